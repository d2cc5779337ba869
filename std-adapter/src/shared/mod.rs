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

mod permit;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use duplex_core::profile::conformance::{
    ACTIVE_OPS, BINDINGS, COMPLETED, ID_LEN, RESOURCES, STAGE_RESULTS,
};
use duplex_core::{
    Activity, AnySession, Appended, Clock, CloseReason, Detached, Fence, Finality, Id, InputMode,
    Instant, Open, OpenOptions, RequestIds, RequestState, Reservation, Session,
};

use crate::error::Error;
use crate::manager::{Expiry, ManagerConfig, Released, SessionManager};
use crate::snapshot::Snapshot;

pub use permit::AdmissionPermit;

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
type Shard<
    C,
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
> = Mutex<SessionManager<SharedClock<C>, SC, RC, R, B, D, A, L, K>>;

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
/// use duplex_std::{ManagerConfig, MonotonicClock, SharedManager};
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
pub struct SharedManager<
    C,
    SC = (),
    RC = (),
    const R: usize = { RESOURCES },
    const B: usize = { BINDINGS },
    const D: usize = { COMPLETED },
    const A: usize = { ACTIVE_OPS },
    const L: usize = { ID_LEN },
    const K: usize = { STAGE_RESULTS },
> {
    shards: Box<[Shard<C, SC, RC, R, B, D, A, L, K>]>,
    clock: SharedClock<C>,
    hasher: foldhash::fast::RandomState,
    max_sessions: Option<usize>,
    /// Sessions in all shards (closing ones included) plus outstanding
    /// permits: what admission counts.
    reserved: AtomicUsize,
    /// Sessions in all shards.
    sessions: AtomicUsize,
}

/// Locks a shard. A panic while a shard was locked can only come from a
/// host callback inside typed access (the manager's own operations do not
/// panic); the session table itself is left consistent by every operation,
/// so the lock is taken over rather than poisoning every later call.
fn lock<T>(shard: &Mutex<T>) -> MutexGuard<'_, T> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The default number of shards: four per available core.
fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get() * 4)
}

impl<C: Clock> SharedManager<C> {
    /// A shared manager of the default profile, without configurations,
    /// with four shards per available core. (Other types or profiles:
    /// [`with_capacities`](Self::with_capacities).)
    ///
    /// # Errors
    ///
    /// As [`SessionManager::new`].
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
    /// As [`SessionManager::new`].
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

impl<
        C: Clock,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > SharedManager<C, SC, RC, R, B, D, A, L, K>
{
    /// A shared manager for any configuration types and capacity profile
    /// (named by the type), with `shards` shards (at least one).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::new`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m: SharedManager<ManualClock, &str, ()> =
    ///     SharedManager::with_capacities(ManualClock::default(), ManagerConfig::default(), 2)?;
    /// m.open(Fence::new(Id::new("s")?, 0), OpenOptions::new("alto", ()))?;
    /// assert_eq!(m.shards(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacities(
        clock: C,
        config: ManagerConfig,
        shards: usize,
    ) -> Result<Self, Error<L>> {
        let clock = SharedClock(Arc::new(clock));
        // Admission is global; each shard checks everything else.
        let shard_config = ManagerConfig {
            max_sessions: None,
            ..config
        };
        // Validates the configuration once (the same errors as the
        // single-threaded manager, `max_sessions` included).
        SessionManager::<_, SC, RC, R, B, D, A, L, K>::with_capacities(clock.clone(), config)?;
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

    /// The shard that holds (or will hold) `session`.
    fn shard(&self, session: &Id<L>) -> &Shard<C, SC, RC, R, B, D, A, L, K> {
        let index = self.hasher.hash_one(session.as_bytes()) as usize % self.shards.len();
        // `index < len` by construction; `shards` is never empty.
        &self.shards[index]
    }

    /// Reserves one admission slot, or fails with `capacity_exhausted`.
    fn reserve_slot(&self) -> Result<(), Error<L>> {
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
    fn open_reserved(&self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
        let mut shard = lock(self.shard(&fence.session));
        shard.open(fence, options)?;
        self.sessions.fetch_add(1, Ordering::AcqRel);
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
    pub fn open(&self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
        let mut shard = lock(self.shard(&fence.session));
        // `session_exists` comes before `capacity_exhausted`; under the
        // shard lock no other open of this id can interleave.
        if shard.get(&fence.session).is_some() {
            return Err(Error::SessionExists {
                session: fence.session,
            });
        }
        self.reserve_slot()?;
        match shard.open(fence, options) {
            Ok(()) => {
                self.sessions.fetch_add(1, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                self.unreserve(1);
                Err(e)
            }
        }
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
    pub fn admit(
        self: &Arc<Self>,
    ) -> Result<AdmissionPermit<C, SC, RC, R, B, D, A, L, K>, Error<L>> {
        self.reserve_slot()?;
        Ok(AdmissionPermit::new(Arc::clone(self)))
    }

    /// Runs `op` on the shard of `session`.
    fn on<T>(
        &self,
        session: &Id<L>,
        op: impl FnOnce(&mut SessionManager<SharedClock<C>, SC, RC, R, B, D, A, L, K>) -> T,
    ) -> T {
        op(&mut lock(self.shard(session)))
    }

    /// Records activity. See [`SessionManager::touch`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::touch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.touch(&f, Activity::Heartbeat)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn touch(&self, fence: &Fence<L>, activity: Activity) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.touch(fence, activity))
    }

    /// The client went away. See [`SessionManager::detach`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::detach`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.resume(&f, 0)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(&self, fence: &Fence<L>) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.detach(fence))
    }

    /// Resume or takeover. See [`SessionManager::resume`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::resume`].
    ///
    /// See [`detach`](Self::detach).
    pub fn resume(&self, fence: &Fence<L>, expected_generation: u64) -> Result<u64, Error<L>> {
        self.on(&fence.session, |m| m.resume(fence, expected_generation))
    }

    /// Starts a lease operation. See [`SessionManager::begin_operation`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::begin_operation`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen")?;
    /// m.end_operation(&f, "gen")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_operation(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.begin_operation(fence, operation))
    }

    /// Ends a lease operation. See [`SessionManager::end_operation`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::end_operation`].
    ///
    /// See [`begin_operation`](Self::begin_operation).
    pub fn end_operation(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.end_operation(fence, operation))
    }

    /// Appends input. See [`SessionManager::append`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::append`].
    ///
    /// See the type-level example.
    pub fn append(&self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error<L>> {
        self.on(&fence.session, |m| m.append(fence, mode))
    }

    /// Phase one of an append. See [`SessionManager::prepare_append`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::prepare_append`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let r = m.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(m.commit_append(&r)?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare_append(
        &self,
        fence: &Fence<L>,
        mode: InputMode,
    ) -> Result<Reservation<L>, Error<L>> {
        self.on(&fence.session, |m| m.prepare_append(fence, mode))
    }

    /// Phase two of an append. See [`SessionManager::commit_append`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::commit_append`].
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&self, reservation: &Reservation<L>) -> Result<Appended, Error<L>> {
        self.on(&reservation.fence().session, |m| {
            m.commit_append(reservation)
        })
    }

    /// Looks up a completed append; the results come back owned (the
    /// shard is unlocked before this returns). See
    /// [`SessionManager::completed`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::completed`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let chunk = InputMode::AppendAudioChunk;
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op", chunk, Finality::Partial, &[3])?;
    /// assert_eq!(m.completed(&f, "op", chunk, Finality::Partial)?, Some(vec![3]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<Vec<i64>>, Error<L>> {
        self.on(&fence.session, |m| {
            m.completed(fence, operation, mode, finality)
                .map(|r| r.map(<[i64]>::to_vec))
        })
    }

    /// Looks up a completed append and hands the results to `f` while the
    /// shard is locked (no allocation). See [`SessionManager::completed`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::completed`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let chunk = InputMode::AppendAudioChunk;
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op", chunk, Finality::Partial, &[3, 4])?;
    /// let sum = m.completed_with(&f, "op", chunk, Finality::Partial, |r| r.map(|r| r.iter().sum::<i64>()))?;
    /// assert_eq!(sum, Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed_with<T>(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        f: impl FnOnce(Option<&[i64]>) -> T,
    ) -> Result<T, Error<L>> {
        self.on(&fence.session, |m| {
            m.completed(fence, operation, mode, finality).map(f)
        })
    }

    /// Records a completed append. See [`SessionManager::record_completed`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::record_completed`].
    ///
    /// See [`completed`](Self::completed).
    pub fn record_completed(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| {
            m.record_completed(fence, operation, mode, finality, results)
        })
    }

    /// Reserves a stage request. See [`SessionManager::reserve`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::reserve`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve(&f, 0, "r0")?;
    /// m.bind(&f, 1, "r1")?;
    /// assert_eq!(m.resource_request_ids(&f.session, None, Some(RequestState::Reserved))?.len(), 1);
    /// assert_eq!(m.stage_request_ids(&f.session, None)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.reserve(fence, stage, request))
    }

    /// Binds a stage request. See [`SessionManager::bind`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::bind`].
    ///
    /// See [`reserve`](Self::reserve).
    pub fn bind(
        &self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.bind(fence, stage, request))
    }

    /// Request ids of the stage bindings. See
    /// [`SessionManager::stage_request_ids`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::stage_request_ids`].
    ///
    /// See [`reserve`](Self::reserve).
    pub fn stage_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(session, |m| m.stage_request_ids(session, fence))
    }

    /// Unique request ids of the resources. See
    /// [`SessionManager::resource_request_ids`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::resource_request_ids`].
    ///
    /// See [`reserve`](Self::reserve).
    pub fn resource_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(session, |m| m.resource_request_ids(session, fence, state))
    }

    /// Drops the bindings and resources with these request ids. See
    /// [`SessionManager::release`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::release`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// m.release(&f.session, &["r0"])?;
    /// m.bind(&f, 0, "r1")?;
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release<I: AsRef<str>>(
        &self,
        session: &Id<L>,
        request_ids: &[I],
    ) -> Result<(), Error<L>> {
        self.on(session, |m| m.release(session, request_ids))
    }

    /// Returns and drops the requests held at exactly `fence`. See
    /// [`SessionManager::release_fence`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::release_fence`].
    ///
    /// See [`release`](Self::release).
    pub fn release_fence(&self, fence: &Fence<L>) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(&fence.session, |m| m.release_fence(fence))
    }

    /// Validates and accepts a fence. See [`SessionManager::accept_fence`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::accept_fence`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "tts")?;
    /// m.accept_fence(&f.clone().with_turn(1))?;
    /// let next = f.clone().with_epoch(1);
    /// assert_eq!(m.cancel(&f.clone().with_turn(1), &next)?.len(), 0);
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn accept_fence(&self, fence: &Fence<L>) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.accept_fence(fence))
    }

    /// Barge-in. See [`SessionManager::cancel`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::cancel`].
    ///
    /// See [`accept_fence`](Self::accept_fence).
    pub fn cancel(
        &self,
        cancelled: &Fence<L>,
        next: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.on(&cancelled.session, |m| m.cancel(cancelled, next))
    }

    /// Publishes new configurations. See [`SessionManager::replace_configs`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::replace_configs`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m: SharedManager<ManualClock, u8, u8> =
    ///     SharedManager::with_capacities(ManualClock::default(), ManagerConfig::default(), 2)?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::new(0, 0))?;
    /// assert_eq!(m.replace_configs(&f.session, Some(1), None)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_configs(
        &self,
        session: &Id<L>,
        session_config: Option<SC>,
        runtime_config: Option<RC>,
    ) -> Result<u64, Error<L>> {
        self.on(session, |m| {
            m.replace_configs(session, session_config, runtime_config)
        })
    }

    /// Starts closing. See [`SessionManager::begin_close`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::begin_close`].
    ///
    /// See [`finalize`](Self::finalize).
    pub fn begin_close(&self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error<L>> {
        self.on(&fence.session, |m| m.begin_close(fence, reason))
    }

    /// Closes in one step; the session leaves and its admission slot is
    /// free. See [`SessionManager::close`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::close`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.close(&f, CloseReason::ClientClose)?.map(|ids| ids.len()), Some(1));
    /// assert!(m.is_empty() && m.reserved() == 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn close(
        &self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        let closed = self.on(&fence.session, |m| m.close(fence, reason))?;
        if closed.is_some() {
            self.left(1);
        }
        Ok(closed)
    }

    /// Finalizes a closing session; its admission slot is free. See
    /// [`SessionManager::finalize`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::finalize`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::RequestCleanup)?;
    /// assert_eq!(m.len(), 1, "closing sessions still count");
    /// assert!(m.finalize(&f.session)?.is_empty());
    /// assert!(m.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finalize(&self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
        let ids = self.on(session, |m| m.finalize(session))?;
        self.left(1);
        Ok(ids)
    }

    /// Finalizes those of `sessions` that are closing. See
    /// [`SessionManager::finalize_closed`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let (a, b) = (Fence::new(Id::new("a")?, 0), Fence::new(Id::new("b")?, 0));
    /// m.open(a.clone(), OpenOptions::default())?;
    /// m.open(b.clone(), OpenOptions::default())?;
    /// m.begin_close(&a, CloseReason::RequestCleanup)?;
    /// let done = m.finalize_closed([&a.session, &b.session]);
    /// assert_eq!((done.len(), m.len()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the released request ids must be cancelled or dropped in the engine"]
    pub fn finalize_closed<'a>(
        &self,
        sessions: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Released<L, R>> {
        let mut out = Vec::new();
        for session in sessions {
            let done = self.on(session, |m| m.finalize_closed([session]));
            self.left(done.len());
            out.extend(done);
        }
        out
    }

    /// Moves every session owning any of `request_ids` to Closing. See
    /// [`SessionManager::close_for_requests`]; visits every shard.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "broken")?;
    /// let closing = m.close_for_requests(&["broken"]);
    /// assert_eq!(closing[0].session, f.session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the sessions' requests must be cancelled in the engine, then the sessions finalized"]
    pub fn close_for_requests<I: AsRef<str>>(&self, request_ids: &[I]) -> Vec<Released<L, R>> {
        let mut out = Vec::new();
        for shard in &*self.shards {
            out.extend(lock(shard).close_for_requests(request_ids));
        }
        out
    }

    /// The reaper over all shards: each shard moves its due sessions (not in
    /// `excluded`) to Closing. See [`SessionManager::collect_expired`];
    /// visits only what is due in each shard.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let m = SharedManager::new(&clock, ManagerConfig::default())?;
    /// let lease = LeaseConfig::new(None, Duration::from_secs(2))?;
    /// let (a, b) = (Fence::new(Id::new("a")?, 0), Fence::new(Id::new("b")?, 0));
    /// for f in [&a, &b] {
    ///     m.open(f.clone(), OpenOptions::default().lease(lease))?;
    ///     m.detach(f)?;
    /// }
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(2_000)));
    /// clock.advance(Duration::from_secs(2));
    /// let expired = m.collect_expired([&b.session]);
    /// assert_eq!(expired.len(), 1);
    /// assert_eq!(expired[0].session, a.session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "each expired session's requests must be cancelled in the engine, then the session finalized"]
    pub fn collect_expired<'a>(
        &self,
        excluded: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Expiry<L, R>> {
        let mut excluded_by_shard: Vec<Vec<&Id<L>>> = vec![Vec::new(); self.shards.len()];
        for session in excluded {
            let index = self.hasher.hash_one(session.as_bytes()) as usize % self.shards.len();
            if let Some(list) = excluded_by_shard.get_mut(index) {
                list.push(session);
            }
        }
        let mut out = Vec::new();
        for (shard, excluded) in self.shards.iter().zip(&excluded_by_shard) {
            out.extend(lock(shard).collect_expired(excluded.iter().copied()));
        }
        out
    }

    /// The earliest lease expiry over all shards (one look per shard, no
    /// scan of sessions). See [`SessionManager::next_deadline`].
    ///
    /// See [`collect_expired`](Self::collect_expired).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.shards
            .iter()
            .filter_map(|shard| lock(shard).next_deadline())
            .min()
    }

    /// Everything observable about a session, as owned values. See
    /// [`SessionManager::snapshot`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.snapshot(&f.session).map(|s| s.state), Some(StateKind::Open));
    /// assert!(m.snapshot(&Id::new("nobody")?).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self, session: &Id<L>) -> Option<Snapshot<L>> {
        self.on(session, |m| m.snapshot(session))
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
        session: &Id<L>,
        f: impl FnOnce(&AnySession<SC, RC, R, B, D, A, L, K>) -> T,
    ) -> Option<T> {
        self.on(session, |m| m.get(session).map(f))
    }

    /// Typed access to an open session while its shard is locked. See
    /// [`SessionManager::with_open`].
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
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Open, SC, RC, R, B, D, A, L, K>, Instant) -> T,
    ) -> Option<T> {
        self.on(session, |m| m.with_open(session, f))
    }

    /// Typed access to a detached session while its shard is locked. See
    /// [`SessionManager::with_detached`].
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
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Detached, SC, RC, R, B, D, A, L, K>, Instant) -> T,
    ) -> Option<T> {
        self.on(session, |m| m.with_detached(session, f))
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
    assert_impl_all!(AdmissionPermit<MonotonicClock, (), (), 8, 4, 8, 4, 32, 4>: Send, Sync);
    // The manual clock is a `Cell` (it works on devices without 64-bit
    // atomics), so a manager over it stays on one thread.
    assert_not_impl_any!(SharedManager<ManualClock>: Sync);
}
