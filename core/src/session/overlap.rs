//! A session's overlap decisions: deciding needs an attached client (the
//! input comes from it); forgetting what was heard works in every
//! unfinished state (a response can end while its client is away).

use super::state::{Attached, State, Unfinished};
use super::Session;
use crate::error::Error;
use crate::fence::Fence;
use crate::fmt::debug;
use crate::id::IdText as _;
use crate::overlap::{Overlap, OverlapConfig, OverlapDecision};
use crate::profile::{IdOf, Profile};

impl<S: State, P: Profile> Session<S, P> {
    /// Decides what to do with `input`, which arrived while the model was
    /// speaking ([`overlap`](crate::overlap) has the rule), accumulating
    /// its speech as the decision says. On a barge-in the host advances
    /// the epoch and cancels the response, which starts the accumulation
    /// again.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`]; nothing changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::{Overlap, OverlapAction, OverlapRequest};
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// // The default policy listens, and keeps count.
    /// assert_eq!(s.decide_overlap(&f, &Overlap::speech(500))?.action, OverlapAction::Listen);
    /// assert_eq!(s.overlap_speech_ms(), 500);
    /// // The client says it is interrupting.
    /// let d = s.decide_overlap(&f, &Overlap::speech(20).with_request(OverlapRequest::BargeIn))?;
    /// assert_eq!(d.action, OverlapAction::BargeIn);
    /// s.cancel(&f, &f.clone().with_epoch(1))?;
    /// assert_eq!(s.overlap_speech_ms(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn decide_overlap(
        &mut self,
        fence: &Fence<IdOf<P>>,
        input: &Overlap,
    ) -> Result<OverlapDecision, Error>
    where
        S: Attached,
    {
        self.fence.admits(fence)?;
        let decision = self.overlap.decide(self.overlap_policy, input);
        debug!(
            "duplex session {=str}: overlap {=str} ({=str}, {=u32} ms heard)",
            self.fence.session.as_str(),
            decision.action.as_str(),
            decision.reason.as_str(),
            decision.overlap_speech_ms
        );
        Ok(decision)
    }

    /// Forgets the overlapping speech heard (the response it overlapped
    /// ended) and returns how much there was.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::Overlap;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.decide_overlap(&f, &Overlap::speech(300))?;
    /// assert_eq!(s.reset_overlap_speech(), 300);
    /// assert_eq!(s.overlap_speech_ms(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reset_overlap_speech(&mut self) -> u32
    where
        S: Unfinished,
    {
        self.overlap.reset()
    }

    /// The overlapping speech heard since the last reset, in ms.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.overlap_speech_ms(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn overlap_speech_ms(&self) -> u32
    where
        S: Unfinished,
    {
        self.overlap.speech_ms
    }

    /// Replaces the overlap policy and thresholds (a client's
    /// `session.update`); the speech heard so far is kept, and the next
    /// decision reads the new rule.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::{Overlap, OverlapAction, OverlapConfig, OverlapPolicy};
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.set_overlap_config(OverlapConfig::new(OverlapPolicy::BargeInOnSpeech, 700, 1_200));
    /// assert_eq!(s.decide_overlap(&f, &Overlap::speech(20))?.action, OverlapAction::BargeIn);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn set_overlap_config(&mut self, config: OverlapConfig)
    where
        S: Unfinished,
    {
        let heard = self.overlap.speech_ms;
        self.overlap = crate::overlap::OverlapState::new(config);
        self.overlap.speech_ms = heard;
        self.overlap_policy = config.policy;
    }

    /// The session's overlap policy and thresholds.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::overlap::OverlapConfig;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.overlap_config(), OverlapConfig::DEFAULT);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn overlap_config(&self) -> OverlapConfig
    where
        S: Unfinished,
    {
        self.overlap.config(self.overlap_policy)
    }
}
