//! The dynamic API of [`AnySession`]: every operation of the typed API,
//! checked against the current state at run time. An operation the state
//! does not permit returns [`Error::WrongState`] and changes nothing.
//! Transitions, too, change the session where it sits; a refused one
//! leaves it as it was.

use super::{AnySession, Typed};
use crate::append::{Appended, Finality, Reservation};
use crate::error::Error;
use crate::fence::Fence;
use crate::lease::{Activity, CloseReason};
use crate::mode::InputMode;
use crate::profile::{IdOf, Profile, Tables};
use crate::requests::{RequestIds, RequestState};
use crate::session::state::{Detached, Live, Open};
use crate::session::Session;
use crate::time::Instant;

/// `wrong_state` for `operation` on a typed session that is not closed
/// (`None`: closed).
pub(super) fn wrong_state<P: Profile>(operation: &'static str, typed: Option<&Typed<P>>) -> Error {
    Error::WrongState {
        operation,
        state: typed.map_or(crate::session::state::StateKind::Closed, Typed::kind),
    }
}

impl<P: Profile> AnySession<P> {
    /// The lease deadline of a live session (see [`Session::deadline`](crate::Session::deadline));
    /// `None` once closing.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.deadline(), Some(Instant::from_millis(300_000)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn deadline(&self) -> Option<Instant> {
        match self.unclosed() {
            Some(Typed::Open(s, _)) => s.deadline(),
            Some(Typed::Detached(s, _)) => s.deadline(),
            _ => None,
        }
    }

    /// Whether a live session's lease has expired at `now`, and why.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.due(Instant::from_millis(300_000)), Some(CloseReason::IdleTtlExpired));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn due(&self, now: Instant) -> Option<CloseReason> {
        match self.unclosed() {
            Some(Typed::Open(s, _)) => s.due(now),
            Some(Typed::Detached(s, _)) => s.due(now),
            _ => None,
        }
    }

    /// Records activity (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.touch(&f, Activity::Heartbeat, Instant::from_millis(5))?;
    /// # Ok::<(), Error>(())
    /// ```
    pub fn touch(
        &mut self,
        fence: &Fence<IdOf<P>>,
        activity: Activity,
        now: Instant,
    ) -> Result<(), Error> {
        live!(self.unclosed_mut(), "touch", s => s.touch(fence, activity, now))
    }

    /// The client went away (Open → Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] or [`Error::FenceMismatch`]; the session is
    /// unchanged.
    ///
    /// See the type-level example.
    pub fn detach(&mut self, fence: &Fence<IdOf<P>>, now: Instant) -> Result<(), Error> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.detach_in_place(fence, now)?,
            other => {
                return Err(wrong_state("detach", other.as_deref()));
            }
        }
        self.transition(|typed| match typed {
            Typed::Open(s, closed) => (
                Typed::Detached(s.into_state(Detached::new(now)), closed),
                (),
            ),
            other => (other, ()),
        });
        Ok(())
    }

    /// Resume or takeover (Open, Detached → Open); returns the new lease
    /// generation.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`] or
    /// [`Error::GenerationMismatch`]; the session is unchanged.
    ///
    /// See the type-level example.
    pub fn resume(
        &mut self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        now: Instant,
    ) -> Result<u64, Error> {
        self.resume_as(fence, expected_generation, None, now)
    }

    /// [`resume`](Self::resume) named by a control id, idempotent: asked
    /// again with the control id of the resume that produced the current
    /// generation, it answers with that generation and changes nothing (see
    /// [`Session::resume_idempotent`](crate::Session::resume_idempotent)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`] or
    /// [`Error::GenerationMismatch`]; the session is unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let control = Id::new("ctl-1")?;
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.detach(&f, Instant::ZERO)?;
    /// assert_eq!(s.resume_idempotent(&f, 0, &control, Instant::from_millis(5))?, 1);
    /// s.detach(&f, Instant::from_millis(9))?;
    /// // Asked again: the same answer, and the session stays detached.
    /// assert_eq!(s.resume_idempotent(&f, 0, &control, Instant::from_millis(9))?, 1);
    /// assert_eq!(s.kind(), StateKind::Detached);
    /// // Another resume needs the current generation.
    /// let other = Id::new("ctl-2")?;
    /// assert!(s.resume_idempotent(&f, 0, &other, Instant::ZERO).is_err());
    /// assert_eq!(s.resume_idempotent(&f, 1, &other, Instant::ZERO)?, 2);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resume_idempotent(
        &mut self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        control: &IdOf<P>,
        now: Instant,
    ) -> Result<u64, Error> {
        self.resume_as(fence, expected_generation, Some(control), now)
    }

    /// A resume, by `control` if given.
    fn resume_as(
        &mut self,
        fence: &Fence<IdOf<P>>,
        expected_generation: u64,
        control: Option<&IdOf<P>>,
        now: Instant,
    ) -> Result<u64, Error> {
        // Checked and applied where the session sits; a resume of a
        // detached session then moves it to Open, once. A resume asked
        // again changes nothing.
        let (generation, detached) = match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => (
                resume_where(s, fence, expected_generation, control, now)?.0,
                false,
            ),
            Some(Typed::Detached(s, _)) => {
                resume_where(s, fence, expected_generation, control, now)?
            }
            other => {
                return Err(wrong_state("resume", other.as_deref()));
            }
        };
        if detached {
            self.transition(|typed| match typed {
                Typed::Detached(s, closed) => (Typed::Open(s.into_state(Open), closed), ()),
                other => (other, ()),
            });
        }
        Ok(generation)
    }

    /// Starts a lease operation (Open).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::begin_operation`](crate::Session::begin_operation).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.begin_operation(&f, &Id::new("gen")?, Instant::ZERO)?;
    /// s.end_operation(&f, &Id::new("gen")?, Instant::ZERO)?;
    /// # Ok::<(), Error>(())
    /// ```
    pub fn begin_operation(
        &mut self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        now: Instant,
    ) -> Result<(), Error> {
        open!(self.unclosed_mut(), "begin_operation", s => s.begin_operation(fence, op, now))
    }

    /// Ends a lease operation (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::end_operation`](crate::Session::end_operation).
    ///
    /// See [`begin_operation`](Self::begin_operation).
    pub fn end_operation(
        &mut self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        now: Instant,
    ) -> Result<(), Error> {
        live!(self.unclosed_mut(), "end_operation", s => s.end_operation(fence, op, now))
    }

    /// Phase one of an append (Open).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::prepare_append`](crate::Session::prepare_append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// let r = s.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(s.commit_append(&r)?.seq, 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn prepare_append(
        &self,
        fence: &Fence<IdOf<P>>,
        mode: InputMode,
    ) -> Result<Reservation<IdOf<P>>, Error> {
        open!(self.unclosed(), "prepare_append", s => s.prepare_append(fence, mode))
    }

    /// Appends input (Open).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::append`](crate::Session::append).
    ///
    /// See the type-level example.
    pub fn append(&mut self, fence: &Fence<IdOf<P>>, mode: InputMode) -> Result<Appended, Error> {
        open!(self.unclosed_mut(), "append", s => s.append(fence, mode))
    }

    /// Phase two of an append (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::commit_append`](crate::Session::commit_append).
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&mut self, reservation: &Reservation<IdOf<P>>) -> Result<Appended, Error> {
        live!(self.unclosed_mut(), "commit_append", s => s.commit_append(reservation))
    }

    /// Looks up a completed append (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::completed`](crate::Session::completed).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let op = Id::new("op")?;
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.record_completed(&f, &op, InputMode::TurnCommitOnly, Finality::Final, &[4])?;
    /// assert_eq!(s.completed(&f, &op, InputMode::TurnCommitOnly, Finality::Final)?, Some(&[4][..]));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed(
        &self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<&[i64]>, Error> {
        live!(self.unclosed(), "completed", s => s.completed(fence, op, mode, finality))
    }

    /// Records a completed append (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::record_completed`](crate::Session::record_completed).
    ///
    /// See [`completed`](Self::completed).
    pub fn record_completed(
        &mut self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error> {
        live!(self.unclosed_mut(), "record_completed", s => s.record_completed(fence, op, mode, finality, results))
    }

    /// Reserves a stage request (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::reserve`](crate::Session::reserve).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.reserve(&f, 0, &Id::new("r")?)?;
    /// assert_eq!(s.resource_request_ids(None, Some(RequestState::Reserved))?.len(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve(
        &mut self,
        fence: &Fence<IdOf<P>>,
        stage: u32,
        request: &IdOf<P>,
    ) -> Result<(), Error> {
        live!(self.unclosed_mut(), "reserve", s => s.reserve(fence, stage, request))
    }

    /// Binds a stage request (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::bind`](crate::Session::bind).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// assert_eq!(s.stage_request_ids(None)?.len(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn bind(
        &mut self,
        fence: &Fence<IdOf<P>>,
        stage: u32,
        request: &IdOf<P>,
    ) -> Result<(), Error> {
        live!(self.unclosed_mut(), "bind", s => s.bind(fence, stage, request))
    }

    /// Validates and accepts a fence (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.accept_fence(&f.clone().with_epoch(1))?;
    /// assert_eq!(s.fence().epoch, 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn accept_fence(&mut self, fence: &Fence<IdOf<P>>) -> Result<(), Error> {
        live!(self.unclosed_mut(), "accept_fence", s => s.accept_fence(fence))
    }

    /// Barge-in (Open, Detached): see [`Session::cancel`](crate::Session::cancel).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("tts")?)?;
    /// assert_eq!(s.cancel(&f, &f.clone().with_epoch(1))?.len(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn cancel(
        &mut self,
        cancelled: &Fence<IdOf<P>>,
        next: &Fence<IdOf<P>>,
    ) -> Result<RequestIds<P::Tables>, Error> {
        live!(self.unclosed_mut(), "cancel", s => s.cancel(cancelled, next))
    }

    /// Publishes new configurations (Open, Detached); returns the config
    /// generation.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f, OpenOptions::new(0_u8, 0_u8), Instant::ZERO)?);
    /// assert_eq!(s.replace_configs(Some(1), None)?, 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn replace_configs(
        &mut self,
        session_config: Option<P::SessionConfig>,
        runtime_config: Option<P::RuntimeConfig>,
    ) -> Result<u64, Error> {
        live!(self.unclosed_mut(), "replace_configs", s => Ok(s.replace_configs(session_config, runtime_config)))
    }

    /// Request ids of the stage bindings (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] for a closed session.
    ///
    /// See [`bind`](Self::bind).
    pub fn stage_request_ids(
        &self,
        fence: Option<&Fence<IdOf<P>>>,
    ) -> Result<RequestIds<P::Tables>, Error> {
        unfinished!(self.unclosed(), "stage_request_ids", s => Ok(RequestIds::collect(s.stage_request_ids(fence))))
    }

    /// Unique request ids of the resources (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] for a closed session.
    ///
    /// See [`reserve`](Self::reserve).
    #[inline]
    pub fn resource_request_ids(
        &self,
        fence: Option<&Fence<IdOf<P>>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<P::Tables>, Error> {
        unfinished!(self.unclosed(), "resource_request_ids", s => Ok(RequestIds::collect(s.resource_request_ids(fence, state))))
    }

    /// Drops the bindings and resources whose request id satisfies
    /// `released` (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] for a closed session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// s.release_where(|id| id.as_str() == "r")?;
    /// assert!(s.stage_request_ids(None)?.is_empty());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_where(
        &mut self,
        released: impl Fn(&<P::Tables as Tables>::StoredId) -> bool,
    ) -> Result<(), Error> {
        unfinished!(self.unclosed_mut(), "release", s => { s.release_where(released); Ok(()) })
    }

    /// Returns every request id the session holds, then drops them all
    /// (Open, Detached, Closing); the state does not change.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] for a closed session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// assert_eq!(s.release_all()?.len(), 1);
    /// assert_eq!(s.kind(), StateKind::Open);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_all(&mut self) -> Result<RequestIds<P::Tables>, Error> {
        unfinished!(self.unclosed_mut(), "release_all", s => Ok(s.release_all()))
    }

    /// Returns and drops the requests held at exactly `fence` (Open,
    /// Detached, Closing; no fence validation).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] for a closed session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// assert_eq!(s.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_fence(
        &mut self,
        fence: &Fence<IdOf<P>>,
    ) -> Result<RequestIds<P::Tables>, Error> {
        unfinished!(self.unclosed_mut(), "release_fence", s => Ok(s.release_fence(fence)))
    }
}

impl<P: Profile> Typed<P> {
    /// The state (a vacant slot reads as closed; no operation sees one).
    pub(super) fn kind(&self) -> crate::session::state::StateKind {
        each!(self, s => s.kind(), vacant => crate::session::state::StateKind::Closed)
    }
}

/// A resume where a live session sits: the generation, and whether the
/// resume moved it (a resume asked again with its control id does not).
fn resume_where<S: Live, P: Profile>(
    s: &mut Session<S, P>,
    fence: &Fence<IdOf<P>>,
    expected_generation: u64,
    control: Option<&IdOf<P>>,
    now: Instant,
) -> Result<(u64, bool), Error> {
    if let Some(generation) = control.map(|c| s.replayed(fence, c)).transpose()?.flatten() {
        return Ok((generation, false));
    }
    Ok((
        s.resume_in_place(fence, expected_generation, control, now)?,
        true,
    ))
}
