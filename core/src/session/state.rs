//! Type-level lifecycle states and the sealed traits that group them.
//!
//! Each operation of [`Session`](crate::Session) names the group of states
//! it needs as a bound on the method (`where S: Live`), so misuse is a
//! compile error that prints the group's sentence: [`Attached`] (Open),
//! [`Live`] (Open, Detached), [`Unfinished`] (Open, Detached, Closing) and
//! [`Finalizable`] (Closing). The lifecycle diagram is in the crate docs.

use core::fmt;

pub use crate::base::StateKind;
use crate::lease::CloseReason;
use crate::time::Instant;

pub(crate) mod private {
    use crate::time::Instant;

    /// Seals the state traits: only this crate's markers are states.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a session state: the states are sealed inside duplex-core",
        label = "not one of `Open`, `Detached`, `Closing`, `Closed`"
    )]
    pub trait Sealed {
        /// Since when the client is detached, for grace expiry.
        fn detached_at(&self) -> Option<Instant>;
        /// Why the session is closing or closed.
        fn close_reason(&self) -> Option<crate::CloseReason>;
    }
}

/// Type-level state of a [`Session`](crate::Session). Sealed: the four
/// markers of this crate are the only states.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a session state",
    label = "use one of `Open`, `Detached`, `Closing`, `Closed`",
    note = "session states are sealed: they cannot be implemented outside duplex-core"
)]
pub trait State: private::Sealed + fmt::Debug {
    /// The runtime name of the state.
    const KIND: StateKind;
}

/// The state in which a client is attached and may send input: [`Open`].
///
/// Operations: `detach`, `begin_operation`, `prepare_append`, `append`,
/// `reserve_input`, `reserve_turn`, `decide_overlap`.
#[diagnostic::on_unimplemented(
    message = "this operation needs an attached client (`Open`), but the session is `{Self}`",
    label = "client input is refused in this state",
    note = "a detached session takes no new client input until `resume` returns it `Open`; engine-side work (bind, commit_append, end_operation) may still finish"
)]
pub trait Attached: Live {}

/// States in which the session is alive and takes engine-side work:
/// [`Open`] and [`Detached`].
///
/// Operations: `touch`, `resume`, `resume_idempotent`, `end_operation`,
/// `commit_append`, `completed`, `record_completed`, `reserve`, `bind`,
/// `accept_fence`, `cancel`, `drain`, `replace_configs`, `deadline`, `due`,
/// `expire`, `close`.
#[diagnostic::on_unimplemented(
    message = "this operation needs a live session (`Open` or `Detached`), but the session is `{Self}`",
    label = "not permitted once the session is closing or closed",
    note = "closing is irreversible: a closing session only answers queries, releases (`release`, `release_fence`, `release_drained`, its input and overlap resets), `begin_close` and `finalize`"
)]
pub trait Live: Unfinished {}

/// States whose session still holds its tables: [`Open`], [`Detached`] and
/// [`Closing`].
///
/// Operations: `begin_close`, `release`, `release_fence`,
/// `release_drained`, `route_output`, `draining`, the input releases, the
/// overlap resets, the id queries and the inspection accessors.
#[diagnostic::on_unimplemented(
    message = "this operation needs a session that is not finalized, but the session is `{Self}`",
    label = "a `Closed` session has released everything and only reports its final facts",
    note = "read `fence()`, `close_reason()` or `lease_generation()` instead"
)]
pub trait Unfinished: State {}

/// The state that may be finalized: [`Closing`].
///
/// Operation: `finalize`.
#[diagnostic::on_unimplemented(
    message = "`finalize` needs a `Closing` session, but the session is `{Self}`",
    label = "only a closing session can be finalized",
    note = "call `begin_close(&fence, reason)` first (or `close` to do both): closing keeps the requests for cleanup until `finalize` releases them"
)]
pub trait Finalizable: Unfinished {}

/// Type-level state: the client is attached.
///
/// ```
/// # use duplex_core::{Open, State, StateKind};
/// assert_eq!(Open::KIND, StateKind::Open);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Open;

/// Type-level state: the client is gone; the session waits out the
/// disconnect grace. Client input is refused; engine work in flight may end.
///
/// ```
/// # use duplex_core::*;
/// let f = Fence::new(Id::new("s")?, 0);
/// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
/// let d: Session<Detached> = s.detach(&f, Instant::from_millis(5))?;
/// assert_eq!(d.state().since(), Instant::from_millis(5));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Detached {
    since: Instant,
}

impl Detached {
    pub(crate) const fn new(since: Instant) -> Self {
        Detached { since }
    }

    /// When the client detached.
    ///
    /// See the type-level example.
    pub const fn since(&self) -> Instant {
        self.since
    }
}

/// Type-level state: irreversibly closing. The session still counts for
/// admission and keeps its resources until finalized, so cleanup can retry.
///
/// See [`Closing::reason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Closing {
    reason: CloseReason,
}

impl Closing {
    pub(crate) const fn new(reason: CloseReason) -> Self {
        Closing { reason }
    }

    /// Why the session is closing (the first reason given).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let s = s.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(s.state().reason(), CloseReason::ClientClose);
    /// # Ok::<(), Error>(())
    /// ```
    pub const fn reason(&self) -> CloseReason {
        self.reason
    }
}

/// Type-level state: finalized. Only the final facts can be read.
///
/// ```
/// # use duplex_core::*;
/// let f = Fence::new(Id::new("s")?, 0);
/// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
/// let (closed, ids) = s.begin_close(&f, CloseReason::ExplicitClose)?.finalize();
/// assert!(ids.is_empty());
/// assert_eq!(closed.state().reason(), CloseReason::ExplicitClose);
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Closed {
    reason: CloseReason,
}

impl Closed {
    pub(crate) const fn new(reason: CloseReason) -> Self {
        Closed { reason }
    }

    /// Why the session was closed.
    ///
    /// See the type-level example.
    pub const fn reason(&self) -> CloseReason {
        self.reason
    }
}

impl private::Sealed for Open {
    fn detached_at(&self) -> Option<Instant> {
        None
    }
    fn close_reason(&self) -> Option<CloseReason> {
        None
    }
}
impl private::Sealed for Detached {
    fn detached_at(&self) -> Option<Instant> {
        Some(self.since)
    }
    fn close_reason(&self) -> Option<CloseReason> {
        None
    }
}
impl private::Sealed for Closing {
    fn detached_at(&self) -> Option<Instant> {
        None
    }
    fn close_reason(&self) -> Option<CloseReason> {
        Some(self.reason)
    }
}
impl private::Sealed for Closed {
    fn detached_at(&self) -> Option<Instant> {
        None
    }
    fn close_reason(&self) -> Option<CloseReason> {
        Some(self.reason)
    }
}

impl State for Open {
    const KIND: StateKind = StateKind::Open;
}
impl State for Detached {
    const KIND: StateKind = StateKind::Detached;
}
impl State for Closing {
    const KIND: StateKind = StateKind::Closing;
}
impl State for Closed {
    const KIND: StateKind = StateKind::Closed;
}

impl Attached for Open {}
impl Live for Open {}
impl Live for Detached {}
impl Unfinished for Open {}
impl Unfinished for Detached {}
impl Unfinished for Closing {}
impl Finalizable for Closing {}
