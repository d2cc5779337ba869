//! The overlap decisions of [`AnySession`], checked against the state at
//! run time: deciding needs an open session, the rest an unfinished one.

use super::dynamic::wrong_state;
use super::{AnySession, Typed};
use crate::error::Error;
use crate::fence::Fence;
use crate::overlap::{Overlap, OverlapConfig, OverlapDecision};
use crate::profile::{IdOf, Profile};

impl<P: Profile> AnySession<P> {
    /// Decides on overlapping input (Open; see
    /// [`Session::decide_overlap`](crate::Session::decide_overlap)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`]; nothing changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::Overlap;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.decide_overlap(&f, &Overlap::speech(200))?;
    /// s.detach(&f, Instant::ZERO)?;
    /// assert_eq!(s.decide_overlap(&f, &Overlap::speech(200)).unwrap_err().kind(), ErrorKind::WrongState);
    /// assert_eq!(s.overlap_speech_ms()?, 200);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn decide_overlap(
        &mut self,
        fence: &Fence<IdOf<P>>,
        input: &Overlap,
    ) -> Result<OverlapDecision, Error> {
        open!(self.unclosed_mut(), "decide_overlap", s => s.decide_overlap(fence, input))
    }

    /// Forgets the overlapping speech heard (Open, Detached, Closing; see
    /// [`Session::reset_overlap_speech`](crate::Session::reset_overlap_speech)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::Overlap;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.decide_overlap(&f, &Overlap::speech(200))?;
    /// assert_eq!(s.reset_overlap_speech()?, 200);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reset_overlap_speech(&mut self) -> Result<u32, Error> {
        unfinished!(self.unclosed_mut(), "reset_overlap_speech", s => Ok(s.reset_overlap_speech()))
    }

    /// The overlapping speech heard since the last reset (Open, Detached,
    /// Closing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = AnySession::from(Session::open(f, OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.overlap_speech_ms()?, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn overlap_speech_ms(&self) -> Result<u32, Error> {
        unfinished!(self.unclosed(), "overlap_speech_ms", s => Ok(s.overlap_speech_ms()))
    }

    /// Replaces the overlap policy and thresholds (Open, Detached,
    /// Closing; see
    /// [`Session::set_overlap_config`](crate::Session::set_overlap_config)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f, OpenOptions::default(), Instant::ZERO)?);
    /// let rule = OverlapConfig::new(OverlapPolicy::Thresholds, 500, 900);
    /// s.set_overlap_config(rule)?;
    /// assert_eq!(s.overlap_config()?, rule);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn set_overlap_config(&mut self, config: OverlapConfig) -> Result<(), Error> {
        unfinished!(self.unclosed_mut(), "set_overlap_config", s => {
            s.set_overlap_config(config);
            Ok(())
        })
    }

    /// The session's overlap policy and thresholds (Open, Detached,
    /// Closing).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::OverlapConfig;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = AnySession::from(Session::open(f, OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.overlap_config()?, OverlapConfig::DEFAULT);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn overlap_config(&self) -> Result<OverlapConfig, Error> {
        unfinished!(self.unclosed(), "overlap_config", s => Ok(s.overlap_config()))
    }
}
