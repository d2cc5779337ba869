//! [`AnySession`]: a session in whichever state it is, in one value.
//!
//! The typed API checks the lifecycle at compile time; a program that must
//! keep one session across state changes in one variable (a firmware main
//! loop, a host's session table) holds an `AnySession` instead, borrows it
//! typed (`as_open`, `as_detached_mut`, ...), or calls the same operations
//! dynamically: an operation the current state does not permit returns
//! [`Error::WrongState`] and changes nothing.

mod dynamic;

use super::state::{Closed, Closing, Detached, Open, StateKind};
use super::Session;
use crate::error::{Error, FenceRule, Rejected};
use crate::fence::{Fence, Stamp};
use crate::id::Id;
use crate::profile::conformance::{
    ACTIVE_OPS, BINDINGS, COMPLETED, ID_LEN, RESOURCES, STAGE_RESULTS,
};
use crate::requests::RequestIds;
use crate::time::Instant;

/// A session in any of the four states (the rp-hal `DynPin` pattern).
///
/// # Examples
///
/// A device main loop keeps its session in one variable:
///
/// ```
/// use duplex_core::*;
///
/// let f = Fence::new(Id::new("kitchen")?, 0);
/// let mut session = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
///
/// session.append(&f, InputMode::TurnCommitOnly)?;
/// session = session.detach(&f, Instant::from_millis(10))?; // Wi-Fi dropped
/// // Input is refused while detached; nothing changes.
/// let refused = session.append(&f, InputMode::TurnCommitOnly).unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::WrongState);
/// let (resumed, generation) = session.resume(&f, 0, Instant::from_millis(20))?;
/// session = resumed;
/// assert_eq!((session.kind(), generation), (StateKind::Open, 1));
///
/// // Typed access when the state is known.
/// if let Some(open) = session.as_open_mut() {
///     open.touch(&f, Activity::Heartbeat, Instant::from_millis(30))?;
/// }
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AnySession<
    SC = (),
    RC = (),
    const R: usize = { RESOURCES },
    const B: usize = { BINDINGS },
    const D: usize = { COMPLETED },
    const A: usize = { ACTIVE_OPS },
    const L: usize = { ID_LEN },
    const K: usize = { STAGE_RESULTS },
> {
    /// Client attached.
    Open(Session<Open, SC, RC, R, B, D, A, L, K>),
    /// Client gone, within grace.
    Detached(Session<Detached, SC, RC, R, B, D, A, L, K>),
    /// Irreversibly closing; resources kept for cleanup.
    Closing(Session<Closing, SC, RC, R, B, D, A, L, K>),
    /// Finalized.
    Closed(Session<Closed, SC, RC, R, B, D, A, L, K>),
}

/// Runs `$body` with `$s` bound to the typed session, whatever its state.
macro_rules! each {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            AnySession::Open($s) => $body,
            AnySession::Detached($s) => $body,
            AnySession::Closing($s) => $body,
            AnySession::Closed($s) => $body,
        }
    };
}

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > AnySession<SC, RC, R, B, D, A, L, K>
{
    /// The session, refused with `wrong_state` for `operation`.
    fn wrong_state(self, operation: &'static str) -> Rejected<Self> {
        Rejected {
            error: Error::WrongState {
                operation,
                state: self.kind(),
            },
            session: self,
        }
    }

    /// The state.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.kind(), StateKind::Open);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn kind(&self) -> StateKind {
        each!(self, s => s.kind())
    }

    /// The current fence.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 3);
    /// let s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.fence(), &f);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn fence(&self) -> &Fence<L> {
        each!(self, s => s.fence())
    }

    /// The session id.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.id().as_str(), "s");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn id(&self) -> &Id<L> {
        each!(self, s => s.id())
    }

    /// The lease generation.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.lease_generation(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn lease_generation(&self) -> u64 {
        each!(self, s => s.lease_generation())
    }

    /// Hands the session to a new owner (another host's manager, or the
    /// same device after a reboot): the fence takes `incarnation`, which
    /// must exceed the current one, so every message still addressed to
    /// the previous owner is refused as [`FenceRule::Identity`] from now on
    /// (the fence is the fencing token). The lease's times restart at
    /// `now`, the new owner's clock (an instant of another clock means
    /// nothing here): the idle TTL counts from `now`, and a detached
    /// session's disconnect grace too. Everything else is kept: epoch,
    /// turn, response, append sequence, completed appends, owned requests,
    /// lease generation and state.
    ///
    /// Returns the new fence.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`] with [`FenceRule::Migration`] if
    /// `incarnation` does not exceed the current one, [`Error::WrongState`]
    /// for a closed session. Nothing changes on error.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let old = Fence::new(Id::new("s")?, 3);
    /// let mut s = AnySession::from(Session::open(old.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&old, 0, &Id::new("tts")?)?;
    /// let new = s.migrate(4, Instant::from_millis(7))?.clone();
    /// assert_eq!(new.incarnation, 4);
    /// assert_eq!(s.as_open().map(|o| o.last_activity()), Some(Instant::from_millis(7)));
    /// // The previous owner's messages are refused; the requests moved along.
    /// assert_eq!(s.append(&old, InputMode::TurnCommitOnly).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// assert!(s.resource_request_ids(None, None)?.contains("tts"));
    /// // An incarnation that does not move forward is refused.
    /// assert!(matches!(s.migrate(4, Instant::ZERO), Err(Error::FenceMismatch { rule: FenceRule::Migration, .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn migrate(&mut self, incarnation: u64, now: Instant) -> Result<&Fence<L>, Error> {
        let current = self.fence().stamp();
        if let AnySession::Closed(_) = self {
            return Err(Error::WrongState {
                operation: "migrate",
                state: StateKind::Closed,
            });
        }
        if incarnation <= current.incarnation {
            return Err(Error::FenceMismatch {
                rule: FenceRule::Migration,
                expected: current,
                actual: Stamp {
                    incarnation,
                    ..current
                },
            });
        }
        match self {
            AnySession::Open(s) => s.lease.last_activity = now,
            AnySession::Detached(s) => {
                s.lease.last_activity = now;
                s.state = Detached::new(now);
            }
            AnySession::Closing(_) | AnySession::Closed(_) => {}
        }
        let fence = each!(self, s => &mut s.fence);
        fence.incarnation = incarnation;
        Ok(fence)
    }

    /// Replaces `ids` with every request id the session holds (unique, in
    /// reservation order; none once closed): what closing it would release.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// let mut ids = RequestIds::new();
    /// s.held_request_ids(&mut ids);
    /// assert!(ids.contains("r"));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn held_request_ids(&self, ids: &mut RequestIds<L, R>) {
        match self {
            AnySession::Open(s) => ids.refill(s.resource_request_ids(None, None)),
            AnySession::Detached(s) => ids.refill(s.resource_request_ids(None, None)),
            AnySession::Closing(s) => ids.refill(s.resource_request_ids(None, None)),
            AnySession::Closed(_) => ids.refill(core::iter::empty()),
        }
    }

    /// The session typed as `Open`, if it is.
    ///
    /// See the type-level example.
    pub fn as_open(&self) -> Option<&Session<Open, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Open(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Open`, mutably, if it is.
    ///
    /// See the type-level example.
    pub fn as_open_mut(&mut self) -> Option<&mut Session<Open, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Open(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Detached`, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?.detach(&f, Instant::from_millis(4))?);
    /// assert_eq!(s.as_detached().map(|d| d.state().since()), Some(Instant::from_millis(4)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_detached(&self) -> Option<&Session<Detached, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Detached(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Detached`, mutably, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?.detach(&f, Instant::ZERO)?);
    /// s.as_detached_mut().map(|d| d.bind(&f, 0, &Id::new("late")?)).transpose()?;
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_detached_mut(&mut self) -> Option<&mut Session<Detached, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Detached(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Closing`, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// let s = s.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(s.as_closing().map(|c| c.state().reason()), Some(CloseReason::ClientClose));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_closing(&self) -> Option<&Session<Closing, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Closing(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Closing`, mutably, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 0, &Id::new("r")?)?;
    /// let mut s = s.begin_close(&f, CloseReason::ClientClose)?;
    /// let held = s.as_closing_mut().map(|c| c.release_fence(&f));
    /// assert_eq!(held.map(|ids| ids.len()), Some(1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_closing_mut(&mut self) -> Option<&mut Session<Closing, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Closing(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Closed`, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// let (s, _released) = s.close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(s.as_closed().map(|c| c.close_reason()), Some(CloseReason::ClientClose));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_closed(&self) -> Option<&Session<Closed, SC, RC, R, B, D, A, L, K>> {
        match self {
            AnySession::Closed(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Open`, by value; the same value back if it is
    /// in another state.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// let open: Session<Open> = s.into_open().unwrap();
    /// # Ok::<(), Error>(())
    /// ```
    #[allow(clippy::result_large_err)]
    pub fn into_open(self) -> Result<Session<Open, SC, RC, R, B, D, A, L, K>, Self> {
        match self {
            AnySession::Open(s) => Ok(s),
            other => Err(other),
        }
    }
}

macro_rules! from_typed {
    ($($state:ident),*) => {$(
        impl<SC, RC, const R: usize, const B: usize, const D: usize, const A: usize, const L: usize, const K: usize>
            From<Session<$state, SC, RC, R, B, D, A, L, K>> for AnySession<SC, RC, R, B, D, A, L, K>
        {
            fn from(session: Session<$state, SC, RC, R, B, D, A, L, K>) -> Self {
                AnySession::$state(session)
            }
        }
    )*};
}
from_typed!(Open, Detached, Closing, Closed);
