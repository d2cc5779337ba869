//! Operations of sessions that still hold their tables (`S: Unfinished`:
//! Open, Detached, Closing): inspection, id queries, release, and
//! `begin_close`.

use super::state::{Closing, State, Unfinished};
use super::Session;
use crate::completed::CompletedAppend;
use crate::error::{Error, Rejected};
use crate::fence::{Fence, Position};
use crate::fmt::debug;
use crate::id::IdText as _;
use crate::lease::{CloseReason, LeaseConfig};
use crate::mode::Modes;
use crate::profile::{IdOf, Profile, Tables};
use crate::requests::{RequestIds, RequestState};
use crate::storage::StoredId;
use crate::time::Instant;

impl<S: State, P: Profile> Session<S, P> {
    /// Fence acceptance: validates, then makes `fence` current.
    #[inline]
    pub(super) fn accept(&mut self, fence: &Fence<IdOf<P>>) -> Result<(), Error> {
        self.fence.admits(fence)?;
        self.accept_validated(fence);
        Ok(())
    }

    /// Acceptance after validation: an epoch change resets the append
    /// cursor, clears the completed-append cache and forgets the
    /// overlapping speech heard (it belonged to the cancelled response). Identity is unchanged
    /// (validated), so only the position moves.
    #[inline]
    pub(super) fn accept_validated(&mut self, fence: &Fence<IdOf<P>>) {
        if fence.epoch != self.fence.epoch {
            self.cursor = crate::append::Cursor::default();
            self.completed.clear();
            self.overlap.reset();
        }
        self.fence.epoch = fence.epoch;
        self.fence.turn = fence.turn;
        self.fence.response = fence.response;
    }

    /// Irreversibly starts closing: accepts `fence` (a newer one is taken,
    /// with the epoch-change resets), records `reason`, bumps the lease
    /// generation and clears active operations. Resources stay until
    /// [`finalize`](Session::finalize). On a session that is already
    /// closing the fence is still accepted and the first reason is kept.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`] if `fence` is
    /// refused (a stale close never closes the live session).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let stale = Fence::new(Id::new("s")?, 7);
    /// let s = s.begin_close(&stale, CloseReason::ClientClose).unwrap_err().session;
    /// let closing = s.begin_close(&f, CloseReason::ClientClose)?;
    /// assert_eq!(closing.lease_generation(), 1);
    /// // Again, with a newer fence: taken; the first reason stays.
    /// let closing = closing.begin_close(&f.clone().with_epoch(2), CloseReason::ExplicitClose)?;
    /// assert_eq!((closing.state().reason(), closing.fence().epoch), (CloseReason::ClientClose, 2));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn begin_close(
        self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<Session<Closing, P>, Rejected<Self>>
    where
        S: Unfinished,
    {
        let session = self.guarded(|s| s.accept(fence))?;
        match session.state.close_reason() {
            Some(first) => {
                debug!(
                    "duplex session {=str}: already closing ({=str}); {=str} not recorded",
                    session.fence.session.as_str(),
                    first.as_str(),
                    reason.as_str()
                );
                Ok(session.into_state(Closing::new(first)))
            }
            None => Ok(session.close_now(reason)),
        }
    }

    /// The epoch's input sequence: the `seq` of the last committed append.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(s.input_seq(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn input_seq(&self) -> u64
    where
        S: Unfinished,
    {
        self.cursor.seq
    }

    /// The turn-local sequence of the last committed append.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(&f, InputMode::TurnCommitOnly)?;
    /// s.append(&f.clone().with_turn(1), InputMode::TurnCommitOnly)?;
    /// assert_eq!((s.input_seq(), s.input_turn_seq()), (2, 1));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn input_turn_seq(&self) -> u64
    where
        S: Unfinished,
    {
        self.cursor.turn_seq
    }

    /// When the lease last saw activity.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.touch(&f, Activity::Heartbeat, Instant::from_millis(9))?;
    /// assert_eq!(s.last_activity(), Instant::from_millis(9));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn last_activity(&self) -> Instant
    where
        S: Unfinished,
    {
        self.lease.last_activity
    }

    /// The lease configuration.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.lease_config(), LeaseConfig::DEFAULT);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn lease_config(&self) -> LeaseConfig
    where
        S: Unfinished,
    {
        self.lease.config
    }

    /// The session's input modes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.modes(), Modes::default());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn modes(&self) -> Modes
    where
        S: Unfinished,
    {
        self.completed.modes()
    }

    /// Active lease operations, in no particular order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.begin_operation(&f, &Id::new("op")?, Instant::ZERO)?;
    /// assert_eq!(s.active_operations().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn active_operations(&self) -> impl Iterator<Item = &<P::Tables as Tables>::StoredId>
    where
        S: Unfinished,
    {
        self.lease.active.iter()
    }

    /// Stage bindings `(stage, request id)`, in binding order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 2, &Id::new("r")?)?;
    /// assert_eq!(s.bindings().next().map(|(st, r)| (st, r.as_str())), Some((2, "r")));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn bindings(&self) -> impl Iterator<Item = (u32, &<P::Tables as Tables>::StoredId)>
    where
        S: Unfinished,
    {
        self.requests.bindings().map(|b| (b.stage, b.request))
    }

    /// Request resources `(stage, request id, state)`, in reservation order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(&f, 1, &Id::new("r")?)?;
    /// assert_eq!(s.resources().next().map(|(st, _, state)| (st, state)), Some((1, RequestState::Reserved)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resources(
        &self,
    ) -> impl Iterator<Item = (u32, &<P::Tables as Tables>::StoredId, RequestState)>
    where
        S: Unfinished,
    {
        self.requests
            .rows()
            .map(|r| (r.stage, r.request, r.state()))
    }

    /// Stage bindings with the fence each was bound under `(stage, request
    /// id, fence)`, in binding order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f.clone().with_turn(3), 2, &Id::new("r")?)?;
    /// assert_eq!(s.bindings_with_fences().next().map(|(_, _, at)| at.turn), Some(3));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn bindings_with_fences(
        &self,
    ) -> impl Iterator<Item = (u32, &<P::Tables as Tables>::StoredId, Fence<IdOf<P>>)>
    where
        S: Unfinished,
    {
        self.requests
            .bindings()
            .map(|b| (b.stage, b.request, self.fence.at(b.position)))
    }

    /// Request resources with the fence each is held under `(stage, request
    /// id, state, fence)`, in reservation order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(&f, 1, &Id::new("r")?)?;
    /// assert_eq!(s.resources_with_fences().next().map(|(_, _, _, at)| at), Some(f));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resources_with_fences(
        &self,
    ) -> impl Iterator<
        Item = (
            u32,
            &<P::Tables as Tables>::StoredId,
            RequestState,
            Fence<IdOf<P>>,
        ),
    >
    where
        S: Unfinished,
    {
        self.requests
            .rows()
            .map(|r| (r.stage, r.request, r.state(), self.fence.at(r.position)))
    }

    /// The completed appends `(operation id, results)`, oldest first, as
    /// recorded: for hosts that show the cache (a lookup that answers a
    /// retry is [`completed`](Self::completed), which checks the fence,
    /// mode and finality).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.record_completed(&f, &Id::new("op1")?, InputMode::TurnCommitOnly, Finality::Final, &[7])?;
    /// let (op, results) = s.completed_records().next().unwrap();
    /// assert_eq!((op.as_str(), results), ("op1", &[7][..]));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_records(
        &self,
    ) -> impl Iterator<Item = (&<P::Tables as Tables>::StoredId, &[i64])>
    where
        S: Unfinished,
    {
        self.completed.results()
    }

    /// How many completed appends the cache holds (O(1); the iterators
    /// above walk the cache).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.record_completed(&f, &Id::new("op1")?, InputMode::TurnCommitOnly, Finality::Final, &[7])?;
    /// assert_eq!(s.completed_len(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_len(&self) -> usize
    where
        S: Unfinished,
    {
        self.completed.len()
    }

    /// The completed-append cache, oldest first, with each record's fence
    /// position, mode and finality.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0).with_epoch(2);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.record_completed(&f, &Id::new("op1")?, InputMode::TurnCommitOnly, Finality::Final, &[7])?;
    /// let r = s.completed_appends().next().unwrap();
    /// assert_eq!((r.operation.as_str(), r.epoch, r.own_identity), ("op1", 2, true));
    /// assert_eq!((r.mode, r.finality, r.results), (InputMode::TurnCommitOnly, Finality::Final, &[7][..]));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_appends(
        &self,
    ) -> impl Iterator<Item = CompletedAppend<'_, <P::Tables as Tables>::StoredId>>
    where
        S: Unfinished,
    {
        self.completed.entries()
    }

    /// Operation ids of the completed-append cache, oldest first.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.record_completed(&f, &Id::new("op1")?, InputMode::TurnCommitOnly, Finality::Final, &[7])?;
    /// assert_eq!(s.completed_operations().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_operations(&self) -> impl Iterator<Item = &<P::Tables as Tables>::StoredId>
    where
        S: Unfinished,
    {
        self.completed.ops()
    }

    /// The completed-append limit in force (`1..=D`).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.completed_limit(), 8);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn completed_limit(&self) -> usize
    where
        S: Unfinished,
    {
        self.completed.limit()
    }

    /// +1 for every `replace_configs` that replaced anything.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.config_generation(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn config_generation(&self) -> u64
    where
        S: Unfinished,
    {
        self.config_generation
    }

    /// The opaque session configuration.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::new("v", ()), Instant::ZERO)?;
    /// assert_eq!(*s.session_config(), "v");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn session_config(&self) -> &P::SessionConfig
    where
        S: Unfinished,
    {
        &self.session_config
    }

    /// The opaque runtime configuration.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let s = Session::open(Fence::new(Id::new("s")?, 0), OpenOptions::new((), 3_u8), Instant::ZERO)?;
    /// assert_eq!(*s.runtime_config(), 3);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn runtime_config(&self) -> &P::RuntimeConfig
    where
        S: Unfinished,
    {
        &self.runtime_config
    }

    /// The position a filter fence selects, or `None` for "all"; a filter
    /// of another identity selects nothing (`Err`).
    fn filter(&self, fence: Option<&Fence<IdOf<P>>>) -> Result<Option<Position>, ()> {
        match fence {
            None => Ok(None),
            Some(f) if f.same_identity(&self.fence) => Ok(Some(f.position())),
            Some(_) => Err(()),
        }
    }

    /// Request ids of the stage bindings, optionally only those bound at
    /// exactly `fence`; in binding order (one per stage, so an id bound on
    /// two stages appears twice).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("a")?)?;
    /// s.bind(&f.clone().with_turn(1), 1, &Id::new("b")?)?;
    /// let ids: Vec<&str> = s.stage_request_ids(Some(&f)).map(|i| i.as_str()).collect();
    /// assert_eq!(ids, ["a"]);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn stage_request_ids(
        &self,
        fence: Option<&Fence<IdOf<P>>>,
    ) -> impl Iterator<Item = &<P::Tables as Tables>::StoredId>
    where
        S: Unfinished,
    {
        let filter = self.filter(fence);
        let at = filter.ok().flatten();
        self.requests.stage_ids(at).filter(move |_| filter.is_ok())
    }

    /// Unique request ids of the resources, optionally only those at exactly
    /// `fence` and in the given state; in reservation order.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(&f, 0, &Id::new("a")?)?;
    /// s.bind(&f, 1, &Id::new("b")?)?;
    /// let reserved: Vec<&str> = s.resource_request_ids(None, Some(RequestState::Reserved)).map(|i| i.as_str()).collect();
    /// assert_eq!(reserved, ["a"]);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resource_request_ids(
        &self,
        fence: Option<&Fence<IdOf<P>>>,
        state: Option<RequestState>,
    ) -> impl Iterator<Item = &<P::Tables as Tables>::StoredId>
    where
        S: Unfinished,
    {
        let filter = self.filter(fence);
        let at = filter.ok().flatten();
        self.requests
            .resource_ids(at, state)
            .filter(move |_| filter.is_ok())
    }

    /// Drops the bindings and resources whose request id is in `ids` (the
    /// ids `cancel`, `finalize` and friends hand out go straight back in).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let a = Id::new("a")?;
    /// s.bind(&f, 0, &a)?;
    /// s.release(&[a]);
    /// assert_eq!(s.resources().count(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn release(&mut self, ids: &[IdOf<P>])
    where
        S: Unfinished,
    {
        if !ids.is_empty() {
            self.requests
                .remove_where(|id, _| ids.iter().any(|x| id.is(x)));
        }
    }

    /// Drops the bindings and resources whose request id satisfies
    /// `released` (for hosts that hold request ids in their own type).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("tts-7")?)?;
    /// s.release_where(|id| id.as_str().starts_with("tts-"));
    /// assert_eq!(s.bindings().count(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn release_where(&mut self, released: impl Fn(&<P::Tables as Tables>::StoredId) -> bool)
    where
        S: Unfinished,
    {
        self.requests.remove_where(|id, _| released(id));
    }

    /// Returns every request id the session holds (unique, reservation
    /// order), then drops every resource and binding; the state does not
    /// change. Each id comes back once: a second call returns none.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("a")?)?;
    /// s.reserve(&f, 1, &Id::new("b")?)?;
    /// assert_eq!(s.release_all().len(), 2);
    /// assert!(s.release_all().is_empty());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_all(&mut self) -> RequestIds<P::Tables>
    where
        S: Unfinished,
    {
        self.requests.drain()
    }

    /// Returns the unique request ids held at exactly `fence`, then drops
    /// those resources and bindings. No fence validation.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("a")?)?;
    /// assert_eq!(s.release_fence(&f).len(), 1);
    /// assert_eq!(s.bindings().count(), 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_fence(&mut self, fence: &Fence<IdOf<P>>) -> RequestIds<P::Tables>
    where
        S: Unfinished,
    {
        if fence.same_identity(&self.fence) {
            self.requests.release_position(fence.position())
        } else {
            RequestIds::new()
        }
    }
}
