//! Type-level lifecycle states (SPEC §5) and the sealed traits that group them.
//!
//! ```text
//!   ┌─ resume (takeover) ─┐
//!   ▼                     │
//!  Open ─────detach─────▶ Detached
//!   │  ◀─────resume────── │
//!   │                     │
//!   └─ begin_close, expiry ─┬─ begin_close, expiry
//!                           ▼
//!                        Closing ──finalize──▶ Closed
//! ```

use core::fmt;

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

/// States in which the session is alive and takes engine-side work:
/// [`Open`] and [`Detached`].
#[diagnostic::on_unimplemented(
    message = "this operation needs a live session (`Open` or `Detached`), but the session is `{Self}`",
    label = "not permitted once the session is closing or closed",
    note = "SPEC §5: closing is irreversible; only id queries, release, begin_close and finalize remain"
)]
pub trait Live: Unfinished {}

/// States whose session still holds its tables: [`Open`], [`Detached`] and
/// [`Closing`].
#[diagnostic::on_unimplemented(
    message = "this operation needs a session that is not finalized, but the session is `{Self}`",
    label = "a `Closed` session only reports its final facts",
    note = "read `fence()`, `close_reason()` or `lease_generation()` instead"
)]
pub trait Unfinished: State {}

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
/// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
/// let d: Session<Detached> = s.detach(&f, Instant::from_millis(5)).unwrap();
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
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let s = s.begin_close(&f, CloseReason::ClientClose).unwrap();
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
/// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
/// let (closed, ids) = s.begin_close(&f, CloseReason::ExplicitClose).unwrap().finalize();
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
}
impl private::Sealed for Detached {
    fn detached_at(&self) -> Option<Instant> {
        Some(self.since)
    }
}
impl private::Sealed for Closing {
    fn detached_at(&self) -> Option<Instant> {
        None
    }
}
impl private::Sealed for Closed {
    fn detached_at(&self) -> Option<Instant> {
        None
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

impl Live for Open {}
impl Live for Detached {}
impl Unfinished for Open {}
impl Unfinished for Detached {}
impl Unfinished for Closing {}
