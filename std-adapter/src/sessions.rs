//! [`Sessions`]: the per-session operations of a host, written once.
//!
//! Each operation finds the session by id and calls the same operation of
//! [`AnySession`], which states the lifecycle rule (the fence check, the
//! state check, the generation bump, what a close releases). A manager
//! implements two methods, [`apply`](Sessions::apply) and
//! [`read`](Sessions::read), that find a session and keep their own books
//! (the deadline index, the reaper's wake-up, logs and metrics); every
//! operation below follows from them, for the single-threaded
//! [`SessionManager`](crate::SessionManager) (`&mut`), the
//! [`SharedManager`](crate::SharedManager) (`&`), and any host layer built
//! the same way.

use duplex_core::profile::{Conformance, IdOf, Profile};
use duplex_core::{
    Activity, AnySession, Appended, CloseReason, Error as CoreError, Fence, Finality, InputMode,
    Instant, RequestIds, RequestState, Reservation, StageResults,
};

use crate::error::Error;
use duplex_core::id::IdText;
use duplex_core::storage::StoredId;

/// A validated request or operation id.
fn id<I: IdText>(text: &str) -> Result<I, CoreError> {
    I::new(text)
}

/// The per-session operations of a host: each finds the session, takes the
/// time once if it needs it (the manager's clock, or the instant of an
/// [`At`](crate::At)), and runs the [`AnySession`] operation of the same
/// name, which checks the lifecycle state (`wrong_state`) and changes
/// nothing when it refuses.
///
/// Implemented for `&mut SessionManager`, [`At`](crate::At) (a manager at a
/// given instant, `manager.at(now)`) and `&SharedManager`, so the same call
/// reads the same on each: `manager.append(&fence, mode)`. Request and
/// operation ids are anything `AsRef<str>` (`invalid_id` after
/// `unknown_session`, before `wrong_state`).
///
/// # Examples
///
/// Code that drives either manager takes `impl Sessions`:
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{ManagerConfig, SessionManager, Sessions, SharedManager};
///
/// fn one_turn(m: impl Sessions, f: &Fence) -> Result<u64, duplex_std::Error> {
///     Ok(m.append(f, InputMode::TurnCommitOnly)?.seq)
/// }
///
/// let f = Fence::new(Id::new("s")?, 0);
/// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
/// single.open(f.clone(), OpenOptions::default())?;
/// assert_eq!(one_turn(&mut single, &f)?, 1);
/// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
/// shared.open(f.clone(), OpenOptions::default())?;
/// assert_eq!(one_turn(&shared, &f)?, 1);
/// # use duplex_std::MonotonicClock;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Sessions<P: Profile = Conformance>: Sized {
    /// Runs `op` on the session named `session` with the time (the clock's
    /// `now`, or the instant of an [`At`](crate::At)), and
    /// keeps the host's books: a moved deadline, a state change (logged
    /// `state=A=>B`), a refusal (counted by kind).
    ///
    /// # Errors
    ///
    /// `unknown_session`, or what `op` returns.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let kind = m.apply(&f.session, |s, _now| Ok(s.kind()))?;
    /// assert_eq!(kind, StateKind::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn apply<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>>;

    /// [`apply`](Self::apply) for an operation that takes no time (append,
    /// bind, cancel, ...): the clock is not read (on a virtual machine a
    /// clock read can cost more than the operation), and the deadline
    /// index is kept for state changes only. An operation given a time
    /// (touch, detach, resume, the lease operations) goes through `apply`.
    ///
    /// # Errors
    ///
    /// `unknown_session`, or what `op` returns.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let seq = m.update(&f.session, |s| s.append(&f, InputMode::TurnCommitOnly))?.seq;
    /// assert_eq!(seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn update<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>>;

    /// Runs `op` on the session named `session`, read-only.
    ///
    /// # Errors
    ///
    /// `unknown_session`, or what `op` returns.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.read(&f.session, |s| Ok(s.lease_generation()))?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn read<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>>;

    /// Records activity (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let mut m = SessionManager::new(&clock, ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// clock.advance(Duration::from_secs(1));
    /// m.touch(&f, Activity::Heartbeat)?;
    /// assert_eq!(m.inspect(&f.session).unwrap().last_activity, Instant::from_millis(1_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn touch(self, fence: &Fence<IdOf<P>>, activity: Activity) -> Result<(), Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| s.touch(fence, activity, now))
    }

    /// The client went away (Open → Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.detach(&f).unwrap_err().kind(), ErrorKind::WrongState);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn detach(self, fence: &Fence<IdOf<P>>) -> Result<(), Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| s.detach(fence, now))
    }

    /// Detaches only if the lease is still at `generation`, the one the
    /// departing connection was handed (checked under the same lock as the
    /// change): a superseded connection never detaches its successor.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `generation_mismatch` (a newer connection holds
    /// the session; nothing changes), `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.resume(&f, 0)?, 1); // takeover by a second connection
    /// let e = m.detach_generation(&f, 0).unwrap_err(); // the first one drops
    /// assert_eq!(e.kind(), ErrorKind::GenerationMismatch);
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Open);
    /// m.detach_generation(&f, 1)?;
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Detached);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn detach_generation(
        self,
        fence: &Fence<IdOf<P>>,
        generation: u64,
    ) -> Result<(), Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| {
            s.check_generation(generation)?;
            s.detach(fence, now)
        })
    }

    /// Resume with the lease generation (Detached → Open, or takeover while
    /// Open); returns the new generation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`,
    /// `generation_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.resume(&f, 7).unwrap_err().kind(), ErrorKind::GenerationMismatch);
    /// assert_eq!(m.resume(&f, 0)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn resume(
        self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
    ) -> Result<u64, Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| {
            s.resume(fence, expected_generation, now)
        })
    }

    /// [`resume`](Self::resume) named by a control id, idempotent: asked
    /// again with the control id of the resume that produced the current
    /// generation (its caller lost the answer), it answers with that
    /// generation and changes nothing.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `generation_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.resume_idempotent(&f, 0, "ctl-9")?, 1);
    /// assert_eq!(m.resume_idempotent(&f, 0, "ctl-9")?, 1); // the same answer
    /// assert_eq!(m.resume_idempotent(&f, 0, "ctl-10").unwrap_err().kind(), ErrorKind::GenerationMismatch);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn resume_idempotent(
        self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        control: impl AsRef<str>,
    ) -> Result<u64, Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| {
            let control = id(control.as_ref())?;
            s.resume_idempotent(fence, expected_generation, &control, now)
        })
    }

    /// Starts a lease operation (Open): the session does not idle-expire
    /// while one is active.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_active`, `full`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "generate")?;
    /// assert_eq!(m.next_deadline(), None);
    /// m.end_operation(&f, "generate")?;
    /// assert!(m.next_deadline().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn begin_operation(
        self,
        fence: &Fence<IdOf<P>>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| {
            s.begin_operation(fence, &id(operation.as_ref())?, now)
        })
    }

    /// Ends a lease operation (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_not_active`.
    ///
    /// See [`begin_operation`](Self::begin_operation).
    fn end_operation(
        self,
        fence: &Fence<IdOf<P>>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.apply(&fence.session, |s, now| {
            s.end_operation(fence, &id(operation.as_ref())?, now)
        })
    }

    /// Appends input (Open): prepare and commit in one step.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `unsupported_mode`,
    /// `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.append(&f, InputMode::TurnCommitOnly)?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn append(self, fence: &Fence<IdOf<P>>, mode: InputMode) -> Result<Appended, Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.append(fence, mode))
    }

    /// Phase one of an append (Open); nothing changes.
    ///
    /// # Errors
    ///
    /// As [`append`](Self::append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let r = m.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(m.commit_append(&r)?.seq, 1);
    /// assert_eq!(m.commit_append(&r).unwrap_err().kind(), ErrorKind::StaleReservation);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn prepare_append(
        self,
        fence: &Fence<IdOf<P>>,
        mode: InputMode,
    ) -> Result<Reservation<IdOf<P>>, Error<IdOf<P>>> {
        self.read(&fence.session, |s| s.prepare_append(fence, mode))
    }

    /// Phase two of an append (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `stale_reservation`.
    ///
    /// See [`prepare_append`](Self::prepare_append).
    fn commit_append(self, reservation: &Reservation<IdOf<P>>) -> Result<Appended, Error<IdOf<P>>> {
        self.update(&reservation.fence().session, |s| {
            s.commit_append(reservation)
        })
    }

    /// The recorded stage results of a completed append (Open, Detached),
    /// copied out; `None` if it is not recorded.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_reused`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op-1", InputMode::TurnCommitOnly, Finality::Final, &[3])?;
    /// let hit = m.completed(&f, "op-1", InputMode::TurnCommitOnly, Finality::Final)?;
    /// assert_eq!(hit.as_deref(), Some(&[3][..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn completed(
        self,
        fence: &Fence<IdOf<P>>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<StageResults<P::Tables>>, Error<IdOf<P>>> {
        self.read(&fence.session, |s| {
            s.completed(fence, &id(operation.as_ref())?, mode, finality)?
                .map(StageResults::new)
                .transpose()
        })
    }

    /// Records a completed append (Open, Detached; no fence validation).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `full` (more than `K`
    /// results).
    ///
    /// See [`completed`](Self::completed).
    fn record_completed(
        self,
        fence: &Fence<IdOf<P>>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error<IdOf<P>>> {
        self.update(&fence.session, |s| {
            s.record_completed(fence, &id(operation.as_ref())?, mode, finality, results)
        })
    }

    /// Reserves a stage request (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `resource_conflict`, `full`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve(&f, 0, "r")?;
    /// let reserved = m.resource_request_ids(&f.session, None, Some(RequestState::Reserved))?;
    /// assert_eq!(reserved.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn reserve(
        self,
        fence: &Fence<IdOf<P>>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.update(&fence.session, |s| {
            s.reserve(fence, stage, &id(request.as_ref())?)
        })
    }

    /// Binds a stage request (Open, Detached).
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "llm")?;
    /// assert_eq!(m.stage_request_ids(&f.session, None)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn bind(
        self,
        fence: &Fence<IdOf<P>>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.update(&fence.session, |s| {
            s.bind(fence, stage, &id(request.as_ref())?)
        })
    }

    /// Request ids of the stage bindings, at exactly `fence` if given
    /// (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// See [`bind`](Self::bind).
    fn stage_request_ids(
        self,
        session: &IdOf<P>,
        fence: Option<&Fence<IdOf<P>>>,
    ) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.read(session, |s| s.stage_request_ids(fence))
    }

    /// Unique request ids of the resources, filtered by exact fence and
    /// state (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// See [`reserve`](Self::reserve).
    fn resource_request_ids(
        self,
        session: &IdOf<P>,
        fence: Option<&Fence<IdOf<P>>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.read(session, |s| s.resource_request_ids(fence, state))
    }

    /// Drops the bindings and resources with these request ids (Open,
    /// Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "a")?;
    /// m.release(&f.session, &["a"])?;
    /// assert!(m.stage_request_ids(&f.session, None)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn release<I: AsRef<str>>(
        self,
        session: &IdOf<P>,
        request_ids: &[I],
    ) -> Result<(), Error<IdOf<P>>> {
        self.update(session, |s| {
            s.release_where(|held| request_ids.iter().any(|r| r.as_ref() == held.text()))
        })
    }

    /// Returns and drops the requests held at exactly `fence` (Open,
    /// Detached, Closing; no fence validation).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "a")?;
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn release_fence(
        self,
        fence: &Fence<IdOf<P>>,
    ) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.release_fence(fence))
    }

    /// Validates and accepts a fence (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.accept_fence(&f.clone().with_epoch(1))?;
    /// assert_eq!(m.accept_fence(&f).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn accept_fence(self, fence: &Fence<IdOf<P>>) -> Result<(), Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.accept_fence(fence))
    }

    /// Barge-in (Open, Detached): the requests of `cancelled`, released;
    /// `next` becomes current if it is ahead.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "tts")?;
    /// let cancelled = m.cancel(&f, &f.clone().with_epoch(1))?;
    /// assert_eq!(cancelled.as_slice(), [Id::new("tts")?]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn cancel(
        self,
        cancelled: &Fence<IdOf<P>>,
        next: &Fence<IdOf<P>>,
    ) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.update(&cancelled.session, |s| s.cancel(cancelled, next))
    }

    /// Publishes new configurations (Open, Detached); returns the config
    /// generation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// use duplex_core::profile::Conformance;
    /// let mut m: SessionManager<ManualClock, Conformance<u8>> =
    ///     SessionManager::with_capacities(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::new(1, ()))?;
    /// assert_eq!(m.replace_configs(&f.session, Some(2), None)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn replace_configs(
        self,
        session: &IdOf<P>,
        session_config: Option<P::SessionConfig>,
        runtime_config: Option<P::RuntimeConfig>,
    ) -> Result<u64, Error<IdOf<P>>> {
        self.update(session, |s| {
            s.replace_configs(session_config, runtime_config)
        })
    }

    /// Starts closing (Open, Detached → Closing; on Closing the fence is
    /// accepted and the first reason kept). The session stays, counted for
    /// admission, until finalized.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::RequestCleanup)?;
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Closing);
    /// assert!(m.finalize(&f.session)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn begin_close(
        self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<(), Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.begin_close(fence, reason))
    }
}
