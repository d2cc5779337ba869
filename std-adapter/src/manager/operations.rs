//! The per-session operations of [`SessionManager`]: each finds the session
//! and calls the same operation of [`AnySession`](duplex_core::AnySession),
//! which checks the lifecycle state. Transitions go through
//! `SessionManager::transition`, which keeps the deadline index current.

// Transitions hand the unchanged session back inside `Rejected`, by value:
// it goes straight back into its slot, so boxing it would only allocate.
#![allow(clippy::result_large_err)]

use duplex_core::{
    Activity, Appended, Clock, CloseReason, Error as CoreError, Fence, Finality, Id, InputMode,
    Rejected, RequestIds, RequestState, Reservation,
};

use super::{id, SessionManager};
use crate::error::Error;

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
    /// assert_eq!(m.snapshot(&f.session).unwrap().last_activity, Instant::from_millis(1_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn touch(&mut self, fence: &Fence<L>, activity: Activity) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.with(&fence.session, |s| Ok(s.touch(fence, activity, now)?))
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
    pub fn detach(&mut self, fence: &Fence<L>) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.transition(&fence.session, |s| Ok((s.detach(fence, now)?, ())))
    }

    /// Detaches only if the lease is still at `generation`: the connection
    /// that holds that generation went away. A host whose connections can
    /// race a takeover (a client reconnects and resumes before the server
    /// has noticed the old socket drop) detaches with the generation its
    /// connection was handed, so a superseded connection never detaches the
    /// new one.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`,
    /// `generation_mismatch` (a newer connection holds the session; nothing
    /// changes).
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
    pub fn detach_generation(&mut self, fence: &Fence<L>, generation: u64) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.transition(&fence.session, |s| {
            let expected = s.lease_generation();
            if expected != generation {
                return Err(Rejected {
                    error: CoreError::GenerationMismatch {
                        expected,
                        actual: generation,
                    },
                    session: s,
                });
            }
            Ok((s.detach(fence, now)?, ()))
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
    /// assert_eq!(m.resume(&f, 0)?, 1);
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(&mut self, fence: &Fence<L>, expected_generation: u64) -> Result<u64, Error<L>> {
        let now = self.clock.now();
        self.transition(&fence.session, |s| {
            s.resume(fence, expected_generation, now)
        })
    }

    /// Starts a lease operation (Open).
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
    /// m.begin_operation(&f, "gen-1")?;
    /// assert_eq!(m.begin_operation(&f, "gen-1").unwrap_err().kind(), ErrorKind::OperationActive);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_operation(
        &mut self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.with(&fence.session, |s| {
            Ok(s.begin_operation(fence, &id(operation.as_ref())?, now)?)
        })
    }

    /// Ends a lease operation (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_not_active`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen-1")?;
    /// m.end_operation(&f, "gen-1")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn end_operation(
        &mut self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        let now = self.clock.now();
        let slot = self.slot_of(&fence.session)?;
        let result = self.with(&fence.session, |s| {
            Ok(s.end_operation(fence, &id(operation.as_ref())?, now)?)
        });
        // Ending the last operation may make idle expiry possible again.
        self.reschedule(slot);
        result
    }

    /// Appends input (Open): prepare and commit in one step.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `unsupported_mode`, `fence_mismatch`.
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
    pub fn append(&mut self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error<L>> {
        self.with(&fence.session, |s| Ok(s.append(fence, mode)?))
    }

    /// Phase one of an append (Open).
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare_append(
        &self,
        fence: &Fence<L>,
        mode: InputMode,
    ) -> Result<Reservation<L>, Error<L>> {
        self.with_ref(&fence.session, |s| Ok(s.prepare_append(fence, mode)?))
    }

    /// Phase two of an append, on the session named by the reservation's
    /// fence (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `stale_reservation`.
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&mut self, reservation: &Reservation<L>) -> Result<Appended, Error<L>> {
        self.with(&reservation.fence().session, |s| {
            Ok(s.commit_append(reservation)?)
        })
    }

    /// Looks up a completed append (Open, Detached).
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
    /// let chunk = InputMode::AppendAudioChunk;
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op-1", chunk, Finality::Partial, &[3])?;
    /// assert_eq!(m.completed(&f, "op-1", chunk, Finality::Partial)?, Some(&[3][..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<&[i64]>, Error<L>> {
        self.with_ref(&fence.session, |s| {
            Ok(s.completed(fence, &id(operation.as_ref())?, mode, finality)?)
        })
    }

    /// Records a completed append (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `full` (too many
    /// stage results).
    ///
    /// See [`completed`](Self::completed).
    pub fn record_completed(
        &mut self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| {
            Ok(s.record_completed(fence, &id(operation.as_ref())?, mode, finality, results)?)
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
    /// m.reserve(&f, 0, "r0")?;
    /// assert_eq!(m.resource_request_ids(&f.session, None, Some(RequestState::Reserved))?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &mut self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| {
            Ok(s.reserve(fence, stage, &id(request.as_ref())?)?)
        })
    }

    /// Binds a stage request: reserve, accept the fence, submit, bind (Open,
    /// Detached).
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
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.stage_request_ids(&f.session, None)?.as_slice(), [Id::new("r0")?]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind(
        &mut self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| {
            Ok(s.bind(fence, stage, &id(request.as_ref())?)?)
        })
    }

    /// Request ids of the stage bindings (optionally at exactly `fence`).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// See [`bind`](Self::bind).
    pub fn stage_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.with_ref(session, |s| Ok(s.stage_request_ids(fence)?))
    }

    /// Unique request ids of the resources (optionally at exactly `fence`,
    /// in the given state).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// See [`reserve`](Self::reserve).
    pub fn resource_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.with_ref(session, |s| Ok(s.resource_request_ids(fence, state)?))
    }

    /// Drops the bindings and resources with these request ids (any of
    /// `&[Id]`, the ids `cancel` returned, or `&[&str]`).
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
    /// m.bind(&f, 0, "r0")?;
    /// m.bind(&f, 1, "r1")?;
    /// m.release(&f.session, &["r0"])?;
    /// let held = m.stage_request_ids(&f.session, None)?;
    /// m.release(&f.session, &held)?; // ids handed out go straight back in
    /// assert!(m.stage_request_ids(&f.session, None)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release<I: AsRef<str>>(
        &mut self,
        session: &Id<L>,
        request_ids: &[I],
    ) -> Result<(), Error<L>> {
        self.with(session, |s| {
            Ok(s.release_where(|held| {
                request_ids
                    .iter()
                    .any(|r| r.as_ref().as_bytes() == held.as_bytes())
            })?)
        })
    }

    /// Returns and drops the requests held at exactly `fence` (no
    /// validation).
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
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_fence(&mut self, fence: &Fence<L>) -> Result<RequestIds<L, R>, Error<L>> {
        self.with(&fence.session, |s| Ok(s.release_fence(fence)?))
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
    pub fn accept_fence(&mut self, fence: &Fence<L>) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| Ok(s.accept_fence(fence)?))
    }

    /// Barge-in: advances to `next` and releases what `cancelled` held
    /// (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session` (for `cancelled`'s session), `wrong_state`,
    /// `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "tts")?;
    /// assert_eq!(m.cancel(&f, &f.clone().with_epoch(1))?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(
        &mut self,
        cancelled: &Fence<L>,
        next: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.with(&cancelled.session, |s| Ok(s.cancel(cancelled, next)?))
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
    /// let mut m: SessionManager<ManualClock, u8, u8> =
    ///     SessionManager::with_capacities(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::new(0, 0))?;
    /// assert_eq!(m.replace_configs(&f.session, Some(1), None)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_configs(
        &mut self,
        session: &Id<L>,
        session_config: Option<SC>,
        runtime_config: Option<RC>,
    ) -> Result<u64, Error<L>> {
        self.with(session, |s| {
            Ok(s.replace_configs(session_config, runtime_config)?)
        })
    }

    /// Starts closing (→ Closing); on a closing session accepts the fence and
    /// keeps the first reason.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `fence_mismatch` (nothing changes: a stale close
    /// keeps the live session).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Closing);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_close(&mut self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error<L>> {
        self.transition(&fence.session, |s| Ok((s.begin_close(fence, reason)?, ())))
    }
}
