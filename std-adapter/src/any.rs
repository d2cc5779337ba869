//! [`AnySession`]: a session in any unfinished state, for code that must
//! store sessions of different states together (the manager's table).

use duplex_core::{
    CloseReason, Closing, Detached, Fence, Id, Instant, Modes, Open, Session, StateKind, Unfinished,
};

/// A typed core session in the state named by `S`, with this crate's generics.
pub type Typed<
    S,
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
> = Session<S, SC, RC, R, B, D, A, L, K>;

/// The state-tagged session. `Vacant` marks a free slot of the manager (its
/// allocation is kept for the next open) and a session mid-transition; it
/// is never observable from outside this crate.
#[derive(Debug)]
pub(crate) enum Inner<
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
> {
    Open(Typed<Open, SC, RC, R, B, D, A, L, K>),
    Detached(Typed<Detached, SC, RC, R, B, D, A, L, K>),
    Closing(Typed<Closing, SC, RC, R, B, D, A, L, K>),
    Vacant,
}

/// A session that is `Open`, `Detached` or `Closing` (a `Closed` session has
/// left the manager). Read it here; borrow it typed with
/// [`as_open`](Self::as_open) and friends.
///
/// # Examples
///
/// ```
/// use duplex_core::{Fence, Id, Instant, ManualClock, OpenOptions, StateKind};
/// use duplex_std::{ManagerConfig, SessionManager};
///
/// let mut m: SessionManager<ManualClock> =
///     SessionManager::new(ManualClock::new(Instant::ZERO), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s1")?, 0);
/// m.open(f.clone(), OpenOptions::default())?;
/// let s = m.get(&f.session).unwrap();
/// assert_eq!(s.kind(), StateKind::Open);
/// assert!(s.as_open().is_some() && s.as_detached().is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AnySession<
    SC = (),
    RC = (),
    const R: usize = 8,
    const B: usize = 4,
    const D: usize = 8,
    const A: usize = 4,
    const L: usize = 32,
    const K: usize = 4,
> {
    pub(crate) inner: Inner<SC, RC, R, B, D, A, L, K>,
}

/// Everything observable about a session, as plain owned values: for
/// inspection, logs and comparing a session before and after an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot<const L: usize = 32> {
    /// The state.
    pub state: StateKind,
    /// The current fence.
    pub fence: Fence<L>,
    /// Input sequence of the epoch.
    pub input_seq: u64,
    /// Turn-local input sequence.
    pub input_turn_seq: u64,
    /// Lease generation.
    pub lease_generation: u64,
    /// Configuration generation.
    pub config_generation: u64,
    /// Last lease activity.
    pub last_activity: Instant,
    /// When the client detached (Detached only).
    pub detached_at: Option<Instant>,
    /// Active operations, sorted.
    pub active_operations: Vec<Id<L>>,
    /// Stage bindings `(stage, request)`, in binding order.
    pub bindings: Vec<(u32, Id<L>)>,
    /// Resources `(stage, request, submitted)`, in reservation order.
    pub resources: Vec<(u32, Id<L>, bool)>,
    /// Completed-append operation ids, oldest first.
    pub completed: Vec<Id<L>>,
    /// Why it is closing (Closing only).
    pub close_reason: Option<CloseReason>,
    /// Input modes.
    pub modes: Modes,
}

fn snapshot_of<
    S: Unfinished,
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
>(
    s: &Typed<S, SC, RC, R, B, D, A, L, K>,
    detached_at: Option<Instant>,
    close_reason: Option<CloseReason>,
) -> Snapshot<L> {
    let mut active_operations: Vec<Id<L>> = s.active_operations().cloned().collect();
    active_operations.sort();
    Snapshot {
        state: s.kind(),
        fence: s.fence().clone(),
        input_seq: s.input_seq(),
        input_turn_seq: s.input_turn_seq(),
        lease_generation: s.lease_generation(),
        config_generation: s.config_generation(),
        last_activity: s.last_activity(),
        detached_at,
        active_operations,
        bindings: s.bindings().map(|(st, r)| (st, r.clone())).collect(),
        resources: s
            .resources()
            .map(|(st, r, sub)| (st, r.clone(), sub))
            .collect(),
        completed: s.completed_operations().cloned().collect(),
        close_reason,
        modes: s.modes(),
    }
}

/// Runs `$body` with `$s` bound to the typed session, whatever its state.
macro_rules! any_state {
    ($inner:expr, $s:ident => $body:expr) => {
        match $inner {
            Inner::Open($s) => $body,
            Inner::Detached($s) => $body,
            Inner::Closing($s) => $body,
            Inner::Vacant => unreachable!("a vacant slot is never observed"),
        }
    };
}
pub(crate) use any_state;

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
    /// The state.
    ///
    /// See the type-level example.
    pub fn kind(&self) -> StateKind {
        any_state!(&self.inner, s => s.kind())
    }

    /// The current fence.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 3);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.get(&f.session).unwrap().fence(), &f);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fence(&self) -> &Fence<L> {
        any_state!(&self.inner, s => s.fence())
    }

    /// When the lease expires if nothing happens (none while closing).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.get(&f.session).unwrap().deadline(), Some(Instant::from_millis(300_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn deadline(&self) -> Option<Instant> {
        match &self.inner {
            Inner::Open(s) => s.deadline(),
            Inner::Detached(s) => s.deadline(),
            Inner::Closing(_) | Inner::Vacant => None,
        }
    }

    /// Everything observable, as owned values (allocates; not for hot paths).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "req")?;
    /// let snap = m.get(&f.session).unwrap().snapshot();
    /// assert_eq!(snap.bindings, [(0, Id::new("req")?)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot<L> {
        match &self.inner {
            Inner::Open(s) => snapshot_of(s, None, None),
            Inner::Detached(s) => snapshot_of(s, Some(s.state().since()), None),
            Inner::Closing(s) => snapshot_of(s, None, Some(s.state().reason())),
            Inner::Vacant => unreachable!("a vacant slot is never observed"),
        }
    }

    /// The session typed as `Open`, if it is.
    ///
    /// See the type-level example.
    pub fn as_open(&self) -> Option<&Typed<Open, SC, RC, R, B, D, A, L, K>> {
        match &self.inner {
            Inner::Open(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Detached`, if it is.
    ///
    /// See the type-level example.
    pub fn as_detached(&self) -> Option<&Typed<Detached, SC, RC, R, B, D, A, L, K>> {
        match &self.inner {
            Inner::Detached(s) => Some(s),
            _ => None,
        }
    }

    /// The session typed as `Closing`, if it is.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::ClientClose)?;
    /// let closing = m.get(&f.session).unwrap().as_closing().unwrap();
    /// assert_eq!(closing.state().reason(), CloseReason::ClientClose);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_closing(&self) -> Option<&Typed<Closing, SC, RC, R, B, D, A, L, K>> {
        match &self.inner {
            Inner::Closing(s) => Some(s),
            _ => None,
        }
    }
}
