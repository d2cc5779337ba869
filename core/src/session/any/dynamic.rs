//! The dynamic API of [`AnySession`]: every operation of the typed API,
//! checked against the current state at run time. An operation the state
//! does not permit returns [`Error::WrongState`] and changes nothing;
//! transitions take the session by value and hand it back inside
//! [`Rejected`] when refused.

use super::AnySession;
use crate::append::{Appended, Finality, Reservation};
use crate::error::{Error, Rejected};
use crate::fence::Fence;
use crate::id::Id;
use crate::lease::{Activity, CloseReason};
use crate::mode::InputMode;
use crate::requests::{RequestIds, RequestState};
use crate::time::Instant;

/// Runs `$body` on a live session (Open or Detached), or fails with
/// `wrong_state`.
macro_rules! live {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            AnySession::Open($s) => $body,
            AnySession::Detached($s) => $body,
            other => Err(Error::WrongState {
                operation: $op,
                state: other.kind(),
            }),
        }
    };
}

/// Runs `$body` on an unfinished session (Open, Detached or Closing), or
/// fails with `wrong_state`.
macro_rules! unfinished {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            AnySession::Open($s) => $body,
            AnySession::Detached($s) => $body,
            AnySession::Closing($s) => $body,
            other @ AnySession::Closed(_) => Err(Error::WrongState {
                operation: $op,
                state: other.kind(),
            }),
        }
    };
}

/// Runs `$body` on an open session, or fails with `wrong_state`.
macro_rules! open {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            AnySession::Open($s) => $body,
            other => Err(Error::WrongState {
                operation: $op,
                state: other.kind(),
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
        match self {
            AnySession::Open(s) => s.deadline(),
            AnySession::Detached(s) => s.deadline(),
            AnySession::Closing(_) | AnySession::Closed(_) => None,
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
        match self {
            AnySession::Open(s) => s.due(now),
            AnySession::Detached(s) => s.due(now),
            AnySession::Closing(_) | AnySession::Closed(_) => None,
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
        live!(self, "touch", s => s.touch(fence, activity, now))
    }

    /// The client went away (Open → Detached).
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::WrongState`] or
    /// [`Error::FenceMismatch`].
    ///
    /// See the type-level example.
    pub fn detach(self, fence: &Fence<L>, now: Instant) -> Result<Self, Rejected<Self>> {
        match self {
            AnySession::Open(s) => s
                .detach(fence, now)
                .map(AnySession::Detached)
                .map_err(|r| r.map(AnySession::Open)),
            other => Err(other.wrong_state("detach")),
        }
    }

    /// Resume or takeover (Open, Detached → Open); returns the new lease
    /// generation.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::WrongState`],
    /// [`Error::FenceMismatch`] or [`Error::GenerationMismatch`].
    ///
    /// See the type-level example.
    pub fn resume(
        self,
        fence: &Fence<L>,
        expected_generation: u64,
        now: Instant,
    ) -> Result<(Self, u64), Rejected<Self>> {
        let resumed = match self {
            AnySession::Open(s) => s
                .resume(fence, expected_generation, now)
                .map_err(|r| r.map(AnySession::Open)),
            AnySession::Detached(s) => s
                .resume(fence, expected_generation, now)
                .map_err(|r| r.map(AnySession::Detached)),
            other => return Err(other.wrong_state("resume")),
        };
        resumed.map(|(s, generation)| (AnySession::Open(s), generation))
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
        open!(self, "begin_operation", s => s.begin_operation(fence, op, now))
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
        live!(self, "end_operation", s => s.end_operation(fence, op, now))
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
        open!(self, "prepare_append", s => s.prepare_append(fence, mode))
    }

    /// Appends input (Open).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::append`](crate::Session::append).
    ///
    /// See the type-level example.
    pub fn append(&mut self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error> {
        open!(self, "append", s => s.append(fence, mode))
    }

    /// Phase two of an append (Open, Detached).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], then as [`Session::commit_append`](crate::Session::commit_append).
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&mut self, reservation: &Reservation<L>) -> Result<Appended, Error> {
        live!(self, "commit_append", s => s.commit_append(reservation))
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
        live!(self, "completed", s => s.completed(fence, op, mode, finality))
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
        live!(self, "record_completed", s => s.record_completed(fence, op, mode, finality, results))
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
        live!(self, "reserve", s => s.reserve(fence, stage, request))
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
        live!(self, "bind", s => s.bind(fence, stage, request))
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
        live!(self, "accept_fence", s => s.accept_fence(fence))
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
        live!(self, "cancel", s => s.cancel(cancelled, next))
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
        live!(self, "replace_configs", s => Ok(s.replace_configs(session_config, runtime_config)))
    }

    /// Request ids of the stage bindings (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] for a closed session.
    ///
    /// See [`bind`](Self::bind).
    pub fn stage_request_ids(&self, fence: Option<&Fence<L>>) -> Result<RequestIds<L, R>, Error> {
        unfinished!(self, "stage_request_ids", s => Ok(RequestIds::collect(s.stage_request_ids(fence))))
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
        unfinished!(self, "resource_request_ids", s => Ok(RequestIds::collect(s.resource_request_ids(fence, state))))
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
        unfinished!(self, "release", s => { s.release_where(released); Ok(()) })
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
        unfinished!(self, "release_fence", s => Ok(s.release_fence(fence)))
    }

    /// Starts closing (Open, Detached → Closing; on Closing the fence is
    /// accepted and the first reason kept).
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::WrongState`] (closed) or
    /// [`Error::FenceMismatch`].
    ///
    /// See [`as_closing`](Self::as_closing).
    pub fn begin_close(
        self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Self, Rejected<Self>> {
        let closing = match self {
            AnySession::Open(s) => s
                .begin_close(fence, reason)
                .map_err(|r| r.map(AnySession::Open)),
            AnySession::Detached(s) => s
                .begin_close(fence, reason)
                .map_err(|r| r.map(AnySession::Detached)),
            AnySession::Closing(s) => s
                .begin_close(fence, reason)
                .map_err(|r| r.map(AnySession::Closing)),
            other @ AnySession::Closed(_) => return Err(other.wrong_state("begin_close")),
        };
        closing.map(AnySession::Closing)
    }

    /// Starts closing a live session whose lease is due at `now` (see
    /// [`Session::expire`](crate::Session::expire)); returns the reason. Anything else comes back
    /// unchanged.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// let s = s.expire(Instant::from_millis(1)).unwrap_err(); // not due
    /// let (s, reason) = s.expire(Instant::from_millis(300_000)).unwrap();
    /// assert_eq!((s.kind(), reason), (StateKind::Closing, CloseReason::IdleTtlExpired));
    /// # Ok::<(), Error>(())
    /// ```
    #[allow(clippy::result_large_err)]
    pub fn expire(self, now: Instant) -> Result<(Self, CloseReason), Self> {
        let closing = match self {
            AnySession::Open(s) => s.expire(now).map_err(AnySession::Open),
            AnySession::Detached(s) => s.expire(now).map_err(AnySession::Detached),
            other => return Err(other),
        };
        closing.map(|c| {
            let reason = c.state().reason();
            (AnySession::Closing(c), reason)
        })
    }

    /// Finalizes a closing session (Closing → Closed) and returns every
    /// request id it still held, now released.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::WrongState`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// let s = s.finalize().unwrap_err().session; // still open
    /// let (s, released) = s.begin_close(&f, CloseReason::ClientClose)?.finalize()?;
    /// assert_eq!((s.kind(), released.len()), (StateKind::Closed, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn finalize(self) -> Result<(Self, RequestIds<L, R>), Rejected<Self>> {
        match self {
            AnySession::Closing(s) => {
                let (closed, ids) = s.finalize();
                Ok((AnySession::Closed(closed), ids))
            }
            other => Err(other.wrong_state("finalize")),
        }
    }

    /// Closes a live session in one step (→ Closed) and returns every
    /// request id it held, now released.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::WrongState`] or
    /// [`Error::FenceMismatch`].
    ///
    /// See [`as_closed`](Self::as_closed).
    pub fn close(
        self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<(Self, RequestIds<L, R>), Rejected<Self>> {
        let closed = match self {
            AnySession::Open(s) => s.close(fence, reason).map_err(|r| r.map(AnySession::Open)),
            AnySession::Detached(s) => s
                .close(fence, reason)
                .map_err(|r| r.map(AnySession::Detached)),
            other => return Err(other.wrong_state("close")),
        };
        closed.map(|(s, ids)| (AnySession::Closed(s), ids))
    }
}
