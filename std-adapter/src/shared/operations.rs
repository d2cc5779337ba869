//! The per-session operations of [`SharedManager`]: each locks the shard
//! that holds the session and runs the single-threaded manager's operation
//! there. Operations that can bring a deadline earlier (detach, ending an
//! operation) tell the reaper; so do open and typed access (`mod.rs`).

use duplex_core::{
    Activity, Appended, Clock, CloseReason, Fence, Finality, Id, InputMode, Instant, RequestIds,
    RequestState, Reservation,
};

use super::{lock, SharedManager};
use crate::error::Error;
use crate::manager::{Expiry, Released};

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
    > SharedManager<C, SC, RC, R, B, D, A, L, K>
{
    /// Records activity. See [`SessionManager::touch`](crate::SessionManager::touch).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::touch`](crate::SessionManager::touch).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.touch(&f, Activity::Heartbeat)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn touch(&self, fence: &Fence<L>, activity: Activity) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.touch(fence, activity))
    }

    /// The client went away. See [`SessionManager::detach`](crate::SessionManager::detach).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::detach`](crate::SessionManager::detach).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.resume(&f, 0)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(&self, fence: &Fence<L>) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| {
            m.detach(fence)?;
            self.deadline_may_be_earlier(m, &fence.session);
            Ok(())
        })
    }

    /// Detaches only if the lease is still at `generation`. See
    /// [`SessionManager::detach_generation`](crate::SessionManager::detach_generation).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::detach_generation`](crate::SessionManager::detach_generation).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let taken_over = m.resume(&f, 0)?;
    /// assert!(m.detach_generation(&f, 0).is_err());
    /// m.detach_generation(&f, taken_over)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach_generation(&self, fence: &Fence<L>, generation: u64) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| {
            m.detach_generation(fence, generation)?;
            self.deadline_may_be_earlier(m, &fence.session);
            Ok(())
        })
    }

    /// Resume or takeover. See [`SessionManager::resume`](crate::SessionManager::resume).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::resume`](crate::SessionManager::resume).
    ///
    /// See [`detach`](Self::detach).
    pub fn resume(&self, fence: &Fence<L>, expected_generation: u64) -> Result<u64, Error<L>> {
        self.on(&fence.session, |m| m.resume(fence, expected_generation))
    }

    /// Starts a lease operation. See [`SessionManager::begin_operation`](crate::SessionManager::begin_operation).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::begin_operation`](crate::SessionManager::begin_operation).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen")?;
    /// m.end_operation(&f, "gen")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_operation(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.begin_operation(fence, operation))
    }

    /// Ends a lease operation. See [`SessionManager::end_operation`](crate::SessionManager::end_operation).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::end_operation`](crate::SessionManager::end_operation).
    ///
    /// See [`begin_operation`](Self::begin_operation).
    pub fn end_operation(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| {
            m.end_operation(fence, operation)?;
            // Ending the last operation lets idle expiry count again.
            self.deadline_may_be_earlier(m, &fence.session);
            Ok(())
        })
    }

    /// Appends input. See [`SessionManager::append`](crate::SessionManager::append).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::append`](crate::SessionManager::append).
    ///
    /// See the type-level example.
    pub fn append(&self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error<L>> {
        self.on(&fence.session, |m| m.append(fence, mode))
    }

    /// Phase one of an append. See [`SessionManager::prepare_append`](crate::SessionManager::prepare_append).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::prepare_append`](crate::SessionManager::prepare_append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let r = m.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(m.commit_append(&r)?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare_append(
        &self,
        fence: &Fence<L>,
        mode: InputMode,
    ) -> Result<Reservation<L>, Error<L>> {
        self.on(&fence.session, |m| m.prepare_append(fence, mode))
    }

    /// Phase two of an append. See [`SessionManager::commit_append`](crate::SessionManager::commit_append).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::commit_append`](crate::SessionManager::commit_append).
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&self, reservation: &Reservation<L>) -> Result<Appended, Error<L>> {
        self.on(&reservation.fence().session, |m| {
            m.commit_append(reservation)
        })
    }

    /// Looks up a completed append; the results come back owned (the
    /// shard is unlocked before this returns). See
    /// [`SessionManager::completed`](crate::SessionManager::completed).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::completed`](crate::SessionManager::completed).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let chunk = InputMode::AppendAudioChunk;
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op", chunk, Finality::Partial, &[3])?;
    /// assert_eq!(m.completed(&f, "op", chunk, Finality::Partial)?, Some(vec![3]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<Vec<i64>>, Error<L>> {
        self.on(&fence.session, |m| {
            m.completed(fence, operation, mode, finality)
                .map(|r| r.map(<[i64]>::to_vec))
        })
    }

    /// Looks up a completed append and hands the results to `f` while the
    /// shard is locked (no allocation). See [`SessionManager::completed`](crate::SessionManager::completed).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::completed`](crate::SessionManager::completed).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let chunk = InputMode::AppendAudioChunk;
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op", chunk, Finality::Partial, &[3, 4])?;
    /// let sum = m.completed_with(&f, "op", chunk, Finality::Partial, |r| r.map(|r| r.iter().sum::<i64>()))?;
    /// assert_eq!(sum, Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed_with<T>(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        f: impl FnOnce(Option<&[i64]>) -> T,
    ) -> Result<T, Error<L>> {
        self.on(&fence.session, |m| {
            m.completed(fence, operation, mode, finality).map(f)
        })
    }

    /// Records a completed append. See [`SessionManager::record_completed`](crate::SessionManager::record_completed).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::record_completed`](crate::SessionManager::record_completed).
    ///
    /// See [`completed`](Self::completed).
    pub fn record_completed(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| {
            m.record_completed(fence, operation, mode, finality, results)
        })
    }

    /// Reserves a stage request. See [`SessionManager::reserve`](crate::SessionManager::reserve).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::reserve`](crate::SessionManager::reserve).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve(&f, 0, "r0")?;
    /// m.bind(&f, 1, "r1")?;
    /// assert_eq!(m.resource_request_ids(&f.session, None, Some(RequestState::Reserved))?.len(), 1);
    /// assert_eq!(m.stage_request_ids(&f.session, None)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.reserve(fence, stage, request))
    }

    /// Binds a stage request. See [`SessionManager::bind`](crate::SessionManager::bind).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::bind`](crate::SessionManager::bind).
    ///
    /// See [`reserve`](Self::reserve).
    pub fn bind(
        &self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.bind(fence, stage, request))
    }

    /// Request ids of the stage bindings. See
    /// [`SessionManager::stage_request_ids`](crate::SessionManager::stage_request_ids).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::stage_request_ids`](crate::SessionManager::stage_request_ids).
    ///
    /// See [`reserve`](Self::reserve).
    pub fn stage_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(session, |m| m.stage_request_ids(session, fence))
    }

    /// Unique request ids of the resources. See
    /// [`SessionManager::resource_request_ids`](crate::SessionManager::resource_request_ids).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::resource_request_ids`](crate::SessionManager::resource_request_ids).
    ///
    /// See [`reserve`](Self::reserve).
    pub fn resource_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(session, |m| m.resource_request_ids(session, fence, state))
    }

    /// Drops the bindings and resources with these request ids. See
    /// [`SessionManager::release`](crate::SessionManager::release).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::release`](crate::SessionManager::release).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// m.release(&f.session, &["r0"])?;
    /// m.bind(&f, 0, "r1")?;
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release<I: AsRef<str>>(
        &self,
        session: &Id<L>,
        request_ids: &[I],
    ) -> Result<(), Error<L>> {
        self.on(session, |m| m.release(session, request_ids))
    }

    /// Returns and drops the requests held at exactly `fence`. See
    /// [`SessionManager::release_fence`](crate::SessionManager::release_fence).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::release_fence`](crate::SessionManager::release_fence).
    ///
    /// See [`release`](Self::release).
    pub fn release_fence(&self, fence: &Fence<L>) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(&fence.session, |m| m.release_fence(fence))
    }

    /// Validates and accepts a fence. See [`SessionManager::accept_fence`](crate::SessionManager::accept_fence).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::accept_fence`](crate::SessionManager::accept_fence).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "tts")?;
    /// m.accept_fence(&f.clone().with_turn(1))?;
    /// let next = f.clone().with_epoch(1);
    /// assert_eq!(m.cancel(&f.clone().with_turn(1), &next)?.len(), 0);
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn accept_fence(&self, fence: &Fence<L>) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.accept_fence(fence))
    }

    /// Barge-in. See [`SessionManager::cancel`](crate::SessionManager::cancel).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::cancel`](crate::SessionManager::cancel).
    ///
    /// See [`accept_fence`](Self::accept_fence).
    pub fn cancel(
        &self,
        cancelled: &Fence<L>,
        next: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(&cancelled.session, |m| m.cancel(cancelled, next))
    }

    /// Publishes new configurations. See [`SessionManager::replace_configs`](crate::SessionManager::replace_configs).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::replace_configs`](crate::SessionManager::replace_configs).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m: SharedManager<ManualClock, u8, u8> =
    ///     SharedManager::with_capacities(ManualClock::default(), ManagerConfig::default(), 2)?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::new(0, 0))?;
    /// assert_eq!(m.replace_configs(&f.session, Some(1), None)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_configs(
        &self,
        session: &Id<L>,
        session_config: Option<SC>,
        runtime_config: Option<RC>,
    ) -> Result<u64, Error<L>> {
        self.on(session, |m| {
            m.replace_configs(session, session_config, runtime_config)
        })
    }

    /// Starts closing. See [`SessionManager::begin_close`](crate::SessionManager::begin_close).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::begin_close`](crate::SessionManager::begin_close).
    ///
    /// See [`finalize`](Self::finalize).
    pub fn begin_close(&self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.begin_close(fence, reason))
    }

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
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        let closed = self.on(&fence.session, |m| m.close(fence, reason))?;
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
    pub fn finalize(&self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
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
        sessions: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Released<L, R>> {
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
    pub fn close_for_requests<I: AsRef<str>>(&self, request_ids: &[I]) -> Vec<Released<L, R>> {
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
        excluded: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Expiry<L, R>> {
        let mut excluded_by_shard: Vec<Vec<&Id<L>>> = vec![Vec::new(); self.shards.len()];
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
