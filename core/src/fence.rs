//! The identity fence: which session, incarnation, epoch, turn and
//! response a message belongs to. A session's fence never moves backwards.

use core::fmt;

pub use crate::base::Stamp;
use crate::error::{Error, FenceRule};
use crate::id::Id;

/// Where a fence stands within one incarnation: `(epoch, turn, response)`,
/// ordered lexicographically (the order `cancel` compares with). Tables
/// store it instead of a whole fence: every fence a session stores has the
/// session's own id and incarnation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Position {
    pub(crate) epoch: u64,
    pub(crate) turn: u64,
    pub(crate) response: u64,
}

impl Position {
    /// Whether `self` is behind `other` under the fence rule: an older
    /// epoch, or within the same epoch an older turn or response.
    #[inline]
    pub(crate) const fn is_behind(self, other: Position) -> bool {
        self.epoch < other.epoch
            || (self.epoch == other.epoch
                && (self.turn < other.turn || self.response < other.response))
    }
}

/// A session's identity fence.
///
/// # Examples
///
/// ```
/// use duplex_core::{Fence, Id};
///
/// let f: Fence = Fence::new(Id::new("s1")?, 0).with_epoch(2).with_turn(5).with_response(1);
/// assert_eq!(f.session.as_str(), "s1");
/// assert_eq!((f.epoch, f.turn, f.response), (2, 5, 1));
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Fence<I = Id> {
    /// The session id.
    pub session: I,
    /// Incarnation: a reopened session id gets a new one.
    pub incarnation: u64,
    /// Barge-in epoch.
    pub epoch: u64,
    /// Turn within the epoch.
    pub turn: u64,
    /// Response within the turn.
    pub response: u64,
}

impl<I> Fence<I> {
    /// A fence at epoch 0, turn 0, response 0 of `incarnation`.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id};
    /// let f = Fence::<Id>::new(Id::new("s")?, 4);
    /// assert_eq!(f.incarnation, 4);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    pub const fn new(session: I, incarnation: u64) -> Self {
        Fence {
            session,
            incarnation,
            epoch: 0,
            turn: 0,
            response: 0,
        }
    }

    /// The same fence at `epoch`.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id};
    /// assert_eq!(Fence::<Id>::new(Id::new("s")?, 0).with_epoch(3).epoch, 3);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// The same fence at `turn`.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id};
    /// assert_eq!(Fence::<Id>::new(Id::new("s")?, 0).with_turn(3).turn, 3);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_turn(mut self, turn: u64) -> Self {
        self.turn = turn;
        self
    }

    /// The same fence at `response`.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id};
    /// assert_eq!(Fence::<Id>::new(Id::new("s")?, 0).with_response(3).response, 3);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_response(mut self, response: u64) -> Self {
        self.response = response;
        self
    }

    /// `(epoch, turn, response)`.
    #[inline]
    pub(crate) const fn position(&self) -> Position {
        Position {
            epoch: self.epoch,
            turn: self.turn,
            response: self.response,
        }
    }

    /// The numeric part, for errors and logs.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id};
    /// assert_eq!(Fence::<Id>::new(Id::new("s")?, 1).stamp().incarnation, 1);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    pub const fn stamp(&self) -> Stamp {
        Stamp {
            incarnation: self.incarnation,
            epoch: self.epoch,
            turn: self.turn,
            response: self.response,
        }
    }
}

impl<I: Clone + PartialEq> Fence<I> {
    /// This fence's identity at `position`.
    pub(crate) fn at(&self, position: Position) -> Fence<I> {
        Fence {
            session: self.session.clone(),
            incarnation: self.incarnation,
            epoch: position.epoch,
            turn: position.turn,
            response: position.response,
        }
    }

    /// Whether `other` names the same session id and incarnation.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id};
    /// let a = Fence::<Id>::new(Id::new("s")?, 1);
    /// assert!(a.same_identity(&a.clone().with_epoch(5)));
    /// assert!(!a.same_identity(&Fence::new(Id::new("s")?, 2)));
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    #[inline]
    pub fn same_identity(&self, other: &Fence<I>) -> bool {
        self.incarnation == other.incarnation && self.session == other.session
    }

    /// Fence validation: may `offered` be applied to a session whose current
    /// fence is `self`?
    ///
    /// Same session and incarnation; not an older epoch; within the same
    /// epoch neither an older turn nor an older response. A higher epoch may
    /// carry any turn and response.
    ///
    /// ```
    /// # use duplex_core::{Fence, Id, ErrorKind};
    /// let cur = Fence::<Id>::new(Id::new("s")?, 0).with_epoch(1).with_turn(4);
    /// assert!(cur.admits(&cur.clone().with_epoch(2).with_turn(0)).is_ok());
    /// let late = cur.clone().with_turn(3);
    /// assert_eq!(cur.admits(&late).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    #[inline]
    pub fn admits(&self, offered: &Fence<I>) -> Result<(), Error> {
        if !self.same_identity(offered) {
            return Err(self.mismatch(FenceRule::Identity, offered));
        }
        if offered.position().is_behind(self.position()) {
            return Err(self.mismatch(FenceRule::Stale, offered));
        }
        Ok(())
    }

    #[cold]
    pub(crate) fn mismatch(&self, rule: FenceRule, offered: &Fence<I>) -> Error {
        Error::FenceMismatch {
            rule,
            expected: self.stamp(),
            actual: offered.stamp(),
        }
    }
}

impl<I: fmt::Display> fmt::Display for Fence<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.session, self.stamp())
    }
}
