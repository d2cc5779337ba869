//! [`AnySession`]: a session in whichever state it is, in one value.
//!
//! The typed API checks the lifecycle at compile time; a program that must
//! keep one session across state changes in one variable (a firmware main
//! loop, a host's session table) holds an `AnySession` instead, borrows it
//! typed (`as_open`, `as_detached_mut`, ...), or calls the same operations
//! dynamically: an operation the current state does not permit returns
//! [`Error::WrongState`] and changes nothing.

use super::state::{Closed, Closing, Detached, Open, StateKind};
use super::{OpenOptions, Session};
use crate::error::{Error, FenceRule};
use crate::fence::{Fence, Stamp};
use crate::id::IdText;
use crate::lease::CloseReason;
use crate::profile::{Conformance, IdOf, Profile};
use crate::requests::RequestIds;
use crate::time::Instant;

/// A session in any of the four states (the rp-hal `DynPin` pattern).
///
/// Every operation, transitions included, works on the session where it
/// sits (`&mut self`): a host keeps one `AnySession` per slot and never
/// moves it to change its state. An operation the state does not permit,
/// or that the session refuses, returns the error and leaves the session
/// exactly as it was.
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
/// session.detach(&f, Instant::from_millis(10))?; // Wi-Fi dropped
/// // Input is refused while detached; nothing changes.
/// let refused = session.append(&f, InputMode::TurnCommitOnly).unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::WrongState);
/// let generation = session.resume(&f, 0, Instant::from_millis(20))?;
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
pub struct AnySession<P: Profile = Conformance> {
    typed: Typed<P>,
}

/// The typed session inside an [`AnySession`], with its close mark.
///
/// Closing changes no storage: a server-profile session is 45 KB, and
/// moving it into a `Session<Closed>` would copy it twice. A closed session
/// stays in the variant it closed from, with the reason in its mark (a
/// byte that sits beside the variant's tag, in what would be padding); it
/// answers only its final facts, and [`AnySession::recycle`] reuses it.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Typed<P: Profile> {
    Open(Session<Open, P>, Option<CloseReason>),
    Detached(Session<Detached, P>, Option<CloseReason>),
    Closing(Session<Closing, P>, Option<CloseReason>),
    /// Only inside [`AnySession::transition`], between taking the session
    /// out and putting the next one back; no transition panics (the
    /// no-panic proof links every one), so no operation ever sees it. It
    /// keeps a fence so that `fence()` has something to lend.
    Vacant(Fence<IdOf<P>>),
}

/// Runs `$body` with `$s` bound to the typed session, whatever its state;
/// `$vacant` for the never-seen vacant slot.
macro_rules! each {
    ($any:expr, $s:ident => $body:expr, vacant => $vacant:expr) => {
        match $any {
            Typed::Open($s, _) => $body,
            Typed::Detached($s, _) => $body,
            Typed::Closing($s, _) => $body,
            Typed::Vacant(_) => $vacant,
        }
    };
}

// After `each!`, so that the dynamic operations can use it.
// The state guards of the dynamic API, shared by its files.
/// Runs `$body` on a live session (Open or Detached), or fails with
/// `wrong_state`.
macro_rules! live {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            Some(Typed::Open($s, _)) => $body,
            Some(Typed::Detached($s, _)) => $body,
            other => Err(wrong_state($op, other.as_deref())),
        }
    };
}

/// Runs `$body` on an unfinished session (Open, Detached or Closing), or
/// fails with `wrong_state`.
macro_rules! unfinished {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            Some(Typed::Open($s, _)) => $body,
            Some(Typed::Detached($s, _)) => $body,
            Some(Typed::Closing($s, _)) => $body,
            other => Err(wrong_state($op, other.as_deref())),
        }
    };
}

/// Runs `$body` on an open session, or fails with `wrong_state`.
macro_rules! open {
    ($any:expr, $op:literal, $s:ident => $body:expr) => {
        match $any {
            Some(Typed::Open($s, _)) => $body,
            other => Err(wrong_state($op, other.as_deref())),
        }
    };
}

mod closing;
mod drain;
mod dynamic;
mod input;
mod overlap;

impl<P: Profile> AnySession<P> {
    /// The one place where an `AnySession` changes state: `step` takes the
    /// typed session by value and returns the next one (or the same one,
    /// refused). Hosts call the transitions; this moves nothing else.
    fn transition<T>(&mut self, step: impl FnOnce(Typed<P>) -> (Typed<P>, T)) -> T {
        let fence = Fence::new(IdOf::<P>::unused(), 0);
        let current = core::mem::replace(&mut self.typed, Typed::Vacant(fence));
        let (next, out) = step(current);
        self.typed = next;
        out
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
        match self.closed() {
            Some(_) => StateKind::Closed,
            None => self.typed.kind(),
        }
    }

    /// The close mark: why the session was closed, if it is.
    fn closed(&self) -> Option<CloseReason> {
        match &self.typed {
            Typed::Open(_, closed) | Typed::Detached(_, closed) | Typed::Closing(_, closed) => {
                *closed
            }
            Typed::Vacant(_) => None,
        }
    }

    /// Marks the session closed for `reason`, where it sits.
    fn mark_closed(&mut self, reason: CloseReason) {
        match &mut self.typed {
            Typed::Open(_, closed) | Typed::Detached(_, closed) | Typed::Closing(_, closed) => {
                *closed = Some(reason);
            }
            Typed::Vacant(_) => {}
        }
    }

    /// The typed session, unless it is closed.
    fn unclosed(&self) -> Option<&Typed<P>> {
        match self.closed() {
            Some(_) => None,
            None => Some(&self.typed),
        }
    }

    /// The typed session, mutably, unless it is closed.
    fn unclosed_mut(&mut self) -> Option<&mut Typed<P>> {
        match self.closed() {
            Some(_) => None,
            None => Some(&mut self.typed),
        }
    }

    /// Why the session is closing or closed (the first reason given);
    /// `None` while it is live.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.close_reason(), None);
    /// let _released = s.close(&f, CloseReason::ClientClose)?;
    /// assert_eq!((s.kind(), s.close_reason()), (StateKind::Closed, Some(CloseReason::ClientClose)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn close_reason(&self) -> Option<CloseReason> {
        match &self.typed {
            Typed::Open(_, closed) | Typed::Detached(_, closed) => *closed,
            Typed::Closing(s, closed) => Some(closed.unwrap_or(s.state().reason())),
            Typed::Vacant(_) => None,
        }
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
    pub fn fence(&self) -> &Fence<IdOf<P>> {
        match &self.typed {
            Typed::Open(s, _) => s.fence(),
            Typed::Detached(s, _) => s.fence(),
            Typed::Closing(s, _) => s.fence(),
            Typed::Vacant(f) => f,
        }
    }

    /// Bytes the session's tables hold on the heap ([`Session::heap_bytes`];
    /// 0 once closed, and always with [`Inline`](crate::storage::Inline) storage).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.heap_bytes(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn heap_bytes(&self) -> usize {
        match &self.typed {
            Typed::Open(s, _) => s.heap_bytes(),
            Typed::Detached(s, _) => s.heap_bytes(),
            Typed::Closing(s, _) => s.heap_bytes(),
            Typed::Vacant(_) => 0,
        }
    }

    /// The session id.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.id().as_str(), "s");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn id(&self) -> &IdOf<P> {
        &self.fence().session
    }

    /// The lease generation: +1 per resume and once on close.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = AnySession::from(Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.lease_generation(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn lease_generation(&self) -> u64 {
        each!(&self.typed, s => s.lease_generation(), vacant => 0)
    }

    /// The control id of the resume that produced the current generation
    /// (see [`Session::resumed_by`]).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.resume_idempotent(&f, 0, &Id::new("c")?, Instant::ZERO)?;
    /// assert_eq!(s.resumed_by(), Some("c"));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resumed_by(&self) -> Option<&str> {
        each!(&self.typed, s => s.resumed_by(), vacant => None)
    }

    /// Checks that the lease is still at `generation` (see
    /// [`Session::check_generation`]).
    ///
    /// # Errors
    ///
    /// [`Error::GenerationMismatch`] if a newer connection holds the lease.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.check_generation(0)?;
    /// s.resume(&f, 0, Instant::ZERO)?; // a second connection takes over
    /// assert_eq!(s.check_generation(0).unwrap_err().kind(), ErrorKind::GenerationMismatch);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn check_generation(&self, generation: u64) -> Result<(), Error> {
        each!(&self.typed, s => s.check_generation(generation), vacant => Err(Error::GenerationMismatch { expected: 0, actual: generation }))
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
    pub fn migrate(&mut self, incarnation: u64, now: Instant) -> Result<&Fence<IdOf<P>>, Error> {
        let current = self.fence().stamp();
        if self.closed().is_some() || matches!(self.typed, Typed::Vacant(_)) {
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
        match &mut self.typed {
            Typed::Open(s, _) => s.lease.last_activity = now,
            Typed::Detached(s, _) => {
                s.lease.last_activity = now;
                s.state = Detached::new(now);
            }
            Typed::Closing(_, _) | Typed::Vacant(_) => {}
        }
        let fence = each!(&mut self.typed, s => &mut s.fence, vacant => return Err(Error::WrongState { operation: "migrate", state: StateKind::Closed }));
        fence.incarnation = incarnation;
        Ok(fence)
    }

    /// Turns this value, whatever its state, into a freshly opened
    /// session in place: the same result as `*self =
    /// AnySession::from(Session::open_with_capacities(fence, options,
    /// now)?)`, reusing the storage (an open session's tables are emptied,
    /// not rebuilt). For hosts that keep sessions in reusable storage (a
    /// slab on a server, a static on a device): the old session is gone,
    /// and nothing of it stays observable.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the completed-append limit is not in
    /// `1..=D`; the old session is then left as it was.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let a = Fence::new(Id::new("a")?, 0);
    /// let mut s = AnySession::from(Session::open(a.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.close(&a, CloseReason::ClientClose)?;
    /// let b = Fence::new(Id::new("b")?, 1);
    /// s.recycle(b.clone(), OpenOptions::default(), Instant::from_millis(5))?;
    /// assert_eq!((s.kind(), s.fence()), (StateKind::Open, &b));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn recycle(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        now: Instant,
    ) -> Result<(), Error> {
        if let Typed::Open(s, closed) = &mut self.typed {
            s.recycle(fence, options, now)?;
            *closed = None;
            return Ok(());
        }
        self.recycle_moved(fence, options, now)
    }

    /// [`recycle`](Self::recycle) of storage in another shape than `Open`:
    /// the one path that moves the session. Kept out of line, so that the
    /// common path's frame stays small (a server-profile session is 45 KB
    /// of stack in any frame that holds one).
    #[cold]
    #[inline(never)]
    fn recycle_moved(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        now: Instant,
    ) -> Result<(), Error> {
        Session::<Open, P>::completed_limit_of(&options)?;
        self.transition(|typed| {
            let open = match typed {
                Typed::Open(s, _) => s,
                Typed::Detached(s, _) => s.into_state(Open),
                Typed::Closing(s, _) => s.into_state(Open),
                vacant @ Typed::Vacant(_) => return (vacant, ()),
            };
            (Typed::Open(open, None), ())
        });
        if let Typed::Open(s, _) = &mut self.typed {
            s.recycle(fence, options, now)
        } else {
            // Only a session that no transition ever left: build one.
            self.typed = Typed::Open(Session::open_with_capacities(fence, options, now)?, None);
            Ok(())
        }
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
    pub fn held_request_ids(&self, ids: &mut RequestIds<P::Tables>) {
        match self.unclosed() {
            Some(Typed::Open(s, _)) => ids.refill(s.resource_request_ids(None, None)),
            Some(Typed::Detached(s, _)) => ids.refill(s.resource_request_ids(None, None)),
            Some(Typed::Closing(s, _)) => ids.refill(s.resource_request_ids(None, None)),
            Some(Typed::Vacant(_)) | None => ids.refill(core::iter::empty::<&IdOf<P>>()),
        }
    }

    /// The session typed as `Open`, if it is.
    ///
    /// See the type-level example.
    pub fn as_open(&self) -> Option<&Session<Open, P>> {
        match self.unclosed() {
            Some(Typed::Open(s, _)) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Open`, mutably, if it is.
    ///
    /// See the type-level example.
    pub fn as_open_mut(&mut self) -> Option<&mut Session<Open, P>> {
        match self.unclosed_mut() {
            Some(Typed::Open(s, _)) => Some(s),
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
    pub fn as_detached(&self) -> Option<&Session<Detached, P>> {
        match self.unclosed() {
            Some(Typed::Detached(s, _)) => Some(s),
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
    pub fn as_detached_mut(&mut self) -> Option<&mut Session<Detached, P>> {
        match self.unclosed_mut() {
            Some(Typed::Detached(s, _)) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Closing`, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(s.as_closing().map(|c| c.state().reason()), Some(CloseReason::ClientClose));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_closing(&self) -> Option<&Session<Closing, P>> {
        match self.unclosed() {
            Some(Typed::Closing(s, _)) => Some(s),
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
    /// s.begin_close(&f, CloseReason::ClientClose)?;
    /// let held = s.as_closing_mut().map(|c| c.release_fence(&f));
    /// assert_eq!(held.map(|ids| ids.len()), Some(1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn as_closing_mut(&mut self) -> Option<&mut Session<Closing, P>> {
        match self.unclosed_mut() {
            Some(Typed::Closing(s, _)) => Some(s),
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
    pub fn into_open(self) -> Result<Session<Open, P>, Self> {
        match self.typed {
            Typed::Open(s, None) => Ok(s),
            typed => Err(AnySession { typed }),
        }
    }
}

macro_rules! from_typed {
    ($($state:ident),*) => {$(
        impl<P: Profile>
            From<Session<$state, P>> for Typed<P>
        {
            fn from(session: Session<$state, P>) -> Self {
                Typed::$state(session, None)
            }
        }

        impl<P: Profile>
            From<Session<$state, P>> for AnySession<P>
        {
            fn from(session: Session<$state, P>) -> Self {
                AnySession { typed: Typed::$state(session, None) }
            }
        }
    )*};
}
from_typed!(Open, Detached, Closing);

impl<P: Profile> From<Session<Closed, P>> for AnySession<P> {
    /// A closed session keeps its storage in the `Closing` shape it was
    /// finalized from; it reads as closed.
    fn from(session: Session<Closed, P>) -> Self {
        let reason = session.close_reason();
        AnySession {
            typed: Typed::Closing(session.into_state(Closing::new(reason)), Some(reason)),
        }
    }
}
