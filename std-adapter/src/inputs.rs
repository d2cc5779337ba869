//! [`InputBudgets`]: the input budget operations of every
//! [`Sessions`] host, as an extension trait (as `tokio`'s `AsyncReadExt`
//! extends `AsyncRead`): each finds the session and runs the
//! [`AnySession`](duplex_core::AnySession) operation of the same name.

use duplex_core::profile::{Conformance, IdOf, Profile};
use duplex_core::{AnySession, Fence, InputLimits, PendingInput};

use crate::error::Error;
use crate::sessions::Sessions;

/// Input budgets on any [`Sessions`] host (`&mut SessionManager`,
/// [`At`](crate::At), `&SharedManager`): reserve an append's bytes before
/// accepting it and a turn before accepting a commit; release them as the
/// model consumes the input. None of them reads the clock.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{InputBudgets, ManagerConfig, SessionManager};
///
/// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// m.open(f.clone(), OpenOptions::default().input_limits(InputLimits::new(6_400, 1)))?;
/// m.reserve_input(&f, 6_400)?;
/// assert_eq!(m.reserve_input(&f, 1).unwrap_err().kind(), ErrorKind::InputBackpressure);
/// m.reserve_turn(&f)?;
/// // The model takes the turn up and consumes its audio.
/// m.release_turn(&f.session)?;
/// assert_eq!(m.release_input(&f.session, 6_400)?, PendingInput::default());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait InputBudgets<P: Profile = Conformance>: Sessions<P> {
    /// Reserves `bytes` of input (Open).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`,
    /// `input_backpressure`; nothing changes.
    ///
    /// See the trait's example.
    fn reserve_input(
        self,
        fence: &Fence<IdOf<P>>,
        bytes: u64,
    ) -> Result<PendingInput, Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.reserve_input(fence, bytes))
    }

    /// Reserves a committed turn (Open).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`,
    /// `input_backpressure`; nothing changes.
    ///
    /// See the trait's example.
    fn reserve_turn(self, fence: &Fence<IdOf<P>>) -> Result<PendingInput, Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.reserve_turn(fence))
    }

    /// Gives back up to `bytes` of reserved input (Open, Detached,
    /// Closing), never below zero.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// See the trait's example.
    fn release_input(self, session: &IdOf<P>, bytes: u64) -> Result<PendingInput, Error<IdOf<P>>> {
        self.update(session, |s| s.release_input(bytes))
    }

    /// Gives back one reserved turn (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// See the trait's example.
    fn release_turn(self, session: &IdOf<P>) -> Result<PendingInput, Error<IdOf<P>>> {
        self.update(session, AnySession::release_turn)
    }

    /// Gives back every reserved byte, keeping the turns; returns how many
    /// were held.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve_input(&f, 640)?;
    /// assert_eq!(m.release_all_input(&f.session)?, 640);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn release_all_input(self, session: &IdOf<P>) -> Result<u32, Error<IdOf<P>>> {
        self.update(session, AnySession::release_all_input)
    }

    /// Drops every pending reservation (a barge-in or `input.cancel`
    /// threw the input away) and returns what was pending.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve_input(&f, 640)?;
    /// m.reserve_turn(&f)?;
    /// assert_eq!(m.cancel_pending_input(&f.session)?, PendingInput { bytes: 640, turns: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn cancel_pending_input(self, session: &IdOf<P>) -> Result<PendingInput, Error<IdOf<P>>> {
        self.update(session, AnySession::cancel_pending_input)
    }

    /// What the session holds of its client's input, and its limits.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.pending_input(&f.session)?, (PendingInput::default(), InputLimits::DEFAULT));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn pending_input(
        self,
        session: &IdOf<P>,
    ) -> Result<(PendingInput, InputLimits), Error<IdOf<P>>> {
        self.read(session, |s| Ok((s.pending_input()?, s.input_limits()?)))
    }
}

impl<P: Profile, T: Sessions<P>> InputBudgets<P> for T {}
