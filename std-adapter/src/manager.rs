//! [`SessionManager`]: the sessions of a std host, by id (SPEC §7).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use duplex_core::{
    Activity, Appended, Clock, CloseReason, ConfigField, Fence, Id, InputMode, Instant,
    OpenOptions, RequestIds, Reservation, Session, StateKind,
};

use crate::any::{any_state, AnySession, Inner, Typed};
use crate::error::Error;
use crate::timers::Timers;

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

/// A session whose lease expired, moved to `Closing` by
/// [`collect_expired`](SessionManager::collect_expired).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expiry<const L: usize = 32, const R: usize = 8> {
    /// The session.
    pub session: Id<L>,
    /// Its fence.
    pub fence: Fence<L>,
    /// Lease generation after the close bumped it.
    pub lease_generation: u64,
    /// `disconnect_grace_expired` or `idle_ttl_expired`.
    pub reason: CloseReason,
    /// Submitted request ids, to cancel in the engine.
    pub submitted: RequestIds<L, R>,
    /// Reserved, never submitted request ids, to drop.
    pub reserved: RequestIds<L, R>,
}

/// Released request ids of one session.
pub type Released<const L: usize = 32, const R: usize = 8> = (Id<L>, RequestIds<L, R>);

/// A session's slot. Free slots keep their allocation (as `Inner::Vacant`)
/// for the next open, so session churn does not allocate.
type Slot<
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
> = Box<AnySession<SC, RC, R, B, D, A, L, K>>;

/// The session table of a std host: admission, expiry, request cleanup, and
/// a dynamic API that checks the lifecycle at run time (`wrong_state`) where
/// the core checks it at compile time.
///
/// - Lookups are by id (hash map, O(1)).
/// - Expiry is indexed: [`collect_expired`](Self::collect_expired) costs
///   O(due · log n) and nothing when nothing is due;
///   [`next_deadline`](Self::next_deadline) says when to call it.
/// - Steady-state operations (append, touch, bind, release, completed
///   lookups and records, cancel) do not allocate.
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
/// let mut m: SessionManager<&ManualClock> = SessionManager::new(&clock, config)?;
///
/// let f = Fence::new(Id::new("s1")?, 0);
/// let lease = LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(2))?;
/// m.open(f.clone(), OpenOptions::default().lease(lease))?;
/// m.bind(&f, 0, "tts-1")?;
/// m.detach(&f)?;
/// assert_eq!(m.next_deadline(), Some(Instant::from_millis(2_000)));
///
/// clock.advance(Duration::from_secs(2));
/// let expired = m.collect_expired(&[]);
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
    const R: usize = 8,
    const B: usize = 4,
    const D: usize = 8,
    const A: usize = 4,
    const L: usize = 32,
    const K: usize = 4,
> {
    clock: C,
    max_sessions: Option<usize>,
    completed_limit: usize,
    index: HashMap<Id<L>, u32, foldhash::fast::RandomState>,
    slots: Vec<Slot<SC, RC, R, B, D, A, L, K>>,
    free: Vec<u32>,
    timers: Timers,
    /// Scratch for sessions skipped by one `collect_expired` (kept to reuse
    /// its allocation).
    deferred: Vec<u32>,
}

/// Runs `$body` with `$s` bound to the typed live session, or fails with
/// `wrong_state` for a closing one.
macro_rules! live {
    ($inner:expr, $op:literal, $s:ident => $body:expr) => {
        match $inner {
            Inner::Open($s) => $body,
            Inner::Detached($s) => $body,
            Inner::Closing(_) => Err(Error::WrongState {
                operation: $op,
                state: StateKind::Closing,
            }),
            Inner::Vacant => unreachable!("a vacant slot is never observed"),
        }
    };
}

/// Runs `$body` with `$s` bound to the typed open session, or fails with
/// `wrong_state`.
macro_rules! open_only {
    ($inner:expr, $op:literal, $s:ident => $body:expr) => {
        match $inner {
            Inner::Open($s) => $body,
            other => Err(Error::WrongState {
                operation: $op,
                state: state_of(other),
            }),
        }
    };
}

fn state_of<
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
>(
    inner: &Inner<SC, RC, R, B, D, A, L, K>,
) -> StateKind {
    match inner {
        Inner::Open(_) => StateKind::Open,
        Inner::Detached(_) => StateKind::Detached,
        Inner::Closing(_) | Inner::Vacant => StateKind::Closing,
    }
}

fn request_id<const L: usize>(text: &str) -> Result<Id<L>, Error<L>> {
    Ok(Id::new(text)?)
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
    /// An empty manager reading `clock`.
    ///
    /// # Errors
    ///
    /// `invalid_config` if `max_sessions` is zero or the completed-append
    /// limit is not in `1..=D`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let bad = ManagerConfig { max_sessions: Some(0), ..ManagerConfig::default() };
    /// let err = SessionManager::<ManualClock>::new(ManualClock::default(), bad).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    /// ```
    pub fn new(clock: C, config: ManagerConfig) -> Result<Self, Error<L>> {
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
                value: completed_limit as u64,
                expected: "1..=D (the completed-append capacity)",
            }
            .into());
        }
        Ok(SessionManager {
            clock,
            max_sessions: config.max_sessions,
            completed_limit,
            index: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            timers: Timers::default(),
            deferred: Vec::new(),
        })
    }

    /// The clock.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
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
    /// let m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// assert_eq!(m.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there is no session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// assert!(m.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The session ids, in no particular order (closing ones included).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// assert_eq!(m.session_ids().map(Id::as_str).collect::<Vec<_>>(), ["a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn session_ids(&self) -> impl Iterator<Item = &Id<L>> {
        self.index.keys()
    }

    /// The session with this id, if any.
    ///
    /// See [`AnySession`].
    pub fn get(&self, session: &Id<L>) -> Option<&AnySession<SC, RC, R, B, D, A, L, K>> {
        let slot = *self.index.get(session.as_str())?;
        Some(self.any(slot))
    }

    fn slot_of(&self, session: &Id<L>) -> Result<u32, Error<L>> {
        self.index
            .get(session.as_str())
            .copied()
            .ok_or_else(|| Error::UnknownSession {
                session: session.clone(),
            })
    }

    /// The session in an occupied slot (slots reached through the index or
    /// the deadline heap are always occupied).
    fn any(&self, slot: u32) -> &AnySession<SC, RC, R, B, D, A, L, K> {
        &self.slots[slot as usize]
    }

    fn inner(&mut self, slot: u32) -> &mut Inner<SC, RC, R, B, D, A, L, K> {
        &mut self.slots[slot as usize].inner
    }

    /// Brings the deadline index up to date after an operation on `slot`:
    /// lowers the entry if the deadline moved earlier; a later deadline is
    /// picked up lazily when the entry comes due.
    fn reschedule(&mut self, slot: u32) {
        let deadline = self.any(slot).deadline();
        match deadline {
            Some(t) => self.timers.lower_to(slot, t),
            None if matches!(self.inner(slot), Inner::Closing(_)) => self.timers.remove(slot),
            None => {}
        }
    }

    /// Runs a state transition in place. `f` gets the session by value and
    /// must hand back a session (the new one, or the old one on error).
    fn transition<T>(
        &mut self,
        slot: u32,
        f: impl FnOnce(
            Inner<SC, RC, R, B, D, A, L, K>,
        ) -> (Inner<SC, RC, R, B, D, A, L, K>, Result<T, Error<L>>),
    ) -> Result<T, Error<L>> {
        let inner = self.inner(slot);
        let from = state_of(inner);
        let (next, result) = f(std::mem::replace(inner, Inner::Vacant));
        let to = state_of(&next);
        *inner = next;
        if from != to {
            tracing::debug!(session = %any_state!(&*inner, s => s.id()), "state={from}=>{to}");
        }
        self.reschedule(slot);
        result
    }

    /// Opens a session (SPEC §7 `open`). The manager's completed-append
    /// limit applies.
    ///
    /// # Errors
    ///
    /// `session_exists`, then `capacity_exhausted`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), config)?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// let again = m.open(Fence::new(Id::new("a")?, 1), OpenOptions::default()).unwrap_err();
    /// assert_eq!(again.kind(), ErrorKind::SessionExists);
    /// let full = m.open(Fence::new(Id::new("b")?, 0), OpenOptions::default()).unwrap_err();
    /// assert_eq!(full.kind(), ErrorKind::CapacityExhausted);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(&mut self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
        let sessions = self.index.len();
        // One hash for the existence check and the insert.
        let Entry::Vacant(entry) = self.index.entry(fence.session.clone()) else {
            return Err(Error::SessionExists {
                session: fence.session,
            });
        };
        if let Some(limit) = self.max_sessions {
            if sessions >= limit {
                return Err(Error::CapacityExhausted { limit });
            }
        }
        let options = options.completed_limit(self.completed_limit);
        let session = Session::open(fence, options, self.clock.now())?;
        let slot = if let Some(slot) = self.free.pop() {
            self.slots[slot as usize].inner = Inner::Open(session);
            slot
        } else {
            self.slots.push(Box::new(AnySession {
                inner: Inner::Open(session),
            }));
            self.timers.grow_to(self.slots.len());
            (self.slots.len() - 1) as u32
        };
        tracing::debug!(session = %entry.key(), "open");
        entry.insert(slot);
        self.reschedule(slot);
        Ok(())
    }

    /// Records activity (SPEC §3 `touch`).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (closing), `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let mut m: SessionManager<&ManualClock> = SessionManager::new(&clock, ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// clock.advance(Duration::from_secs(1));
    /// m.touch(&f, Activity::Heartbeat)?;
    /// assert_eq!(m.get(&f.session).unwrap().snapshot().last_activity, Instant::from_millis(1_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn touch(&mut self, fence: &Fence<L>, activity: Activity) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let now = self.clock.now();
        live!(self.inner(slot), "touch", s => Ok(s.touch(fence, activity, now)?))
    }

    /// The client went away (→ Detached).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (not open), `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.detach(&f).unwrap_err().kind(), ErrorKind::WrongState);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(&mut self, fence: &Fence<L>) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let now = self.clock.now();
        self.transition(slot, |inner| match inner {
            Inner::Open(s) => match s.detach(fence, now) {
                Ok(d) => (Inner::Detached(d), Ok(())),
                Err(r) => (Inner::Open(r.session), Err(r.error.into())),
            },
            other => {
                let state = state_of(&other);
                (
                    other,
                    Err(Error::WrongState {
                        operation: "detach",
                        state,
                    }),
                )
            }
        })
    }

    /// Resume with the lease generation (Detached → Open, or takeover while
    /// Open); returns the new generation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (closing), `fence_mismatch`,
    /// `generation_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// assert_eq!(m.resume(&f, 0)?, 1);
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(&mut self, fence: &Fence<L>, expected_generation: u64) -> Result<u64, Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let now = self.clock.now();
        self.transition(slot, |inner| match inner {
            Inner::Open(mut s) => {
                let r = s
                    .resume(fence, expected_generation, now)
                    .map_err(Error::from);
                (Inner::Open(s), r)
            }
            Inner::Detached(s) => match s.resume(fence, expected_generation, now) {
                Ok((open, generation)) => (Inner::Open(open), Ok(generation)),
                Err(r) => (Inner::Detached(r.session), Err(r.error.into())),
            },
            other => {
                let state = state_of(&other);
                (
                    other,
                    Err(Error::WrongState {
                        operation: "resume",
                        state,
                    }),
                )
            }
        })
    }

    /// Starts a lease operation (Open only).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_active`, `full`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen-1")?;
    /// assert_eq!(m.begin_operation(&f, "gen-1").unwrap_err().kind(), ErrorKind::OperationActive);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_operation(&mut self, fence: &Fence<L>, operation: &str) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let op = request_id(operation)?;
        let now = self.clock.now();
        open_only!(self.inner(slot), "begin_operation", s => Ok(s.begin_operation(fence, &op, now)?))
    }

    /// Ends a lease operation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_not_active`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_operation(&f, "gen-1")?;
    /// m.end_operation(&f, "gen-1")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn end_operation(&mut self, fence: &Fence<L>, operation: &str) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let op = request_id(operation)?;
        let now = self.clock.now();
        let result =
            live!(self.inner(slot), "end_operation", s => Ok(s.end_operation(fence, &op, now)?));
        // Ending the last operation may make idle expiry possible again.
        self.reschedule(slot);
        result
    }

    /// Appends input (Open only): prepare and commit in one step.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `unsupported_mode`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.append(&f, InputMode::TurnCommitOnly)?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(&mut self, fence: &Fence<L>, mode: InputMode) -> Result<Appended, Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        open_only!(self.inner(slot), "append", s => Ok(s.append(mode, fence)?))
    }

    /// Phase one of an append (Open only).
    ///
    /// # Errors
    ///
    /// As [`append`](Self::append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let r = m.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(m.commit_append(&r)?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare_append(
        &mut self,
        fence: &Fence<L>,
        mode: InputMode,
    ) -> Result<Reservation<L>, Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        open_only!(self.inner(slot), "prepare_append", s => Ok(s.prepare_append(mode, fence)?))
    }

    /// Phase two of an append, on the session named by the reservation's fence.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (closing), `stale_reservation`.
    ///
    /// See [`prepare_append`](Self::prepare_append).
    pub fn commit_append(&mut self, reservation: &Reservation<L>) -> Result<Appended, Error<L>> {
        let slot = self.slot_of(&reservation.fence().session)?;
        live!(self.inner(slot), "commit_append", s => Ok(s.commit_append(reservation)?))
    }

    /// Looks up a completed append.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `operation_reused`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.record_completed(&f, "op-1", InputMode::AppendAudioChunk, false, &[3])?;
    /// assert_eq!(m.completed(&f, "op-1", InputMode::AppendAudioChunk, false)?, Some(&[3][..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn completed(
        &mut self,
        fence: &Fence<L>,
        operation: &str,
        mode: InputMode,
        final_: bool,
    ) -> Result<Option<&[i64]>, Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let op = request_id(operation)?;
        live!(self.inner(slot), "completed", s => Ok(s.completed(&op, fence, mode, final_)?))
    }

    /// Records a completed append.
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
        operation: &str,
        mode: InputMode,
        final_: bool,
        results: &[i64],
    ) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let op = request_id(operation)?;
        live!(self.inner(slot), "record_completed", s => Ok(s.record_completed(&op, fence, mode, final_, results)?))
    }

    /// Reserves a stage request.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `invalid_id`, `wrong_state`, `fence_mismatch`,
    /// `resource_conflict`, `full`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.reserve(&f, 0, "r0")?;
    /// assert_eq!(m.resource_request_ids(&f.session, None, Some(false))?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(&mut self, fence: &Fence<L>, stage: u32, request: &str) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let request = request_id(request)?;
        live!(self.inner(slot), "reserve", s => Ok(s.reserve(stage, &request, fence)?))
    }

    /// Binds a stage request (reserve, accept the fence, submit, bind).
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.stage_request_ids(&f.session, None)?.as_slice(), [Id::new("r0")?]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind(&mut self, fence: &Fence<L>, stage: u32, request: &str) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        let request = request_id(request)?;
        live!(self.inner(slot), "bind", s => Ok(s.bind(stage, &request, fence)?))
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
        let slot = self.slot_of(session)?;
        Ok(
            any_state!(&self.any(slot).inner, s => s.stage_request_ids(fence).take(R).cloned().collect()),
        )
    }

    /// Unique request ids of the resources (optionally at exactly `fence`,
    /// with the given submitted flag).
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
        submitted: Option<bool>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        let slot = self.slot_of(session)?;
        Ok(
            any_state!(&self.any(slot).inner, s => s.resource_request_ids(fence, submitted).cloned().collect()),
        )
    }

    /// Drops the bindings and resources with these request ids.
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// m.release(&f.session, &["r0"])?;
    /// assert!(m.stage_request_ids(&f.session, None)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release<I: AsRef<str>>(
        &mut self,
        session: &Id<L>,
        request_ids: &[I],
    ) -> Result<(), Error<L>> {
        let slot = self.slot_of(session)?;
        any_state!(self.inner(slot), s => s.release(request_ids));
        Ok(())
    }

    /// Returns and drops the requests held at exactly `fence` (no validation).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// assert_eq!(m.release_fence(&f)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_fence(&mut self, fence: &Fence<L>) -> Result<RequestIds<L, R>, Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        Ok(any_state!(self.inner(slot), s => s.release_fence(fence)))
    }

    /// Validates and accepts a fence.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.accept_fence(&f.clone().with_epoch(1))?;
    /// assert_eq!(m.accept_fence(&f).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn accept_fence(&mut self, fence: &Fence<L>) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        live!(self.inner(slot), "accept_fence", s => Ok(s.accept_fence(fence)?))
    }

    /// Barge-in: advances to `next` and releases what `cancelled` held.
    ///
    /// # Errors
    ///
    /// `unknown_session` (for `cancelled`'s session), `wrong_state`,
    /// `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
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
        let slot = self.slot_of(&cancelled.session)?;
        live!(self.inner(slot), "cancel", s => Ok(s.cancel(cancelled, next)?))
    }

    /// Publishes new configurations; returns the config generation.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m: SessionManager<ManualClock, u8, u8> =
    ///     SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
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
        let slot = self.slot_of(session)?;
        live!(self.inner(slot), "replace_configs", s => Ok(s.replace_configs(session_config, runtime_config)))
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
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Closing);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_close(&mut self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error<L>> {
        let slot = self.slot_of(&fence.session)?;
        self.transition(slot, |inner| match inner {
            Inner::Open(s) => match s.begin_close(fence, reason) {
                Ok(c) => (Inner::Closing(c), Ok(())),
                Err(r) => (Inner::Open(r.session), Err(r.error.into())),
            },
            Inner::Detached(s) => match s.begin_close(fence, reason) {
                Ok(c) => (Inner::Closing(c), Ok(())),
                Err(r) => (Inner::Detached(r.session), Err(r.error.into())),
            },
            Inner::Closing(mut s) => {
                let r = s.begin_close(fence, reason).map_err(Error::from);
                (Inner::Closing(s), r)
            }
            Inner::Vacant => unreachable!("a vacant slot is never observed"),
        })
    }

    /// Closes in one step: begin_close, then finalize. `Ok(None)` if the
    /// session is absent or already closing ("not closed"); otherwise the
    /// released request ids.
    ///
    /// # Errors
    ///
    /// `fence_mismatch` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "r0")?;
    /// let released = m.close(&f, CloseReason::ExplicitClose)?.unwrap();
    /// assert_eq!(released.len(), 1);
    /// assert_eq!(m.close(&f, CloseReason::ExplicitClose)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close(
        &mut self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        let Ok(slot) = self.slot_of(&fence.session) else {
            return Ok(None);
        };
        // The session leaves the manager: validate the fence, read its
        // request ids, and drop it in place. Nothing observable differs from
        // begin_close + finalize, and the 1.8 KB session is never copied.
        let ids = match self.inner(slot) {
            Inner::Closing(_) => return Ok(None),
            Inner::Open(s) => Self::closing_ids(s, fence)?,
            Inner::Detached(s) => Self::closing_ids(s, fence)?,
            Inner::Vacant => unreachable!("a vacant slot is never observed"),
        };
        tracing::debug!(session = %fence.session, %reason, "closed");
        self.vacate(slot, &fence.session);
        Ok(Some(ids))
    }

    /// What closing a live session at `fence` releases, after checking the
    /// fence as `begin_close` would.
    fn closing_ids<S: duplex_core::Live>(
        session: &Typed<S, SC, RC, R, B, D, A, L, K>,
        fence: &Fence<L>,
    ) -> Result<RequestIds<L, R>, Error<L>> {
        session.fence().admits(fence)?;
        Ok(session.resource_request_ids(None, None).cloned().collect())
    }

    /// Drops the session in `slot` in place (keeping the allocation for the
    /// next open) and forgets `id`.
    fn vacate(&mut self, slot: u32, id: &Id<L>) {
        *self.inner(slot) = Inner::Vacant;
        self.index.remove(id.as_str());
        self.timers.remove(slot);
        self.free.push(slot);
    }

    /// Finalizes a closing session: removes it and returns every request id
    /// it still held.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (not closing).
    ///
    /// See the type-level example.
    pub fn finalize(&mut self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
        let slot = self.slot_of(session)?;
        match self.inner(slot) {
            Inner::Closing(_) => Ok(self.finalize_slot(slot)),
            other => Err(Error::WrongState {
                operation: "finalize",
                state: state_of(other),
            }),
        }
    }

    /// Removes the closing session in `slot`; returns its request ids.
    fn finalize_slot(&mut self, slot: u32) -> RequestIds<L, R> {
        // As in `close`: the ids `finalize` would return, then drop in place.
        let (id, ids) = match self.inner(slot) {
            Inner::Closing(s) => (
                s.id().clone(),
                s.resource_request_ids(None, None).cloned().collect(),
            ),
            _ => unreachable!("only closing sessions are finalized"),
        };
        tracing::debug!(session = %id, "state=closing=>closed");
        self.vacate(slot, &id);
        ids
    }

    /// Finalizes those of `sessions` that are closing; others are ignored.
    /// Returns what each finalized session released.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let (a, b) = (Fence::new(Id::new("a")?, 0), Fence::new(Id::new("b")?, 0));
    /// m.open(a.clone(), OpenOptions::default())?;
    /// m.open(b.clone(), OpenOptions::default())?;
    /// m.begin_close(&a, CloseReason::RequestCleanup)?;
    /// let done = m.finalize_closed(&[&a.session, &b.session]);
    /// assert_eq!(done.len(), 1);
    /// assert_eq!(m.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finalize_closed(&mut self, sessions: &[&Id<L>]) -> Vec<Released<L, R>> {
        let mut out = Vec::new();
        for &id in sessions {
            if let Ok(slot) = self.slot_of(id) {
                if matches!(self.inner(slot), Inner::Closing(_)) {
                    out.push((id.clone(), self.finalize_slot(slot)));
                }
            }
        }
        out
    }

    /// Moves every session owning any of `request_ids` to Closing with reason
    /// `request_cleanup` (closing ones are reported again) and returns each
    /// with all its request ids. Scans every session: meant for the rare
    /// engine-failure path.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "broken")?;
    /// let closing = m.close_for_requests(&["broken"]);
    /// assert_eq!(closing[0].0, f.session);
    /// assert_eq!(m.get(&f.session).unwrap().kind(), StateKind::Closing);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close_for_requests<I: AsRef<str>>(&mut self, request_ids: &[I]) -> Vec<Released<L, R>> {
        let mut out = Vec::new();
        for slot in 0..self.slots.len() as u32 {
            let inner = &self.slots[slot as usize].inner;
            if matches!(inner, Inner::Vacant) {
                continue;
            }
            let (id, fence, ids) = any_state!(inner, s => {
                let ids: RequestIds<L, R> = s.resource_request_ids(None, None).cloned().collect();
                (s.id().clone(), s.fence().clone(), ids)
            });
            let owns = ids
                .iter()
                .any(|own| request_ids.iter().any(|r| r.as_ref() == own.as_str()));
            if !owns {
                continue;
            }
            if !matches!(self.inner(slot), Inner::Closing(_)) {
                // The session's own fence: accepted by construction.
                let _ = self.begin_close(&fence, CloseReason::RequestCleanup);
            }
            out.push((id, ids));
        }
        out
    }

    /// The reaper (SPEC §7 `collect_expired`): every session not in
    /// `excluded` whose disconnect grace ran out (checked first) or whose
    /// idle TTL ran out is moved to Closing; returns one record each, in no
    /// particular order. Costs O(due · log n); allocation-free when nothing
    /// is due.
    ///
    /// See the type-level example.
    pub fn collect_expired(&mut self, excluded: &[&Id<L>]) -> Vec<Expiry<L, R>> {
        let now = self.clock.now();
        let mut out = Vec::new();
        let mut deferred = std::mem::take(&mut self.deferred);
        while let Some((key, slot)) = self.timers.peek() {
            if key > now {
                break;
            }
            let session = self.any(slot);
            match session.deadline() {
                None => {
                    self.timers.remove(slot);
                    continue;
                }
                Some(deadline) if deadline > now => {
                    self.timers.set(slot, deadline);
                    continue;
                }
                Some(_) => {}
            }
            let fence = session.fence();
            if excluded.iter().any(|e| **e == fence.session) {
                self.timers.remove(slot);
                deferred.push(slot);
                continue;
            }
            out.push(self.expire_slot(slot, now));
        }
        for slot in deferred.drain(..) {
            self.reschedule(slot);
        }
        self.deferred = deferred;
        out
    }

    fn expire_slot(&mut self, slot: u32, now: Instant) -> Expiry<L, R> {
        let (submitted, reserved) = any_state!(self.inner(slot), s => (
            s.resource_request_ids(None, Some(true)).cloned().collect(),
            s.resource_request_ids(None, Some(false)).cloned().collect(),
        ));
        let closed = self.transition(slot, |inner| {
            let expired = match inner {
                Inner::Open(s) => s.expire(now).map_err(Inner::Open),
                Inner::Detached(s) => s.expire(now).map_err(Inner::Detached),
                other => Err(other),
            };
            match expired {
                Ok(c) => {
                    let facts = (c.fence().clone(), c.lease_generation(), c.state().reason());
                    (Inner::Closing(c), Ok(facts))
                }
                Err(same) => (
                    same,
                    Err(Error::WrongState {
                        operation: "expire",
                        state: StateKind::Closing,
                    }),
                ),
            }
        });
        let (fence, lease_generation, reason) = closed.expect("a due session expires");
        Expiry {
            session: fence.session.clone(),
            fence,
            lease_generation,
            reason,
            submitted,
            reserved,
        }
    }

    /// The exact instant of the next lease expiry, if any session can
    /// expire: a host sleeps until then, then calls
    /// [`collect_expired`](Self::collect_expired).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let mut m: SessionManager<&ManualClock> = SessionManager::new(&clock, ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// clock.advance(Duration::from_secs(100));
    /// m.touch(&f, Activity::Heartbeat)?;
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(400_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_deadline(&mut self) -> Option<Instant> {
        while let Some((key, slot)) = self.timers.peek() {
            let session = self.any(slot);
            match session.deadline() {
                None => self.timers.remove(slot),
                Some(deadline) if deadline > key => self.timers.set(slot, deadline),
                Some(_) => return Some(key),
            }
        }
        None
    }

    /// Typed access to an open session: runs `f` with the session and the
    /// clock's `now`, for code that wants the compile-time lifecycle checks.
    /// `None` if the session is absent or not open.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let seq = m.with_open(&f.session, |s, _now| s.append(InputMode::TurnCommitOnly, &f));
    /// assert_eq!(seq.unwrap()?.seq, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_open<T>(
        &mut self,
        session: &Id<L>,
        f: impl FnOnce(&mut Typed<duplex_core::Open, SC, RC, R, B, D, A, L, K>, Instant) -> T,
    ) -> Option<T> {
        let slot = self.slot_of(session).ok()?;
        let now = self.clock.now();
        let Inner::Open(s) = self.inner(slot) else {
            return None;
        };
        let out = f(s, now);
        self.reschedule(slot);
        Some(out)
    }

    /// Typed access to a detached session (see [`with_open`](Self::with_open)).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// # let mut m: SessionManager<ManualClock> = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.detach(&f)?;
    /// let bound = m.with_detached(&f.session, |s, _| s.bind(0, &Id::new("late")?, &f));
    /// assert!(bound.unwrap().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_detached<T>(
        &mut self,
        session: &Id<L>,
        f: impl FnOnce(&mut Typed<duplex_core::Detached, SC, RC, R, B, D, A, L, K>, Instant) -> T,
    ) -> Option<T> {
        let slot = self.slot_of(session).ok()?;
        let now = self.clock.now();
        let Inner::Detached(s) = self.inner(slot) else {
            return None;
        };
        let out = f(s, now);
        self.reschedule(slot);
        Some(out)
    }
}
