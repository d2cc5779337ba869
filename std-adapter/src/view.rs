//! [`SessionView`]: an owned, read-only view of a session's facts.

use duplex_core::id::IdText;
use duplex_core::overlap::OverlapConfig;
use duplex_core::profile::{Profile, Tables};
use duplex_core::storage::StoredId;
use duplex_core::{
    AnySession, CloseReason, Fence, Id, InputLimits, Instant, Modes, PendingInput, RequestState,
    Session, StateKind, Unfinished,
};

/// Everything observable about a session, as plain owned values: for
/// inspection, logs and comparing a session before and after an operation.
/// A view, never a second live session.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_std::SessionView;
///
/// let f = Fence::new(Id::new("s")?, 0);
/// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
/// s.reserve(&f, 0, &Id::new("r")?)?;
/// let view = SessionView::of(&AnySession::from(s)).unwrap();
/// assert_eq!(view.resources, [(0, Id::new("r")?, RequestState::Reserved)]);
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionView<I = Id> {
    /// The state.
    pub state: StateKind,
    /// The current fence.
    pub fence: Fence<I>,
    /// Input sequence of the epoch.
    pub input_seq: u64,
    /// Turn-local input sequence.
    pub input_turn_seq: u64,
    /// Lease generation.
    pub lease_generation: u64,
    /// Configuration generation.
    pub config_generation: u64,
    /// The control id of the resume that produced the lease generation
    /// (see [`Sessions::resume_idempotent`](crate::Sessions::resume_idempotent)).
    pub resumed_by: Option<I>,
    /// Last lease activity.
    pub last_activity: Instant,
    /// When the client detached (Detached only).
    pub detached_at: Option<Instant>,
    /// Active operations, sorted.
    pub active_operations: Vec<I>,
    /// Stage bindings `(stage, request)`, in binding order.
    pub bindings: Vec<(u32, I)>,
    /// Resources `(stage, request, state)`, in reservation order.
    pub resources: Vec<(u32, I, RequestState)>,
    /// Completed-append operation ids, oldest first.
    pub completed: Vec<I>,
    /// Why it is closing (Closing only).
    pub close_reason: Option<CloseReason>,
    /// Input modes.
    pub modes: Modes,
    /// Pending input against the session's limits.
    pub pending_input: PendingInput,
    /// The session's input limits.
    pub input_limits: InputLimits,
    /// Overlapping speech heard since the last reset, in ms.
    pub overlap_speech_ms: u32,
    /// The session's overlap policy and thresholds.
    pub overlap: OverlapConfig,
}

impl<I: IdText> SessionView<I> {
    /// The view of a session that still holds its tables (`None` for a
    /// closed one, which only reports its final facts).
    ///
    /// See the type-level example.
    pub fn of<P: Profile<Tables = T>, T: Tables<Id = I>>(session: &AnySession<P>) -> Option<Self> {
        if let Some(s) = session.as_open() {
            Some(Self::of_typed(s, None, None))
        } else if let Some(s) = session.as_detached() {
            Some(Self::of_typed(s, Some(s.state().since()), None))
        } else {
            let s = session.as_closing()?;
            Some(Self::of_typed(s, None, Some(s.state().reason())))
        }
    }

    fn of_typed<S: Unfinished, P: Profile<Tables = T>, T: Tables<Id = I>>(
        s: &Session<S, P>,
        detached_at: Option<Instant>,
        close_reason: Option<CloseReason>,
    ) -> Self {
        let mut active_operations: Vec<I> = s.active_operations().map(StoredId::to_id).collect();
        active_operations.sort();
        SessionView {
            state: s.kind(),
            fence: s.fence().clone(),
            input_seq: s.input_seq(),
            input_turn_seq: s.input_turn_seq(),
            lease_generation: s.lease_generation(),
            config_generation: s.config_generation(),
            resumed_by: s.resumed_by().and_then(|c| I::new(c).ok()),
            last_activity: s.last_activity(),
            detached_at,
            active_operations,
            bindings: s.bindings().map(|(st, r)| (st, r.to_id())).collect(),
            resources: s
                .resources()
                .map(|(st, r, state)| (st, r.to_id(), state))
                .collect(),
            completed: s.completed_operations().map(StoredId::to_id).collect(),
            close_reason,
            modes: s.modes(),
            pending_input: s.pending_input(),
            input_limits: s.input_limits(),
            overlap_speech_ms: s.overlap_speech_ms(),
            overlap: s.overlap_config(),
        }
    }
}
