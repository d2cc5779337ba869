//! Overlap: what a session does with its user's speech while its model is
//! speaking, as vllm-omni 0.30 decides it (`overlap_policy.decide`).
//!
//! Each append that arrives during a response is classified: **listen**
//! (a backchannel such as "mm-hm": the model keeps speaking), **barge in**
//! (the user takes the turn: the host advances the epoch and cancels the
//! response), or **drop** (silence or noise). The session accumulates the
//! overlapping speech it has heard; the thresholds are the session's
//! [`OverlapConfig`], and a client's explicit request (`overlap_action`,
//! then `force_barge_in` or `force_listen`) is honoured first.
//!
//! The core decides; the host measures. What a chunk is (its duration,
//! whether it is speech, a voice-activity detector's verdict, a transcript)
//! is [`Overlap`], filled in by the host from its audio. An epoch change
//! (a barge-in) starts the accumulation again from zero.
//!
//! The decision, policy by policy, after the client's requests and
//! silence:
//!
//! | policy | speech while the model speaks |
//! |---|---|
//! | [`ListenOnly`](OverlapPolicy::ListenOnly) (default) | listen, accumulating |
//! | [`BargeInOnSpeech`](OverlapPolicy::BargeInOnSpeech) | barge in, unless a VAD says the utterance started earlier |
//! | [`Thresholds`](OverlapPolicy::Thresholds) | listen up to `short_ack_ms` (a short acknowledgement), barge in from `barge_in_ms` of accumulated speech, listen between |

/// How a session treats speech that overlaps its model's.
///
/// # Examples
///
/// ```
/// use duplex_core::overlap::OverlapPolicy;
///
/// assert_eq!(OverlapPolicy::parse("barge_in_on_speech"), Some(OverlapPolicy::BargeInOnSpeech));
/// assert_eq!(OverlapPolicy::Thresholds.as_str(), "thresholds");
/// assert_eq!(OverlapPolicy::parse("shout"), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OverlapPolicy {
    /// Keep speaking; the user's speech is heard and accumulated
    /// (vllm-omni's default, `listen_only`).
    #[default]
    ListenOnly,
    /// Any speech barges in (`barge_in_on_speech`).
    BargeInOnSpeech,
    /// Short acknowledgements are heard, long overlapping speech barges in
    /// (`thresholds`). vllm-omni 0.30 has this rule but no name for it: its
    /// configuration turns every other name into `listen_only`.
    Thresholds,
}

impl OverlapPolicy {
    /// Every policy, in declaration order.
    ///
    /// ```
    /// # use duplex_core::overlap::OverlapPolicy;
    /// assert_eq!(OverlapPolicy::ALL.len(), 3);
    /// ```
    pub const ALL: [OverlapPolicy; 3] = [
        OverlapPolicy::ListenOnly,
        OverlapPolicy::BargeInOnSpeech,
        OverlapPolicy::Thresholds,
    ];

    /// The policy's wire name.
    ///
    /// ```
    /// # use duplex_core::overlap::OverlapPolicy;
    /// assert_eq!(OverlapPolicy::ListenOnly.as_str(), "listen_only");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::ListenOnly => "listen_only",
            OverlapPolicy::BargeInOnSpeech => "barge_in_on_speech",
            OverlapPolicy::Thresholds => "thresholds",
        }
    }

    /// The policy a wire name names (exactly, as [`as_str`](Self::as_str)
    /// writes it), if any.
    ///
    /// ```
    /// # use duplex_core::overlap::OverlapPolicy;
    /// assert_eq!(OverlapPolicy::parse("listen_only"), Some(OverlapPolicy::ListenOnly));
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// A session's overlap policy and thresholds (vllm-omni 0.30's
/// `overlap_policy`, `overlap_short_ack_ms`, `overlap_barge_in_ms`), up to
/// 65,535 ms each: a minute of speech over the model's is a barge-in by
/// any measure, and two bytes each keep the session 8 bytes smaller.
///
/// # Examples
///
/// ```
/// use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
///
/// assert_eq!(OverlapConfig::DEFAULT, OverlapConfig::new(OverlapPolicy::ListenOnly, 700, 1_200));
/// assert_eq!(OverlapConfig::default().barge_in_ms, 1_200);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OverlapConfig {
    /// The policy.
    pub policy: OverlapPolicy,
    /// Overlapping speech up to this long is a short acknowledgement.
    pub short_ack_ms: u16,
    /// Accumulated overlapping speech this long barges in.
    pub barge_in_ms: u16,
}

impl OverlapConfig {
    /// `listen_only`, 700 ms, 1,200 ms: vllm-omni 0.30's defaults.
    pub const DEFAULT: OverlapConfig = OverlapConfig::new(OverlapPolicy::ListenOnly, 700, 1_200);

    /// A configuration.
    ///
    /// ```
    /// # use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
    /// let c = OverlapConfig::new(OverlapPolicy::Thresholds, 500, 1_000);
    /// assert_eq!(c.short_ack_ms, 500);
    /// ```
    pub const fn new(policy: OverlapPolicy, short_ack_ms: u16, barge_in_ms: u16) -> Self {
        OverlapConfig {
            policy,
            short_ack_ms,
            barge_in_ms,
        }
    }
}

impl Default for OverlapConfig {
    fn default() -> Self {
        OverlapConfig::DEFAULT
    }
}

/// What a client asks to be done with its overlapping input (vllm-omni's
/// `overlap_action`).
///
/// # Examples
///
/// ```
/// use duplex_core::overlap::OverlapRequest;
///
/// assert_eq!(OverlapRequest::parse(" Interrupt "), Some(OverlapRequest::BargeIn));
/// assert_eq!(OverlapRequest::parse("ack"), Some(OverlapRequest::Continue));
/// assert_eq!(OverlapRequest::parse("maybe"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OverlapRequest {
    /// Take the turn (`barge_in`, `interrupt`, `cancel`).
    BargeIn,
    /// Let the model go on, and keep the input if it is more than a short
    /// acknowledgement (`listen`).
    Listen,
    /// Let the model go on; the input was an acknowledgement (`continue`,
    /// `continue_output`, `ack`).
    Continue,
    /// Throw the input away (`drop`, `ignore`, `silence`).
    Drop,
}

impl OverlapRequest {
    /// The request a client's word names, as vllm-omni reads it: trimmed,
    /// in any case. Unknown words are no request.
    ///
    /// ```
    /// # use duplex_core::overlap::OverlapRequest;
    /// assert_eq!(OverlapRequest::parse("IGNORE"), Some(OverlapRequest::Drop));
    /// ```
    pub fn parse(word: &str) -> Option<Self> {
        let word = word.trim();
        let is = |name: &str| word.eq_ignore_ascii_case(name);
        if is("barge_in") || is("interrupt") || is("cancel") {
            Some(OverlapRequest::BargeIn)
        } else if is("listen") {
            Some(OverlapRequest::Listen)
        } else if is("continue") || is("continue_output") || is("ack") {
            Some(OverlapRequest::Continue)
        } else if is("drop") || is("ignore") || is("silence") {
            Some(OverlapRequest::Drop)
        } else {
            None
        }
    }
}

/// One piece of input that arrived while the model was speaking, as the
/// host measured it.
///
/// # Examples
///
/// ```
/// use duplex_core::overlap::{Overlap, OverlapRequest};
///
/// let chunk = Overlap::speech(40).with_request(OverlapRequest::Listen);
/// assert!(chunk.speech && chunk.duration_ms == 40);
/// assert!(!Overlap::silence(20).speech);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Overlap {
    /// How long the input is.
    pub duration_ms: u32,
    /// Whether it is speech (a VAD's verdict, or its energy).
    pub speech: bool,
    /// The client's explicit request, if it made one.
    pub request: Option<OverlapRequest>,
    /// The client forced a barge-in or a listen (`force_barge_in`,
    /// `force_listen`), below its request in precedence.
    pub forced: Option<Forced>,
    /// A voice-activity detector's word on whether this input starts an
    /// utterance (`vad.speech_started`), if it said.
    pub vad_speech_started: Option<bool>,
    /// The input's transcript is a short acknowledgement
    /// ([`is_short_ack`]).
    pub short_ack_transcript: bool,
}

impl Overlap {
    /// Speech of `duration_ms`, with no request.
    ///
    /// ```
    /// # use duplex_core::overlap::Overlap;
    /// assert!(Overlap::speech(20).speech);
    /// ```
    pub const fn speech(duration_ms: u32) -> Self {
        Overlap {
            duration_ms,
            speech: true,
            request: None,
            forced: None,
            vad_speech_started: None,
            short_ack_transcript: false,
        }
    }

    /// Silence or noise of `duration_ms`.
    ///
    /// ```
    /// # use duplex_core::overlap::Overlap;
    /// assert_eq!(Overlap::silence(20).duration_ms, 20);
    /// ```
    pub const fn silence(duration_ms: u32) -> Self {
        Overlap {
            speech: false,
            ..Overlap::speech(duration_ms)
        }
    }

    /// The same input with the client's request.
    ///
    /// ```
    /// # use duplex_core::overlap::{Overlap, OverlapRequest};
    /// assert_eq!(Overlap::speech(20).with_request(OverlapRequest::Drop).request, Some(OverlapRequest::Drop));
    /// ```
    #[must_use]
    pub const fn with_request(mut self, request: OverlapRequest) -> Self {
        self.request = Some(request);
        self
    }
}

/// What a client forced (vllm-omni's `force_barge_in` and `force_listen`
/// flags; with both set, the barge-in).
///
/// ```
/// use duplex_core::overlap::{Forced, Overlap};
/// let forced = Overlap { forced: Some(Forced::Listen), ..Overlap::speech(20) };
/// assert_eq!(forced.forced, Some(Forced::Listen));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Forced {
    /// `force_barge_in`: take the turn.
    BargeIn,
    /// `force_listen`: let the model go on.
    Listen,
}

impl Forced {
    /// What the two flags force, if anything.
    ///
    /// ```
    /// # use duplex_core::overlap::Forced;
    /// assert_eq!(Forced::from_flags(true, true), Some(Forced::BargeIn));
    /// assert_eq!(Forced::from_flags(false, false), None);
    /// ```
    pub const fn from_flags(force_barge_in: bool, force_listen: bool) -> Option<Self> {
        match (force_barge_in, force_listen) {
            (true, _) => Some(Forced::BargeIn),
            (false, true) => Some(Forced::Listen),
            (false, false) => None,
        }
    }
}

/// What to do with overlapping input.
///
/// ```
/// use duplex_core::overlap::OverlapAction;
/// assert_eq!(OverlapAction::BargeIn.as_str(), "barge_in");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OverlapAction {
    /// The model goes on speaking.
    Listen,
    /// The user takes the turn: advance the epoch, cancel the response.
    BargeIn,
    /// The input is thrown away.
    Drop,
}

impl OverlapAction {
    /// The action's wire name.
    ///
    /// ```
    /// # use duplex_core::overlap::OverlapAction;
    /// assert_eq!(OverlapAction::Drop.as_str(), "drop");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            OverlapAction::Listen => "listen",
            OverlapAction::BargeIn => "barge_in",
            OverlapAction::Drop => "drop",
        }
    }
}

/// Why a decision was made: vllm-omni 0.30's `reason` strings.
///
/// ```
/// use duplex_core::overlap::OverlapReason;
/// assert_eq!(OverlapReason::LongOverlapSpeech.as_str(), "long_overlap_speech");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)] // each variant is its wire name, below
pub enum OverlapReason {
    ClientOverlapAction,
    ClientForceBargeIn,
    ClientForceListen,
    SilenceOrNoise,
    ShortAckTranscript,
    PolicyListenOnly,
    ServerVadUtteranceActive,
    ServerVadSpeechStarted,
    PolicyBargeInOnSpeech,
    ShortAck,
    LongOverlapSpeech,
    AccumulatingOverlapSpeech,
}

impl OverlapReason {
    /// The reason's wire name.
    ///
    /// ```
    /// # use duplex_core::overlap::OverlapReason;
    /// assert_eq!(OverlapReason::ShortAck.as_str(), "short_ack");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            OverlapReason::ClientOverlapAction => "client_overlap_action",
            OverlapReason::ClientForceBargeIn => "client_force_barge_in",
            OverlapReason::ClientForceListen => "client_force_listen",
            OverlapReason::SilenceOrNoise => "silence_or_noise",
            OverlapReason::ShortAckTranscript => "short_ack_transcript",
            OverlapReason::PolicyListenOnly => "policy_listen_only",
            OverlapReason::ServerVadUtteranceActive => "server_vad_utterance_active",
            OverlapReason::ServerVadSpeechStarted => "server_vad_speech_started",
            OverlapReason::PolicyBargeInOnSpeech => "policy_barge_in_on_speech",
            OverlapReason::ShortAck => "short_ack",
            OverlapReason::LongOverlapSpeech => "long_overlap_speech",
            OverlapReason::AccumulatingOverlapSpeech => "accumulating_overlap_speech",
        }
    }
}

/// A decision on overlapping input.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_core::overlap::{Overlap, OverlapAction, OverlapConfig, OverlapPolicy, OverlapReason};
///
/// let f = Fence::new(Id::new("s")?, 0);
/// let opts = OpenOptions::default().overlap(OverlapConfig::new(OverlapPolicy::Thresholds, 700, 1_200));
/// let mut s = Session::open(f.clone(), opts, Instant::ZERO)?;
/// // "mm-hm": short, the model goes on.
/// let d = s.decide_overlap(&f, &Overlap::speech(400))?;
/// assert_eq!((d.action, d.reason), (OverlapAction::Listen, OverlapReason::ShortAck));
/// // The user keeps talking: 1,200 ms of overlapping speech take the turn.
/// let d = s.decide_overlap(&f, &Overlap::speech(800))?;
/// assert_eq!((d.action, d.overlap_speech_ms), (OverlapAction::BargeIn, 1_200));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OverlapDecision {
    /// What to do.
    pub action: OverlapAction,
    /// Why.
    pub reason: OverlapReason,
    /// The input's duration.
    pub duration_ms: u32,
    /// The overlapping speech accumulated, after this input.
    pub overlap_speech_ms: u32,
    /// Keep the input for the next turn (a drop never does).
    pub buffer_audio: bool,
    /// For a listen: hold the input back from the model until its response
    /// ends, instead of passing it on now.
    pub defer_append: bool,
    /// For a listen: tell the model to keep listening (not to answer this
    /// input on its own).
    pub force_listen: bool,
}

/// Whether `transcript` is a short acknowledgement ("ok", "yeah", "go on",
/// "嗯"): vllm-omni 0.30's word list, compared as it does (trimmed, lower
/// case, letters and digits only).
///
/// ```
/// use duplex_core::overlap::is_short_ack;
///
/// assert!(is_short_ack(" Okay! "));
/// assert!(is_short_ack("Go on"));
/// assert!(is_short_ack("好的。"));
/// assert!(!is_short_ack("okay, but what about tomorrow?"));
/// ```
pub fn is_short_ack(transcript: &str) -> bool {
    const WORDS: [&str; 18] = [
        "嗯",
        "嗯嗯",
        "对",
        "对的",
        "好",
        "好的",
        "继续",
        "继续说",
        "可以",
        "是的",
        "yes",
        "yeah",
        "yep",
        "ok",
        "okay",
        "continue",
        "goon",
        "right",
    ];
    const PHRASES: [&str; 3] = ["go on", "keep going", "please continue"];
    let trimmed = transcript.trim();
    let lower = || trimmed.chars().flat_map(char::to_lowercase);
    if trimmed.is_empty() {
        return false;
    }
    let compact = || lower().filter(|c| c.is_alphanumeric());
    WORDS.iter().any(|w| compact().eq(w.chars())) || PHRASES.iter().any(|p| lower().eq(p.chars()))
}

/// A session's overlap thresholds and the overlapping speech it has
/// accumulated: 8 bytes. The policy, one byte, is kept beside it by the
/// session, where it fills padding (inside this struct it would cost four).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct OverlapState {
    short_ack_ms: u16,
    barge_in_ms: u16,
    pub(crate) speech_ms: u32,
}

impl OverlapState {
    pub(crate) const fn new(config: OverlapConfig) -> Self {
        OverlapState {
            short_ack_ms: config.short_ack_ms,
            barge_in_ms: config.barge_in_ms,
            speech_ms: 0,
        }
    }

    /// A state that has heard `speech_ms` (an image's).
    #[cfg(feature = "serde")]
    pub(crate) const fn heard(config: OverlapConfig, speech_ms: u32) -> Self {
        OverlapState {
            speech_ms,
            ..OverlapState::new(config)
        }
    }

    /// The configuration, with the policy the session keeps.
    pub(crate) const fn config(self, policy: OverlapPolicy) -> OverlapConfig {
        OverlapConfig::new(policy, self.short_ack_ms, self.barge_in_ms)
    }

    /// Forgets the accumulated speech and says how much there was.
    pub(crate) fn reset(&mut self) -> u32 {
        core::mem::take(&mut self.speech_ms)
    }

    fn accumulate(&mut self, ms: u32) {
        self.speech_ms = self.speech_ms.saturating_add(ms);
    }

    /// Decides on `input` (vllm-omni 0.30's `decide` for a session that
    /// supports barge-in and answers turns when asked), accumulating its
    /// speech or starting again as the decision says.
    pub(crate) fn decide(&mut self, policy: OverlapPolicy, input: &Overlap) -> OverlapDecision {
        use OverlapAction::{BargeIn, Drop, Listen};
        use OverlapReason as R;
        let d = input.duration_ms;
        let decision =
            |s: &Self, action, reason, buffer_audio, defer_append, force_listen| OverlapDecision {
                action,
                reason,
                duration_ms: d,
                overlap_speech_ms: s.speech_ms,
                buffer_audio,
                defer_append,
                force_listen,
            };
        let listen = |s: &Self, reason, buffer| decision(s, Listen, reason, buffer, true, true);
        let barge_in = |s: &Self, reason| decision(s, BargeIn, reason, true, false, false);
        match input.request {
            Some(OverlapRequest::BargeIn) => return barge_in(self, R::ClientOverlapAction),
            Some(request @ (OverlapRequest::Listen | OverlapRequest::Continue)) => {
                self.reset();
                let keep = request == OverlapRequest::Listen
                    && input.speech
                    && d > u32::from(self.short_ack_ms);
                return listen(self, R::ClientOverlapAction, keep);
            }
            Some(OverlapRequest::Drop) => {
                self.reset();
                return decision(self, Drop, R::ClientOverlapAction, false, false, false);
            }
            None => {}
        }
        match input.forced {
            Some(Forced::BargeIn) => return barge_in(self, R::ClientForceBargeIn),
            Some(Forced::Listen) => {
                self.reset();
                return listen(self, R::ClientForceListen, input.speech);
            }
            None => {}
        }
        if !input.speech {
            return decision(self, Drop, R::SilenceOrNoise, false, false, false);
        }
        if input.short_ack_transcript {
            self.reset();
            return listen(self, R::ShortAckTranscript, false);
        }
        self.accumulate(d);
        let short = u32::from(self.short_ack_ms);
        match policy {
            OverlapPolicy::ListenOnly => listen(self, R::PolicyListenOnly, true),
            OverlapPolicy::BargeInOnSpeech => match input.vad_speech_started {
                Some(false) => {
                    decision(self, Listen, R::ServerVadUtteranceActive, true, false, true)
                }
                Some(true) => barge_in(self, R::ServerVadSpeechStarted),
                None => barge_in(self, R::PolicyBargeInOnSpeech),
            },
            OverlapPolicy::Thresholds if d <= short && self.speech_ms <= short => {
                listen(self, R::ShortAck, true)
            }
            OverlapPolicy::Thresholds if self.speech_ms >= u32::from(self.barge_in_ms) => {
                barge_in(self, R::LongOverlapSpeech)
            }
            OverlapPolicy::Thresholds => listen(self, R::AccumulatingOverlapSpeech, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tested(OverlapPolicy, OverlapState);

    impl Tested {
        fn decide(&mut self, input: &Overlap) -> OverlapDecision {
            self.1.decide(self.0, input)
        }

        fn reset(&mut self) -> u32 {
            self.1.reset()
        }
    }

    fn state(policy: OverlapPolicy) -> Tested {
        Tested(
            policy,
            OverlapState::new(OverlapConfig::new(policy, 700, 1_200)),
        )
    }

    #[test]
    fn thresholds_hear_an_acknowledgement_and_yield_to_a_long_interruption() {
        let mut s = state(OverlapPolicy::Thresholds);
        let steps = [
            (300, OverlapAction::Listen, OverlapReason::ShortAck, 300),
            (300, OverlapAction::Listen, OverlapReason::ShortAck, 600),
            (
                300,
                OverlapAction::Listen,
                OverlapReason::AccumulatingOverlapSpeech,
                900,
            ),
            (
                300,
                OverlapAction::BargeIn,
                OverlapReason::LongOverlapSpeech,
                1_200,
            ),
        ];
        for (ms, action, reason, total) in steps {
            let d = s.decide(&Overlap::speech(ms));
            assert_eq!(
                (d.action, d.reason, d.overlap_speech_ms),
                (action, reason, total)
            );
        }
    }

    #[test]
    fn silence_is_dropped_and_keeps_what_was_heard() {
        let mut s = state(OverlapPolicy::ListenOnly);
        s.decide(&Overlap::speech(500));
        let d = s.decide(&Overlap::silence(20));
        assert_eq!(
            (d.action, d.overlap_speech_ms, d.buffer_audio),
            (OverlapAction::Drop, 500, false)
        );
    }

    #[test]
    fn a_client_s_request_comes_first_and_a_listen_starts_again() {
        let mut s = state(OverlapPolicy::BargeInOnSpeech);
        let d = s.decide(&Overlap::speech(900).with_request(OverlapRequest::Listen));
        assert_eq!(
            (d.action, d.buffer_audio, d.overlap_speech_ms),
            (OverlapAction::Listen, true, 0)
        );
        let d = s.decide(&Overlap::speech(900).with_request(OverlapRequest::Continue));
        assert!(!d.buffer_audio);
        let d = s.decide(&Overlap::silence(20).with_request(OverlapRequest::BargeIn));
        assert_eq!(d.action, OverlapAction::BargeIn);
        let vad_says_no = Overlap {
            vad_speech_started: Some(false),
            ..Overlap::speech(20)
        };
        let d = s.decide(&vad_says_no);
        assert_eq!(
            (d.reason, d.defer_append),
            (OverlapReason::ServerVadUtteranceActive, false)
        );
    }

    #[test]
    fn accumulation_saturates() {
        let mut s = state(OverlapPolicy::ListenOnly);
        s.decide(&Overlap::speech(u32::MAX));
        assert_eq!(s.decide(&Overlap::speech(5)).overlap_speech_ms, u32::MAX);
        assert_eq!(s.reset(), u32::MAX);
    }

    #[test]
    fn short_acks_are_the_release_s_words() {
        for yes in [
            "ok",
            "OK.",
            "  yeah ",
            "go on",
            "Keep going",
            "嗯嗯",
            "继续说！",
            "go-on",
        ] {
            assert!(is_short_ack(yes), "{yes}");
        }
        for no in ["", "   ", "okay then", "go  on please", "no", "嗯嗯嗯"] {
            assert!(!is_short_ack(no), "{no}");
        }
    }
}
