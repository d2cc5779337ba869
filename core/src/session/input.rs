//! A session's input budgets: reserving needs an attached client (input
//! comes from it); releasing works in every unfinished state (the model
//! consumes input while its client is away, and a closing session gives
//! back what it held).

use super::state::{Attached, State, Unfinished};
use super::Session;
use crate::error::Error;
use crate::fence::Fence;
use crate::fmt::debug;
use crate::id::IdText as _;
use crate::input::{InputLimits, PendingInput};
use crate::profile::{IdOf, Profile};

impl<S: State, P: Profile> Session<S, P> {
    /// Reserves `bytes` of input before the host accepts an append of that
    /// size, and returns what is then pending.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`]; [`Error::InputBackpressure`] if the
    /// session would hold more than its byte limit. Either way nothing
    /// changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let opts = OpenOptions::default().input_limits(InputLimits::new(3_200, 4));
    /// let mut s = Session::open(f.clone(), opts, Instant::ZERO)?;
    /// assert_eq!(s.reserve_input(&f, 3_200)?.bytes, 3_200);
    /// let e = s.reserve_input(&f, 1).unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::InputBackpressure);
    /// assert_eq!(s.pending_input().bytes, 3_200);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve_input(
        &mut self,
        fence: &Fence<IdOf<P>>,
        bytes: u64,
    ) -> Result<PendingInput, Error>
    where
        S: Attached,
    {
        self.fence.admits(fence)?;
        self.input.check_bytes(bytes)?;
        self.input.add_bytes(bytes);
        Ok(self.input.pending())
    }

    /// Reserves a committed turn before the host accepts a commit, and
    /// returns what is then pending.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`]; [`Error::InputBackpressure`] if the
    /// session already holds its limit of turns. Either way nothing
    /// changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let opts = OpenOptions::default().input_limits(InputLimits::new(1024, 1));
    /// let mut s = Session::open(f.clone(), opts, Instant::ZERO)?;
    /// s.reserve_turn(&f)?;
    /// assert!(matches!(s.reserve_turn(&f), Err(Error::InputBackpressure { budget: Budget::Turns, .. })));
    /// s.release_turn();
    /// assert_eq!(s.reserve_turn(&f)?.turns, 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve_turn(&mut self, fence: &Fence<IdOf<P>>) -> Result<PendingInput, Error>
    where
        S: Attached,
    {
        self.fence.admits(fence)?;
        self.input.check_turn()?;
        self.input.add_turn();
        Ok(self.input.pending())
    }

    /// Gives back up to `bytes` of reserved input as the model consumes it
    /// (never below zero, as vllm-omni 0.30's `release_input_bytes`), and
    /// returns what is then pending.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve_input(&f, 640)?;
    /// assert_eq!(s.release_input(600).bytes, 40);
    /// assert_eq!(s.release_input(600).bytes, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_input(&mut self, bytes: u64) -> PendingInput
    where
        S: Unfinished,
    {
        self.input.release_bytes(bytes);
        self.input.pending()
    }

    /// Gives back one reserved turn as the model takes it up (none below
    /// zero), and returns what is then pending.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve_turn(&f)?;
    /// assert_eq!(s.release_turn().turns, 0);
    /// assert_eq!(s.release_turn().turns, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_turn(&mut self) -> PendingInput
    where
        S: Unfinished,
    {
        self.input.release_turn();
        self.input.pending()
    }

    /// Gives back every reserved byte, keeping the turns (the input buffer
    /// was cleared), and returns how many bytes were held.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve_input(&f, 640)?;
    /// s.reserve_turn(&f)?;
    /// assert_eq!(s.release_all_input(), 640);
    /// assert_eq!(s.pending_input(), PendingInput { bytes: 0, turns: 1 });
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_all_input(&mut self) -> u32
    where
        S: Unfinished,
    {
        self.input.release_all_bytes()
    }

    /// Drops every pending reservation, bytes and turns (a barge-in or an
    /// `input.cancel` threw the input away), and returns what was pending.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve_input(&f, 640)?;
    /// s.reserve_turn(&f)?;
    /// assert_eq!(s.cancel_pending_input(), PendingInput { bytes: 640, turns: 1 });
    /// assert_eq!(s.pending_input(), PendingInput::default());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn cancel_pending_input(&mut self) -> PendingInput
    where
        S: Unfinished,
    {
        let dropped = self.input.clear();
        debug!(
            "duplex session {=str}: pending input dropped ({=u32} bytes, {=u16} turns)",
            self.fence.session.as_str(),
            dropped.bytes,
            dropped.turns
        );
        dropped
    }

    /// What the session holds of its client's input.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.pending_input(), PendingInput::default());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn pending_input(&self) -> PendingInput
    where
        S: Unfinished,
    {
        self.input.pending()
    }

    /// The session's input limits.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.input_limits(), InputLimits::DEFAULT);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn input_limits(&self) -> InputLimits
    where
        S: Unfinished,
    {
        self.input.limits()
    }
}
