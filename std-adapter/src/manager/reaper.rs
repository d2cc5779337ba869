//! Close, expiry and cleanup policy: what leaves the manager, when, and
//! what the engine must be told.
//!
//! Sessions leave in place: `close` and `finalize` check what the typed
//! transition would check, read the request ids it would return, and drop
//! the session where it lies (observably the same as moving it through
//! `Closing` and `Closed` and discarding it, without copying it).

use duplex_core::profile::conformance::{ID_LEN, RESOURCES};
use duplex_core::{
    AnySession, Clock, CloseReason, Fence, Id, Instant, RequestIds, RequestState, StateKind,
};

use super::SessionManager;
use crate::error::Error;
use crate::metrics;

/// A session whose lease expired, moved to `Closing` by
/// [`collect_expired`](SessionManager::collect_expired): the engine must
/// cancel `submitted` and drop `reserved`, then the host finalizes it.
///
/// # Examples
///
/// See [`SessionManager`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "an expired session's requests must be cancelled in the engine, then the session finalized"]
pub struct Expiry<const L: usize = { ID_LEN }, const R: usize = { RESOURCES }> {
    /// The session.
    pub session: Id<L>,
    /// Its fence.
    pub fence: Fence<L>,
    /// Lease generation after the close bumped it.
    pub lease_generation: u64,
    /// `disconnect_grace_expired` or `idle_ttl_expired`.
    pub reason: CloseReason,
    /// Submitted request ids, to cancel in the engine.
    pub submitted: RequestIds<L, R>,
    /// Reserved, never submitted request ids, to drop.
    pub reserved: RequestIds<L, R>,
}

/// The request ids one session released (or, from
/// [`close_for_requests`](SessionManager::close_for_requests), holds for
/// cleanup).
///
/// # Examples
///
/// See [`SessionManager::finalize_closed`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "released request ids must be cancelled or dropped in the engine, or that work leaks"]
pub struct Released<const L: usize = { ID_LEN }, const R: usize = { RESOURCES }> {
    /// The session.
    pub session: Id<L>,
    /// Its request ids.
    pub ids: RequestIds<L, R>,
}

impl<
        C: Clock,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > SessionManager<C, SC, RC, R, B, D, A, L, K>
{
    /// Brings the deadline index up to date after an operation on `slot`:
    /// lowers the entry if the deadline moved earlier (a later deadline is
    /// picked up lazily when the entry comes due); a closing session has
    /// none.
    pub(super) fn reschedule(&mut self, slot: u32) {
        match self.table.get(slot) {
            Some(s) => match s.deadline() {
                Some(t) => self.timers.lower_to(slot, t),
                None if s.kind() == StateKind::Closing => self.timers.remove(slot),
                None => {}
            },
            None => self.timers.remove(slot),
        }
    }

    /// Drops the session in `slot` (whose id has hash `hash`) where it is,
    /// and forgets it.
    fn vacate(&mut self, slot: u32, hash: u64) {
        if let Some(s) = self.table.get(slot) {
            metrics::left(s.kind());
        }
        self.table.remove(slot, hash);
        self.timers.remove(slot);
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
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        let hash = self.table.hash(&fence.session);
        let Some(slot) = self.table.find_hashed(hash, &fence.session) else {
            return Ok(None);
        };
        match self.table.get(slot) {
            // What `close` checks.
            Some(s @ (AnySession::Open(_) | AnySession::Detached(_))) => s.fence().admits(fence)?,
            _ => return Ok(None),
        }
        // Built in place from the slot (no copy of the fixed-size value).
        let mut released = Some(RequestIds::new());
        if let (Some(ids), Some(s)) = (released.as_mut(), self.table.get(slot)) {
            s.held_request_ids(ids);
        }
        tracing::debug!(session = %fence.session, %reason, "closed");
        self.vacate(slot, hash);
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
    pub fn finalize(&mut self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
        let hash = self.table.hash(session);
        let slot = self
            .table
            .find_hashed(hash, session)
            .ok_or_else(|| Error::UnknownSession {
                session: session.clone(),
            })?;
        match self.table.get(slot) {
            Some(s @ AnySession::Closing(_)) => {
                let ids = s.resource_request_ids(None, None)?;
                tracing::debug!(%session, "state=closing=>closed");
                self.vacate(slot, hash);
                Ok(ids)
            }
            Some(other) => Err(duplex_core::Error::WrongState {
                operation: "finalize",
                state: other.kind(),
            }
            .into()),
            None => Err(Error::UnknownSession {
                session: session.clone(),
            }),
        }
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
        sessions: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Released<L, R>> {
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
    pub fn close_for_requests<I: AsRef<str>>(&mut self, request_ids: &[I]) -> Vec<Released<L, R>> {
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
                let _ = self.begin_close(&fence, CloseReason::RequestCleanup);
            }
            out.push(Released { session, ids });
        }
        out
    }

    /// The reaper: every session not in `excluded` whose disconnect grace
    /// ran out (checked first) or whose idle TTL ran out is moved to
    /// Closing; returns one record each, in no particular order. Costs
    /// O(excluded + due · log n); allocation-free when nothing is due.
    ///
    /// See the [`SessionManager`] example.
    #[must_use = "each expired session's requests must be cancelled in the engine, then the session finalized"]
    pub fn collect_expired<'a>(
        &mut self,
        excluded: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Expiry<L, R>> {
        let now = self.clock.now();
        let mut deferred = std::mem::take(&mut self.deferred);
        // Excluded sessions leave the index for this pass.
        for session in excluded {
            if let Some(slot) = self.table.find(session) {
                if self.timers.key(slot).is_some() {
                    self.timers.remove(slot);
                    deferred.push(slot);
                }
            }
        }
        let mut out = Vec::new();
        while let Some((key, slot)) = self.timers.peek() {
            if key > now {
                break;
            }
            match self.table.get(slot).and_then(AnySession::deadline) {
                None => self.timers.remove(slot),
                Some(deadline) if deadline > now => self.timers.set(slot, deadline),
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
    fn expire_slot(&mut self, slot: u32, now: Instant) -> Option<Expiry<L, R>> {
        let entry = self.table.entry(slot)?;
        let session = entry.take()?;
        let from = session.kind();
        let submitted = session.resource_request_ids(None, Some(RequestState::Submitted));
        let reserved = session.resource_request_ids(None, Some(RequestState::Reserved));
        let (next, expired) = match session.expire(now) {
            Ok((closing, reason)) => (closing, Some(reason)),
            Err(same) => (same, None),
        };
        let record = match (expired, submitted, reserved) {
            (Some(reason), Ok(submitted), Ok(reserved)) => {
                tracing::debug!(session = %next.id(), %reason, "state=>closing");
                metrics::moved(from, StateKind::Closing);
                metrics::expired(reason);
                Some(Expiry {
                    session: next.id().clone(),
                    fence: next.fence().clone(),
                    lease_generation: next.lease_generation(),
                    reason,
                    submitted,
                    reserved,
                })
            }
            _ => None,
        };
        *entry = Some(next);
        self.timers.remove(slot);
        record
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
        while let Some((key, slot)) = self.timers.peek() {
            match self.table.get(slot).and_then(AnySession::deadline) {
                None => self.timers.remove(slot),
                Some(deadline) if deadline > key => self.timers.set(slot, deadline),
                Some(_) => return Some(key),
            }
        }
        None
    }
}
