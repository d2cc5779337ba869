//! The typed session: `Session<S>`, whose operations each name the states
//! they need as a bound on the method.
//!
//! | file | bound | operations |
//! |---|---|---|
//! | `attached.rs` | `S: Attached` (Open) | detach, begin_operation, prepare_append, append |
//! | `live.rs` | `S: Live` (Open, Detached) | touch, resume, end_operation, commit_append, completed, record_completed, reserve, bind, accept_fence, cancel, replace_configs, deadline, due, expire, close |
//! | `unfinished.rs` | `S: Unfinished` (Open, Detached, Closing) | begin_close, stage/resource ids, release, release_fence, inspection |
//! | `input.rs` | `S: Attached` to reserve, `S: Unfinished` to release | reserve_input, reserve_turn, release_input, release_turn, release_all_input, cancel_pending_input, pending_input |
//! | `overlap.rs` | `S: Attached` to decide, `S: Unfinished` for the rest | decide_overlap, reset_overlap_speech, set_overlap_config, overlap_speech_ms, overlap_config |
//! | `closing.rs` | `S: Finalizable` (Closing); `Closed` | finalize; close_reason |
//! | this file | any state | open, fence, id, lease generation, state data |
//!
//! [`AnySession`](any::AnySession) holds a session in whichever state it is,
//! with typed access and a dynamic API (`wrong_state` instead of a compile
//! error).

/// What `cancel` and `drain` check and move, in the caller's body:
/// `$cancelled` and `$next` name this session, `$advancing` says `$next`
/// moves far enough past `$cancelled`, `$cancelled` is not ahead of the
/// session; then `$next` is accepted if it is ahead. Returns the error from
/// the caller, nothing changed. A macro, not a function: as a call of its
/// own it cost a barge-in on the Cortex-M0 1,100 more instructions (the
/// caller's release was no longer inlined into it).
macro_rules! move_past {
    ($s:ident, $cancelled:ident, $next:ident, $advancing:expr) => {
        if !$cancelled.same_identity(&$s.fence) {
            return Err($s
                .fence
                .mismatch(crate::error::FenceRule::Identity, $cancelled));
        }
        if !$next.same_identity(&$s.fence) {
            return Err($cancelled.mismatch(crate::error::FenceRule::Identity, $next));
        }
        if !$advancing {
            return Err($cancelled.mismatch(crate::error::FenceRule::NotAdvancing, $next));
        }
        let current = $s.fence.position();
        if $cancelled.position() > current {
            return Err($s
                .fence
                .mismatch(crate::error::FenceRule::Ahead, $cancelled));
        }
        if $next.position() > current {
            $s.accept($next)?;
        }
    };
}

pub(crate) mod any;
mod attached;
mod closing;
mod drain;
pub(crate) mod expiry;
mod input;
mod live;
mod overlap;
#[cfg(feature = "serde")]
pub(crate) mod snapshot;
pub(crate) mod state;
#[cfg(test)]
mod tests;
mod unfinished;

use crate::append::Cursor;
use crate::completed::Completed;
use crate::error::{ConfigField, Error, Rejected};
use crate::fence::Fence;
use crate::fmt::debug;
use crate::id::IdText as _;
use crate::input::{InputBudget, InputLimits};
use crate::lease::{Lease, LeaseConfig};
use crate::mode::Modes;
use crate::overlap::{OverlapConfig, OverlapPolicy, OverlapState};
use crate::profile::{Conformance, IdOf, Profile, Tables};
use crate::requests::Requests;
use crate::storage::StoredId as _;
use crate::time::Instant;
use state::{Open, State, StateKind};

pub use live::Resumption;

/// How a session is opened: capabilities, lease, completed-append limit,
/// input limits, overlap policy and the two opaque configurations.
///
/// # Examples
///
/// ```
/// use duplex_core::{Duration, InputMode, LeaseConfig, Modes, OpenOptions};
///
/// let opts = OpenOptions::new("voice-a", 64_u32)
///     .modes(Modes::only(InputMode::AppendAudioChunk))
///     .lease(LeaseConfig::new(Some(Duration::from_secs(60)), Duration::from_secs(10))?)
///     .completed_limit(4);
/// assert_eq!(opts.session_config, "voice-a");
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpenOptions<SC = (), RC = ()> {
    /// Input modes the session accepts (default `{turn_commit_only}`).
    pub modes: Modes,
    /// Lease timing (default 300 s idle TTL, 30 s grace).
    pub lease: LeaseConfig,
    /// Completed-append limit in `1..=D`; `None` means `D`.
    pub completed_limit: Option<usize>,
    /// Limits of pending input (default 16 MiB and 4 turns).
    pub input_limits: InputLimits,
    /// How speech that overlaps the model's is treated (default
    /// `listen_only`, 700 ms, 1,200 ms).
    pub overlap: OverlapConfig,
    /// Opaque session configuration.
    pub session_config: SC,
    /// Opaque runtime configuration.
    pub runtime_config: RC,
}

impl Default for OpenOptions {
    /// No configurations; defaults for the rest.
    fn default() -> Self {
        OpenOptions::new((), ())
    }
}

impl<SC, RC> OpenOptions<SC, RC> {
    /// Options with the given configurations and defaults for the rest.
    ///
    /// ```
    /// # use duplex_core::OpenOptions;
    /// let o = OpenOptions::new((), ());
    /// assert!(o.completed_limit.is_none());
    /// ```
    pub fn new(session_config: SC, runtime_config: RC) -> Self {
        OpenOptions {
            modes: Modes::default(),
            lease: LeaseConfig::DEFAULT,
            completed_limit: None,
            input_limits: InputLimits::DEFAULT,
            overlap: OverlapConfig::DEFAULT,
            session_config,
            runtime_config,
        }
    }

    /// Sets the input modes.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes, OpenOptions};
    /// let o = OpenOptions::default().modes(Modes::only(InputMode::AppendTokens));
    /// assert!(o.modes.contains(InputMode::AppendTokens));
    /// ```
    #[must_use]
    pub fn modes(mut self, modes: Modes) -> Self {
        self.modes = modes;
        self
    }

    /// Sets the lease timing.
    ///
    /// ```
    /// # use duplex_core::{LeaseConfig, OpenOptions};
    /// let o = OpenOptions::default().lease(LeaseConfig::DEFAULT);
    /// assert_eq!(o.lease, LeaseConfig::DEFAULT);
    /// ```
    #[must_use]
    pub fn lease(mut self, lease: LeaseConfig) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the completed-append limit (checked against `D` at open).
    ///
    /// ```
    /// # use duplex_core::OpenOptions;
    /// let o = OpenOptions::default().completed_limit(2);
    /// assert_eq!(o.completed_limit, Some(2));
    /// ```
    #[must_use]
    pub fn completed_limit(mut self, limit: usize) -> Self {
        self.completed_limit = Some(limit);
        self
    }

    /// Sets the limits of pending input.
    ///
    /// ```
    /// # use duplex_core::{InputLimits, OpenOptions};
    /// let o = OpenOptions::default().input_limits(InputLimits::new(64 * 1024, 2));
    /// assert_eq!(o.input_limits.turns(), 2);
    /// ```
    #[must_use]
    pub fn input_limits(mut self, limits: InputLimits) -> Self {
        self.input_limits = limits;
        self
    }

    /// Sets the overlap policy and thresholds.
    ///
    /// ```
    /// # use duplex_core::OpenOptions;
    /// use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
    /// let o = OpenOptions::default().overlap(OverlapConfig::new(OverlapPolicy::Thresholds, 500, 1_000));
    /// assert_eq!(o.overlap.policy, OverlapPolicy::Thresholds);
    /// ```
    #[must_use]
    pub fn overlap(mut self, overlap: OverlapConfig) -> Self {
        self.overlap = overlap;
        self
    }
}

/// One client session's engine-side state, with its lifecycle state `S` in
/// the type.
///
/// Type parameters (defaults: the [`conformance`](crate::profile::conformance)
/// profile; see [`profile`](crate::profile) for the table):
/// - `S`: the state, one of [`Open`] (the default),
///   [`Detached`](crate::Detached), [`Closing`](crate::Closing),
///   [`Closed`](crate::Closed);
/// - `SC`, `RC`: the opaque session and runtime configurations;
/// - `R` request resources, `B` stage bindings, `D` completed appends, `A`
///   active operations, `L` id bytes, `K` stage results per completed
///   append.
///
/// A session is linear: it is neither `Clone` nor `Copy`, so there is never
/// a second live copy that could append after the first detached or release
/// the same requests twice. Read its facts through `&self`, or take an owned
/// view with the std adapter's `Snapshot`.
///
/// Operations a state does not permit are compile errors that say which
/// states they need; transitions consume the session and return the new
/// type, or the unchanged session inside a [`Rejected`].
///
/// # Examples
///
/// ```
/// use duplex_core::*;
///
/// let fence = Fence::new(Id::new("s1")?, 0);
/// let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
/// let mut s = Session::open(fence.clone(), opts, Instant::ZERO)?;
/// let a = s.append(&fence, InputMode::AppendAudioChunk)?;
/// assert_eq!((a.seq, a.turn_seq), (1, 1));
///
/// // Client drops: input is refused by the type, engine work may finish.
/// let mut s: Session<Detached> = s.detach(&fence, Instant::from_millis(10))?;
/// s.bind(&fence, 0, &Id::new("req-0")?)?;
/// // s.append(..) would not compile here.
/// let (s, generation) = s.resume(&fence, 0, Instant::from_millis(20))?;
/// assert_eq!(generation, 1);
/// let (closed, released) = s.begin_close(&fence, CloseReason::ClientClose)?.finalize();
/// assert_eq!(released.as_slice(), [Id::new("req-0")?]);
/// assert_eq!(closed.lease_generation(), 2);
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Session<S = Open, P: Profile = Conformance> {
    state: S,
    fence: Fence<IdOf<P>>,
    lease: Lease<P::Tables>,
    cursor: Cursor,
    requests: Requests<P::Tables>,
    completed: Completed<P::Tables>,
    input: InputBudget,
    overlap: OverlapState,
    overlap_policy: OverlapPolicy,
    config_generation: u64,
    session_config: P::SessionConfig,
    runtime_config: P::RuntimeConfig,
}

impl<SC: core::fmt::Debug + 'static, RC: core::fmt::Debug + 'static>
    Session<Open, Conformance<SC, RC>>
{
    /// Opens a session of the default profile at `now`, with `fence` as its
    /// first fence. (Sessions of another profile open with
    /// [`open_with_capacities`](Self::open_with_capacities).)
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the completed-append limit is not in `1..=D`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::from_millis(3))?;
    /// assert_eq!(s.last_activity(), Instant::from_millis(3));
    /// let too_many = OpenOptions::default().completed_limit(9);
    /// assert_eq!(Session::open(f, too_many, Instant::ZERO).unwrap_err().kind(), ErrorKind::InvalidConfig);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn open(fence: Fence, options: OpenOptions<SC, RC>, now: Instant) -> Result<Self, Error> {
        Self::open_with_capacities(fence, options, now)
    }
}

impl<P: Profile> Session<Open, P> {
    /// Opens a session of any profile (the type names it, for example
    /// `Session<Open, Device>`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the completed-append limit is not in `1..=D`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::profile::{Capacities, Profile};
    /// #[derive(Debug)]
    /// struct Small;
    /// impl Profile for Small {
    ///     type SessionConfig = ();
    ///     type RuntimeConfig = ();
    ///     type Tables = Capacities<2, 1, 2, 1, 8, 1>;
    /// }
    /// type Tiny<S = Open> = Session<S, Small>;
    /// let s = Tiny::open_with_capacities(Fence::new(Id::new("t")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.completed_limit(), 2);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn open_with_capacities(
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        now: Instant,
    ) -> Result<Self, Error> {
        let limit = Self::completed_limit_of(&options)?;
        debug!("duplex session {=str}: open", fence.session.as_str());
        Ok(Session {
            state: Open,
            fence,
            lease: Lease::new(options.lease, now),
            cursor: Cursor::default(),
            requests: Requests::new(),
            completed: Completed::new(limit, options.modes),
            input: InputBudget::new(options.input_limits),
            overlap: OverlapState::new(options.overlap),
            overlap_policy: options.overlap.policy,
            config_generation: 0,
            session_config: options.session_config,
            runtime_config: options.runtime_config,
        })
    }
}

impl<P: Profile> Session<Open, P> {
    /// Turns this value into a freshly opened session, in place: the same
    /// result as `*self = Session::open_with_capacities(fence, options,
    /// now)?`, without building a new value (the tables are emptied, not
    /// rewritten). For hosts that keep sessions in reusable storage (a
    /// static on a device, a slab on a server): the old session is gone,
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
    /// let mut s = Session::open(a.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(&a, InputMode::TurnCommitOnly)?;
    /// let b = Fence::new(Id::new("b")?, 3);
    /// s.recycle(b.clone(), OpenOptions::default(), Instant::from_millis(5))?;
    /// assert_eq!((s.fence(), s.input_seq(), s.last_activity()), (&b, 0, Instant::from_millis(5)));
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn recycle(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        now: Instant,
    ) -> Result<(), Error> {
        let limit = Self::completed_limit_of(&options)?;
        debug!(
            "duplex session {=str}: open (recycled)",
            fence.session.as_str()
        );
        self.fence = fence;
        self.lease.reset(options.lease, now);
        self.cursor = Cursor::default();
        self.requests.clear();
        self.completed.reset(limit, options.modes);
        self.input = InputBudget::new(options.input_limits);
        self.overlap = OverlapState::new(options.overlap);
        self.overlap_policy = options.overlap.policy;
        self.config_generation = 0;
        self.session_config = options.session_config;
        self.runtime_config = options.runtime_config;
        Ok(())
    }
}

impl<S: State, P: Profile> Session<S, P> {
    /// The completed-append limit `options` asks for, checked against `D`.
    fn completed_limit_of(
        options: &OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<u16, Error> {
        let () = <P::Tables as Tables>::CHECKED;
        let capacity = <P::Tables as Tables>::COMPLETED;
        let limit = options.completed_limit.unwrap_or(capacity);
        u16::try_from(limit)
            .ok()
            .filter(|l| *l >= 1 && limit <= capacity)
            .ok_or(Error::InvalidConfig {
                field: ConfigField::CompletedAppendLimit,
                value: u64::try_from(limit).unwrap_or(u64::MAX),
                expected: "1..=D (the completed-append capacity)",
            })
    }

    /// Moves to state `T`: the one place where a session changes state, and
    /// its one log line (`state=open=>detached`).
    fn into_state<T: State>(self, state: T) -> Session<T, P> {
        if S::KIND != T::KIND {
            debug!(
                "duplex session {=str}: state={=str}=>{=str}",
                self.fence.session.as_str(),
                S::KIND.as_str(),
                T::KIND.as_str()
            );
        }
        Session {
            state,
            fence: self.fence,
            lease: self.lease,
            cursor: self.cursor,
            requests: self.requests,
            completed: self.completed,
            input: self.input,
            overlap: self.overlap,
            overlap_policy: self.overlap_policy,
            config_generation: self.config_generation,
            session_config: self.session_config,
            runtime_config: self.runtime_config,
        }
    }

    /// Runs the checks of a transition: on failure the session comes back,
    /// unchanged (checks change nothing when they fail), inside the error.
    fn guarded(
        mut self,
        check: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<Self, Rejected<Self>> {
        match check(&mut self) {
            Ok(()) => Ok(self),
            Err(error) => Err(Rejected {
                error,
                session: self,
            }),
        }
    }

    /// The current fence.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 2);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.fence(), &f);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn fence(&self) -> &Fence<IdOf<P>> {
        &self.fence
    }

    /// Bytes the session's tables hold on the heap (the rows' capacity and
    /// the ids' text; the allocator's own bookkeeping not counted): 0 with
    /// [`Inline`](crate::storage::Inline) storage, where `size_of` is the whole cost.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("req")?)?;
    /// assert_eq!(s.heap_bytes(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn heap_bytes(&self) -> usize {
        self.lease.active.heap_bytes() + self.requests.heap_bytes() + self.completed.heap_bytes()
    }

    /// The session id.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.id().as_str(), "s");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn id(&self) -> &IdOf<P> {
        &self.fence.session
    }

    /// The lease generation: +1 per resume and once on close.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.lease_generation(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn lease_generation(&self) -> u64 {
        self.lease.generation
    }

    /// The control id of the resume that produced the current generation
    /// (see [`resume_idempotent`](Self::resume_idempotent)); `None` after
    /// the open, a resume without one, or a close.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.resumed_by(), None);
    /// let Resumption::Resumed(s, _) = s.resume_idempotent(&f, 0, &Id::new("c")?, Instant::ZERO)? else {
    ///     unreachable!()
    /// };
    /// assert_eq!(s.resumed_by(), Some("c"));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resumed_by(&self) -> Option<&str> {
        let control = &self.lease.resumed_by;
        (!control.is_unused()).then(|| control.text())
    }

    /// Checks that the lease is still at `generation`, the one a connection
    /// was handed when it opened or resumed the session: a host whose
    /// connections can race a takeover checks it, under the same lock,
    /// before it acts for a connection, so a superseded connection never
    /// detaches, closes or feeds its successor's session.
    ///
    /// # Errors
    ///
    /// [`Error::GenerationMismatch`] if a newer connection holds the lease.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.check_generation(0)?;
    /// let (s, _) = s.resume(&f, 0, Instant::ZERO)?; // a second connection takes over
    /// assert_eq!(s.check_generation(0).unwrap_err(), Error::GenerationMismatch { expected: 1, actual: 0 });
    /// # Ok::<(), Error>(())
    /// ```
    pub fn check_generation(&self, generation: u64) -> Result<(), Error> {
        if self.lease.generation == generation {
            Ok(())
        } else {
            Err(Error::GenerationMismatch {
                expected: self.lease.generation,
                actual: generation,
            })
        }
    }

    /// The state marker with its per-state data.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::from_millis(7))?;
    /// assert_eq!(d.state().since(), Instant::from_millis(7));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The runtime name of the state.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.kind(), StateKind::Open);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn kind(&self) -> StateKind {
        S::KIND
    }
}
