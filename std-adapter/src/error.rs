//! Errors of the manager's dynamic API.

use duplex_core::{ErrorKind, Id, Rejected};

/// Why a manager operation failed. A failed operation changes nothing.
///
/// # Examples
///
/// ```
/// use duplex_core::{ErrorKind, Fence, Id, ManualClock, Instant};
/// use duplex_std::{Error, ManagerConfig, SessionManager, Sessions};
///
/// let mut m = SessionManager::new(ManualClock::new(Instant::ZERO), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("nobody")?, 0);
/// let err = m.detach(&f).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::UnknownSession);
/// assert_eq!(err.to_string(), "unknown session \"nobody\"");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error<I = Id> {
    /// The session refused the operation (fence, mode, capacity, lifecycle
    /// state, ...).
    #[error(transparent)]
    Session(#[from] duplex_core::Error),
    /// No session has this id.
    #[error("unknown session {session:?}")]
    UnknownSession {
        /// The id asked for.
        session: I,
    },
    /// `open` with an id that is already open or closing.
    #[error("session {session:?} already exists")]
    SessionExists {
        /// The id.
        session: I,
    },
    /// `open` beyond `max_sessions` (closing sessions count until finalized).
    #[error("session capacity exhausted: limit {limit}")]
    CapacityExhausted {
        /// The limit.
        limit: usize,
    },
}

impl<I> Error<I> {
    /// The stable kind.
    ///
    /// ```
    /// # use duplex_core::{ErrorKind, StateKind};
    /// # use duplex_std::Error;
    /// let e: Error = duplex_core::Error::WrongState { operation: "append", state: StateKind::Detached }.into();
    /// assert_eq!(e.kind(), ErrorKind::WrongState);
    /// assert_eq!(e.to_string(), "append is not permitted while the session is detached");
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Session(e) => e.kind(),
            Error::UnknownSession { .. } => ErrorKind::UnknownSession,
            Error::SessionExists { .. } => ErrorKind::SessionExists,
            Error::CapacityExhausted { .. } => ErrorKind::CapacityExhausted,
        }
    }
}

impl<T, I> From<Rejected<T>> for Error<I> {
    /// The refusal's error (the session in it is dropped), so `?` works on
    /// typed transitions in a function returning this error.
    fn from(rejected: Rejected<T>) -> Self {
        Error::Session(rejected.error)
    }
}
