//! Typed errors with context, and their stable snake_case kinds.

use core::fmt;

use crate::base::{Budget, Stamp, StateKind};
use crate::mode::{InputMode, Modes};

/// Why a fence was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FenceRule {
    /// The session id or incarnation differs from the session's: a message
    /// for another session or a previous incarnation.
    Identity,
    /// Same incarnation, but older: a lower epoch, or within the same epoch a
    /// lower turn or response (a late message from a cancelled turn).
    Stale,
    /// `cancel`: the next fence does not advance past the cancelled epoch;
    /// `drain`: the next fence is not ahead of the cancelled one.
    NotAdvancing,
    /// `cancel`: the cancelled fence is ahead of the session's current one.
    Ahead,
    /// `migrate`: the new owner's incarnation does not exceed the session's.
    Migration,
}

impl fmt::Display for FenceRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FenceRule::Identity => "other session or incarnation",
            FenceRule::Stale => "stale",
            FenceRule::NotAdvancing => "next fence must move past the cancelled one",
            FenceRule::Ahead => "cancelled fence is ahead of the session",
            FenceRule::Migration => "a migration must move to a higher incarnation",
        })
    }
}

/// Which fixed-capacity table an operation found full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Table {
    /// Request resources (`R`).
    Resources,
    /// Stage bindings (`B`).
    Bindings,
    /// Active lease operations (`A`).
    ActiveOperations,
    /// Stage results of one completed append (`K`).
    StageResults,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Table::Resources => "request resources",
            Table::Bindings => "stage bindings",
            Table::ActiveOperations => "active operations",
            Table::StageResults => "stage results",
        })
    }
}

/// A configuration value outside its allowed range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigField {
    /// The idle TTL must be positive (or absent).
    IdleTtl,
    /// The disconnect grace must be positive.
    DisconnectGrace,
    /// The completed-append limit must be in `1..=D`.
    CompletedAppendLimit,
    /// The session limit must be positive (or absent).
    MaxSessions,
}

impl fmt::Display for ConfigField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigField::IdleTtl => "idle_ttl",
            ConfigField::DisconnectGrace => "disconnect_grace",
            ConfigField::CompletedAppendLimit => "completed_append_limit",
            ConfigField::MaxSessions => "max_sessions",
        })
    }
}

/// Why an append reservation can no longer be committed: what moved
/// between `prepare_append` and `commit_append`.
///
/// # Examples
///
/// ```
/// use duplex_core::Staleness;
///
/// let s = Staleness::EpochMoved { from: 0, to: 1 };
/// assert_eq!(s.to_string(), "the epoch moved from 0 to 1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Staleness {
    /// A barge-in (or any newer epoch) reset the input sequence.
    EpochMoved {
        /// The epoch the reservation was made in.
        from: u64,
        /// The session's epoch now.
        to: u64,
    },
    /// Another append was committed first (or this one already was).
    Appended {
        /// The sequence the reservation was made against.
        from: u64,
        /// The session's sequence now.
        to: u64,
    },
    /// The fence moved within the epoch (a newer turn or response was
    /// accepted), so the turn sequence may differ.
    FenceMoved {
        /// The fence the reservation was made against.
        from: Stamp,
        /// The session's fence now.
        to: Stamp,
    },
}

impl fmt::Display for Staleness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Staleness::EpochMoved { from, to } => write!(f, "the epoch moved from {from} to {to}"),
            Staleness::Appended { from, to } => write!(
                f,
                "another append was committed first (seq moved from {from} to {to})"
            ),
            Staleness::FenceMoved { from, to } => {
                write!(f, "the fence moved from {from} to {to}")
            }
        }
    }
}

/// Every way a core operation can fail. A failed operation changes nothing.
///
/// Each variant carries the context a caller needs to act on it, and maps to
/// a stable snake_case [`ErrorKind`].
///
/// # Examples
///
/// ```
/// use duplex_core::{Error, ErrorKind};
///
/// let e = Error::GenerationMismatch { expected: 2, actual: 1 };
/// assert_eq!(e.kind(), ErrorKind::GenerationMismatch);
/// assert_eq!(e.kind().as_str(), "generation_mismatch");
/// assert_eq!(e.to_string(), "lease generation mismatch: expected 2, got 1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The fence was refused.
    #[error("fence mismatch ({rule}): session is at {expected}, got {actual}")]
    FenceMismatch {
        /// Which rule refused it.
        rule: FenceRule,
        /// The reference fence (the session's, or the cancelled one for [`FenceRule::NotAdvancing`]).
        expected: Stamp,
        /// The fence that was offered.
        actual: Stamp,
    },
    /// The input mode is not among the session's capabilities.
    #[error("input mode {mode} is not supported; supported: {supported}")]
    UnsupportedMode {
        /// The mode asked for.
        mode: InputMode,
        /// The session's capabilities.
        supported: Modes,
    },
    /// `resume` named the wrong lease generation.
    #[error("lease generation mismatch: expected {expected}, got {actual}")]
    GenerationMismatch {
        /// The session's generation.
        expected: u64,
        /// The generation offered.
        actual: u64,
    },
    /// `begin_operation` with an id that is already active.
    #[error("operation is already active")]
    OperationActive,
    /// `end_operation` with an id that is not active.
    #[error("operation is not active")]
    OperationNotActive,
    /// The append reservation no longer matches the session: something
    /// moved since it was prepared.
    #[error("append reservation is stale: {staleness}")]
    StaleReservation {
        /// What moved.
        staleness: Staleness,
    },
    /// The (stage, request) pair is held by another epoch.
    #[error("stage {stage} request already reserved by epoch {held_epoch}, requested by epoch {requested_epoch}")]
    ResourceConflict {
        /// The stage.
        stage: u32,
        /// Epoch of the existing reservation.
        held_epoch: u64,
        /// Epoch of the request.
        requested_epoch: u64,
    },
    /// A completed-append operation id was reused with other metadata.
    #[error("append operation id was reused with a different fence, mode or final flag")]
    OperationReused,
    /// The session's lifecycle state does not permit the operation (the
    /// dynamic API's counterpart of a compile error in the typed API).
    #[error("{operation} is not permitted while the session is {state}")]
    WrongState {
        /// The operation.
        operation: &'static str,
        /// The session's state.
        state: StateKind,
    },
    /// A fixed-capacity table is full.
    #[error("{table} full: capacity {capacity}")]
    Full {
        /// The table.
        table: Table,
        /// Its capacity.
        capacity: usize,
    },
    /// An id is empty or longer than the limit.
    #[error("invalid id: {len} bytes, expected 1..={max}")]
    InvalidId {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A configuration value is out of range.
    #[error("invalid config: {field} = {value}, expected {expected}")]
    InvalidConfig {
        /// The field.
        field: ConfigField,
        /// The value given.
        value: u64,
        /// What is allowed, in words.
        expected: &'static str,
    },
    /// A reservation of input would take the session past one of its
    /// [`InputLimits`](crate::InputLimits): the client must wait until the
    /// model has consumed some of its input.
    #[error("input backpressure: {pending} {budget} held, {requested} more asked, limit {limit}")]
    InputBackpressure {
        /// The budget that refused.
        budget: Budget,
        /// What the session holds of it.
        pending: u64,
        /// What was asked for.
        requested: u64,
        /// The session's limit.
        limit: u64,
    },
}

impl Error {
    /// The stable kind of this error.
    ///
    /// ```
    /// # use duplex_core::{Error, ErrorKind};
    /// assert_eq!(Error::OperationActive.kind(), ErrorKind::OperationActive);
    /// ```
    pub const fn kind(&self) -> ErrorKind {
        match self {
            Error::FenceMismatch { .. } => ErrorKind::FenceMismatch,
            Error::UnsupportedMode { .. } => ErrorKind::UnsupportedMode,
            Error::GenerationMismatch { .. } => ErrorKind::GenerationMismatch,
            Error::OperationActive => ErrorKind::OperationActive,
            Error::OperationNotActive => ErrorKind::OperationNotActive,
            Error::StaleReservation { .. } => ErrorKind::StaleReservation,
            Error::ResourceConflict { .. } => ErrorKind::ResourceConflict,
            Error::OperationReused => ErrorKind::OperationReused,
            Error::WrongState { .. } => ErrorKind::WrongState,
            Error::Full { .. } => ErrorKind::Full,
            Error::InvalidId { .. } => ErrorKind::InvalidId,
            Error::InvalidConfig { .. } => ErrorKind::InvalidConfig,
            Error::InputBackpressure { .. } => ErrorKind::InputBackpressure,
        }
    }
}

/// The error kinds, with their stable snake_case names (the names the
/// conformance traces and logs use).
///
/// The core raises a subset; the std manager adds the session-table kinds
/// (`capacity_exhausted`, `session_exists`, `unknown_session`, `wrong_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// `fence_mismatch`
    FenceMismatch,
    /// `unsupported_mode`
    UnsupportedMode,
    /// `capacity_exhausted`
    CapacityExhausted,
    /// `session_exists`
    SessionExists,
    /// `unknown_session`
    UnknownSession,
    /// `generation_mismatch`
    GenerationMismatch,
    /// `operation_active`
    OperationActive,
    /// `operation_not_active`
    OperationNotActive,
    /// `stale_reservation`
    StaleReservation,
    /// `resource_conflict`
    ResourceConflict,
    /// `operation_reused`
    OperationReused,
    /// `wrong_state`
    WrongState,
    /// `full`
    Full,
    /// `invalid_id`
    InvalidId,
    /// `invalid_config`
    InvalidConfig,
    /// `input_backpressure`
    InputBackpressure,
}

impl ErrorKind {
    /// Every kind, in the specification's order (then the kinds added
    /// after it).
    pub const ALL: [ErrorKind; 16] = [
        ErrorKind::FenceMismatch,
        ErrorKind::UnsupportedMode,
        ErrorKind::CapacityExhausted,
        ErrorKind::SessionExists,
        ErrorKind::UnknownSession,
        ErrorKind::GenerationMismatch,
        ErrorKind::OperationActive,
        ErrorKind::OperationNotActive,
        ErrorKind::StaleReservation,
        ErrorKind::ResourceConflict,
        ErrorKind::OperationReused,
        ErrorKind::WrongState,
        ErrorKind::Full,
        ErrorKind::InvalidId,
        ErrorKind::InvalidConfig,
        ErrorKind::InputBackpressure,
    ];

    /// The stable snake_case name used by traces and logs.
    ///
    /// ```
    /// # use duplex_core::ErrorKind;
    /// assert_eq!(ErrorKind::WrongState.as_str(), "wrong_state");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::FenceMismatch => "fence_mismatch",
            ErrorKind::UnsupportedMode => "unsupported_mode",
            ErrorKind::CapacityExhausted => "capacity_exhausted",
            ErrorKind::SessionExists => "session_exists",
            ErrorKind::UnknownSession => "unknown_session",
            ErrorKind::GenerationMismatch => "generation_mismatch",
            ErrorKind::OperationActive => "operation_active",
            ErrorKind::OperationNotActive => "operation_not_active",
            ErrorKind::StaleReservation => "stale_reservation",
            ErrorKind::ResourceConflict => "resource_conflict",
            ErrorKind::OperationReused => "operation_reused",
            ErrorKind::WrongState => "wrong_state",
            ErrorKind::Full => "full",
            ErrorKind::InvalidId => "invalid_id",
            ErrorKind::InvalidConfig => "invalid_config",
            ErrorKind::InputBackpressure => "input_backpressure",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused transition: the error, and the session back, unchanged.
///
/// Transitions consume the session; when one fails, nothing is lost. It
/// converts into [`Error`] (dropping the session), so `?` works in a
/// function that returns `Result<_, Error>`.
///
/// # Examples
///
/// ```
/// use duplex_core::{Fence, Id, Instant, Session, Open, OpenOptions, ErrorKind};
///
/// let fence = Fence::new(Id::new("s1")?, 0);
/// let session = Session::open(fence.clone(), OpenOptions::default(), Instant::ZERO)?;
/// let wrong = Fence::new(Id::new("s1")?, 9); // another incarnation
/// let rejected = session.detach(&wrong, Instant::ZERO).unwrap_err();
/// assert_eq!(rejected.error.kind(), ErrorKind::FenceMismatch);
/// let session = rejected.session; // still open, unchanged
/// assert_eq!(session.fence(), &fence);
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "a refused transition carries the session back: dropping it drops the session and the requests it owns"]
pub struct Rejected<T> {
    /// Why the transition was refused.
    pub error: Error,
    /// The session, exactly as it was.
    pub session: T,
}

impl<T> Rejected<T> {
    /// Drops the session and keeps the error.
    ///
    /// ```
    /// # use duplex_core::{Rejected, Error};
    /// let r = Rejected { error: Error::OperationActive, session: () };
    /// assert_eq!(r.into_error(), Error::OperationActive);
    /// ```
    pub fn into_error(self) -> Error {
        self.error
    }

    /// The same refusal with the session wrapped or converted by `f` (for
    /// example into an [`AnySession`](crate::AnySession)).
    ///
    /// ```
    /// # use duplex_core::{Rejected, Error};
    /// let r = Rejected { error: Error::OperationActive, session: 1 };
    /// assert_eq!(r.map(|n| n + 1).session, 2);
    /// ```
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Rejected<U> {
        Rejected {
            error: self.error,
            session: f(self.session),
        }
    }
}

impl<T> From<Rejected<T>> for Error {
    fn from(rejected: Rejected<T>) -> Self {
        rejected.error
    }
}

impl<T> fmt::Display for Rejected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "transition refused: {}", self.error)
    }
}

impl<T: fmt::Debug> core::error::Error for Rejected<T> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}
