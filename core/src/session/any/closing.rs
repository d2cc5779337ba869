//! What ends a session, where it sits: begin_close, expire, finalize and
//! close. Each applies the core's rule in place (a refusal changes nothing)
//! and moves the session at most once.

use super::dynamic::wrong_state;
use super::{AnySession, Typed};
use crate::error::Error;
use crate::fence::Fence;
use crate::id::IdText as _;
use crate::lease::CloseReason;
use crate::profile::{IdOf, Profile};
use crate::requests::{RequestIds, RequestState};
use crate::session::expiry::Expiry;
use crate::time::Instant;

impl<P: Profile> AnySession<P> {
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
    pub fn begin_close(
        &mut self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<(), Error> {
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
                return Err(wrong_state("begin_close", other.as_deref()));
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
    pub fn expire(&mut self, now: Instant) -> Option<Expiry<P::Tables>> {
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
    pub fn finalize(&mut self) -> Result<RequestIds<P::Tables>, Error> {
        let (ids, reason) = match self.unclosed_mut() {
            Some(Typed::Closing(s, _)) => s.finalize_in_place(),
            other => {
                return Err(wrong_state("finalize", other.as_deref()));
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
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<RequestIds<P::Tables>, Error> {
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
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
        released: &mut RequestIds<P::Tables>,
    ) -> Result<(), Error> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.close_in_place(fence, released)?,
            Some(Typed::Detached(s, _)) => s.close_in_place(fence, released)?,
            other => {
                return Err(wrong_state("close", other.as_deref()));
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
