//! The operations of [`SharedManager`]: [`Sessions`] for `&SharedManager`
//! (lock the shard that holds the session, run the single-threaded
//! manager's operation there, wake the reaper if the session's deadline
//! came earlier), and what leaves the manager (close, finalize, expiry,
//! request cleanup), which also frees admission slots.

use duplex_core::profile::{IdOf, Profile};
use duplex_core::{
    AnySession, Clock, CloseReason, Error as CoreError, Expiry, Fence, Instant, RequestIds,
};

use super::{lock, SharedManager};
use crate::error::Error;
use crate::manager::Released;
use crate::sessions::Sessions;

impl<C: Clock, P: Profile> Sessions<P> for &SharedManager<C, P> {
    fn apply<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        // The shard's clock form: the clock is read under the shard's lock,
        // so one session's readings come in the order its operations run.
        let (result, deadline) = self.on(session, |m| {
            let now = m.clock().now();
            m.run(session, true, |s| op(s, now))
        });
        if let Some(deadline) = deadline {
            self.wake.earlier(deadline);
        }
        result
    }

    fn update<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        let (result, deadline) = self.on(session, |m| m.run(session, false, op));
        if let Some(deadline) = deadline {
            self.wake.earlier(deadline);
        }
        result
    }

    fn read<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.on(session, |m| m.read(session, op))
    }
}

impl<C: Clock, P: Profile> SharedManager<C, P> {
    /// Closes in one step; the session leaves and its admission slot is
    /// free. See [`SessionManager::close`](crate::SessionManager::close).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::close`](crate::SessionManager::close).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.close(&f, CloseReason::ClientClose)?.map(|ids| ids.len()), Some(1));
    /// assert!(m.is_empty() && m.reserved() == 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn close(
        &self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
        let closed = self.on(&fence.session, |m| m.close(fence, reason))?;
        if closed.is_some() {
            self.left(1);
        }
        Ok(closed)
    }

    /// Closes in one step only if the lease is still at `generation`,
    /// checked under the shard's lock. See
    /// [`SessionManager::close_generation`](crate::SessionManager::close_generation).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::close_generation`](crate::SessionManager::close_generation).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.resume(&f, 0)?;
    /// assert!(m.close_generation(&f, 0, CloseReason::ClientClose).is_err());
    /// assert_eq!(m.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn close_generation(
        &self,
        fence: &Fence<IdOf<P>>,
        generation: u64,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
        let closed = self.on(&fence.session, |m| {
            m.close_generation(fence, generation, reason)
        })?;
        if closed.is_some() {
            self.left(1);
        }
        Ok(closed)
    }

    /// Finalizes a closing session; its admission slot is free. See
    /// [`SessionManager::finalize`](crate::SessionManager::finalize).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::finalize`](crate::SessionManager::finalize).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::RequestCleanup)?;
    /// assert_eq!(m.len(), 1, "closing sessions still count");
    /// assert!(m.finalize(&f.session)?.is_empty());
    /// assert!(m.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finalize(&self, session: &IdOf<P>) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        let ids = self.on(session, |m| m.finalize(session))?;
        self.left(1);
        Ok(ids)
    }

    /// Finalizes those of `sessions` that are closing. See
    /// [`SessionManager::finalize_closed`](crate::SessionManager::finalize_closed).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let (a, b) = (Fence::new(Id::new("a")?, 0), Fence::new(Id::new("b")?, 0));
    /// m.open(a.clone(), OpenOptions::default())?;
    /// m.open(b.clone(), OpenOptions::default())?;
    /// m.begin_close(&a, CloseReason::RequestCleanup)?;
    /// let done = m.finalize_closed([&a.session, &b.session]);
    /// assert_eq!((done.len(), m.len()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn finalize_closed<'a>(
        &self,
        sessions: impl IntoIterator<Item = &'a IdOf<P>>,
    ) -> Vec<Released<P::Tables>> {
        let mut out = Vec::new();
        for session in sessions {
            let done = self.on(session, |m| m.finalize_closed([session]));
            self.left(done.len());
            out.extend(done);
        }
        out
    }

    /// Moves every session owning any of `request_ids` to Closing. See
    /// [`SessionManager::close_for_requests`](crate::SessionManager::close_for_requests); visits every shard.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "broken")?;
    /// let closing = m.close_for_requests(&["broken"]);
    /// assert_eq!(closing[0].session, f.session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the sessions' requests must be cancelled in the engine, then the sessions finalized"]
    pub fn close_for_requests<I: AsRef<str>>(&self, request_ids: &[I]) -> Vec<Released<P::Tables>> {
        let mut out = Vec::new();
        for shard in &*self.shards {
            out.extend(lock(shard).close_for_requests(request_ids));
        }
        out
    }

    /// The reaper over all shards: each shard moves its due sessions (not in
    /// `excluded`) to Closing. See [`SessionManager::collect_expired`](crate::SessionManager::collect_expired);
    /// visits only what is due in each shard.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let m = SharedManager::new(&clock, ManagerConfig::default())?;
    /// let lease = LeaseConfig::new(None, Duration::from_secs(2))?;
    /// let (a, b) = (Fence::new(Id::new("a")?, 0), Fence::new(Id::new("b")?, 0));
    /// for f in [&a, &b] {
    ///     m.open(f.clone(), OpenOptions::default().lease(lease))?;
    ///     m.detach(f)?;
    /// }
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(2_000)));
    /// clock.advance(Duration::from_secs(2));
    /// let expired = m.collect_expired([&b.session]);
    /// assert_eq!(expired.len(), 1);
    /// assert_eq!(expired[0].session, a.session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "each expired session's requests must be cancelled in the engine, then the session finalized"]
    pub fn collect_expired<'a>(
        &self,
        excluded: impl IntoIterator<Item = &'a IdOf<P>>,
    ) -> Vec<Expiry<P::Tables>> {
        let mut excluded_by_shard: Vec<Vec<&IdOf<P>>> = vec![Vec::new(); self.shards.len()];
        for session in excluded {
            if let Some(list) = excluded_by_shard.get_mut(self.shard_index(session)) {
                list.push(session);
            }
        }
        let mut out = Vec::new();
        for (shard, excluded) in self.shards.iter().zip(&excluded_by_shard) {
            out.extend(lock(shard).collect_expired(excluded.iter().copied()));
        }
        out
    }

    /// The earliest lease expiry over all shards (one look per shard, no
    /// scan of sessions). See [`SessionManager::next_deadline`](crate::SessionManager::next_deadline).
    ///
    /// See [`collect_expired`](Self::collect_expired).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.shards
            .iter()
            .filter_map(|shard| lock(shard).next_deadline())
            .min()
    }
}
