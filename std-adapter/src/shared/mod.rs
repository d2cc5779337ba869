//! [`SharedManager`]: one session table for many threads.
//!
//! Sessions are sharded by id hash over N shards, each a [`SessionManager`]
//! behind its own mutex, with its own id index and deadline index.
//! Operations on sessions of different shards run in parallel; operations on
//! one session serialize on its shard, so they are linearizable. Admission is
//! global and exact: one atomic counter of reserved slots (sessions, closing
//! ones included, plus outstanding [`AdmissionPermit`]s), reserved with a
//! compare-and-swap before a session is inserted, so `max_sessions` is never
//! exceeded under any interleaving, and a refused open changes nothing.

mod keys;
mod migrate;
mod operations;
mod permit;
mod reaper;

use duplex_core::id::IdText;
use duplex_core::profile::{Conformance, IdOf, Profile};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use duplex_core::{AnySession, Clock, Detached, Fence, Instant, Open, OpenOptions, Session};

use crate::error::Error;
use crate::manager::{ManagerConfig, SessionManager};
use crate::view::SessionView;
use reaper::Wake;

pub use keys::SharedKey;
pub use permit::AdmissionPermit;
pub use reaper::{ReaperStats, ReaperThread};

/// The clock of every shard: the manager's one clock, shared.
#[derive(Debug)]
pub struct SharedClock<C>(Arc<C>);

impl<C> Clone for SharedClock<C> {
    fn clone(&self) -> Self {
        SharedClock(Arc::clone(&self.0))
    }
}

impl<C: Clock> Clock for SharedClock<C> {
    fn now(&self) -> Instant {
        self.0.now()
    }
}

/// One shard: a single-threaded manager (no admission limit of its own).
type Shard<C, P> = Mutex<SessionManager<SharedClock<C>, P>>;

/// The session table of a multi-threaded host: every operation of
/// [`SessionManager`], with the same meaning and errors, through `&self`
/// (share it in an `Arc`).
///
/// - Operations on different sessions proceed in parallel (sessions are
///   sharded by id hash); operations on one session are linearizable.
/// - `max_sessions` counts sessions in every shard, closing ones included,
///   and is never exceeded: a slot is reserved atomically before a session
///   is inserted.
/// - [`admit`](Self::admit) reserves a slot ahead of an open that happens
///   later (after an engine warm-up or a handshake): the
///   [`AdmissionPermit`] becomes the session, or gives the slot back when
///   dropped, so a cancelled or failed task never leaks one.
/// - Cross-shard queries have the single-threaded meaning:
///   [`next_deadline`](Self::next_deadline) is the earliest over all shards
///   (one look per shard, no scan of sessions),
///   [`collect_expired`](Self::collect_expired) visits only what is due.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use duplex_core::*;
/// use duplex_std::{ManagerConfig, MonotonicClock, SharedManager, Sessions};
///
/// let config = ManagerConfig { max_sessions: Some(1_000), ..ManagerConfig::default() };
/// let manager = Arc::new(SharedManager::new(MonotonicClock::new(), config)?);
/// let workers: Vec<_> = (0..4)
///     .map(|t| {
///         let m = Arc::clone(&manager);
///         thread::spawn(move || -> Result<u64, duplex_std::Error> {
///             let f = Fence::new(Id::new(&format!("call-{t}")).unwrap(), 0);
///             m.open(f.clone(), OpenOptions::default())?;
///             let mut seq = 0;
///             for _ in 0..100 {
///                 seq = m.append(&f, InputMode::TurnCommitOnly)?.seq;
///             }
///             Ok(seq)
///         })
///     })
///     .collect();
/// for w in workers {
///     assert_eq!(w.join().unwrap()?, 100);
/// }
/// assert_eq!(manager.len(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SharedManager<C, P: Profile = Conformance> {
    shards: Box<[Shard<C, P>]>,
    clock: SharedClock<C>,
    hasher: foldhash::fast::RandomState,
    max_sessions: Option<usize>,
    /// Sessions in all shards (closing ones included) plus outstanding
    /// permits: what admission counts.
    reserved: AtomicUsize,
    /// Sessions in all shards.
    sessions: AtomicUsize,
    /// Tells a sleeping reaper that a deadline earlier than the one it
    /// sleeps toward appeared.
    wake: Wake,
}

/// Locks a shard. A panic while a shard was locked can only come from a
/// host callback inside typed access (the manager's own operations do not
/// panic); the session table itself is left consistent by every operation,
/// so the lock is taken over rather than poisoning every later call.
fn lock<T>(shard: &Mutex<T>) -> MutexGuard<'_, T> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The default number of shards: four per available core (what
/// [`SharedManager::new`] uses; pass it to
/// [`with_capacities`](SharedManager::with_capacities) for other types).
///
/// ```
/// assert!(duplex_std::default_shards() >= 4);
/// ```
pub fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get() * 4)
}

impl<C: Clock> SharedManager<C> {
    /// A shared manager of the default profile, without configurations,
    /// with four shards per available core. (Other types or profiles:
    /// [`with_capacities`](Self::with_capacities).)
    ///
    /// # Errors
    ///
    /// As [`SessionManager::new`](crate::SessionManager::new).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// assert!(m.is_empty() && m.shards() >= 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(clock: C, config: ManagerConfig) -> Result<Self, Error> {
        Self::with_capacities(clock, config, default_shards())
    }

    /// As [`new`](SharedManager::new), with `shards` shards (at least one).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::new`](crate::SessionManager::new).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::with_shards(MonotonicClock::new(), ManagerConfig::default(), 8)?;
    /// assert_eq!(m.shards(), 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_shards(clock: C, config: ManagerConfig, shards: usize) -> Result<Self, Error> {
        Self::with_capacities(clock, config, shards)
    }
}

impl<C: Clock, P: Profile> SharedManager<C, P> {
    /// A shared manager for any profile (configuration types and capacities)
    /// (named by the type), with `shards` shards (at least one).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::new`](crate::SessionManager::new).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// use duplex_core::profile::Conformance;
    /// let m: SharedManager<ManualClock, Conformance<&str>> =
    ///     SharedManager::with_capacities(ManualClock::default(), ManagerConfig::default(), 2)?;
    /// m.open(Fence::new(Id::new("s")?, 0), OpenOptions::new("alto", ()))?;
    /// assert_eq!(m.shards(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacities(
        clock: C,
        config: ManagerConfig,
        shards: usize,
    ) -> Result<Self, Error<IdOf<P>>> {
        let clock = SharedClock(Arc::new(clock));
        // Admission is global; each shard checks everything else.
        let shard_config = ManagerConfig {
            max_sessions: None,
            ..config
        };
        // Validates the configuration once (the same errors as the
        // single-threaded manager, `max_sessions` included).
        SessionManager::<_, P>::with_capacities(clock.clone(), config)?;
        let shards = (0..shards.max(1))
            .map(|_| SessionManager::with_capacities(clock.clone(), shard_config).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?
            .into_boxed_slice();
        Ok(SharedManager {
            shards,
            clock,
            hasher: foldhash::fast::RandomState::default(),
            max_sessions: config.max_sessions,
            reserved: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            wake: Wake::default(),
        })
    }

    /// The number of shards.
    ///
    /// See [`with_capacities`](Self::with_capacities).
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The clock.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::new(Instant::from_millis(5)), ManagerConfig::default())?;
    /// assert_eq!(m.clock().now(), Instant::from_millis(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock.0
    }

    /// Number of sessions in all shards (open, detached and closing).
    ///
    /// See the type-level example.
    pub fn len(&self) -> usize {
        self.sessions.load(Ordering::Acquire)
    }

    /// Whether there is no session.
    ///
    /// See [`new`](SharedManager::new).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Admission slots in use: sessions plus outstanding permits. Never
    /// above `max_sessions`.
    ///
    /// See [`admit`](Self::admit).
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Acquire)
    }

    /// The shard that holds (or would hold) `session`, in `0..shards()`:
    /// sessions of different shards never wait for each other (a host can
    /// use it for thread affinity).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::with_shards(MonotonicClock::new(), ManagerConfig::default(), 4)?;
    /// assert!(m.shard_of(&Id::new("call-1")?) < 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shard_of(&self, session: &IdOf<P>) -> usize {
        self.shard_index(session)
    }

    /// The index of the shard that holds (or will hold) `session`.
    fn shard_index(&self, session: &IdOf<P>) -> usize {
        self.hasher.hash_one(session.as_bytes()) as usize % self.shards.len()
    }

    /// The shard that holds (or will hold) `session`.
    fn shard(&self, session: &IdOf<P>) -> &Shard<C, P> {
        // `index < len` by construction; `shards` is never empty.
        &self.shards[self.shard_index(session)]
    }

    /// After an operation on `session` that may have brought its deadline
    /// earlier: tells the reaper if it is now earlier than what the reaper
    /// sleeps toward. Called with the shard locked.
    fn deadline_may_be_earlier(
        &self,
        shard: &SessionManager<SharedClock<C>, P>,
        session: &IdOf<P>,
    ) {
        if let Some(deadline) = shard.get(session).and_then(AnySession::deadline) {
            self.wake.earlier(deadline);
        }
    }

    /// Reserves one admission slot, or fails with `capacity_exhausted`.
    fn reserve_slot(&self) -> Result<(), Error<IdOf<P>>> {
        let Some(limit) = self.max_sessions else {
            self.reserved.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        };
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| {
                tracing::debug!(limit, "admission refused");
                crate::metrics::admission_refused();
                Error::CapacityExhausted { limit }
            })
    }

    /// Gives back `n` admission slots.
    fn unreserve(&self, n: usize) {
        self.reserved.fetch_sub(n, Ordering::AcqRel);
    }

    /// `n` sessions left the table: their slots are free again.
    fn left(&self, n: usize) {
        if n > 0 {
            self.sessions.fetch_sub(n, Ordering::AcqRel);
            self.unreserve(n);
        }
    }

    /// Opens a session in an already reserved slot (the slot stays reserved
    /// on success; the caller gives it back on error).
    fn open_reserved(
        &self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<(), Error<IdOf<P>>> {
        let session = fence.session.clone();
        let mut shard = lock(self.shard(&session));
        shard.open(fence, options)?;
        self.sessions.fetch_add(1, Ordering::AcqRel);
        self.deadline_may_be_earlier(&shard, &session);
        Ok(())
    }

    /// Opens a session.
    ///
    /// # Errors
    ///
    /// `session_exists`, then `capacity_exhausted` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let m = SharedManager::new(ManualClock::default(), config)?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// let again = m.open(Fence::new(Id::new("a")?, 1), OpenOptions::default()).unwrap_err();
    /// assert_eq!(again.kind(), ErrorKind::SessionExists);
    /// let full = m.open(Fence::new(Id::new("b")?, 0), OpenOptions::default()).unwrap_err();
    /// assert_eq!(full.kind(), ErrorKind::CapacityExhausted);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        &self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.open_keyed(fence, options).map(|_| ())
    }

    /// Reserves an admission slot now, for a session opened later: the
    /// permit opens it, or gives the slot back when dropped (a cancelled or
    /// failed task never leaks a slot).
    ///
    /// # Errors
    ///
    /// `capacity_exhausted`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let m = Arc::new(SharedManager::new(ManualClock::default(), config)?);
    /// let permit = m.admit()?;
    /// assert_eq!(m.admit().unwrap_err().kind(), ErrorKind::CapacityExhausted);
    /// drop(permit); // e.g. the handshake task was cancelled
    /// assert_eq!(m.reserved(), 0);
    /// m.admit()?.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// assert_eq!((m.len(), m.reserved()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn admit(self: &Arc<Self>) -> Result<AdmissionPermit<C, P>, Error<IdOf<P>>> {
        self.reserve_slot()?;
        Ok(AdmissionPermit::new(Arc::clone(self)))
    }

    /// Reserves an admission slot for the session `session` names, for a
    /// host that knows the id before it has everything to open it (a
    /// gateway drawing the session's resume secret, a handshake still
    /// authenticating): refuses in the manager's order, `session_exists`
    /// before `capacity_exhausted`, without the caller restating it. The
    /// permit's [`open`](AdmissionPermit::open) checks existence again,
    /// since another open of the id may have come first meanwhile.
    ///
    /// # Errors
    ///
    /// `session_exists`, then `capacity_exhausted`; nothing is reserved.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let m = Arc::new(SharedManager::new(ManualClock::default(), config)?);
    /// let a = Id::new("a")?;
    /// m.admit_for(&a)?.open(Fence::new(a.clone(), 0), OpenOptions::default())?;
    /// // Full, and `a` exists: the manager's order names the existing session.
    /// assert_eq!(m.admit_for(&a).unwrap_err().kind(), ErrorKind::SessionExists);
    /// assert_eq!(m.admit_for(&Id::new("b")?).unwrap_err().kind(), ErrorKind::CapacityExhausted);
    /// assert_eq!(m.reserved(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn admit_for(
        self: &Arc<Self>,
        session: &IdOf<P>,
    ) -> Result<AdmissionPermit<C, P>, Error<IdOf<P>>> {
        let shard = lock(self.shard(session));
        if shard.get(session).is_some() {
            return Err(Error::SessionExists {
                session: session.clone(),
            });
        }
        self.reserve_slot()?;
        drop(shard);
        Ok(AdmissionPermit::new(Arc::clone(self)))
    }

    /// The session ids in every shard (closing ones included), in no
    /// particular order; owned, since each shard is unlocked before the
    /// next is read.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// m.open(Fence::new(Id::new("b")?, 0), OpenOptions::default())?;
    /// let mut ids = m.session_ids();
    /// ids.sort();
    /// assert_eq!(ids, [Id::new("a")?, Id::new("b")?]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn session_ids(&self) -> Vec<IdOf<P>> {
        let mut out = Vec::with_capacity(self.len());
        for shard in &*self.shards {
            out.extend(lock(shard).session_ids().cloned());
        }
        out
    }

    /// Everything observable about a session, as owned values. See
    /// [`SessionManager::inspect`](crate::SessionManager::inspect).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.inspect(&f.session).map(|s| s.state), Some(StateKind::Open));
    /// assert!(m.inspect(&Id::new("nobody")?).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inspect(&self, session: &IdOf<P>) -> Option<SessionView<IdOf<P>>> {
        self.on(session, |m| m.inspect(session))
    }

    /// Reads the session with `f` while its shard is locked; `None` if
    /// there is no such session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.with_session(&f.session, |s| s.kind()), Some(StateKind::Open));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_session<T>(
        &self,
        session: &IdOf<P>,
        f: impl FnOnce(&AnySession<P>) -> T,
    ) -> Option<T> {
        self.on(session, |m| m.get(session).map(f))
    }

    /// Typed access to an open session while its shard is locked. See
    /// [`SessionManager::with_open`](crate::SessionManager::with_open).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let seq = m.with_open(&f.session, |s, _now| s.append(&f, InputMode::TurnCommitOnly));
    /// assert_eq!(seq.unwrap()?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_open<T>(
        &self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Open, P>, Instant) -> T,
    ) -> Option<T> {
        self.on(session, |m| {
            let out = m.with_open(session, f);
            self.deadline_may_be_earlier(m, session);
            out
        })
    }

    /// Typed access to a detached session while its shard is locked. See
    /// [`SessionManager::with_detached`](crate::SessionManager::with_detached).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// let bound = m.with_detached(&f.session, |s, _| s.bind(&f, 0, &Id::new("late")?));
    /// assert!(bound.unwrap().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_detached<T>(
        &self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Detached, P>, Instant) -> T,
    ) -> Option<T> {
        self.on(session, |m| {
            let out = m.with_detached(session, f);
            self.deadline_may_be_earlier(m, session);
            out
        })
    }

    /// Runs `op` on the shard of `session`.
    fn on<T>(
        &self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut SessionManager<SharedClock<C>, P>) -> T,
    ) -> T {
        op(&mut lock(self.shard(session)))
    }
}

mod guarantees {
    use duplex_core::ManualClock;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    use super::{AdmissionPermit, SharedManager};
    use crate::MonotonicClock;

    // Shared across threads (and tokio tasks) with a thread-safe clock and
    // configurations; permits can be held across awaits on any worker.
    assert_impl_all!(SharedManager<MonotonicClock>: Send, Sync);
    assert_impl_all!(AdmissionPermit<MonotonicClock, duplex_core::profile::Conformance>: Send, Sync);
    // The manual clock is a `Cell` (it works on devices without 64-bit
    // atomics), so a manager over it stays on one thread.
    assert_not_impl_any!(SharedManager<ManualClock>: Sync);
}
