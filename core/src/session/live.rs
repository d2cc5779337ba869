//! Operations of live sessions (`Open` or `Detached`): engine-side work that
//! may finish after the client has gone.

use super::state::{Closed, Closing, Live};
use super::Session;
use crate::append::{Appended, Reservation};
use crate::error::{Error, FenceRule, Rejected};
use crate::fence::Fence;
use crate::id::Id;
use crate::lease::{Activity, CloseReason};
use crate::mode::InputMode;
use crate::requests::RequestIds;
use crate::time::Instant;

impl<
        S: Live,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<S, SC, RC, R, B, D, A, L, K>
{
    /// SPEC §2 `accept`: validates `fence` and makes it current.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`] for another identity or an older fence.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.accept_fence(&f.clone().with_epoch(1))?;
    /// assert!(s.accept_fence(&f).is_err()); // epoch 0 is behind now
    /// # Ok::<(), Error>(())
    /// ```
    pub fn accept_fence(&mut self, fence: &Fence<L>) -> Result<(), Error> {
        self.fence.admits(fence)?;
        self.accept_validated(fence);
        Ok(())
    }

    /// Records activity at `now` (SPEC §3 `touch`).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.touch(&f, Activity::PlaybackAck, Instant::from_millis(40))?;
    /// assert_eq!(s.last_activity(), Instant::from_millis(40));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn touch(
        &mut self,
        fence: &Fence<L>,
        activity: Activity,
        now: Instant,
    ) -> Result<(), Error> {
        self.fence.admits(fence)?;
        let _ = activity;
        self.lease.last_activity = now;
        Ok(())
    }

    /// Ends an active lease operation (SPEC §3 `end_operation`).
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`], or [`Error::OperationNotActive`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let op = Id::new("op")?;
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.begin_operation(&f, &op, Instant::ZERO)?;
    /// s.end_operation(&f, &op, Instant::from_millis(5))?;
    /// assert_eq!(s.end_operation(&f, &op, Instant::ZERO), Err(Error::OperationNotActive));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn end_operation(
        &mut self,
        fence: &Fence<L>,
        op: &Id<L>,
        now: Instant,
    ) -> Result<(), Error> {
        self.fence.admits(fence)?;
        let index = self.lease.active_index(op)?;
        self.lease.end(index, now);
        Ok(())
    }

    /// Phase two of an append: applies `reservation` if the session has not
    /// moved since it was prepared (SPEC §4 `commit_append`).
    ///
    /// # Errors
    ///
    /// [`Error::StaleReservation`] if the fence, sequence, turn sequence or
    /// turn key changed in between (including a second commit).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let a = s.prepare_append(InputMode::TurnCommitOnly, &f)?;
    /// let b = s.prepare_append(InputMode::TurnCommitOnly, &f)?;
    /// s.commit_append(&b)?;
    /// assert_eq!(s.commit_append(&a).unwrap_err().kind(), ErrorKind::StaleReservation);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn commit_append(&mut self, reservation: &Reservation<L>) -> Result<Appended, Error> {
        if self.fence != reservation.base_fence || self.cursor != reservation.base {
            return Err(Error::StaleReservation {
                expected_seq: reservation.base.seq,
                actual_seq: self.cursor.seq,
            });
        }
        // Validated against this very fence when prepared.
        self.fence.admits(&reservation.fence)?;
        self.accept_validated(&reservation.fence);
        self.cursor.seq = reservation.update.seq;
        self.cursor.turn_seq = reservation.update.turn_seq;
        self.cursor.turn_key = Some(reservation.fence.position());
        Ok(reservation.update)
    }

    /// Looks up a completed append by operation id (SPEC §4 `completed`):
    /// `None` if unknown, the recorded stage results if recorded with the same
    /// fence, mode and final flag.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`], or [`Error::OperationReused`] if recorded
    /// with other metadata.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let op = Id::new("op-1")?;
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.completed(&op, &f, InputMode::AppendAudioChunk, false)?, None);
    /// s.record_completed(&op, &f, InputMode::AppendAudioChunk, false, &[10, 11])?;
    /// assert_eq!(s.completed(&op, &f, InputMode::AppendAudioChunk, false)?, Some(&[10, 11][..]));
    /// assert_eq!(s.completed(&op, &f, InputMode::AppendAudioChunk, true), Err(Error::OperationReused));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed(
        &self,
        op: &Id<L>,
        fence: &Fence<L>,
        mode: InputMode,
        final_: bool,
    ) -> Result<Option<&[i64]>, Error> {
        self.fence.admits(fence)?;
        self.completed.lookup(op, fence, mode, final_)
    }

    /// Records a completed append (SPEC §4 `record_completed`; no fence
    /// validation): inserted or replaced as newest; the oldest is evicted
    /// beyond the session's completed-append limit.
    ///
    /// # Errors
    ///
    /// [`Error::Full`] if `results` has more than `K` entries.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default().completed_limit(2), Instant::ZERO)?;
    /// for op in ["a", "b", "c"] {
    ///     s.record_completed(&Id::new(op)?, &f, InputMode::TurnCommitOnly, true, &[])?;
    /// }
    /// let ops: Vec<&str> = s.completed_operations().map(|o| o.as_str()).collect();
    /// assert_eq!(ops, ["b", "c"]);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn record_completed(
        &mut self,
        op: &Id<L>,
        fence: &Fence<L>,
        mode: InputMode,
        final_: bool,
        results: &[i64],
    ) -> Result<(), Error> {
        self.completed
            .record(&self.fence.session, op, fence, mode, final_, results)
    }

    /// Reserves `(stage, request)` under `fence` without submitting it
    /// (SPEC §4 `reserve`). Reserving an existing pair of the same epoch is a
    /// no-op.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`], [`Error::ResourceConflict`] if another epoch
    /// holds the pair, [`Error::Full`] if the resource table is full.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let r = Id::new("r")?;
    /// s.reserve(0, &r, &f)?;
    /// s.reserve(0, &r, &f)?; // idempotent
    /// assert_eq!(s.resources().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve(&mut self, stage: u32, request: &Id<L>, fence: &Fence<L>) -> Result<(), Error> {
        self.fence.admits(fence)?;
        self.requests.reserve(stage, request, fence.position())
    }

    /// Reserves, accepts `fence`, marks the request submitted and makes it
    /// the stage's binding (SPEC §4 `bind`). All-or-nothing.
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve), plus [`Error::Full`] when a new stage
    /// finds the binding table full.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(0, &Id::new("a")?, &f)?;
    /// s.bind(0, &Id::new("b")?, &f)?; // replaces stage 0's binding
    /// let bound: Vec<&str> = s.stage_request_ids(None).map(|i| i.as_str()).collect();
    /// assert_eq!(bound, ["b"]);
    /// assert_eq!(s.resources().count(), 2);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn bind(&mut self, stage: u32, request: &Id<L>, fence: &Fence<L>) -> Result<(), Error> {
        self.fence.admits(fence)?;
        let plan = self.requests.plan_bind(stage, request, fence.position())?;
        self.accept_validated(fence);
        self.requests.bind(plan, stage, request, fence.position());
        Ok(())
    }

    /// Barge-in (SPEC §4 `cancel`): advances to `next` if it is ahead of the
    /// session, then returns and releases the requests held at exactly
    /// `cancelled`. A late cancel never moves the session backwards.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`] if either fence names another identity, if
    /// `next.epoch <= cancelled.epoch`, if `cancelled` is ahead of the
    /// session, or if accepting `next` fails. Nothing changes on error.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f0 = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f0.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(0, &Id::new("talk")?, &f0)?;
    /// let f1 = f0.clone().with_epoch(1);
    /// let released = s.cancel(&f0, &f1)?;
    /// assert_eq!(released.as_slice(), [Id::new("talk")?]);
    /// assert_eq!(s.fence(), &f1);
    /// // A late append from the cancelled epoch is refused.
    /// assert!(s.append(InputMode::TurnCommitOnly, &f0).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn cancel(
        &mut self,
        cancelled: &Fence<L>,
        next: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error> {
        if !cancelled.same_identity(&self.fence) {
            return Err(self.fence.mismatch(FenceRule::Identity, cancelled));
        }
        if !next.same_identity(&self.fence) {
            return Err(cancelled.mismatch(FenceRule::Identity, next));
        }
        if next.epoch <= cancelled.epoch {
            return Err(cancelled.mismatch(FenceRule::NotAdvancing, next));
        }
        let current = self.fence.position();
        if cancelled.position() > current {
            return Err(self.fence.mismatch(FenceRule::Ahead, cancelled));
        }
        if next.position() > current {
            self.accept_fence(next)?;
        }
        Ok(self.requests.release_position(cancelled.position()))
    }

    /// Publishes new configurations atomically (SPEC §4). Passing neither
    /// changes nothing; otherwise `config_generation` advances by one.
    /// Returns the config generation.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let mut s: Session<Open, u8, u8> =
    ///     Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::new(1, 1), Instant::ZERO)?;
    /// assert_eq!(s.replace_configs(None, None), 0);
    /// assert_eq!(s.replace_configs(Some(2), None), 1);
    /// assert_eq!((*s.session_config(), *s.runtime_config()), (2, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn replace_configs(
        &mut self,
        session_config: Option<SC>,
        runtime_config: Option<RC>,
    ) -> u64 {
        if session_config.is_none() && runtime_config.is_none() {
            return self.config_generation;
        }
        if let Some(c) = session_config {
            self.session_config = c;
        }
        if let Some(c) = runtime_config {
            self.runtime_config = c;
        }
        self.config_generation = self.config_generation.saturating_add(1);
        self.config_generation
    }

    /// The next instant at which the lease expires, if nothing happens
    /// before: the earlier of the grace deadline (when detached) and the idle
    /// deadline (when a TTL is set and no operation is active). A host sleeps
    /// until then (`poll_at`).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(Some(Duration::from_secs(60)), Duration::from_secs(5))?;
    /// let s: Session = Session::open(f.clone(), OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// assert_eq!(s.deadline(), Some(Instant::from_millis(60_000)));
    /// let d = s.detach(&f, Instant::from_millis(1_000)).unwrap();
    /// assert_eq!(d.deadline(), Some(Instant::from_millis(6_000)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn deadline(&self) -> Option<Instant> {
        let grace = self
            .state
            .detached_at()
            .map(|t| t + self.lease.config.disconnect_grace());
        match (grace, self.lease.idle_deadline()) {
            (Some(g), Some(i)) => Some(g.min(i)),
            (g, i) => g.or(i),
        }
    }

    /// Whether the lease has expired at `now`, and why: grace expiry first,
    /// then idle expiry (SPEC §7 `collect_expired`).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(Some(Duration::from_secs(1)), Duration::from_secs(5))?;
    /// let s: Session = Session::open(f, OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// assert_eq!(s.due(Instant::from_millis(999)), None);
    /// assert_eq!(s.due(Instant::from_millis(1_000)), Some(CloseReason::IdleTtlExpired));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn due(&self, now: Instant) -> Option<CloseReason> {
        let grace_expired = self
            .state
            .detached_at()
            .is_some_and(|t| now >= t + self.lease.config.disconnect_grace());
        if grace_expired {
            return Some(CloseReason::DisconnectGraceExpired);
        }
        match self.lease.idle_deadline() {
            Some(t) if now >= t => Some(CloseReason::IdleTtlExpired),
            _ => None,
        }
    }

    /// Irreversibly starts closing (SPEC §4 `begin_close`): accepts `fence`,
    /// records `reason`, bumps the lease generation, clears active
    /// operations. Resources stay until [`finalize`](Session::finalize).
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`] if `fence` is
    /// refused (a stale close never closes the live session).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let stale = Fence::new(Id::new("s")?, 7);
    /// let s = s.begin_close(&stale, CloseReason::ClientClose).unwrap_err().session;
    /// let closing = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    /// assert_eq!(closing.lease_generation(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn begin_close(
        self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Session<Closing, SC, RC, R, B, D, A, L, K>, Rejected<Self>> {
        let session = self.guarded(|s| s.accept_fence(fence))?;
        Ok(session.close_now(reason))
    }

    /// Closes in one step (`begin_close` then `finalize`): accepts `fence`,
    /// records `reason`, bumps the lease generation and returns the closed
    /// session with every request id it held, now released.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(0, &Id::new("llm")?, &f)?;
    /// let (closed, ids) = s.close(&f, CloseReason::ClientClose).unwrap();
    /// assert_eq!((closed.lease_generation(), ids.len()), (1, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn close(
        self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<(Session<Closed, SC, RC, R, B, D, A, L, K>, RequestIds<L, R>), Rejected<Self>> {
        let mut session = self.guarded(|s| s.accept_fence(fence))?;
        session.lease.mark_closing();
        let ids = session.requests.drain();
        session.completed.clear();
        Ok((session.into_state(Closed::new(reason)), ids))
    }

    /// Closes the session if its lease is due at `now` (grace first, then
    /// idle), with that reason; otherwise gives it back unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(None, Duration::from_secs(5))?;
    /// let s: Session = Session::open(f.clone(), OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::ZERO).unwrap();
    /// let d = d.expire(Instant::from_millis(4_999)).unwrap_err();
    /// let closing = d.expire(Instant::from_millis(5_000)).unwrap();
    /// assert_eq!(closing.state().reason(), CloseReason::DisconnectGraceExpired);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn expire(self, now: Instant) -> Result<Session<Closing, SC, RC, R, B, D, A, L, K>, Self> {
        match self.due(now) {
            Some(reason) => Ok(self.close_now(reason)),
            None => Err(self),
        }
    }

    /// SPEC §3 `mark closing`; `detached_at` is dropped with the state.
    fn close_now(mut self, reason: CloseReason) -> Session<Closing, SC, RC, R, B, D, A, L, K> {
        self.lease.mark_closing();
        self.into_state(Closing::new(reason))
    }
}
