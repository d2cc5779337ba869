//! Input budgets: how much client input a session may hold that the model
//! has not consumed yet, in bytes and in committed turns (vllm-omni 0.30's
//! `max_pending_input_bytes_per_session` and
//! `max_pending_turns_per_session`).
//!
//! A host reserves an append's bytes before it accepts the append, and a
//! turn before it accepts a commit; it releases them as the model consumes
//! the input. A reservation past a limit is refused with
//! [`Error::InputBackpressure`] and
//! changes nothing, so the client is told to slow down before the session
//! holds more than its limit.

pub use crate::base::Budget;
use crate::error::Error;

/// The limits of a session's pending input. Any values are allowed: a
/// byte limit of 0 refuses every non-empty append, a turn limit of 0 every
/// commit.
///
/// # Examples
///
/// ```
/// use duplex_core::InputLimits;
///
/// // vllm-omni 0.30's defaults: 16 MiB and 4 turns.
/// assert_eq!(InputLimits::DEFAULT, InputLimits::new(16 * 1024 * 1024, 4));
/// assert_eq!(InputLimits::new(1024, 2).turns(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct InputLimits {
    bytes: u32,
    turns: u16,
}

impl InputLimits {
    /// 16 MiB of pending input and 4 pending turns, vllm-omni 0.30's
    /// defaults.
    pub const DEFAULT: InputLimits = InputLimits::new(16 * 1024 * 1024, 4);

    /// Limits of `bytes` pending input bytes and `turns` pending turns.
    ///
    /// ```
    /// # use duplex_core::InputLimits;
    /// assert_eq!(InputLimits::new(8, 1).bytes(), 8);
    /// ```
    pub const fn new(bytes: u32, turns: u16) -> Self {
        InputLimits { bytes, turns }
    }

    /// The most input bytes that may be pending.
    ///
    /// ```
    /// # use duplex_core::InputLimits;
    /// assert_eq!(InputLimits::DEFAULT.bytes(), 16 * 1024 * 1024);
    /// ```
    pub const fn bytes(&self) -> u32 {
        self.bytes
    }

    /// The most committed turns that may be pending.
    ///
    /// ```
    /// # use duplex_core::InputLimits;
    /// assert_eq!(InputLimits::DEFAULT.turns(), 4);
    /// ```
    pub const fn turns(&self) -> u16 {
        self.turns
    }
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits::DEFAULT
    }
}

/// What a session holds of its client's input that the model has not
/// consumed yet.
///
/// # Examples
///
/// ```
/// use duplex_core::PendingInput;
///
/// assert_eq!(PendingInput::default(), PendingInput { bytes: 0, turns: 0 });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PendingInput {
    /// Reserved input bytes.
    pub bytes: u32,
    /// Reserved committed turns.
    pub turns: u16,
}

/// A session's limits and what it holds against them, flat: 12 bytes
/// (4 GiB and 65,535 turns are far past any limit a host sets; vllm-omni's
/// defaults are 16 MiB and 4). What is pending
/// never exceeds its limit: a reservation that would is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct InputBudget {
    bytes: u32,
    bytes_limit: u32,
    turns: u16,
    turns_limit: u16,
}

impl InputBudget {
    pub(crate) const fn new(limits: InputLimits) -> Self {
        InputBudget {
            bytes: 0,
            bytes_limit: limits.bytes,
            turns: 0,
            turns_limit: limits.turns,
        }
    }

    /// A budget from an image's parts, if they can be one.
    #[cfg(any(feature = "serde", test))]
    pub(crate) fn from_parts(limits: InputLimits, pending: PendingInput) -> Option<Self> {
        (pending.bytes <= limits.bytes && pending.turns <= limits.turns).then_some(InputBudget {
            bytes: pending.bytes,
            bytes_limit: limits.bytes,
            turns: pending.turns,
            turns_limit: limits.turns,
        })
    }

    /// The limits.
    pub(crate) const fn limits(&self) -> InputLimits {
        InputLimits::new(self.bytes_limit, self.turns_limit)
    }

    /// What is pending.
    pub(crate) const fn pending(&self) -> PendingInput {
        PendingInput {
            bytes: self.bytes,
            turns: self.turns,
        }
    }

    /// Checks that `bytes` more fit, changing nothing.
    pub(crate) fn check_bytes(&self, bytes: u64) -> Result<(), Error> {
        let fits = u64::from(self.bytes)
            .checked_add(bytes)
            .is_some_and(|total| total <= u64::from(self.bytes_limit));
        if fits {
            Ok(())
        } else {
            Err(Error::InputBackpressure {
                budget: Budget::Bytes,
                pending: u64::from(self.bytes),
                requested: bytes,
                limit: u64::from(self.bytes_limit),
            })
        }
    }

    /// Checks that one more turn fits, changing nothing.
    pub(crate) fn check_turn(&self) -> Result<(), Error> {
        if self.turns < self.turns_limit {
            Ok(())
        } else {
            Err(Error::InputBackpressure {
                budget: Budget::Turns,
                pending: u64::from(self.turns),
                requested: 1,
                limit: u64::from(self.turns_limit),
            })
        }
    }

    /// Adds `bytes`, after [`check_bytes`](Self::check_bytes).
    pub(crate) fn add_bytes(&mut self, bytes: u64) {
        let total = u64::from(self.bytes).saturating_add(bytes);
        self.bytes = u32::try_from(total).unwrap_or(u32::MAX);
    }

    /// Adds a turn, after [`check_turn`](Self::check_turn).
    pub(crate) fn add_turn(&mut self) {
        self.turns = self.turns.saturating_add(1);
    }

    /// Gives back up to `bytes` (the release's `release_input_bytes`:
    /// never below zero).
    pub(crate) fn release_bytes(&mut self, bytes: u64) {
        let left = u64::from(self.bytes).saturating_sub(bytes);
        self.bytes = u32::try_from(left).unwrap_or(u32::MAX);
    }

    /// Gives back every byte and says how many there were.
    pub(crate) fn release_all_bytes(&mut self) -> u32 {
        core::mem::take(&mut self.bytes)
    }

    /// Gives back a turn, if one is pending.
    pub(crate) fn release_turn(&mut self) {
        self.turns = self.turns.saturating_sub(1);
    }

    /// Drops everything pending and says what it was.
    pub(crate) fn clear(&mut self) -> PendingInput {
        let pending = self.pending();
        self.bytes = 0;
        self.turns = 0;
        pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_reservation_names_its_budget_and_changes_nothing() {
        let mut b = InputBudget::new(InputLimits::new(10, 1));
        b.check_bytes(10).unwrap();
        b.add_bytes(10);
        let e = b.check_bytes(1).unwrap_err();
        assert_eq!(
            e,
            Error::InputBackpressure {
                budget: Budget::Bytes,
                pending: 10,
                requested: 1,
                limit: 10
            }
        );
        assert_eq!(b.pending().bytes, 10);
        b.check_bytes(0).unwrap();
        assert!(b.check_bytes(u64::MAX).is_err());
        b.check_turn().unwrap();
        b.add_turn();
        assert_eq!(
            b.check_turn().unwrap_err().kind().as_str(),
            "input_backpressure"
        );
        assert_eq!(b.pending().turns, 1);
    }

    #[test]
    fn releases_never_go_below_zero() {
        let mut b = InputBudget::new(InputLimits::DEFAULT);
        b.add_bytes(5);
        b.release_bytes(9);
        b.release_turn();
        assert_eq!(b.pending(), PendingInput::default());
        b.add_bytes(3);
        b.add_turn();
        assert_eq!(b.clear(), PendingInput { bytes: 3, turns: 1 });
        assert_eq!(b.pending(), PendingInput::default());
    }

    #[test]
    fn an_image_past_its_limits_is_no_budget() {
        let limits = InputLimits::new(4, 1);
        assert!(InputBudget::from_parts(limits, PendingInput { bytes: 4, turns: 1 }).is_some());
        assert!(InputBudget::from_parts(limits, PendingInput { bytes: 5, turns: 0 }).is_none());
        assert!(InputBudget::from_parts(limits, PendingInput { bytes: 0, turns: 2 }).is_none());
    }
}
