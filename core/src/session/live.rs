//! Operations of live sessions (`S: Live`: Open or Detached): engine-side
//! work that may finish after the client has gone, and the ways out.

use super::state::{Closed, Closing, Live, Open, State};
use super::Session;
use crate::append::{Appended, Finality, Reservation};
use crate::error::{Error, Rejected};
use crate::fence::Fence;
use crate::fmt::debug;
use crate::id::IdText as _;
use crate::lease::{Activity, CloseReason};
use crate::mode::InputMode;
use crate::profile::{IdOf, Profile};
use crate::requests::RequestIds;
use crate::time::Instant;

impl<S: State, P: Profile> Session<S, P> {
    /// Validates `fence` and makes it current (a new epoch resets the input
    /// sequence and clears the completed-append cache).
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`] for another identity or an older fence.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.accept_fence(&f.clone().with_epoch(1))?;
    /// assert!(s.accept_fence(&f).is_err()); // epoch 0 is behind now
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn accept_fence(&mut self, fence: &Fence<IdOf<P>>) -> Result<(), Error>
    where
        S: Live,
    {
        self.accept(fence)
    }

    /// Records activity at `now`.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.touch(&f, Activity::PlaybackAck, Instant::from_millis(40))?;
    /// assert_eq!(s.last_activity(), Instant::from_millis(40));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn touch(
        &mut self,
        fence: &Fence<IdOf<P>>,
        activity: Activity,
        now: Instant,
    ) -> Result<(), Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        debug!(
            "duplex session {=str}: {=str} at {=u64} ms",
            self.fence.session.as_str(),
            activity.as_str(),
            now.as_millis()
        );
        self.lease.last_activity = now;
        Ok(())
    }

    /// The client (re)attaches with its resume token: checks and bumps the
    /// lease generation and returns the session `Open` with the new
    /// generation. From `Detached` this is the return within grace; from
    /// `Open` it is a takeover by a new connection (the old connection's
    /// token is dead).
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`] or
    /// [`Error::GenerationMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::ZERO)?;
    /// let d = d.resume(&f, 5, Instant::ZERO).unwrap_err().session; // stale token
    /// let (open, generation) = d.resume(&f, 0, Instant::from_millis(50))?;
    /// assert_eq!((generation, open.last_activity()), (1, Instant::from_millis(50)));
    /// // Takeover while open: the old token (1) is now stale.
    /// let (open, generation) = open.resume(&f, 1, Instant::from_millis(60))?;
    /// assert_eq!(generation, 2);
    /// assert_eq!(open.resume(&f, 1, Instant::ZERO).unwrap_err().error, Error::GenerationMismatch { expected: 2, actual: 1 });
    /// # Ok::<(), Error>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn resume(
        self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        now: Instant,
    ) -> Result<(Session<Open, P>, u64), Rejected<Self>>
    where
        S: Live,
    {
        let mut generation = 0;
        let session = self.guarded(|s| {
            generation = s.resume_in_place(fence, expected_generation, None, now)?;
            Ok(())
        })?;
        // `detached_at` lives in the `Detached` marker: it goes with it.
        Ok((session.into_state(Open), generation))
    }

    /// The rule of [`resume`](Self::resume), where the session sits: the
    /// fence and the generation are checked (a refusal changes nothing),
    /// then the generation is bumped, `control` recorded as the resume
    /// that produced it, and activity recorded. The state move
    /// (Detached → Open) is the caller's.
    pub(super) fn resume_in_place(
        &mut self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        control: Option<&IdOf<P>>,
        now: Instant,
    ) -> Result<u64, Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        self.lease.resume(expected_generation, control, now)
    }

    /// The generation the resume named `control` produced, if it produced
    /// the current one: a resume asked again is answered with it, and
    /// nothing changes. The fence is checked first.
    pub(super) fn replayed(
        &self,
        fence: &Fence<IdOf<P>>,
        control: &IdOf<P>,
    ) -> Result<Option<u64>, Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        Ok(self.lease.resumed_by(control))
    }

    /// [`resume`](Self::resume) named by a control id, idempotent: asked
    /// again with the control id of the resume that produced the current
    /// generation (its caller lost the first answer), it answers with that
    /// generation and changes nothing, in whatever live state the session
    /// is; otherwise it resumes, and records `control`. As vllm-omni's
    /// released lease (`resumed_by`), but the fence is checked first.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`] or
    /// [`Error::GenerationMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let control = Id::new("ctl-1")?;
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::ZERO)?;
    /// let Resumption::Resumed(open, 1) = d.resume_idempotent(&f, 0, &control, Instant::ZERO)? else {
    ///     unreachable!()
    /// };
    /// // The answer was lost; asked again, the same resume gets the same generation.
    /// let Resumption::Replayed(open, 1) = open.resume_idempotent(&f, 0, &control, Instant::ZERO)? else {
    ///     unreachable!()
    /// };
    /// assert_eq!((open.lease_generation(), open.resumed_by()), (1, Some("ctl-1")));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resume_idempotent(
        self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        control: &IdOf<P>,
        now: Instant,
    ) -> Result<Resumption<S, P>, Rejected<Self>>
    where
        S: Live,
    {
        match self.replayed(fence, control) {
            Ok(Some(generation)) => return Ok(Resumption::Replayed(self, generation)),
            Ok(None) => {}
            Err(error) => {
                return Err(Rejected {
                    error,
                    session: self,
                })
            }
        }
        let mut generation = 0;
        let session = self.guarded(|s| {
            generation = s.resume_in_place(fence, expected_generation, Some(control), now)?;
            Ok(())
        })?;
        Ok(Resumption::Resumed(session.into_state(Open), generation))
    }

    /// Ends an active lease operation.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`], or [`Error::OperationNotActive`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let op = Id::new("op")?;
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.begin_operation(&f, &op, Instant::ZERO)?;
    /// s.end_operation(&f, &op, Instant::from_millis(5))?;
    /// assert_eq!(s.end_operation(&f, &op, Instant::ZERO), Err(Error::OperationNotActive));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn end_operation(
        &mut self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        now: Instant,
    ) -> Result<(), Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        let index = self.lease.active_index(op)?;
        self.lease.end(index, now);
        Ok(())
    }

    /// Phase two of an append: applies `reservation` if the session has not
    /// moved since it was prepared.
    ///
    /// # Errors
    ///
    /// [`Error::StaleReservation`] saying what moved: the epoch, the
    /// sequence (another commit, or this one already), or the fence.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let a = s.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// s.accept_fence(&f.clone().with_epoch(1))?; // barge-in
    /// let err = s.commit_append(&a).unwrap_err();
    /// assert_eq!(err.to_string(), "append reservation is stale: the epoch moved from 0 to 1");
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn commit_append(&mut self, reservation: &Reservation<IdOf<P>>) -> Result<Appended, Error>
    where
        S: Live,
    {
        reservation.check_fresh(&self.fence, &self.cursor)?;
        // Validated against this very fence when prepared.
        self.fence.admits(&reservation.fence)?;
        self.accept_validated(&reservation.fence);
        self.cursor
            .commit(reservation.on_commit, reservation.fence.position());
        Ok(reservation.on_commit)
    }

    /// Looks up a completed append by operation id: `None` if unknown, the
    /// recorded stage results if recorded with the same fence, mode and
    /// finality.
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
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let chunk = InputMode::AppendAudioChunk;
    /// assert_eq!(s.completed(&f, &op, chunk, Finality::Partial)?, None);
    /// s.record_completed(&f, &op, chunk, Finality::Partial, &[10, 11])?;
    /// assert_eq!(s.completed(&f, &op, chunk, Finality::Partial)?, Some(&[10, 11][..]));
    /// assert_eq!(s.completed(&f, &op, chunk, Finality::Final), Err(Error::OperationReused));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn completed(
        &self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<&[i64]>, Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        self.completed.lookup(fence, op, mode, finality)
    }

    /// Records a completed append (no fence validation): inserted or
    /// replaced as newest; the oldest is evicted beyond the session's
    /// completed-append limit.
    ///
    /// # Errors
    ///
    /// [`Error::Full`] if `results` has more than `K` entries.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default().completed_limit(2), Instant::ZERO)?;
    /// for op in ["a", "b", "c"] {
    ///     s.record_completed(&f, &Id::new(op)?, InputMode::TurnCommitOnly, Finality::Final, &[])?;
    /// }
    /// let ops: Vec<&str> = s.completed_operations().map(|o| o.as_str()).collect();
    /// assert_eq!(ops, ["b", "c"]);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn record_completed(
        &mut self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error>
    where
        S: Live,
    {
        let own_identity = fence.same_identity(&self.fence);
        self.completed
            .record(own_identity, fence, op, mode, finality, results)
    }

    /// Reserves `(stage, request)` under `fence` without submitting it.
    /// Reserving an existing pair of the same epoch is a no-op.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`], [`Error::ResourceConflict`] if another epoch
    /// holds the pair, [`Error::Full`] if the resource table is full.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let r = Id::new("r")?;
    /// s.reserve(&f, 0, &r)?;
    /// s.reserve(&f, 0, &r)?; // idempotent
    /// assert_eq!(s.resources().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn reserve(
        &mut self,
        fence: &Fence<IdOf<P>>,
        stage: u32,
        request: &IdOf<P>,
    ) -> Result<(), Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        self.requests.reserve(stage, request, fence.position())
    }

    /// Reserves, accepts `fence`, marks the request submitted and makes it
    /// the stage's binding. All-or-nothing.
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve), plus [`Error::Full`] when a new stage
    /// finds the binding table full.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("a")?)?;
    /// s.bind(&f, 0, &Id::new("b")?)?; // replaces stage 0's binding
    /// let bound: Vec<&str> = s.stage_request_ids(None).map(|i| i.as_str()).collect();
    /// assert_eq!(bound, ["b"]);
    /// assert_eq!(s.resources().count(), 2);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn bind(
        &mut self,
        fence: &Fence<IdOf<P>>,
        stage: u32,
        request: &IdOf<P>,
    ) -> Result<(), Error>
    where
        S: Live,
    {
        self.fence.admits(fence)?;
        let plan = self.requests.plan_bind(stage, request, fence.position())?;
        self.accept_validated(fence);
        self.requests.bind(plan, stage, request, fence.position());
        Ok(())
    }

    /// Barge-in: advances to `next` if it is ahead of the session, then
    /// returns and releases the requests held at exactly `cancelled`. A late
    /// cancel never moves the session backwards.
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
    /// let mut s = Session::open(f0.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f0, 0, &Id::new("talk")?)?;
    /// let f1 = f0.clone().with_epoch(1);
    /// let released = s.cancel(&f0, &f1)?;
    /// assert_eq!(released.as_slice(), [Id::new("talk")?]);
    /// assert_eq!(s.fence(), &f1);
    /// // A late append from the cancelled epoch is refused.
    /// assert!(s.append(&f0, InputMode::TurnCommitOnly).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn cancel(
        &mut self,
        cancelled: &Fence<IdOf<P>>,
        next: &Fence<IdOf<P>>,
    ) -> Result<RequestIds<P::Tables>, Error>
    where
        S: Live,
    {
        move_past!(self, cancelled, next, next.epoch > cancelled.epoch);
        Ok(self.requests.release_position(cancelled.position()))
    }

    /// Publishes new configurations atomically. Passing neither changes
    /// nothing; otherwise `config_generation` advances by one. Returns the
    /// config generation.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let mut s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::new(1_u8, 1_u8), Instant::ZERO)?;
    /// assert_eq!(s.replace_configs(None, None), 0);
    /// assert_eq!(s.replace_configs(Some(2), None), 1);
    /// assert_eq!((*s.session_config(), *s.runtime_config()), (2, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn replace_configs(
        &mut self,
        session_config: Option<P::SessionConfig>,
        runtime_config: Option<P::RuntimeConfig>,
    ) -> u64
    where
        S: Live,
    {
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
    /// until then.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(Some(Duration::from_secs(60)), Duration::from_secs(5))?;
    /// let s = Session::open(f.clone(), OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// assert_eq!(s.deadline(), Some(Instant::from_millis(60_000)));
    /// let d = s.detach(&f, Instant::from_millis(1_000))?;
    /// assert_eq!(d.deadline(), Some(Instant::from_millis(6_000)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn deadline(&self) -> Option<Instant>
    where
        S: Live,
    {
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
    /// then idle expiry.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(Some(Duration::from_secs(1)), Duration::from_secs(5))?;
    /// let s = Session::open(f, OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// assert_eq!(s.due(Instant::from_millis(999)), None);
    /// assert_eq!(s.due(Instant::from_millis(1_000)), Some(CloseReason::IdleTtlExpired));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn due(&self, now: Instant) -> Option<CloseReason>
    where
        S: Live,
    {
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

    /// Starts closing if the lease is due at `now` (grace first, then idle),
    /// with that reason; otherwise gives the session back unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(None, Duration::from_secs(5))?;
    /// let s = Session::open(f.clone(), OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::ZERO)?;
    /// let d = d.expire(Instant::from_millis(4_999)).unwrap_err();
    /// let closing = d.expire(Instant::from_millis(5_000)).unwrap();
    /// assert_eq!(closing.state().reason(), CloseReason::DisconnectGraceExpired);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn expire(self, now: Instant) -> Result<Session<Closing, P>, Self>
    where
        S: Live,
    {
        match self.due(now) {
            Some(reason) => Ok(self.close_now(reason)),
            None => Err(self),
        }
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
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("llm")?)?;
    /// let (closed, ids) = s.close(&f, CloseReason::ClientClose)?;
    /// assert_eq!((closed.lease_generation(), ids.len()), (1, 1));
    /// # Ok::<(), Error>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn close(
        self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<(Session<Closed, P>, RequestIds<P::Tables>), Rejected<Self>>
    where
        S: Live,
    {
        let mut session = self;
        let mut ids = RequestIds::new();
        match session.close_in_place(fence, &mut ids) {
            Ok(()) => Ok((session.into_state(Closed::new(reason)), ids)),
            Err(error) => Err(Rejected { error, session }),
        }
    }

    /// Marks the lease closing and moves to `Closing` with `reason`.
    /// What a close does to the session, where it sits: accepts `fence`
    /// (the only step that can fail, and it changes nothing when it does),
    /// bumps the lease generation and ends every operation, releases every
    /// request into `released` and forgets the completed appends. The
    /// caller then moves the session to `Closed` ([`close`](Self::close))
    /// or marks it closed (`AnySession::close_into`).
    #[inline]
    pub(crate) fn close_in_place(
        &mut self,
        fence: &Fence<IdOf<P>>,
        released: &mut RequestIds<P::Tables>,
    ) -> Result<(), Error>
    where
        S: Live,
    {
        self.accept(fence)?;
        self.lease.mark_closing();
        self.requests.drain_into(released);
        self.completed.clear();
        Ok(())
    }

    pub(super) fn close_now(mut self, reason: CloseReason) -> Session<Closing, P> {
        self.lease.mark_closing();
        self.into_state(Closing::new(reason))
    }
}

/// What [`Session::resume_idempotent`] did.
///
/// # Examples
///
/// See [`Session::resume_idempotent`].
#[derive(Debug)]
#[must_use = "the session is inside: a dropped `Resumption` drops the session with the requests it owns"]
pub enum Resumption<S: State, P: Profile = crate::profile::Conformance> {
    /// The resume took effect: the session is open under the new
    /// generation.
    Resumed(Session<Open, P>, u64),
    /// The same resume asked again: the session as it was, and the
    /// generation that resume produced.
    Replayed(Session<S, P>, u64),
}
