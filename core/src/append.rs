//! Append sequencing: the input sequence, the turn-local sequence, and
//! two-phase prepare/commit.

use core::fmt;

use crate::error::{Error, Staleness};
use crate::fence::{Fence, Position};
use crate::id::Id;
use crate::mode::InputMode;
use crate::profile::{Conformance, Profile, ResultsRow, Tables};

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

/// Whether an append carried the last piece of its input (the seed's
/// `final` flag): part of the identity of a completed append.
///
/// # Examples
///
/// ```
/// use duplex_core::Finality;
///
/// assert_eq!(Finality::from(true), Finality::Final);
/// assert!(!Finality::Partial.is_final());
/// assert_eq!(Finality::Final.as_str(), "final");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Finality {
    /// More input of the same operation follows.
    Partial,
    /// The last piece of the input.
    Final,
}

impl Finality {
    /// Whether this is [`Finality::Final`].
    ///
    /// ```
    /// # use duplex_core::Finality;
    /// assert!(Finality::Final.is_final());
    /// ```
    pub const fn is_final(self) -> bool {
        matches!(self, Finality::Final)
    }

    /// `"partial"` or `"final"`.
    ///
    /// ```
    /// # use duplex_core::Finality;
    /// assert_eq!(Finality::Partial.as_str(), "partial");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Finality::Partial => "partial",
            Finality::Final => "final",
        }
    }
}

impl From<bool> for Finality {
    fn from(is_final: bool) -> Self {
        if is_final {
            Finality::Final
        } else {
            Finality::Partial
        }
    }
}

impl fmt::Display for Finality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The append cursor of a session: the last committed append of the epoch.
///
/// The turn key of the last commit is `(current epoch, turn, response)`: a
/// commit accepts its fence, and any later epoch change resets the cursor,
/// so only turn and response are stored. There is a turn key exactly when
/// `turn_seq > 0` (a reset zeroes everything; a commit sets `turn_seq >= 1`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Cursor {
    pub(crate) seq: u64,
    pub(crate) turn_seq: u64,
    turn: u64,
    response: u64,
}

impl Cursor {
    /// The next append for a fence at `at`, computed against this cursor
    /// (or a fresh one if `at` starts a new epoch).
    #[inline]
    pub(crate) fn next(&self, current_epoch: u64, at: Position) -> Appended {
        let base = if at.epoch == current_epoch {
            *self
        } else {
            Cursor::default()
        };
        let same_turn = base.turn_seq > 0 && base.turn == at.turn && base.response == at.response;
        Appended {
            seq: base.seq.saturating_add(1),
            turn_seq: if same_turn {
                base.turn_seq.saturating_add(1)
            } else {
                1
            },
            turn_id: at.turn,
        }
    }

    /// `(seq, turn_seq, turn, response)`, for snapshots and reservations.
    pub(crate) fn parts(&self) -> (u64, u64, u64, u64) {
        (self.seq, self.turn_seq, self.turn, self.response)
    }

    /// A cursor from snapshot parts, if they can be one: a turn key exists
    /// exactly when `turn_seq > 0`, and a turn never has more appends than
    /// its epoch.
    pub(crate) fn from_parts(seq: u64, turn_seq: u64, turn: u64, response: u64) -> Option<Self> {
        let keyless = turn_seq == 0 && (turn != 0 || response != 0);
        (turn_seq <= seq && !keyless).then_some(Cursor {
            seq,
            turn_seq,
            turn,
            response,
        })
    }

    /// Records a committed append made at `at` (whose epoch is now current).
    #[inline]
    pub(crate) fn commit(&mut self, appended: Appended, at: Position) {
        *self = Cursor {
            seq: appended.seq,
            turn_seq: appended.turn_seq,
            turn: at.turn,
            response: at.response,
        };
    }
}

/// A prepared append: phase one of two. Nothing in the session changed when
/// it was made; [`commit_append`](crate::Session::commit_append) applies it if
/// the session has not moved since.
///
/// A reservation is a plain value: it remembers the fence and cursor it was
/// computed against, and any append or fence change in between makes it
/// stale.
///
/// # Examples
///
/// ```
/// use duplex_core::{Fence, Id, InputMode, Instant, Modes, OpenOptions, Session};
///
/// let fence = Fence::new(Id::new("s")?, 0);
/// let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
/// let mut s = Session::open(fence.clone(), opts, Instant::ZERO)?;
/// let r = s.prepare_append(&fence, InputMode::AppendAudioChunk)?;
/// assert_eq!(r.on_commit().seq, 1);
/// assert_eq!(r.mode(), InputMode::AppendAudioChunk);
/// s.commit_append(&r)?;
/// // Committing the same reservation twice is refused.
/// assert!(s.commit_append(&r).is_err());
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reservation<I = Id> {
    pub(crate) fence: Fence<I>,
    pub(crate) mode: InputMode,
    pub(crate) base_fence: Fence<I>,
    pub(crate) base: Cursor,
    pub(crate) on_commit: Appended,
}

impl<I: Clone + PartialEq> Reservation<I> {
    /// The fence the append carries.
    ///
    /// See the type-level example.
    pub fn fence(&self) -> &Fence<I> {
        &self.fence
    }

    /// The input mode.
    ///
    /// See the type-level example.
    pub fn mode(&self) -> InputMode {
        self.mode
    }

    /// The sequence numbers the append gets when it is committed.
    ///
    /// See the type-level example.
    pub fn on_commit(&self) -> Appended {
        self.on_commit
    }

    /// The session's fence when the reservation was made.
    ///
    /// See [`from_parts`](Self::from_parts).
    pub fn base_fence(&self) -> &Fence<I> {
        &self.base_fence
    }

    /// The session's input sequence when the reservation was made:
    /// `(seq, turn_seq, turn key)`, the turn key `(turn, response)` of the
    /// last append, if the epoch had one.
    ///
    /// See [`from_parts`](Self::from_parts).
    pub fn base_input(&self) -> (u64, u64, Option<(u64, u64)>) {
        let (seq, turn_seq, turn, response) = self.base.parts();
        (seq, turn_seq, (turn_seq > 0).then_some((turn, response)))
    }

    /// A reservation from its parts, for hosts that carry one across a
    /// boundary as plain values (the Python binding's frozen dataclass).
    /// `None` unless the parts are those of a reservation: the base input
    /// must be a possible one, and `on_commit` must be exactly what the
    /// append at `fence` gets from that base. A rebuilt reservation is
    /// checked like any other when committed: stale unless the session is
    /// still where it was made.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
    /// let mut s = Session::open(f.clone(), opts, Instant::ZERO)?;
    /// let r = s.prepare_append(&f, InputMode::AppendAudioChunk)?;
    /// let (seq, turn_seq, key) = r.base_input();
    /// let parts = |on_commit| {
    ///     Reservation::from_parts(r.fence().clone(), r.mode(), r.base_fence().clone(), (seq, turn_seq, key), on_commit)
    /// };
    /// assert_eq!(parts(r.on_commit()).as_ref(), Some(&r));
    /// assert!(parts(Appended { seq: 9, ..r.on_commit() }).is_none()); // not what the append gets
    /// s.commit_append(&parts(r.on_commit()).unwrap())?;
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_parts(
        fence: Fence<I>,
        mode: InputMode,
        base_fence: Fence<I>,
        (seq, turn_seq, key): (u64, u64, Option<(u64, u64)>),
        on_commit: Appended,
    ) -> Option<Self> {
        let (turn, response) = key.unwrap_or((0, 0));
        if key.is_some() != (turn_seq > 0) {
            return None;
        }
        let base = Cursor::from_parts(seq, turn_seq, turn, response)?;
        (base.next(base_fence.epoch, fence.position()) == on_commit).then_some(Reservation {
            fence,
            mode,
            base_fence,
            base,
            on_commit,
        })
    }

    /// Whether a session now at `fence` with `cursor` is still where this
    /// reservation was made; if not, why.
    pub(crate) fn check_fresh(&self, fence: &Fence<I>, cursor: &Cursor) -> Result<(), Error> {
        let staleness = if fence.epoch != self.base_fence.epoch {
            Staleness::EpochMoved {
                from: self.base_fence.epoch,
                to: fence.epoch,
            }
        } else if *cursor != self.base {
            Staleness::Appended {
                from: self.base.seq,
                to: cursor.seq,
            }
        } else if *fence != self.base_fence {
            Staleness::FenceMoved {
                from: self.base_fence.stamp(),
                to: fence.stamp(),
            }
        } else {
            return Ok(());
        };
        Err(Error::StaleReservation { staleness })
    }
}

/// The stage results of a completed append, copied out of the session (at
/// most the profile's `STAGE_RESULTS` per completed append): what a host
/// hands back on a retry after the session's lock is gone.
///
/// # Examples
///
/// ```
/// use duplex_core::StageResults;
///
/// use duplex_core::profile::{Capacities, Server};
///
/// let r = StageResults::<Capacities<8, 4, 8, 4, 32, 4>>::new(&[7, -1])?;
/// assert_eq!(r.as_slice(), [7, -1]);
/// // The server profile keeps one result (a handle) per completed append.
/// assert!(StageResults::<duplex_core::profile::TablesOf<Server>>::new(&[1, 2]).is_err());
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StageResults<T: Tables = <Conformance as Profile>::Tables> {
    values: T::Results,
    len: u8,
}

impl<T: Tables> StageResults<T> {
    /// A copy of `results`.
    ///
    /// # Errors
    ///
    /// [`Error::Full`] if there are more than `K` results (nothing is
    /// copied).
    ///
    /// See the type-level example.
    pub fn new(results: &[i64]) -> Result<Self, crate::Error> {
        let full = crate::Error::Full {
            table: crate::Table::StageResults,
            capacity: T::STAGE_RESULTS,
        };
        let mut values = T::Results::default();
        let len = u8::try_from(results.len()).map_err(|_| full)?;
        values
            .slots_mut()
            .get_mut(..results.len())
            .ok_or(full)?
            .copy_from_slice(results);
        Ok(StageResults { values, len })
    }

    /// The results, in order.
    ///
    /// ```
    /// # use duplex_core::StageResults;
    /// assert!(StageResults::<duplex_core::profile::TablesOf<duplex_core::profile::Device>>::new(&[])?.as_slice().is_empty());
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    pub fn as_slice(&self) -> &[i64] {
        self.values
            .slots()
            .get(..usize::from(self.len))
            .unwrap_or(&[])
    }
}

impl<T: Tables> core::ops::Deref for StageResults<T> {
    type Target = [i64];

    fn deref(&self) -> &[i64] {
        self.as_slice()
    }
}
