//! The dynamic API of [`AnySession`]: every operation of the typed API,
//! checked against the current state at run time. An operation the state
//! does not permit returns [`Error::WrongState`] and changes nothing.
//! Transitions, too, change the session where it sits; a refused one
//! leaves it as it was.

use super::{AnySession, Typed};
use crate::append::{Appended, Finality, Reservation};
use crate::error::Error;
use crate::fence::Fence;
use crate::id::Id;
use crate::lease::{Activity, CloseReason};
use crate::mode::InputMode;
use crate::requests::{RequestIds, RequestState};
use crate::session::expiry::Expiry;
use crate::session::state::{Detached, Open};
use crate::time::Instant;

/// The state of a typed session that is not closed (`None`: closed).
fn state_of<
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
>(
    typed: Option<&Typed<SC, RC, R, B, D, A, L, K>>,
) -> crate::session::state::StateKind {
    typed.map_or(crate::session::state::StateKind::Closed, Typed::kind)
}

/// Runs `$body` on a live session (Open or Detached), or fails with
/// `wrong_state`.
macro_rules! live {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            Some(Typed::Open($s, _)) => $body,
            Some(Typed::Detached($s, _)) => $body,
            other => Err(Error::WrongState {
                operation: $op,
                state: state_of(other.as_deref()),
            }),
        }
    };
}

/// Runs `$body` on an unfinished session (Open, Detached or Closing), or
/// fails with `wrong_state`.
macro_rules! unfinished {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            Some(Typed::Open($s, _)) => $body,
            Some(Typed::Detached($s, _)) => $body,
            Some(Typed::Closing($s, _)) => $body,
            other => Err(Error::WrongState {
                operation: $op,
                state: state_of(other.as_deref()),
            }),
        }
    };
}

/// Runs `$body` on an open session, or fails with `wrong_state`.
macro_rules! open {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            Some(Typed::Open($s, _)) => $body,
            other => Err(Error::WrongState {
                operation: $op,
                state: state_of(other.as_deref()),
            }),
        }
    };
}

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > AnySession<SC, RC, R, B, D, A, L, K>
{
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
        fence: &Fence<L>,
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
    pub fn detach(&mut self, fence: &Fence<L>, now: Instant) -> Result<(), Error> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.detach_in_place(fence, now)?,
            other => {
                let state = state_of(other.as_deref());
                return Err(Error::WrongState {
                    operation: "detach",
                    state,
                });
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
        fence: &Fence<L>,
        expected_generation: u64,
        now: Instant,
    ) -> Result<u64, Error> {
        // Checked and applied where the session sits; a resume of a
        // detached session then moves it to Open, once.
        let (generation, detached) = match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => (s.resume_in_place(fence, expected_generation, now)?, false),
            Some(Typed::Detached(s, _)) => {
                (s.resume_in_place(fence, expected_generation, now)?, true)
            }
            other => {
                let state = state_of(other.as_deref());
                return Err(Error::WrongState {
                    operation: "resume",
                    state,
                });
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
        fence: &Fence<L>,
        op: &Id<L>,
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
        fence: &Fence<L>,
        op: &Id<L>,
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
        fence: &Fence<L>,
        mode: InputMode,
    ) -> Result<Reservation<L>, Error> {
        open!(self.unclosed(), "prepare_append", s => s.prepare_append(fence, mode))
    }

    /// Appends input (Open).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::append`](crate::Session::append).
    ///
    /// See the type-level example.
    pub fn append(&mut self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error> {
        open!(self.unclosed_mut(), "append", s => s.append(fence, mode))
    }

    /// Phase two of an append (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::commit_append`](crate::Session::commit_append).
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&mut self, reservation: &Reservation<L>) -> Result<Appended, Error> {
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
        fence: &Fence<L>,
        op: &Id<L>,
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
        fence: &Fence<L>,
        op: &Id<L>,
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
    pub fn reserve(&mut self, fence: &Fence<L>, stage: u32, request: &Id<L>) -> Result<(), Error> {
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
    pub fn bind(&mut self, fence: &Fence<L>, stage: u32, request: &Id<L>) -> Result<(), Error> {
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
    pub fn accept_fence(&mut self, fence: &Fence<L>) -> Result<(), Error> {
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
        cancelled: &Fence<L>,
        next: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error> {
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
        session_config: Option<SC>,
        runtime_config: Option<RC>,
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
    pub fn stage_request_ids(&self, fence: Option<&Fence<L>>) -> Result<RequestIds<L, R>, Error> {
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
        fence: Option<&Fence<L>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<L, R>, Error> {
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
    pub fn release_where(&mut self, released: impl Fn(&Id<L>) -> bool) -> Result<(), Error> {
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
    pub fn release_all(&mut self) -> Result<RequestIds<L, R>, Error> {
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
    pub fn release_fence(&mut self, fence: &Fence<L>) -> Result<RequestIds<L, R>, Error> {
        unfinished!(self.unclosed_mut(), "release_fence", s => Ok(s.release_fence(fence)))
    }

    /// Starts closing (Open, Detached → Closing; on Closing the fence is
    /// accepted and the first reason kept). Closing bumps the lease
    /// generation once and ends every lease operation; the requests stay,
    /// for the engine to clean up, until [`finalize`](Self::finalize).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] (closed) or [`Error::FenceMismatch`]; the
    /// session is unchanged.
    ///
    /// See [`as_closing`](Self::as_closing).
    pub fn begin_close(&mut self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error> {
        // The fence is checked and accepted where the session sits (a
        // refusal changes nothing); only the infallible move to Closing
        // takes the session by value, once. Three by-value arms, each with
        // its `Rejected` session, had cost 9 KB of stack on a Cortex-M0.
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.accept(fence)?,
            Some(Typed::Detached(s, _)) => s.accept(fence)?,
            Some(Typed::Closing(s, _)) => {
                s.accept(fence)?;
                crate::fmt::debug!(
                    "duplex session {=str}: already closing ({=str}); {=str} not recorded",
                    s.fence.session.as_str(),
                    s.state.reason().as_str(),
                    reason.as_str()
                );
                return Ok(());
            }
            other => {
                let state = state_of(other.as_deref());
                return Err(Error::WrongState {
                    operation: "begin_close",
                    state,
                });
            }
        }
        // The one move, written out at each call site: shared as a helper,
        // the compiler kept a copy of the session per arm (7.5 KB of stack
        // on a Cortex-M4F); here it moves in place (84 bytes).
        self.transition(|typed| match typed {
            Typed::Open(s, closed) => (Typed::Closing(s.close_now(reason), closed), ()),
            Typed::Detached(s, closed) => (Typed::Closing(s.close_now(reason), closed), ()),
            other => (other, ()),
        });
        Ok(())
    }

    /// Starts closing a live session whose lease is due at `now` (see
    /// [`Session::expire`](crate::Session::expire)) and returns what the
    /// host must do about it: the [`Expiry`] record, with the requests to
    /// cancel and to drop. `None` (and nothing changes) if the session is
    /// not live or not due.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("tts")?)?;
    /// assert!(s.expire(Instant::from_millis(1)).is_none()); // not due
    /// let expiry = s.expire(Instant::from_millis(300_000)).unwrap();
    /// assert_eq!((s.kind(), expiry.reason), (StateKind::Closing, CloseReason::IdleTtlExpired));
    /// assert_eq!((expiry.lease_generation, expiry.submitted.len()), (1, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn expire(&mut self, now: Instant) -> Option<Expiry<L, R>> {
        self.due(now)?;
        let submitted = self
            .resource_request_ids(None, Some(RequestState::Submitted))
            .ok()?;
        let reserved = self
            .resource_request_ids(None, Some(RequestState::Reserved))
            .ok()?;
        let reason = self.due(now)?;
        // The one move, written out at each call site: shared as a helper,
        // the compiler kept a copy of the session per arm (7.5 KB of stack
        // on a Cortex-M4F); here it moves in place (84 bytes).
        self.transition(|typed| match typed {
            Typed::Open(s, closed) => (Typed::Closing(s.close_now(reason), closed), ()),
            Typed::Detached(s, closed) => (Typed::Closing(s.close_now(reason), closed), ()),
            other => (other, ()),
        });
        Some(Expiry {
            session: self.id().clone(),
            fence: self.fence().clone(),
            lease_generation: self.lease_generation(),
            reason,
            submitted,
            reserved,
        })
    }

    /// Finalizes a closing session (Closing → Closed) and returns every
    /// request id it still held, now released.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`]; the session is unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// assert_eq!(s.finalize().unwrap_err().kind(), ErrorKind::WrongState); // still open
    /// s.begin_close(&f, CloseReason::ClientClose)?;
    /// let released = s.finalize()?;
    /// assert_eq!((s.kind(), released.len()), (StateKind::Closed, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn finalize(&mut self) -> Result<RequestIds<L, R>, Error> {
        let (ids, reason) = match self.unclosed_mut() {
            Some(Typed::Closing(s, _)) => s.finalize_in_place(),
            other => {
                let state = state_of(other.as_deref());
                return Err(Error::WrongState {
                    operation: "finalize",
                    state,
                });
            }
        };
        self.mark_closed(reason);
        Ok(ids)
    }

    /// Closes a live session in one step (→ Closed): accepts `fence`, bumps
    /// the lease generation, and returns every request id it held, now
    /// released. The session does not move (see [`recycle`](Self::recycle)
    /// to reuse it); afterwards it answers only its final facts.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] or [`Error::FenceMismatch`]; the session is
    /// unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// let stale = Fence::new(Id::new("s")?, 9);
    /// assert_eq!(s.close(&stale, CloseReason::ClientClose).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// assert_eq!(s.kind(), StateKind::Open); // refused: unchanged
    /// assert_eq!(s.close(&f, CloseReason::ClientClose)?.len(), 1);
    /// assert_eq!((s.kind(), s.lease_generation()), (StateKind::Closed, 1));
    /// assert_eq!(s.append(&f, InputMode::TurnCommitOnly).unwrap_err().kind(), ErrorKind::WrongState);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn close(
        &mut self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<RequestIds<L, R>, Error> {
        let mut released = RequestIds::new();
        self.close_into(fence, reason, &mut released)?;
        Ok(released)
    }

    /// [`close`](Self::close), with the released request ids written into
    /// `released` (replacing what it held) instead of returned: for a host
    /// that builds them where it keeps them (a few hundred bytes not moved).
    ///
    /// # Errors
    ///
    /// As [`close`](Self::close); `released` and the session are unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// let mut released = RequestIds::new();
    /// s.close_into(&f, CloseReason::ClientClose, &mut released)?;
    /// assert!(released.contains("r"));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn close_into(
        &mut self,
        fence: &Fence<L>,
        reason: CloseReason,
        released: &mut RequestIds<L, R>,
    ) -> Result<(), Error> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.close_in_place(fence, released)?,
            Some(Typed::Detached(s, _)) => s.close_in_place(fence, released)?,
            other => {
                let state = state_of(other.as_deref());
                return Err(Error::WrongState {
                    operation: "close",
                    state,
                });
            }
        }
        crate::fmt::debug!(
            "duplex session {=str}: state=>closed ({=str})",
            self.id().as_str(),
            reason.as_str()
        );
        self.mark_closed(reason);
        Ok(())
    }
}

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Typed<SC, RC, R, B, D, A, L, K>
{
    /// The state (a vacant slot reads as closed; no operation sees one).
    pub(super) fn kind(&self) -> crate::session::state::StateKind {
        each!(self, s => s.kind(), vacant => crate::session::state::StateKind::Closed)
    }
}
