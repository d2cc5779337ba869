//! [`SessionManager`]: the sessions of a std host, by id.
//!
//! Four rooms: `table` keeps the sessions (slab and id index),
//! `deadlines` keeps the deadline index, `closing` holds what leaves the
//! manager (close, finalize, expiry, request cleanup), `operations` runs
//! the per-session operations of [`Sessions`](crate::Sessions). This file
//! opens sessions, finds them (`run`, the one lookup every operation goes
//! through) and lends them out.

mod at;
mod closing;
mod deadlines;
mod keys;
mod migrate;
mod operations;
mod table;

use duplex_core::profile::{Conformance, IdOf, Profile, Tables};
use duplex_core::{
    AnySession, Clock, ConfigField, Detached, Error as CoreError, Fence, Instant, Open,
    OpenOptions, Session, StateKind,
};

use crate::error::Error;
use crate::metrics;
use crate::view::SessionView;
use deadlines::Deadlines;
use table::Table;

pub use at::At;
pub use closing::Released;
pub use keys::SessionKey;
pub use migrate::NotImported;

/// Manager-wide settings.
///
/// # Examples
///
/// ```
/// use duplex_std::ManagerConfig;
///
/// let c = ManagerConfig { max_sessions: Some(1_000), completed_append_limit: Some(4) };
/// assert_eq!(ManagerConfig::default().max_sessions, None);
/// # let _ = c;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManagerConfig {
    /// Admission limit; closing sessions count until finalized. `None`: unlimited.
    pub max_sessions: Option<usize>,
    /// Completed-append limit of every session, in `1..=D`. `None`: `D`.
    pub completed_append_limit: Option<usize>,
}

/// The session table of a std host: admission, expiry, request cleanup, and
/// a dynamic API that checks the lifecycle at run time (`wrong_state`) where
/// the core checks it at compile time.
///
/// - Lookups are by id (hash index, O(1)).
/// - Expiry is indexed: [`collect_expired`](Self::collect_expired) costs
///   O(due · log n) and nothing when nothing is due;
///   [`next_deadline`](Self::next_deadline) says when to call it.
/// - Steady-state operations (append, touch, bind, release, completed
///   lookups and records, cancel) do not allocate.
///
/// Session ids are [`Id`](duplex_core::Id)s (every fence carries one); request and operation
/// ids are anything `AsRef<str>`: the [`Id`](duplex_core::Id)s the manager hands out go
/// straight back in, and so does `&str`.
///
/// Generic parameters: the clock `C` and the sessions' profile `P`
/// ([`duplex_core::profile`]: their configurations and capacities).
///
/// # Time is an argument
///
/// Like the core's sessions, the manager takes the time as an argument:
/// [`at(now)`](Self::at) is the manager at that instant, and every
/// operation that needs the time (open, the per-session operations of
/// [`Sessions`](crate::Sessions), expiry, import, typed access) is there.
/// The clock `C` is a convenience: the forms without `now` read it once and
/// call the `at` form. A host that has its own readings (an event loop, a
/// simulator, a foreign runtime) gives the manager no clock (`C = ()`) and
/// passes them in.
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{ManagerConfig, SessionManager, Sessions};
///
/// let mut m = SessionManager::new((), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// m.at(Instant::from_millis(5)).open(f.clone(), OpenOptions::default())?;
/// m.at(Instant::from_millis(9)).detach(&f)?;
/// assert_eq!(m.next_deadline(), Some(Instant::from_millis(30_009)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{ManagerConfig, SessionManager, Sessions};
///
/// let clock = ManualClock::new(Instant::ZERO);
/// let config = ManagerConfig { max_sessions: Some(2), ..ManagerConfig::default() };
/// let mut m = SessionManager::new(&clock, config)?;
///
/// let f = Fence::new(Id::new("s1")?, 0);
/// let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2))?;
/// m.open(f.clone(), OpenOptions::default().lease(lease))?;
/// m.bind(&f, 0, "tts-1")?;
/// m.detach(&f)?;
/// assert_eq!(m.next_deadline(), Some(Instant::from_millis(2_000)));
///
/// clock.advance(Duration::from_secs(2));
/// let expired = m.collect_expired([]);
/// assert_eq!(expired[0].reason, CloseReason::DisconnectGraceExpired);
/// assert_eq!(expired[0].submitted.as_slice(), [Id::new("tts-1")?]);
/// // Closing until the engine has cleaned up; then finalize.
/// let released = m.finalize(&f.session)?;
/// assert_eq!(released.len(), 1);
/// assert!(m.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SessionManager<C, P: Profile = Conformance> {
    clock: C,
    max_sessions: Option<usize>,
    completed_limit: usize,
    table: Table<P>,
    deadlines: Deadlines,
    /// Scratch for the slots one `collect_expired` skips (kept to reuse its
    /// allocation).
    deferred: Vec<u32>,
}

impl<C> SessionManager<C> {
    /// An empty manager of the default profile, without configurations,
    /// reading `clock` (`()`: none, see [`at`](Self::at)). (Other
    /// configuration types or profiles:
    /// [`with_capacities`](Self::with_capacities).)
    ///
    /// # Errors
    ///
    /// `invalid_config` if `max_sessions` is zero or the completed-append
    /// limit is not in `1..=D`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SessionManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// assert!(m.is_empty());
    /// let bad = ManagerConfig { max_sessions: Some(0), ..ManagerConfig::default() };
    /// let err = SessionManager::new(ManualClock::default(), bad).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(clock: C, config: ManagerConfig) -> Result<Self, Error> {
        Self::with_capacities(clock, config)
    }
}

impl<C, P: Profile> SessionManager<C, P> {
    /// An empty manager for any profile (configuration types and capacities),
    /// named by the type.
    ///
    /// # Errors
    ///
    /// As [`new`](SessionManager::new).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// // Sessions carry a voice name as their session configuration.
    /// use duplex_core::profile::Conformance;
    /// let mut m: SessionManager<ManualClock, Conformance<&str>> =
    ///     SessionManager::with_capacities(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("s")?, 0), OpenOptions::new("alto", ()))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacities(clock: C, config: ManagerConfig) -> Result<Self, Error<IdOf<P>>> {
        if config.max_sessions == Some(0) {
            return Err(duplex_core::Error::InvalidConfig {
                field: ConfigField::MaxSessions,
                value: 0,
                expected: "a positive number of sessions, or none",
            }
            .into());
        }
        let capacity = <P::Tables as Tables>::COMPLETED;
        let completed_limit = config.completed_append_limit.unwrap_or(capacity);
        if completed_limit == 0 || completed_limit > capacity {
            return Err(duplex_core::Error::InvalidConfig {
                field: ConfigField::CompletedAppendLimit,
                value: u64::try_from(completed_limit).unwrap_or(u64::MAX),
                expected: "1..=D (the completed-append capacity)",
            }
            .into());
        }
        Ok(SessionManager {
            clock,
            max_sessions: config.max_sessions,
            completed_limit,
            table: Table::new(),
            deadlines: Deadlines::default(),
            deferred: Vec::new(),
        })
    }

    /// The manager at `now`: the operations that take the time, with
    /// `now` as their time (see [Time is an argument](Self#time-is-an-argument)).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.at(Instant::ZERO).open_keyed(f.clone(), OpenOptions::default())?;
    /// m.at(Instant::from_millis(40)).touch(&f, Activity::Heartbeat)?;
    /// assert_eq!(m.get_at(key).unwrap().deadline(), Some(Instant::from_millis(300_040)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn at(&mut self, now: Instant) -> At<'_, C, P> {
        At::new(self, now)
    }

    /// Number of sessions (open, detached and closing).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// assert_eq!(m.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether there is no session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// assert!(m.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// The session ids, in no particular order (closing ones included).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// assert_eq!(m.session_ids().map(Id::as_str).collect::<Vec<_>>(), ["a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn session_ids(&self) -> impl Iterator<Item = &IdOf<P>> {
        self.table.ids()
    }

    /// The session with this id, if any: read it, or borrow it typed with
    /// [`AnySession::as_open`] and friends.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s1")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let s = m.get(&f.session).unwrap();
    /// assert_eq!(s.kind(), StateKind::Open);
    /// assert!(s.as_open().is_some() && s.as_detached().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, session: &IdOf<P>) -> Option<&AnySession<P>> {
        self.table.get(self.table.find(session)?)
    }

    /// Everything observable about a session, as an owned view (allocates;
    /// for inspection and logs, not hot paths).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "req")?;
    /// let view = m.inspect(&f.session).unwrap();
    /// assert_eq!(view.bindings, [(0, Id::new("req")?)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inspect(&self, session: &IdOf<P>) -> Option<SessionView<IdOf<P>>> {
        self.get(session).and_then(SessionView::of)
    }

    /// Runs `op` on the session named `session` (`timed`: `op` has a time,
    /// so it may move the session's deadline); returns its result and, if
    /// the session's deadline may have come earlier, the deadline (for a
    /// reaper that may have to wake).
    #[inline]
    pub(crate) fn run<T>(
        &mut self,
        session: &IdOf<P>,
        timed: bool,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> (Result<T, Error<IdOf<P>>>, Option<Instant>) {
        let found = self
            .table
            .find(session)
            .and_then(|slot| self.run_slot(slot, timed, op));
        if let Some((result, deadline)) = found {
            return (result.map_err(Error::from), deadline);
        }
        metrics::refused(duplex_core::ErrorKind::UnknownSession);
        let unknown = Error::UnknownSession {
            session: session.clone(),
        };
        (Err(unknown), None)
    }

    /// [`run`](Self::run) on the session in `slot`; `None` if the slot is
    /// empty.
    ///
    /// The index holds lower bounds, so only a state change or a deadline
    /// that came earlier than the session's entry (detach, ending the last
    /// operation) touches it; the hot path (append, touch, lookups) does
    /// not. An operation that is not `timed` cannot move the session's
    /// deadline earlier without changing its state (without a time it
    /// cannot record activity, detach or end an operation), so only its
    /// state is compared.
    #[inline]
    fn run_slot<T>(
        &mut self,
        slot: u32,
        timed: bool,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Option<(Result<T, CoreError>, Option<Instant>)> {
        let s = self.table.entry(slot)?.as_mut()?;
        let from = s.kind();
        let result = op(s);
        let to = s.kind();
        if let Err(e) = &result {
            metrics::refused(e.kind());
        }
        let deadline = if from != to {
            tracing::debug!(session = %s.id(), "state={from}=>{to}");
            metrics::moved(from, to);
            self.reschedule(slot)
        } else if timed {
            match s.deadline() {
                Some(t) if self.deadlines.key(slot).is_none_or(|k| t < k) => {
                    self.deadlines.lower_to(slot, t);
                    Some(t)
                }
                _ => None,
            }
        } else {
            None
        };
        Some((result, deadline))
    }

    /// Opens a session at `now`, returning the slot it took.
    pub(super) fn open_slot(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        now: Instant,
    ) -> Result<u32, Error<IdOf<P>>> {
        let hash = self.table.hash(&fence.session);
        if self.table.find_hashed(hash, &fence.session).is_some() {
            return Err(Error::SessionExists {
                session: fence.session,
            });
        }
        if let Some(limit) = self.max_sessions {
            if self.table.len() >= limit {
                metrics::admission_refused();
                return Err(Error::CapacityExhausted { limit });
            }
        }
        tracing::debug!(session = %fence.session, "open");
        let options = options.completed_limit(self.completed_limit);
        let (slot, grew) = self.table.insert(hash, |entry| {
            if let Some(s) = entry.as_mut() {
                // A reused slot: its storage becomes the new session.
                s.recycle(fence, options, now)?;
            } else {
                let session = Session::open_with_capacities(fence, options, now)?;
                *entry = Some(AnySession::from(session));
            }
            Ok::<(), Error<IdOf<P>>>(())
        })?;
        if grew {
            self.deadlines.grow_to(self.table.slot_bound());
        }
        metrics::entered(StateKind::Open);
        self.reschedule(slot);
        Ok(slot)
    }

    /// Runs `f` on the session named `session` if `typed` lends it in the
    /// state `f` takes, then brings its deadline up to date.
    pub(super) fn typed<S, T>(
        &mut self,
        session: &IdOf<P>,
        typed: impl FnOnce(&mut AnySession<P>) -> Option<&mut S>,
        f: impl FnOnce(&mut S) -> T,
    ) -> Option<T> {
        let slot = self.table.find(session)?;
        let out = f(typed(self.table.entry(slot)?.as_mut()?)?);
        self.reschedule(slot);
        Some(out)
    }
}

/// The forms that read the manager's clock: each reads it once and calls
/// the form of [`at`](SessionManager::at).
impl<C: Clock, P: Profile> SessionManager<C, P> {
    /// The clock.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// assert_eq!(m.clock().now(), Instant::ZERO);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The manager at the clock's `now` (see [`at`](Self::at)).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::new(Instant::from_millis(7));
    /// let mut m = SessionManager::new(&clock, ManagerConfig::default())?;
    /// assert_eq!(m.now().time(), Instant::from_millis(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn now(&mut self) -> At<'_, C, P> {
        let now = self.clock.now();
        self.at(now)
    }

    /// Opens a session. The manager's completed-append limit applies.
    ///
    /// # Errors
    ///
    /// `session_exists`, then `capacity_exhausted` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let mut m = SessionManager::new(ManualClock::default(), config)?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// let again = m.open(Fence::new(Id::new("a")?, 1), OpenOptions::default()).unwrap_err();
    /// assert_eq!(again.kind(), ErrorKind::SessionExists);
    /// let full = m.open(Fence::new(Id::new("b")?, 0), OpenOptions::default()).unwrap_err();
    /// assert_eq!(full.kind(), ErrorKind::CapacityExhausted);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.now().open(fence, options)
    }

    /// Typed access to an open session: runs `f` with the session and the
    /// clock's `now`, for code that wants the compile-time lifecycle checks.
    /// `None` if the session is absent or not open.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let seq = m.with_open(&f.session, |s, _now| s.append(&f, InputMode::TurnCommitOnly));
    /// assert_eq!(seq.unwrap()?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_open<T>(
        &mut self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Open, P>, Instant) -> T,
    ) -> Option<T> {
        self.now().with_open(session, f)
    }

    /// Typed access to a detached session (see [`with_open`](Self::with_open)).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// let bound = m.with_detached(&f.session, |s, _| s.bind(&f, 0, &Id::new("late")?));
    /// assert!(bound.unwrap().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_detached<T>(
        &mut self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Detached, P>, Instant) -> T,
    ) -> Option<T> {
        self.now().with_detached(session, f)
    }
}
