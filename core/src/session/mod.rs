//! The typed session: `Session<S>` with one `impl` block per set of states
//! that SPEC §5 permits an operation in.
//!
//! | block | states | operations |
//! |---|---|---|
//! | `impl Session<Open>` | Open | open, detach, resume (takeover), begin_operation, prepare_append, append |
//! | `impl Session<Detached>` | Detached | resume (→ Open) |
//! | `impl<S: Live>` | Open, Detached | touch, end_operation, commit_append, completed, record_completed, reserve, bind, accept_fence, cancel, replace_configs, begin_close (→ Closing), expire (→ Closing) |
//! | `impl<S: Unfinished>` | Open, Detached, Closing | stage/resource ids, release, release_fence, inspection |
//! | `impl Session<Closing>` | Closing | begin_close (no-op, fence accepted), finalize (→ Closed) |
//! | `impl<S: State>` | all | fence, id, lease generation, state data |

mod closing;
mod live;
mod open;
pub(crate) mod state;
#[cfg(test)]
mod tests;

use crate::append::Cursor;
use crate::completed::Completed;
use crate::error::{ConfigField, Error};
use crate::fence::Fence;
use crate::fmt::debug;
use crate::id::Id;
use crate::lease::{Lease, LeaseConfig};
use crate::mode::Modes;
use crate::requests::Requests;
use crate::time::Instant;
use state::{State, Unfinished};

/// How a session is opened: capabilities, lease, completed-append limit and
/// the two opaque configurations.
///
/// # Examples
///
/// ```
/// use duplex_core::{Duration, InputMode, LeaseConfig, Modes, OpenOptions};
///
/// let opts: OpenOptions<&str, u32> = OpenOptions::new("voice-a", 64)
///     .modes(Modes::only(InputMode::AppendAudioChunk))
///     .lease(LeaseConfig::new(Some(Duration::from_secs(60)), Duration::from_secs(10))?)
///     .completed_limit(4);
/// assert_eq!(opts.session_config, "voice-a");
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpenOptions<SC = (), RC = ()> {
    /// Input modes the session accepts (default `{turn_commit_only}`).
    pub modes: Modes,
    /// Lease timing (default 300 s idle TTL, 30 s grace).
    pub lease: LeaseConfig,
    /// Completed-append limit in `1..=D`; `None` means `D`.
    pub completed_limit: Option<usize>,
    /// Opaque session configuration.
    pub session_config: SC,
    /// Opaque runtime configuration.
    pub runtime_config: RC,
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
            session_config,
            runtime_config,
        }
    }

    /// Sets the input modes.
    ///
    /// ```
    /// # use duplex_core::{InputMode, Modes, OpenOptions};
    /// let o = OpenOptions::default().modes(Modes::only(InputMode::AppendTokens));
    /// # let _: OpenOptions = o;
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
    /// # let _: OpenOptions = o;
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
    /// # let _: OpenOptions = o;
    /// ```
    #[must_use]
    pub fn completed_limit(mut self, limit: usize) -> Self {
        self.completed_limit = Some(limit);
        self
    }
}

/// One client session's engine-side state, with its lifecycle state `S` in
/// the type.
///
/// Type parameters (defaults are the conformance profile):
/// - `S`: the state, one of [`Open`](crate::Open) (the default),
///   [`Detached`](crate::Detached), [`Closing`](crate::Closing),
///   [`Closed`](crate::Closed);
/// - `SC`, `RC`: the opaque session and runtime configurations;
/// - `R` request resources (8), `B` stage bindings (4), `D` completed appends
///   (8), `A` active operations (4), `L` id bytes (32), `K` stage results per
///   completed append (4). Each table is at most 255 entries.
///
/// Operations a state does not permit do not exist on that type; transitions
/// consume the session and return the new type, or the unchanged session in
/// a [`Rejected`](crate::Rejected).
///
/// # Examples
///
/// ```
/// use duplex_core::*;
///
/// let fence = Fence::new(Id::new("s1")?, 0);
/// let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
/// let mut s: Session<Open> = Session::open(fence.clone(), opts, Instant::ZERO)?;
/// let a = s.append(InputMode::AppendAudioChunk, &fence)?;
/// assert_eq!((a.seq, a.turn_seq), (1, 1));
///
/// // Client drops: input is refused by the type, engine work may finish.
/// let mut s: Session<Detached> = s.detach(&fence, Instant::from_millis(10)).unwrap();
/// s.bind(0, &Id::new("req-0")?, &fence)?;
/// // s.append(..) would not compile here.
/// let (s, generation) = s.resume(&fence, 0, Instant::from_millis(20)).unwrap();
/// assert_eq!(generation, 1);
/// let (closed, released) = s.begin_close(&fence, CloseReason::ClientClose).unwrap().finalize();
/// assert_eq!(released.as_slice(), [Id::new("req-0")?]);
/// assert_eq!(closed.lease_generation(), 2);
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Session<
    S = state::Open,
    SC = (),
    RC = (),
    const R: usize = 8,
    const B: usize = 4,
    const D: usize = 8,
    const A: usize = 4,
    const L: usize = 32,
    const K: usize = 4,
> {
    state: S,
    fence: Fence<L>,
    lease: Lease<A, L>,
    modes: Modes,
    cursor: Cursor,
    requests: Requests<R, B, L>,
    completed: Completed<D, L, K>,
    config_generation: u64,
    session_config: SC,
    runtime_config: RC,
}

impl<
        S: State,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<S, SC, RC, R, B, D, A, L, K>
{
    /// Compile-time checks of the capacity profile (tables use `u8` lengths).
    const PROFILE_OK: () = {
        assert!(R >= 1 && R <= 255, "R (request resources) must be 1..=255");
        assert!(B >= 1 && B <= 255, "B (stage bindings) must be 1..=255");
        assert!(D >= 1 && D <= 255, "D (completed appends) must be 1..=255");
        assert!(A >= 1 && A <= 255, "A (active operations) must be 1..=255");
        assert!(K <= 255, "K (stage results) must be at most 255");
        assert!(L >= 1 && L <= 255, "L (id bytes) must be 1..=255");
    };

    /// Moves to state `T`: the one place where a session changes state.
    fn into_state<T: State>(self, state: T) -> Session<T, SC, RC, R, B, D, A, L, K> {
        debug!(
            "duplex session {=str}: state={=str}=>{=str}",
            self.fence.session.as_str(),
            S::KIND.as_str(),
            T::KIND.as_str()
        );
        Session {
            state,
            fence: self.fence,
            lease: self.lease,
            modes: self.modes,
            cursor: self.cursor,
            requests: self.requests,
            completed: self.completed,
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
    ) -> Result<Self, crate::Rejected<Self>> {
        match check(&mut self) {
            Ok(()) => Ok(self),
            Err(error) => Err(crate::Rejected {
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
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.fence(), &f);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn fence(&self) -> &Fence<L> {
        &self.fence
    }

    /// The session id.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.id().as_str(), "s");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn id(&self) -> &Id<L> {
        &self.fence.session
    }

    /// The lease generation: +1 per resume and once on close.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.lease_generation(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn lease_generation(&self) -> u64 {
        self.lease.generation
    }

    /// The state marker with its per-state data.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::from_millis(7)).unwrap();
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
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.kind(), StateKind::Open);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn kind(&self) -> StateKind {
        S::KIND
    }
}

use state::StateKind;

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<state::Open, SC, RC, R, B, D, A, L, K>
{
    /// Opens a session at `now` with `fence` as its first fence.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the completed-append limit is not in `1..=D`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::from_millis(3))?;
    /// assert_eq!(s.last_activity(), Instant::from_millis(3));
    /// let too_many = OpenOptions::default().completed_limit(9);
    /// assert!(Session::<Open>::open(f, too_many, Instant::ZERO).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn open(
        fence: Fence<L>,
        options: OpenOptions<SC, RC>,
        now: Instant,
    ) -> Result<Self, Error> {
        let () = Self::PROFILE_OK;
        let limit = options.completed_limit.unwrap_or(D);
        if limit == 0 || limit > D {
            return Err(Error::InvalidConfig {
                field: ConfigField::CompletedAppendLimit,
                value: limit as u64,
                expected: "1..=D (the completed-append capacity)",
            });
        }
        debug!("duplex session {=str}: open", fence.session.as_str());
        Ok(Session {
            state: state::Open,
            fence,
            lease: Lease::new(options.lease, now),
            modes: options.modes,
            cursor: Cursor::default(),
            requests: Requests::new(),
            // `limit <= D <= 255` (PROFILE_OK).
            completed: Completed::new(limit as u8),
            config_generation: 0,
            session_config: options.session_config,
            runtime_config: options.runtime_config,
        })
    }
}

/// Inspection, for every state that still holds its tables.
impl<
        S: Unfinished,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<S, SC, RC, R, B, D, A, L, K>
{
    /// SPEC §2 `accept` after validation: an epoch change resets the append
    /// cursor and clears the completed-append cache. Identity is unchanged
    /// (validated), so only the position moves.
    fn accept_validated(&mut self, fence: &Fence<L>) {
        if fence.epoch != self.fence.epoch {
            self.cursor = crate::append::Cursor::default();
            self.completed.clear();
        }
        self.fence.epoch = fence.epoch;
        self.fence.turn = fence.turn;
        self.fence.response = fence.response;
    }

    /// The epoch's input sequence: the `seq` of the last committed append.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(InputMode::TurnCommitOnly, &f)?;
    /// assert_eq!(s.input_seq(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn input_seq(&self) -> u64 {
        self.cursor.seq
    }

    /// The turn-local sequence of the last committed append.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(InputMode::TurnCommitOnly, &f)?;
    /// s.append(InputMode::TurnCommitOnly, &f.clone().with_turn(1))?;
    /// assert_eq!((s.input_seq(), s.input_turn_seq()), (2, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn input_turn_seq(&self) -> u64 {
        self.cursor.turn_seq
    }

    /// When the lease last saw activity.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.touch(&f, Activity::Heartbeat, Instant::from_millis(9))?;
    /// assert_eq!(s.last_activity(), Instant::from_millis(9));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn last_activity(&self) -> Instant {
        self.lease.last_activity
    }

    /// The lease configuration.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.lease_config(), LeaseConfig::DEFAULT);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn lease_config(&self) -> LeaseConfig {
        self.lease.config
    }

    /// The session's input modes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.modes(), Modes::default());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn modes(&self) -> Modes {
        self.modes
    }

    /// Active lease operations, in no particular order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.begin_operation(&f, &Id::new("op")?, Instant::ZERO)?;
    /// assert_eq!(s.active_operations().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn active_operations(&self) -> impl Iterator<Item = &Id<L>> {
        self.lease.active.iter()
    }

    /// Stage bindings `(stage, request id)`, in binding order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(2, &Id::new("r")?, &f)?;
    /// assert_eq!(s.bindings().next().map(|(st, r)| (st, r.as_str())), Some((2, "r")));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn bindings(&self) -> impl Iterator<Item = (u32, &Id<L>)> {
        self.requests.bindings().map(|b| (b.stage, &b.request))
    }

    /// Request resources `(stage, request id, submitted)`, in reservation order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(1, &Id::new("r")?, &f)?;
    /// assert_eq!(s.resources().next().map(|(st, _, sub)| (st, sub)), Some((1, false)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resources(&self) -> impl Iterator<Item = (u32, &Id<L>, bool)> {
        self.requests
            .resources
            .iter()
            .map(|r| (r.stage, &r.request, r.submitted))
    }

    /// Operation ids of the completed-append cache, oldest first.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.record_completed(&Id::new("op1")?, &f, InputMode::TurnCommitOnly, true, &[7])?;
    /// assert_eq!(s.completed_operations().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_operations(&self) -> impl Iterator<Item = &Id<L>> {
        self.completed.ops()
    }

    /// The completed-append limit in force (`1..=D`).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.completed_limit(), 8);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_limit(&self) -> usize {
        self.completed.limit()
    }

    /// +1 for every `replace_configs` that replaced anything.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.config_generation(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn config_generation(&self) -> u64 {
        self.config_generation
    }

    /// The opaque session configuration.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session<Open, &str> = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::new("v", ()), Instant::ZERO)?;
    /// assert_eq!(*s.session_config(), "v");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn session_config(&self) -> &SC {
        &self.session_config
    }

    /// The opaque runtime configuration.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s: Session<Open, (), u8> = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::new((), 3), Instant::ZERO)?;
    /// assert_eq!(*s.runtime_config(), 3);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn runtime_config(&self) -> &RC {
        &self.runtime_config
    }

    /// Whether `fence` names this session's id and incarnation: a filter
    /// fence of any other identity matches nothing.
    fn filter(&self, fence: Option<&Fence<L>>) -> (bool, Option<crate::fence::Position>) {
        match fence {
            None => (true, None),
            Some(f) => (f.same_identity(&self.fence), Some(f.position())),
        }
    }

    /// Request ids of the stage bindings, optionally only those bound at
    /// exactly `fence`; in binding order (one per stage, so an id bound on
    /// two stages appears twice).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(0, &Id::new("a")?, &f)?;
    /// s.bind(1, &Id::new("b")?, &f.clone().with_turn(1))?;
    /// let ids: Vec<&str> = s.stage_request_ids(Some(&f)).map(|i| i.as_str()).collect();
    /// assert_eq!(ids, ["a"]);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn stage_request_ids(&self, fence: Option<&Fence<L>>) -> impl Iterator<Item = &Id<L>> {
        let (same, at) = self.filter(fence);
        self.requests.stage_ids(at).filter(move |_| same)
    }

    /// Unique request ids of the resources, optionally only those at exactly
    /// `fence` and with the given submitted flag; in reservation order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(0, &Id::new("a")?, &f)?;
    /// s.bind(1, &Id::new("b")?, &f)?;
    /// let reserved: Vec<&str> = s.resource_request_ids(None, Some(false)).map(|i| i.as_str()).collect();
    /// assert_eq!(reserved, ["a"]);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resource_request_ids(
        &self,
        fence: Option<&Fence<L>>,
        submitted: Option<bool>,
    ) -> impl Iterator<Item = &Id<L>> {
        let (same, at) = self.filter(fence);
        self.requests
            .resource_ids(at, submitted)
            .filter(move |_| same)
    }

    /// Drops the bindings and resources whose request id is in `ids`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(0, &Id::new("a")?, &f)?;
    /// s.release(&["a"]);
    /// assert_eq!(s.resources().count(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release<I: AsRef<str>>(&mut self, ids: &[I]) {
        self.requests.release(ids);
    }

    /// Returns the unique request ids held at exactly `fence`, then drops
    /// those resources and bindings. No fence validation (SPEC §4).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(0, &Id::new("a")?, &f)?;
    /// assert_eq!(s.release_fence(&f).len(), 1);
    /// assert_eq!(s.bindings().count(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_fence(&mut self, fence: &Fence<L>) -> crate::RequestIds<L, R> {
        if fence.same_identity(&self.fence) {
            self.requests.release_position(fence.position())
        } else {
            crate::RequestIds::new()
        }
    }
}
