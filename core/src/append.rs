//! Append sequencing (SPEC §4): the input sequence, the turn-local sequence,
//! and two-phase prepare/commit.

use crate::fence::{Fence, Position};
use crate::id::DEFAULT_ID_LEN;
use crate::mode::InputMode;

/// The sequence numbers an append was given.
///
/// # Examples
///
/// ```
/// use duplex_core::Appended;
///
/// let a = Appended { seq: 3, turn_seq: 1, turn_id: 2 };
/// assert_eq!(a.seq, 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Appended {
    /// Position in the epoch's input sequence (1-based).
    pub seq: u64,
    /// Position within the turn key `(epoch, turn, response)` (1-based).
    pub turn_seq: u64,
    /// The fence's turn.
    pub turn_id: u64,
}

/// The append cursor of a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Cursor {
    pub(crate) seq: u64,
    pub(crate) turn_seq: u64,
    pub(crate) turn_key: Option<Position>,
}

impl Cursor {
    /// The next append for `fence`, computed against this cursor (or a fresh
    /// one if `fence` starts a new epoch).
    pub(crate) fn next(&self, current_epoch: u64, fence: Position) -> Appended {
        let base = if fence.epoch == current_epoch {
            *self
        } else {
            Cursor::default()
        };
        let turn_seq = if base.turn_key == Some(fence) {
            base.turn_seq.saturating_add(1)
        } else {
            1
        };
        Appended {
            seq: base.seq.saturating_add(1),
            turn_seq,
            turn_id: fence.turn,
        }
    }
}

/// A prepared append: phase one of two. Nothing in the session changed when
/// it was made; [`commit_append`](crate::Session::commit_append) applies it if
/// the session has not moved since.
///
/// A reservation is a plain value: it remembers the fence and cursor it was
/// computed against, and any append or epoch change in between makes it
/// stale.
///
/// # Examples
///
/// ```
/// use duplex_core::{Fence, Id, InputMode, Instant, Modes, OpenOptions, Session};
///
/// let fence = Fence::new(Id::new("s")?, 0);
/// let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
/// let mut s: Session = Session::open(fence.clone(), opts, Instant::ZERO)?;
/// let r = s.prepare_append(InputMode::AppendAudioChunk, &fence)?;
/// assert_eq!(r.update().seq, 1);
/// assert_eq!(r.mode(), InputMode::AppendAudioChunk);
/// s.commit_append(&r)?;
/// // Committing the same reservation twice is refused.
/// assert!(s.commit_append(&r).is_err());
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reservation<const L: usize = DEFAULT_ID_LEN> {
    pub(crate) fence: Fence<L>,
    pub(crate) mode: InputMode,
    pub(crate) base_fence: Fence<L>,
    pub(crate) base: Cursor,
    pub(crate) update: Appended,
}

impl<const L: usize> Reservation<L> {
    /// The fence the append carries.
    ///
    /// See the type-level example.
    pub fn fence(&self) -> &Fence<L> {
        &self.fence
    }

    /// The input mode.
    ///
    /// See the type-level example.
    pub fn mode(&self) -> InputMode {
        self.mode
    }

    /// The sequence numbers the append will get on commit.
    ///
    /// See the type-level example.
    pub fn update(&self) -> Appended {
        self.update
    }
}
