//! The input budgets of [`AnySession`], checked against the state at run
//! time: reserving needs an open session, releasing an unfinished one.

use super::dynamic::wrong_state;
use super::{AnySession, Typed};
use crate::error::Error;
use crate::fence::Fence;
use crate::input::{InputLimits, PendingInput};
use crate::profile::{IdOf, Profile};

impl<P: Profile> AnySession<P> {
    /// Reserves `bytes` of input (Open; see
    /// [`Session::reserve_input`](crate::Session::reserve_input)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`],
    /// [`Error::InputBackpressure`]; nothing changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.reserve_input(&f, 640)?;
    /// s.detach(&f, Instant::ZERO)?;
    /// assert_eq!(s.reserve_input(&f, 640).unwrap_err().kind(), ErrorKind::WrongState);
    /// assert_eq!(s.pending_input()?.bytes, 640);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve_input(
        &mut self,
        fence: &Fence<IdOf<P>>,
        bytes: u64,
    ) -> Result<PendingInput, Error> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.reserve_input(fence, bytes),
            other => Err(wrong_state("reserve_input", other.as_deref())),
        }
    }

    /// Reserves a committed turn (Open; see
    /// [`Session::reserve_turn`](crate::Session::reserve_turn)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`],
    /// [`Error::InputBackpressure`]; nothing changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let opts = OpenOptions::default().input_limits(InputLimits::new(0, 1));
    /// let mut s = AnySession::from(Session::open(f.clone(), opts, Instant::ZERO)?);
    /// s.reserve_turn(&f)?;
    /// assert_eq!(s.reserve_turn(&f).unwrap_err().kind(), ErrorKind::InputBackpressure);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve_turn(&mut self, fence: &Fence<IdOf<P>>) -> Result<PendingInput, Error> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => s.reserve_turn(fence),
            other => Err(wrong_state("reserve_turn", other.as_deref())),
        }
    }

    /// Gives back up to `bytes` of reserved input (Open, Detached,
    /// Closing; see [`Session::release_input`](crate::Session::release_input)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.reserve_input(&f, 640)?;
    /// s.detach(&f, Instant::ZERO)?; // the model still consumes it
    /// assert_eq!(s.release_input(640)?.bytes, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_input(&mut self, bytes: u64) -> Result<PendingInput, Error> {
        unfinished!(self.unclosed_mut(), "release_input", s => Ok(s.release_input(bytes)))
    }

    /// Gives back one reserved turn (Open, Detached, Closing; see
    /// [`Session::release_turn`](crate::Session::release_turn)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.reserve_turn(&f)?;
    /// assert_eq!(s.release_turn()?.turns, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_turn(&mut self) -> Result<PendingInput, Error> {
        unfinished!(self.unclosed_mut(), "release_turn", s => Ok(s.release_turn()))
    }

    /// Gives back every reserved byte, keeping the turns (see
    /// [`Session::release_all_input`](crate::Session::release_all_input)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.reserve_input(&f, 640)?;
    /// assert_eq!(s.release_all_input()?, 640);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_all_input(&mut self) -> Result<u32, Error> {
        unfinished!(self.unclosed_mut(), "release_all_input", s => Ok(s.release_all_input()))
    }

    /// Drops every pending reservation and says what it was (see
    /// [`Session::cancel_pending_input`](crate::Session::cancel_pending_input)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.reserve_turn(&f)?;
    /// assert_eq!(s.cancel_pending_input()?, PendingInput { bytes: 0, turns: 1 });
    /// # Ok::<(), Error>(())
    /// ```
    pub fn cancel_pending_input(&mut self) -> Result<PendingInput, Error> {
        unfinished!(self.unclosed_mut(), "cancel_pending_input", s => Ok(s.cancel_pending_input()))
    }

    /// What the session holds of its client's input.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.pending_input()?, PendingInput::default());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn pending_input(&self) -> Result<PendingInput, Error> {
        unfinished!(self.unclosed(), "pending_input", s => Ok(s.pending_input()))
    }

    /// The session's input limits.
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.input_limits()?, InputLimits::DEFAULT);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn input_limits(&self) -> Result<InputLimits, Error> {
        unfinished!(self.unclosed(), "input_limits", s => Ok(s.input_limits()))
    }
}
