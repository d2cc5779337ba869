//! What leaves the manager, and when: close, finalize, expiry and request
//! cleanup. The rules (the fence a close accepts, the generation bump, what
//! a close or an expiry releases) are the core's: each of these runs the
//! [`AnySession`] transition where the session sits, then frees the slot.

use duplex_core::id::IdText;
use duplex_core::profile::{Conformance, IdOf, Profile, Tables, TablesOf};
use duplex_core::{AnySession, Clock, CloseReason, Expiry, Fence, Instant, RequestIds, StateKind};

use super::SessionManager;
use crate::error::Error;
use crate::metrics;

/// The request ids one session released (or, from
/// [`close_for_requests`](SessionManager::close_for_requests), holds for
/// cleanup).
///
/// # Examples
///
/// See [`SessionManager::finalize_closed`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "released request ids must be cancelled or dropped in the engine, or that work leaks"]
pub struct Released<T: Tables = TablesOf<Conformance>> {
    /// The session.
    pub session: T::Id,
    /// Its request ids.
    pub ids: RequestIds<T>,
}

impl<C, P: Profile> SessionManager<C, P> {
    /// Brings the deadline index up to date after an operation on `slot`:
    /// lowers the entry if the deadline moved earlier (a later deadline is
    /// picked up lazily when the entry comes due); a closing session has
    /// none.
    /// Returns the session's deadline, if it has one.
    pub(super) fn reschedule(&mut self, slot: u32) -> Option<Instant> {
        let Some(s) = self.table.get(slot) else {
            self.deadlines.remove(slot);
            return None;
        };
        let deadline = s.deadline();
        if let Some(t) = deadline {
            self.deadlines.lower_to(slot, t);
        } else if s.kind() == StateKind::Closing {
            self.deadlines.remove(slot);
        }
        deadline
    }

    /// Drops the session in `slot` (whose id has hash `hash`), which was
    /// in state `was` before it closed, and forgets it.
    pub(super) fn vacate(&mut self, slot: u32, hash: u64, was: StateKind) {
        metrics::left(was);
        self.table.remove(slot, hash);
        self.deadlines.remove(slot);
    }

    /// Closes in one step: begin_close, then finalize. `Ok(None)` if the
    /// session is absent or already closing ("not closed"); otherwise the
    /// released request ids.
    ///
    /// # Errors
    ///
    /// `fence_mismatch` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// let released = m.close(&f, CloseReason::ExplicitClose)?.unwrap();
    /// assert_eq!(released.len(), 1);
    /// assert_eq!(m.close(&f, CloseReason::ExplicitClose)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn close(
        &mut self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
        self.close_if(fence, None, reason)
    }

    /// Closes in one step only if the lease is still at `generation`, the
    /// one the closing connection was handed (checked under the same lock
    /// as the close): a connection superseded by a resume never closes its
    /// successor's session. `Ok(None)` if the session is absent or already
    /// closing.
    ///
    /// # Errors
    ///
    /// `generation_mismatch`, then `fence_mismatch` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.resume(&f, 0)?, 1); // a second connection took over
    /// let e = m.close_generation(&f, 0, CloseReason::ClientClose).unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::GenerationMismatch);
    /// assert!(m.close_generation(&f, 1, CloseReason::ClientClose)?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn close_generation(
        &mut self,
        fence: &Fence<IdOf<P>>,
        generation: u64,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
        self.close_if(fence, Some(generation), reason)
    }

    /// `close`, with the generation check when one is given.
    fn close_if(
        &mut self,
        fence: &Fence<IdOf<P>>,
        generation: Option<u64>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
        let hash = self.table.hash(&fence.session);
        let Some(slot) = self.table.find_hashed(hash, &fence.session) else {
            return Ok(None);
        };
        let Some(s) = self.table.entry(slot).and_then(Option::as_mut) else {
            return Ok(None);
        };
        if !matches!(s.kind(), StateKind::Open | StateKind::Detached) {
            return Ok(None);
        }
        let from = s.kind();
        // Built in place in the value returned (a few hundred bytes not
        // moved).
        let mut released = Some(RequestIds::new());
        let closed = generation
            .map_or(Ok(()), |g| s.check_generation(g))
            .and_then(|()| {
                released
                    .as_mut()
                    .map_or(Ok(()), |ids| s.close_into(fence, reason, ids))
            });
        if let Err(e) = closed {
            metrics::refused(e.kind());
            return Err(e.into());
        }
        tracing::debug!(session = %fence.session, %reason, "state={from}=>closed");
        self.vacate(slot, hash, from);
        Ok(released)
    }

    /// Finalizes a closing session: removes it and returns every request id
    /// it still held.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (not closing).
    ///
    /// See the [`SessionManager`] example.
    pub fn finalize(&mut self, session: &IdOf<P>) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        let hash = self.table.hash(session);
        let slot = self
            .table
            .find_hashed(hash, session)
            .ok_or_else(|| Error::UnknownSession {
                session: session.clone(),
            })?;
        let Some(s) = self.table.entry(slot).and_then(Option::as_mut) else {
            return Err(Error::UnknownSession {
                session: session.clone(),
            });
        };
        let ids = s.finalize()?;
        tracing::debug!(%session, "state=closing=>closed");
        self.vacate(slot, hash, StateKind::Closing);
        Ok(ids)
    }

    /// Finalizes those of `sessions` that are closing; others are ignored.
    /// Returns what each finalized session released.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let (a, b) = (Fence::new(Id::new("a")?, 0), Fence::new(Id::new("b")?, 0));
    /// m.open(a.clone(), OpenOptions::default())?;
    /// m.open(b.clone(), OpenOptions::default())?;
    /// m.begin_close(&a, CloseReason::RequestCleanup)?;
    /// let done = m.finalize_closed([&a.session, &b.session]);
    /// assert_eq!(done.len(), 1);
    /// assert_eq!(done[0].session, a.session);
    /// assert_eq!(m.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn finalize_closed<'a>(
        &mut self,
        sessions: impl IntoIterator<Item = &'a IdOf<P>>,
    ) -> Vec<Released<P::Tables>> {
        let mut out = Vec::new();
        for session in sessions {
            let closing = self
                .get(session)
                .is_some_and(|s| s.kind() == StateKind::Closing);
            if closing {
                if let Ok(ids) = self.finalize(session) {
                    out.push(Released {
                        session: session.clone(),
                        ids,
                    });
                }
            }
        }
        out
    }

    /// Moves every session owning any of `request_ids` to Closing with reason
    /// `request_cleanup` (closing ones are reported again) and returns each
    /// with all its request ids. Scans every session: meant for the rare
    /// engine-failure path.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "broken")?;
    /// let closing = m.close_for_requests(&["broken"]);
    /// assert_eq!(closing[0].session, f.session);
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Closing);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the sessions' requests must be cancelled in the engine, then the sessions finalized"]
    pub fn close_for_requests<I: AsRef<str>>(
        &mut self,
        request_ids: &[I],
    ) -> Vec<Released<P::Tables>> {
        let mut out = Vec::new();
        let slots: Vec<u32> = self.table.slots().collect();
        for slot in slots {
            let Some(s) = self.table.get(slot) else {
                continue;
            };
            let Ok(ids) = s.resource_request_ids(None, None) else {
                continue;
            };
            let owns = ids.iter().any(|own| {
                request_ids
                    .iter()
                    .any(|r| r.as_ref().as_bytes() == own.as_bytes())
            });
            if !owns {
                continue;
            }
            let (session, fence) = (s.id().clone(), s.fence().clone());
            if s.kind() != StateKind::Closing {
                // The session's own fence: accepted by construction.
                let _ = self.run(&fence.session, false, |s| {
                    s.begin_close(&fence, CloseReason::RequestCleanup)
                });
            }
            out.push(Released { session, ids });
        }
        out
    }

    /// Moves every session not in `excluded` that is due at `now` to
    /// Closing (see [`collect_expired`](Self::collect_expired)).
    pub(super) fn expire_due<'a>(
        &mut self,
        excluded: impl IntoIterator<Item = &'a IdOf<P>>,
        now: Instant,
    ) -> Vec<Expiry<P::Tables>> {
        // Nothing due: nothing to look at (the common reaper tick).
        if self.deadlines.peek().is_none_or(|(key, _)| key > now) {
            return Vec::new();
        }
        let mut deferred = std::mem::take(&mut self.deferred);
        // Excluded sessions leave the index for this pass.
        for session in excluded {
            if let Some(slot) = self.table.find(session) {
                if self.deadlines.key(slot).is_some() {
                    self.deadlines.remove(slot);
                    deferred.push(slot);
                }
            }
        }
        let mut out = Vec::new();
        while let Some((key, slot)) = self.deadlines.peek() {
            if key > now {
                break;
            }
            match self.table.get(slot).and_then(AnySession::deadline) {
                None => self.deadlines.remove(slot),
                Some(deadline) if deadline > now => self.deadlines.set(slot, deadline),
                Some(_) => {
                    if let Some(expiry) = self.expire_slot(slot, now) {
                        out.push(expiry);
                    }
                }
            }
        }
        for slot in deferred.drain(..) {
            self.reschedule(slot);
        }
        self.deferred = deferred;
        out
    }

    /// Moves the due session in `slot` to Closing and says what it held.
    fn expire_slot(&mut self, slot: u32, now: Instant) -> Option<Expiry<P::Tables>> {
        let session = self.table.entry(slot)?.as_mut()?;
        let from = session.kind();
        let expiry = session.expire(now);
        if let Some(e) = &expiry {
            tracing::debug!(session = %e.session, reason = %e.reason, "state={from}=>closing");
            metrics::moved(from, StateKind::Closing);
            metrics::expired(e.reason);
        }
        self.deadlines.remove(slot);
        expiry
    }

    /// The exact instant of the next lease expiry, if any session can
    /// expire: a host sleeps until then, then calls
    /// [`collect_expired`](Self::collect_expired). (It tidies the deadline
    /// index as it looks, hence `&mut self`.)
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let mut m = SessionManager::new(&clock, ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// clock.advance(Duration::from_secs(100));
    /// m.touch(&f, Activity::Heartbeat)?;
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(400_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_deadline(&mut self) -> Option<Instant> {
        while let Some((key, slot)) = self.deadlines.peek() {
            match self.table.get(slot).and_then(AnySession::deadline) {
                None => self.deadlines.remove(slot),
                Some(deadline) if deadline > key => self.deadlines.set(slot, deadline),
                Some(_) => return Some(key),
            }
        }
        None
    }
}

/// The reaper that reads the manager's clock (see [`SessionManager::at`]).
impl<C: Clock, P: Profile> SessionManager<C, P> {
    /// The reaper: every session not in `excluded` whose disconnect grace
    /// ran out (checked first) or whose idle TTL ran out is moved to
    /// Closing; returns one record each, in no particular order. Costs
    /// O(excluded + due · log n); allocation-free when nothing is due.
    ///
    /// See the [`SessionManager`] example.
    #[must_use = "each expired session's requests must be cancelled in the engine, then the session finalized"]
    pub fn collect_expired<'a>(
        &mut self,
        excluded: impl IntoIterator<Item = &'a IdOf<P>>,
    ) -> Vec<Expiry<P::Tables>> {
        self.now().collect_expired(excluded)
    }
}
