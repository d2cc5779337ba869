//! [`SessionManager`]: the sessions of a std host, by id.
//!
//! Three rooms: `table` keeps the sessions (slab and id index), `timers`
//! keeps the deadline index, `reaper` holds the close, expiry and cleanup
//! policy. This file is the per-session façade: each operation finds the
//! session and calls the same operation of [`AnySession`], which checks the
//! lifecycle state.

// Transitions hand the unchanged session back inside `Rejected`, by value:
// it goes straight back into its slot, so boxing it would only allocate.
#![allow(clippy::result_large_err)]

mod reaper;
mod table;
mod timers;

use duplex_core::profile::conformance::{
    ACTIVE_OPS, BINDINGS, COMPLETED, ID_LEN, RESOURCES, STAGE_RESULTS,
};
use duplex_core::{
    Activity, AnySession, Appended, Clock, CloseReason, ConfigField, Detached, Fence, Finality, Id,
    InputMode, Instant, Open, OpenOptions, Rejected, RequestIds, RequestState, Reservation,
    Session,
};

use crate::error::Error;
use crate::snapshot::Snapshot;
use table::Table;
use timers::Timers;

pub use reaper::{Expiry, Released};

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
/// Session ids are [`Id`]s (every fence carries one); request and operation
/// ids are anything `AsRef<str>`: the [`Id`]s the manager hands out go
/// straight back in, and so does `&str`.
///
/// Generic parameters: the clock `C`, the opaque configurations `SC`/`RC`,
/// and the capacity profile of [`Session`].
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{ManagerConfig, SessionManager};
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
pub struct SessionManager<
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
    clock: C,
    max_sessions: Option<usize>,
    completed_limit: usize,
    table: Table<SC, RC, R, B, D, A, L, K>,
    timers: Timers,
    /// Scratch for the slots one `collect_expired` skips (kept to reuse its
    /// allocation).
    deferred: Vec<u32>,
}

/// A validated request or operation id.
fn id<const L: usize>(text: &str) -> Result<Id<L>, Error<L>> {
    Ok(Id::new(text)?)
}

impl<C: Clock> SessionManager<C> {
    /// An empty manager of the default profile, without configurations,
    /// reading `clock`. (Other configuration types or profiles:
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
    > SessionManager<C, SC, RC, R, B, D, A, L, K>
{
    /// An empty manager for any configuration types and capacity profile,
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
    /// let mut m: SessionManager<ManualClock, &str, ()> =
    ///     SessionManager::with_capacities(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("s")?, 0), OpenOptions::new("alto", ()))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacities(clock: C, config: ManagerConfig) -> Result<Self, Error<L>> {
        if config.max_sessions == Some(0) {
            return Err(duplex_core::Error::InvalidConfig {
                field: ConfigField::MaxSessions,
                value: 0,
                expected: "a positive number of sessions, or none",
            }
            .into());
        }
        let completed_limit = config.completed_append_limit.unwrap_or(D);
        if completed_limit == 0 || completed_limit > D {
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
            timers: Timers::default(),
            deferred: Vec::new(),
        })
    }

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
    pub fn session_ids(&self) -> impl Iterator<Item = &Id<L>> {
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
    pub fn get(&self, session: &Id<L>) -> Option<&AnySession<SC, RC, R, B, D, A, L, K>> {
        self.table.get(self.table.find(session.as_str())?)
    }

    /// Everything observable about a session, as owned values (allocates;
    /// for inspection and logs, not hot paths).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "req")?;
    /// let snap = m.snapshot(&f.session).unwrap();
    /// assert_eq!(snap.bindings, [(0, Id::new("req")?)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self, session: &Id<L>) -> Option<Snapshot<L>> {
        self.get(session).and_then(Snapshot::of)
    }

    fn slot_of(&self, session: &Id<L>) -> Result<u32, Error<L>> {
        self.table
            .find(session.as_str())
            .ok_or_else(|| Error::UnknownSession {
                session: session.clone(),
            })
    }

    /// Runs `op` on the session named `session`.
    fn with<T>(
        &mut self,
        session: &Id<L>,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K>) -> Result<T, Error<L>>,
    ) -> Result<T, Error<L>> {
        let slot = self.slot_of(session)?;
        match self.table.entry(slot).and_then(Option::as_mut) {
            Some(s) => op(s),
            None => Err(Error::UnknownSession {
                session: session.clone(),
            }),
        }
    }

    /// Runs `op` on the session named `session`, read-only.
    fn with_ref<'a, T>(
        &'a self,
        session: &Id<L>,
        op: impl FnOnce(&'a AnySession<SC, RC, R, B, D, A, L, K>) -> Result<T, Error<L>>,
    ) -> Result<T, Error<L>> {
        match self.get(session) {
            Some(s) => op(s),
            None => Err(Error::UnknownSession {
                session: session.clone(),
            }),
        }
    }

    /// Runs a state transition in place: `op` takes the session by value and
    /// gives back the next one, or the unchanged one inside `Rejected`.
    fn transition<T>(
        &mut self,
        session: &Id<L>,
        op: impl FnOnce(
            AnySession<SC, RC, R, B, D, A, L, K>,
        ) -> Result<
            (AnySession<SC, RC, R, B, D, A, L, K>, T),
            Rejected<AnySession<SC, RC, R, B, D, A, L, K>>,
        >,
    ) -> Result<T, Error<L>> {
        let slot = self.slot_of(session)?;
        let unknown = || Error::UnknownSession {
            session: session.clone(),
        };
        let entry = self.table.entry(slot).ok_or_else(unknown)?;
        let current = entry.take().ok_or_else(unknown)?;
        let from = current.kind();
        let (next, result) = match op(current) {
            Ok((next, out)) => (next, Ok(out)),
            Err(rejected) => (rejected.session, Err(rejected.error.into())),
        };
        let to = next.kind();
        *entry = Some(next);
        if from != to {
            tracing::debug!(%session, "state={from}=>{to}");
        }
        self.reschedule(slot);
        result
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
    pub fn open(&mut self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
        if self.table.find(fence.session.as_str()).is_some() {
            return Err(Error::SessionExists {
                session: fence.session,
            });
        }
        if let Some(limit) = self.max_sessions {
            if self.table.len() >= limit {
                return Err(Error::CapacityExhausted { limit });
            }
        }
        let options = options.completed_limit(self.completed_limit);
        let session = Session::open_with_capacities(fence, options, self.clock.now())?;
        tracing::debug!(session = %session.id(), "open");
        let (slot, grew) = self.table.insert(AnySession::Open(session));
        if grew {
            self.timers.grow_to(self.table.slot_bound());
        }
        self.reschedule(slot);
        Ok(())
    }

    /// Records activity (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let mut m = SessionManager::new(&clock, ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// clock.advance(Duration::from_secs(1));
    /// m.touch(&f, Activity::Heartbeat)?;
    /// assert_eq!(m.snapshot(&f.session).unwrap().last_activity, Instant::from_millis(1_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn touch(&mut self, fence: &Fence<L>, activity: Activity) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.with(&fence.session, |s| Ok(s.touch(fence, activity, now)?))
    }

    /// The client went away (Open → Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.detach(&f).unwrap_err().kind(), ErrorKind::WrongState);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(&mut self, fence: &Fence<L>) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.transition(&fence.session, |s| Ok((s.detach(fence, now)?, ())))
    }

    /// Resume with the lease generation (Detached → Open, or takeover while
    /// Open); returns the new generation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`,
    /// `generation_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.resume(&f, 0)?, 1);
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(&mut self, fence: &Fence<L>, expected_generation: u64) -> Result<u64, Error<L>> {
        let now = self.clock.now();
        self.transition(&fence.session, |s| {
            s.resume(fence, expected_generation, now)
        })
    }

    /// Starts a lease operation (Open).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_active`, `full`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen-1")?;
    /// assert_eq!(m.begin_operation(&f, "gen-1").unwrap_err().kind(), ErrorKind::OperationActive);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_operation(
        &mut self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        let now = self.clock.now();
        self.with(&fence.session, |s| {
            Ok(s.begin_operation(fence, &id(operation.as_ref())?, now)?)
        })
    }

    /// Ends a lease operation (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_not_active`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen-1")?;
    /// m.end_operation(&f, "gen-1")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn end_operation(
        &mut self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        let now = self.clock.now();
        let slot = self.slot_of(&fence.session)?;
        let result = self.with(&fence.session, |s| {
            Ok(s.end_operation(fence, &id(operation.as_ref())?, now)?)
        });
        // Ending the last operation may make idle expiry possible again.
        self.reschedule(slot);
        result
    }

    /// Appends input (Open): prepare and commit in one step.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `unsupported_mode`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.append(&f, InputMode::TurnCommitOnly)?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(&mut self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error<L>> {
        self.with(&fence.session, |s| Ok(s.append(fence, mode)?))
    }

    /// Phase one of an append (Open).
    ///
    /// # Errors
    ///
    /// As [`append`](Self::append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
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
        self.with_ref(&fence.session, |s| Ok(s.prepare_append(fence, mode)?))
    }

    /// Phase two of an append, on the session named by the reservation's
    /// fence (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `stale_reservation`.
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&mut self, reservation: &Reservation<L>) -> Result<Appended, Error<L>> {
        self.with(&reservation.fence().session, |s| {
            Ok(s.commit_append(reservation)?)
        })
    }

    /// Looks up a completed append (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_reused`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let chunk = InputMode::AppendAudioChunk;
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op-1", chunk, Finality::Partial, &[3])?;
    /// assert_eq!(m.completed(&f, "op-1", chunk, Finality::Partial)?, Some(&[3][..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed(
        &self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<&[i64]>, Error<L>> {
        self.with_ref(&fence.session, |s| {
            Ok(s.completed(fence, &id(operation.as_ref())?, mode, finality)?)
        })
    }

    /// Records a completed append (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `full` (too many
    /// stage results).
    ///
    /// See [`completed`](Self::completed).
    pub fn record_completed(
        &mut self,
        fence: &Fence<L>,
        operation: impl AsRef<str>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| {
            Ok(s.record_completed(fence, &id(operation.as_ref())?, mode, finality, results)?)
        })
    }

    /// Reserves a stage request (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `resource_conflict`, `full`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve(&f, 0, "r0")?;
    /// assert_eq!(m.resource_request_ids(&f.session, None, Some(RequestState::Reserved))?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &mut self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| {
            Ok(s.reserve(fence, stage, &id(request.as_ref())?)?)
        })
    }

    /// Binds a stage request: reserve, accept the fence, submit, bind (Open,
    /// Detached).
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.stage_request_ids(&f.session, None)?.as_slice(), [Id::new("r0")?]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind(
        &mut self,
        fence: &Fence<L>,
        stage: u32,
        request: impl AsRef<str>,
    ) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| {
            Ok(s.bind(fence, stage, &id(request.as_ref())?)?)
        })
    }

    /// Request ids of the stage bindings (optionally at exactly `fence`).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// See [`bind`](Self::bind).
    pub fn stage_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.with_ref(session, |s| Ok(s.stage_request_ids(fence)?))
    }

    /// Unique request ids of the resources (optionally at exactly `fence`,
    /// in the given state).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// See [`reserve`](Self::reserve).
    pub fn resource_request_ids(
        &self,
        session: &Id<L>,
        fence: Option<&Fence<L>>,
        state: Option<RequestState>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.with_ref(session, |s| Ok(s.resource_request_ids(fence, state)?))
    }

    /// Drops the bindings and resources with these request ids (any of
    /// `&[Id]`, the ids `cancel` returned, or `&[&str]`).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// m.bind(&f, 1, "r1")?;
    /// m.release(&f.session, &["r0"])?;
    /// let held = m.stage_request_ids(&f.session, None)?;
    /// m.release(&f.session, &held)?; // ids handed out go straight back in
    /// assert!(m.stage_request_ids(&f.session, None)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release<I: AsRef<str>>(
        &mut self,
        session: &Id<L>,
        request_ids: &[I],
    ) -> Result<(), Error<L>> {
        self.with(session, |s| {
            Ok(s.release_where(|held| request_ids.iter().any(|r| r.as_ref() == held.as_str()))?)
        })
    }

    /// Returns and drops the requests held at exactly `fence` (no
    /// validation).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_fence(&mut self, fence: &Fence<L>) -> Result<RequestIds<L, R>, Error<L>> {
        self.with(&fence.session, |s| Ok(s.release_fence(fence)?))
    }

    /// Validates and accepts a fence (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.accept_fence(&f.clone().with_epoch(1))?;
    /// assert_eq!(m.accept_fence(&f).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn accept_fence(&mut self, fence: &Fence<L>) -> Result<(), Error<L>> {
        self.with(&fence.session, |s| Ok(s.accept_fence(fence)?))
    }

    /// Barge-in: advances to `next` and releases what `cancelled` held
    /// (Open, Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session` (for `cancelled`'s session), `wrong_state`,
    /// `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "tts")?;
    /// assert_eq!(m.cancel(&f, &f.clone().with_epoch(1))?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(
        &mut self,
        cancelled: &Fence<L>,
        next: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        self.with(&cancelled.session, |s| Ok(s.cancel(cancelled, next)?))
    }

    /// Publishes new configurations (Open, Detached); returns the config
    /// generation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m: SessionManager<ManualClock, u8, u8> =
    ///     SessionManager::with_capacities(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::new(0, 0))?;
    /// assert_eq!(m.replace_configs(&f.session, Some(1), None)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_configs(
        &mut self,
        session: &Id<L>,
        session_config: Option<SC>,
        runtime_config: Option<RC>,
    ) -> Result<u64, Error<L>> {
        self.with(session, |s| {
            Ok(s.replace_configs(session_config, runtime_config)?)
        })
    }

    /// Starts closing (→ Closing); on a closing session accepts the fence and
    /// keeps the first reason.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `fence_mismatch` (nothing changes: a stale close
    /// keeps the live session).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Closing);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_close(&mut self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error<L>> {
        self.transition(&fence.session, |s| Ok((s.begin_close(fence, reason)?, ())))
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
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Open, SC, RC, R, B, D, A, L, K>, Instant) -> T,
    ) -> Option<T> {
        let now = self.clock.now();
        let slot = self.table.find(session.as_str())?;
        let out = f(self.table.entry(slot)?.as_mut()?.as_open_mut()?, now);
        self.reschedule(slot);
        Some(out)
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
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Detached, SC, RC, R, B, D, A, L, K>, Instant) -> T,
    ) -> Option<T> {
        let now = self.clock.now();
        let slot = self.table.find(session.as_str())?;
        let out = f(self.table.entry(slot)?.as_mut()?.as_detached_mut()?, now);
        self.reschedule(slot);
        Some(out)
    }
}
