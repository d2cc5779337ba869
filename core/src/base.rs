//! The small types the rest of the crate shares: a fence's [`Stamp`], a
//! state's [`StateKind`], an input [`Budget`], and the sizes of the three profiles.
//!
//! This module imports nothing else of the crate, so the errors that name
//! these types (`error`), the modules that raise those errors and the
//! profiles' session types form no circle. Each type is re-exported where
//! users find it (`duplex_core::Stamp`, `duplex_core::StateKind`,
//! `duplex_core::profile::{conformance, device, server}`).

use core::fmt;

/// The numeric part of a fence (everything but the session id): what errors
/// report as expected and actual, and what logs print.
///
/// # Examples
///
/// ```
/// use duplex_core::{Fence, Id, Stamp};
///
/// let f: Fence = Fence::new(Id::new("s")?, 3).with_epoch(1);
/// assert_eq!(f.stamp(), Stamp { incarnation: 3, epoch: 1, turn: 0, response: 0 });
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stamp {
    /// Incarnation of the session id.
    pub incarnation: u64,
    /// Epoch.
    pub epoch: u64,
    /// Turn.
    pub turn: u64,
    /// Response.
    pub response: u64,
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "incarnation {} epoch {} turn {} response {}",
            self.incarnation, self.epoch, self.turn, self.response
        )
    }
}

/// The runtime name of a state, for the dynamic API and logs.
///
/// # Examples
///
/// ```
/// use duplex_core::{State, StateKind, Detached};
///
/// assert_eq!(<Detached as State>::KIND, StateKind::Detached);
/// assert_eq!(StateKind::Closing.as_str(), "closing");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StateKind {
    /// Client attached.
    Open,
    /// Client gone, within grace.
    Detached,
    /// Irreversibly closing; resources kept for cleanup retry.
    Closing,
    /// Finalized.
    Closed,
}

impl StateKind {
    /// The lowercase name.
    ///
    /// ```
    /// # use duplex_core::StateKind;
    /// assert_eq!(StateKind::Open.as_str(), "open");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            StateKind::Open => "open",
            StateKind::Detached => "detached",
            StateKind::Closing => "closing",
            StateKind::Closed => "closed",
        }
    }
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which budget refused a reservation.
///
/// # Examples
///
/// ```
/// use duplex_core::Budget;
///
/// assert_eq!(Budget::Turns.to_string(), "pending turns");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Budget {
    /// Pending input bytes.
    Bytes,
    /// Pending committed turns.
    Turns,
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Budget::Bytes => "pending input bytes",
            Budget::Turns => "pending turns",
        })
    }
}

/// The conformance profile, and the default of every generic type: the
/// sizes the conformance traces are written for.
pub mod conformance {
    /// Request resources a session owns (`R`).
    pub const RESOURCES: usize = 8;
    /// Stage bindings (`B`).
    pub const BINDINGS: usize = 4;
    /// Completed-append records (`D`).
    pub const COMPLETED: usize = 8;
    /// Active lease operations (`A`).
    pub const ACTIVE_OPS: usize = 4;
    /// Bytes of an id (`L`).
    pub const ID_LEN: usize = 32;
    /// Stage results of one completed append (`K`).
    pub const STAGE_RESULTS: usize = 4;
}

/// A small device: a microphone-and-speaker node with one or two engine
/// stages (the profile `tests/no-std-check` builds).
pub mod device {
    /// Request resources a session owns (`R`).
    pub const RESOURCES: usize = 4;
    /// Stage bindings (`B`).
    pub const BINDINGS: usize = 2;
    /// Completed-append records (`D`).
    pub const COMPLETED: usize = 4;
    /// Active lease operations (`A`).
    pub const ACTIVE_OPS: usize = 2;
    /// Bytes of an id (`L`).
    pub const ID_LEN: usize = 16;
    /// Stage results of one completed append (`K`).
    pub const STAGE_RESULTS: usize = 2;
}

/// Real sizes on a server: vllm-omni's control plane names sessions,
/// requests and operations with UUID-based ids (74, 46 and 43 bytes) and
/// keeps the seed's window of 256 completed appends per session. Each
/// completed append keeps one result: a handle to the stage results, which
/// such a host keeps in its own objects (the Python package does). A lookup
/// in a full window of 256 is a binary search over the op-id index.
pub mod server {
    /// Request resources a session owns (`R`): twice the seed's own
    /// workloads' most (4 stages bound, 2 requests each).
    pub const RESOURCES: usize = 16;
    /// Stage bindings (`B`).
    pub const BINDINGS: usize = 8;
    /// Completed-append records (`D`): the seed's default limit.
    pub const COMPLETED: usize = 256;
    /// Active lease operations (`A`).
    pub const ACTIVE_OPS: usize = 8;
    /// Bytes of an id (`L`).
    pub const ID_LEN: usize = 128;
    /// Stage results of one completed append (`K`): a handle.
    pub const STAGE_RESULTS: usize = 1;
}
