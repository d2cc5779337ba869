//! [`Overlaps`]: the overlap decisions of every [`Sessions`] host, as an
//! extension trait (as [`InputBudgets`](crate::InputBudgets) is): each
//! finds the session and runs the
//! [`AnySession`](duplex_core::AnySession) operation of the same name.

use duplex_core::overlap::{Overlap, OverlapConfig, OverlapDecision};
use duplex_core::profile::{Conformance, IdOf, Profile};
use duplex_core::{AnySession, Fence};

use crate::error::Error;
use crate::sessions::Sessions;

/// Overlap decisions on any [`Sessions`] host (`&mut SessionManager`,
/// [`At`](crate::At), `&SharedManager`): decide what to do with input that
/// arrived while the model was speaking, and forget what was heard when
/// the response ends. None of them reads the clock.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_core::overlap::{Overlap, OverlapAction, OverlapConfig, OverlapPolicy};
/// use duplex_std::{ManagerConfig, Overlaps, SessionManager};
///
/// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// let thresholds = OverlapConfig::new(OverlapPolicy::Thresholds, 700, 1_200);
/// m.open(f.clone(), OpenOptions::default().overlap(thresholds))?;
/// assert_eq!(m.decide_overlap(&f, &Overlap::speech(600))?.action, OverlapAction::Listen);
/// assert_eq!(m.decide_overlap(&f, &Overlap::speech(600))?.action, OverlapAction::BargeIn);
/// // The response ends.
/// assert_eq!(m.reset_overlap_speech(&f.session)?, 1_200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Overlaps<P: Profile = Conformance>: Sessions<P> {
    /// Decides on overlapping input (Open).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`; nothing
    /// changes.
    ///
    /// See the trait's example.
    fn decide_overlap(
        self,
        fence: &Fence<IdOf<P>>,
        input: &Overlap,
    ) -> Result<OverlapDecision, Error<IdOf<P>>> {
        self.update(&fence.session, |s| s.decide_overlap(fence, input))
    }

    /// Forgets the overlapping speech heard (Open, Detached, Closing);
    /// returns how much there was.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// See the trait's example.
    fn reset_overlap_speech(self, session: &IdOf<P>) -> Result<u32, Error<IdOf<P>>> {
        self.update(session, AnySession::reset_overlap_speech)
    }

    /// Replaces the session's overlap rule, keeping the speech heard
    /// (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let rule = OverlapConfig::new(OverlapPolicy::BargeInOnSpeech, 700, 1_200);
    /// m.set_overlap_config(&f.session, rule)?;
    /// assert_eq!(m.overlap(&f.session)?.1, rule);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn set_overlap_config(
        self,
        session: &IdOf<P>,
        config: OverlapConfig,
    ) -> Result<(), Error<IdOf<P>>> {
        self.update(session, |s| s.set_overlap_config(config))
    }

    /// The overlapping speech heard, and the session's overlap
    /// configuration.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// use duplex_core::overlap::OverlapConfig;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.overlap(&f.session)?, (0, OverlapConfig::DEFAULT));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn overlap(self, session: &IdOf<P>) -> Result<(u32, OverlapConfig), Error<IdOf<P>>> {
        self.read(session, |s| {
            Ok((s.overlap_speech_ms()?, s.overlap_config()?))
        })
    }
}

impl<P: Profile, T: Sessions<P>> Overlaps<P> for T {}
