//! Input modes and the capability set of a session.

use core::fmt;

/// How a client contributes input to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InputMode {
    /// Append text tokens.
    AppendTokens,
    /// Append a chunk of audio (typically 20 ms).
    AppendAudioChunk,
    /// Replace the latest chunk.
    ReplaceLatestChunk,
    /// Re-encode the context.
    ReencodeContext,
    /// Roll back to a checkpoint.
    RollbackToCheckpoint,
    /// Only commit whole turns.
    TurnCommitOnly,
}

impl InputMode {
    /// Every mode.
    pub const ALL: [InputMode; 6] = [
        InputMode::AppendTokens,
        InputMode::AppendAudioChunk,
        InputMode::ReplaceLatestChunk,
        InputMode::ReencodeContext,
        InputMode::RollbackToCheckpoint,
        InputMode::TurnCommitOnly,
    ];

    /// The stable snake_case name.
    ///
    /// ```
    /// # use duplex_core::InputMode;
    /// assert_eq!(InputMode::AppendAudioChunk.as_str(), "append_audio_chunk");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            InputMode::AppendTokens => "append_tokens",
            InputMode::AppendAudioChunk => "append_audio_chunk",
            InputMode::ReplaceLatestChunk => "replace_latest_chunk",
            InputMode::ReencodeContext => "reencode_context",
            InputMode::RollbackToCheckpoint => "rollback_to_checkpoint",
            InputMode::TurnCommitOnly => "turn_commit_only",
        }
    }

    /// Parses a snake_case name.
    ///
    /// ```
    /// # use duplex_core::InputMode;
    /// assert_eq!(InputMode::parse("turn_commit_only"), Some(InputMode::TurnCommitOnly));
    /// assert_eq!(InputMode::parse("shout"), None);
    /// ```
    pub fn parse(name: &str) -> Option<InputMode> {
        InputMode::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// The mode's index in [`InputMode::ALL`] (0..=5), for compact storage.
    pub(crate) const fn index(self) -> u8 {
        self as u8
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for InputMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`InputMode`]s: the session's capabilities.
///
/// The default is `{turn_commit_only}`, as in the seed.
///
/// # Examples
///
/// ```
/// use duplex_core::{InputMode, Modes};
///
/// let m = Modes::EMPTY.with(InputMode::AppendAudioChunk).with(InputMode::AppendTokens);
/// assert!(m.contains(InputMode::AppendTokens));
/// assert!(!Modes::default().contains(InputMode::AppendTokens));
/// assert_eq!(m.iter().count(), 2);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Modes {
    bits: u8,
}

impl Modes {
    /// No mode at all.
    pub const EMPTY: Modes = Modes { bits: 0 };

    /// `{mode}`.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes};
    /// assert!(Modes::only(InputMode::ReencodeContext).contains(InputMode::ReencodeContext));
    /// ```
    pub const fn only(mode: InputMode) -> Modes {
        Modes { bits: mode.bit() }
    }

    /// This set plus `mode`.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes};
    /// assert!(Modes::EMPTY.with(InputMode::AppendTokens).contains(InputMode::AppendTokens));
    /// ```
    #[must_use]
    pub const fn with(self, mode: InputMode) -> Modes {
        Modes {
            bits: self.bits | mode.bit(),
        }
    }

    /// Whether `mode` is in the set.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes};
    /// assert!(Modes::default().contains(InputMode::TurnCommitOnly));
    /// ```
    pub const fn contains(self, mode: InputMode) -> bool {
        self.bits & mode.bit() != 0
    }

    /// The set as bits (bit `i` is `InputMode::ALL[i]`), for persistence.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes};
    /// let m = Modes::only(InputMode::AppendAudioChunk);
    /// assert_eq!(Modes::from_bits(m.bits()), Some(m));
    /// ```
    pub const fn bits(self) -> u8 {
        self.bits
    }

    /// The set with these bits, if they name only modes.
    ///
    /// ```
    /// # use duplex_core::Modes;
    /// assert!(Modes::from_bits(0b100_0000).is_none());
    /// ```
    pub const fn from_bits(bits: u8) -> Option<Modes> {
        if bits >> InputMode::ALL.len() == 0 {
            Some(Modes { bits })
        } else {
            None
        }
    }

    /// The modes in the set, in [`InputMode::ALL`] order.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes};
    /// assert_eq!(Modes::default().iter().collect::<Vec<_>>(), [InputMode::TurnCommitOnly]);
    /// ```
    pub fn iter(self) -> impl Iterator<Item = InputMode> {
        InputMode::ALL
            .into_iter()
            .filter(move |m| self.contains(*m))
    }
}

impl Default for Modes {
    fn default() -> Self {
        Modes::only(InputMode::TurnCommitOnly)
    }
}

impl FromIterator<InputMode> for Modes {
    fn from_iter<I: IntoIterator<Item = InputMode>>(iter: I) -> Self {
        iter.into_iter().fold(Modes::EMPTY, Modes::with)
    }
}

impl fmt::Debug for Modes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for Modes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, m) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(m.as_str())?;
        }
        f.write_str("}")
    }
}
