//! Stage bindings and request resources: which engine requests the session
//! owns, under which fence, and which one each stage currently runs.
//!
//! Every stored fence has the session's id and incarnation (`reserve`
//! validates the fence, and a session's incarnation never changes), so only
//! its [`Position`] is kept. Order is insertion order; a replaced binding
//! keeps its stage's place.
//!
//! A binding `stage -> (request, fence)` is always the resource
//! `(stage, request)` with the same fence (`bind` sets both, nothing else
//! moves either), so a binding is stored on its resource as a rank: its
//! place in the binding order (1-based; 0 means not bound).

use core::fmt;
use core::ops::Deref;

use crate::columns::swap_down;
use crate::error::{Error, Table};
use crate::fence::Position;
use crate::id::IdText;
use crate::profile::{Conformance, IdList, Profile, Tables};
use crate::storage::{Column, StoredId};

/// Request ids handed out by the session: unique, in reservation order, at
/// most `R` (the resource capacity).
///
/// When an operation *released* them (`finalize`, `close`, `cancel`,
/// `release_fence`, the manager's expiry and cleanup), the session no longer
/// tracks them: the engine must cancel or drop each one, exactly once.
/// Ignoring such a value is a compile warning (`#[must_use]`).
///
/// It derefs to a slice of [`Id`](crate::Id)s, and goes straight back into
/// [`Session::release`](crate::Session::release).
///
/// # Examples
///
/// ```
/// use duplex_core::*;
///
/// let f0 = Fence::new(Id::new("s")?, 0);
/// let mut s = Session::open(f0.clone(), OpenOptions::default(), Instant::ZERO)?;
/// s.bind(&f0, 0, &Id::new("tts-1")?)?;
/// let cancelled = s.cancel(&f0, &f0.clone().with_epoch(1))?;
/// assert_eq!(cancelled.len(), 1);
/// assert!(cancelled.contains("tts-1"));
/// for id in &cancelled {
///     assert_eq!(id.as_str(), "tts-1"); // engine.cancel(id)
/// }
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "released request ids must be cancelled or dropped in the engine, or that work leaks"]
pub struct RequestIds<T: Tables = <Conformance as Profile>::Tables> {
    ids: T::IdList,
}

impl<T: Tables> RequestIds<T> {
    /// No ids.
    ///
    /// ```
    /// # use duplex_core::RequestIds;
    /// # use duplex_core::profile::Capacities;
    /// assert!(RequestIds::<Capacities<8, 4, 8, 4, 32, 4>>::new().is_empty());
    /// ```
    pub fn new() -> Self {
        RequestIds {
            ids: T::IdList::default(),
        }
    }

    /// Copies the first `R` ids of `ids` (callers pass at most `R`: one per
    /// resource or binding).
    #[inline]
    pub(crate) fn collect<'a, I: StoredId<T::Id> + 'a>(ids: impl Iterator<Item = &'a I>) -> Self {
        let mut out = RequestIds::new();
        for id in ids {
            if IdList::push_id(&mut out.ids, id.to_id()).is_err() {
                break;
            }
        }
        out
    }

    /// Replaces the contents with the first `R` ids of `ids`, in place.
    #[inline]
    pub(crate) fn refill<'a, I: StoredId<T::Id> + 'a>(&mut self, ids: impl Iterator<Item = &'a I>) {
        IdList::clear_ids(&mut self.ids);
        for id in ids {
            if IdList::push_id(&mut self.ids, id.to_id()).is_err() {
                break;
            }
        }
    }

    /// The ids as a slice.
    ///
    /// ```
    /// # use duplex_core::RequestIds;
    /// # use duplex_core::profile::Capacities;
    /// assert!(RequestIds::<Capacities<8, 4, 8, 4, 32, 4>>::new().as_slice().is_empty());
    /// ```
    pub fn as_slice(&self) -> &[T::Id] {
        &self.ids
    }

    /// Whether `id` is among them.
    ///
    /// See the type-level example.
    pub fn contains(&self, id: &str) -> bool {
        self.ids.iter().any(|i| i.as_str() == id)
    }
}

impl<T: Tables> Default for RequestIds<T> {
    fn default() -> Self {
        RequestIds::new()
    }
}

impl<T: Tables> Deref for RequestIds<T> {
    type Target = [T::Id];
    fn deref(&self) -> &[T::Id] {
        &self.ids
    }
}

impl<T: Tables> AsRef<[T::Id]> for RequestIds<T> {
    fn as_ref(&self) -> &[T::Id] {
        &self.ids
    }
}

impl<T: Tables> IntoIterator for RequestIds<T> {
    type Item = T::Id;
    type IntoIter = <T::IdList as IntoIterator>::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        self.ids.into_iter()
    }
}

impl<'a, T: Tables> IntoIterator for &'a RequestIds<T> {
    type Item = &'a T::Id;
    type IntoIter = core::slice::Iter<'a, T::Id>;
    fn into_iter(self) -> Self::IntoIter {
        self.ids.iter()
    }
}

impl<T: Tables> fmt::Debug for RequestIds<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.ids.iter()).finish()
    }
}

/// Where a request resource stands: reserved (the engine has not started
/// it) or submitted (bound to a stage at least once, so the engine runs it).
///
/// # Examples
///
/// ```
/// use duplex_core::RequestState;
///
/// assert_eq!(RequestState::Submitted.as_str(), "submitted");
/// assert!(RequestState::Submitted.is_submitted());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RequestState {
    /// Reserved under a fence, never submitted: drop it on cleanup.
    Reserved,
    /// Submitted to the engine: cancel it on cleanup.
    Submitted,
}

impl RequestState {
    /// Whether this is [`RequestState::Submitted`].
    ///
    /// ```
    /// # use duplex_core::RequestState;
    /// assert!(!RequestState::Reserved.is_submitted());
    /// ```
    pub const fn is_submitted(self) -> bool {
        matches!(self, RequestState::Submitted)
    }

    /// `"reserved"` or `"submitted"`.
    ///
    /// ```
    /// # use duplex_core::RequestState;
    /// assert_eq!(RequestState::Reserved.as_str(), "reserved");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            RequestState::Reserved => "reserved",
            RequestState::Submitted => "submitted",
        }
    }
}

impl fmt::Display for RequestState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a checked `bind` will do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BindPlan {
    /// The existing resource for `(stage, request)`, if any.
    resource: Option<usize>,
    /// The place of the stage's current binding (0: the stage is not bound).
    stage_rank: u8,
}

/// `states` value of a reserved resource.
const RESERVED: u8 = 0;
/// `states` value of a submitted resource that is not its stage's binding.
const SUBMITTED: u8 = 1;

/// The resource table, stored column by column: every column is a plain
/// array, so the table has no per-entry padding (62 bytes a resource with
/// the default profile, instead of 64 in a row of structs).
///
/// Rows `0..len` are live, in reservation order. A resource's state byte
/// says whether it was submitted and, if it is its stage's binding, its
/// place in the binding order (`states[i] = place + 1`, places `1..=bound`
/// in use). A binding is always a resource (`bind` sets both, nothing else
/// moves either), so there is no separate binding table.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Requests<T: Tables> {
    ids: T::Resources<T::StoredId>,
    positions: T::Resources<Position>,
    stages: T::Resources<u32>,
    states: T::Resources<u8>,
    len: u8,
    bound: u8,
}

/// One live row of the table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row<'a, I> {
    pub(crate) stage: u32,
    pub(crate) request: &'a I,
    pub(crate) position: Position,
    state: u8,
}

impl<I> Row<'_, I> {
    /// The stored state byte, for snapshots.
    #[cfg(feature = "serde")]
    pub(crate) fn state_byte(&self) -> u8 {
        self.state
    }

    pub(crate) fn state(&self) -> RequestState {
        if self.state == RESERVED {
            RequestState::Reserved
        } else {
            RequestState::Submitted
        }
    }

    /// Place in the binding order, or 0 if not its stage's binding.
    fn rank(&self) -> u8 {
        self.state.saturating_sub(SUBMITTED)
    }
}

impl<T: Tables> Requests<T> {
    pub(crate) fn new() -> Self {
        Requests {
            ids: Column::empty(),
            positions: Column::empty(),
            stages: Column::empty(),
            states: Column::empty(),
            len: 0,
            bound: 0,
        }
    }

    fn len(&self) -> usize {
        usize::from(self.len)
    }

    fn row(&self, i: usize) -> Option<Row<'_, T::StoredId>> {
        if i >= self.len() {
            return None;
        }
        Some(Row {
            stage: *self.stages.get(i)?,
            request: self.ids.get(i)?,
            position: *self.positions.get(i)?,
            state: *self.states.get(i)?,
        })
    }

    /// The live rows, in reservation order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = Row<'_, T::StoredId>> {
        (0..self.len()).filter_map(|i| self.row(i))
    }

    #[inline]
    fn find(&self, stage: u32, request: &T::Id) -> Option<usize> {
        let len = self.len();
        let stages = self.stages.get(..len).unwrap_or_default();
        let ids = self.ids.get(..len).unwrap_or_default();
        stages
            .iter()
            .zip(ids)
            .position(|(s, id)| *s == stage && id.is(request))
    }

    /// The existing resource for `(stage, request)`, if its epoch matches;
    /// `resource_conflict` if another epoch holds it.
    #[inline]
    fn existing(&self, stage: u32, request: &T::Id, at: Position) -> Result<Option<usize>, Error> {
        let Some(i) = self.find(stage, request) else {
            return Ok(None);
        };
        match self.positions.get(i) {
            Some(p) if p.epoch != at.epoch => Err(Error::ResourceConflict {
                stage,
                held_epoch: p.epoch,
                requested_epoch: at.epoch,
            }),
            _ => Ok(Some(i)),
        }
    }

    fn room_for_resource(&self) -> Result<(), Error> {
        if self.len() >= T::RESOURCES {
            return Err(Error::Full {
                table: Table::Resources,
                capacity: T::RESOURCES,
            });
        }
        Ok(())
    }

    /// Writes row `i` (an existing row, or `len` to append one).
    #[inline]
    fn write(&mut self, i: usize, stage: u32, request: &T::Id, at: Position, state: u8) {
        self.ids.grow_to(i + 1);
        self.positions.grow_to(i + 1);
        self.stages.grow_to(i + 1);
        self.states.grow_to(i + 1);
        if let (Some(id), Some(p), Some(s), Some(st)) = (
            self.ids.get_mut(i),
            self.positions.get_mut(i),
            self.stages.get_mut(i),
            self.states.get_mut(i),
        ) {
            id.set(request);
            *p = at;
            *s = stage;
            *st = state;
            if i == usize::from(self.len) {
                self.len = self.len.saturating_add(1);
            }
        }
    }

    /// `reserve` after fence validation: checks, then inserts.
    pub(crate) fn reserve(
        &mut self,
        stage: u32,
        request: &T::Id,
        at: Position,
    ) -> Result<(), Error> {
        if self.existing(stage, request, at)?.is_some() {
            return Ok(());
        }
        self.room_for_resource()?;
        self.write(self.len(), stage, request, at, RESERVED);
        Ok(())
    }

    /// Checks a `bind` without changing anything.
    #[inline]
    pub(crate) fn plan_bind(
        &self,
        stage: u32,
        request: &T::Id,
        at: Position,
    ) -> Result<BindPlan, Error> {
        let resource = self.existing(stage, request, at)?;
        if resource.is_none() {
            self.room_for_resource()?;
        }
        let len = self.len();
        let stage_rank = self
            .stages
            .iter()
            .zip(self.states.iter())
            .take(len)
            .find(|(s, st)| **s == stage && **st > SUBMITTED)
            .map_or(0, |(_, st)| st - SUBMITTED);
        if stage_rank == 0 && usize::from(self.bound) >= T::BINDINGS {
            return Err(Error::Full {
                table: Table::Bindings,
                capacity: T::BINDINGS,
            });
        }
        Ok(BindPlan {
            resource,
            stage_rank,
        })
    }

    /// Applies a checked `bind`: the resource becomes submitted, at `at`,
    /// and takes over its stage's place in the binding order (or the next
    /// place for a newly bound stage).
    #[inline]
    pub(crate) fn bind(&mut self, plan: BindPlan, stage: u32, request: &T::Id, at: Position) {
        let rank = if plan.stage_rank == 0 {
            self.bound = self.bound.saturating_add(1);
            self.bound
        } else {
            // The stage's old binding stays a submitted resource.
            for (s, st) in self.stages.iter().zip(self.states.iter_mut()) {
                if *s == stage && *st > SUBMITTED {
                    *st = SUBMITTED;
                }
            }
            plan.stage_rank
        };
        let row = plan.resource.unwrap_or(self.len());
        self.write(row, stage, request, at, rank.saturating_add(SUBMITTED));
    }

    /// The bound resources, in binding order.
    pub(crate) fn bindings(&self) -> impl Iterator<Item = Row<'_, T::StoredId>> {
        (1..=self.bound).filter_map(|rank| self.rows().find(|r| r.rank() == rank))
    }

    /// Request ids of the stage bindings, optionally only those at `at`.
    pub(crate) fn stage_ids(&self, at: Option<Position>) -> impl Iterator<Item = &T::StoredId> {
        self.bindings()
            .filter(move |b| at.is_none_or(|p| b.position == p))
            .map(|b| b.request)
    }

    /// Unique request ids of the resources, filtered by position and state.
    pub(crate) fn resource_ids(
        &self,
        at: Option<Position>,
        state: Option<RequestState>,
    ) -> impl Iterator<Item = &T::StoredId> {
        self.ids_where(move |r: &Row<'_, T::StoredId>| {
            at.is_none_or(|p| r.position == p) && state.is_none_or(|s| r.state() == s)
        })
    }

    /// Unique request ids of the rows for which `keep` holds, in
    /// reservation order.
    #[inline]
    pub(crate) fn ids_where(
        &self,
        keep: impl Fn(&Row<'_, T::StoredId>) -> bool + Copy,
    ) -> impl Iterator<Item = &T::StoredId> {
        self.rows().enumerate().filter_map(move |(i, r)| {
            let first = keep(&r)
                && !self
                    .rows()
                    .take(i)
                    .any(|e| keep(&e) && e.request.same(r.request));
            first.then_some(r.request)
        })
    }

    /// Drops the rows for which `drop` holds (keeping the order of the
    /// rest), then closes the gaps in the binding order. Reads only the two
    /// columns it needs: releases are hot (a loop through `remove_rows`
    /// measured 2 ns slower a bind and release).
    #[inline]
    pub(crate) fn remove_where(&mut self, drop: impl Fn(&T::StoredId, Position) -> bool) {
        let len = self.len();
        let mut kept = 0;
        for i in 0..len {
            let gone = match (self.ids.get(i), self.positions.get(i)) {
                (Some(id), Some(p)) => drop(id, *p),
                _ => break,
            };
            if gone {
                continue;
            }
            if kept != i {
                swap_down(&mut self.ids, kept, i);
                swap_down(&mut self.positions, kept, i);
                swap_down(&mut self.stages, kept, i);
                swap_down(&mut self.states, kept, i);
            }
            kept += 1;
        }
        self.close_gaps(kept, len);
    }

    /// Drops the rows for which `drop` holds (keeping the order of the
    /// rest), then closes the gaps in the binding order.
    #[inline]
    pub(crate) fn remove_rows(&mut self, drop: impl Fn(Row<'_, T::StoredId>) -> bool) {
        let len = self.len();
        let mut kept = 0;
        for i in 0..len {
            let gone = match self.row(i) {
                Some(r) => drop(r),
                None => break,
            };
            if !gone {
                self.keep_row(&mut kept, i);
            }
        }
        self.close_gaps(kept, len);
    }

    /// Moves row `i` down to place `kept`, the next kept one.
    #[inline]
    fn keep_row(&mut self, kept: &mut usize, i: usize) {
        if *kept != i {
            swap_down(&mut self.ids, *kept, i);
            swap_down(&mut self.positions, *kept, i);
            swap_down(&mut self.stages, *kept, i);
            swap_down(&mut self.states, *kept, i);
        }
        *kept += 1;
    }

    /// After a removal kept `kept` of `len` rows: the new length, and the
    /// binding order renumbered.
    #[inline]
    fn close_gaps(&mut self, kept: usize, len: usize) {
        if kept == len {
            return;
        }
        // `kept < len <= R <= 255`.
        self.len = u8::try_from(kept).unwrap_or(self.len);
        self.trim();
        if self.bound != 0 {
            self.compact_ranks();
        }
    }

    /// Renumbers the surviving bindings `1..=n`, keeping their order.
    fn compact_ranks(&mut self) {
        let len = self.len();
        let mut next = 0u8;
        for rank in 1..=self.bound {
            // Places are unique, and a renumbered place only moves down, so
            // it is never found again by a later (higher) `rank`.
            let wanted = rank.saturating_add(SUBMITTED);
            if let Some(st) = self.states.iter_mut().take(len).find(|st| **st == wanted) {
                next = next.saturating_add(1);
                *st = next.saturating_add(SUBMITTED);
            }
        }
        self.bound = next;
    }

    /// Returns the unique ids at exactly `at`, then drops everything at `at`.
    pub(crate) fn release_position(&mut self, at: Position) -> RequestIds<T> {
        let ids = RequestIds::collect(self.resource_ids(Some(at), None));
        self.remove_where(|_, p| p == at);
        ids
    }

    /// Number of bound stages, for snapshots.
    #[cfg(feature = "serde")]
    pub(crate) fn bound(&self) -> u8 {
        self.bound
    }

    /// A table from snapshot rows `(stage, request, position, state byte)`
    /// and the number of bound stages, if they form one: at most `R` rows,
    /// no `(stage, request)` twice, binding places exactly `1..=bound` with
    /// `bound <= B`, one binding per stage.
    #[cfg(feature = "serde")]
    pub(crate) fn from_rows(
        rows: impl Iterator<Item = (u32, T::Id, Position, u8)>,
        bound: u8,
    ) -> Result<Self, &'static str> {
        let mut t = Requests::new();
        if usize::from(bound) > T::BINDINGS {
            return Err("more bound stages than the binding capacity");
        }
        for (stage, request, position, state) in rows {
            if t.len() >= T::RESOURCES {
                return Err("more resources than the resource capacity");
            }
            if t.find(stage, &request).is_some() {
                return Err("a resource appears twice");
            }
            if state > bound.saturating_add(SUBMITTED) {
                return Err("a binding place beyond the bound stages");
            }
            if state > SUBMITTED {
                let taken = t
                    .rows()
                    .any(|r| r.state == state || (r.rank() != 0 && r.stage == stage));
                if taken {
                    return Err("two bindings share a place or a stage");
                }
            }
            t.write(t.len(), stage, &request, position, state);
        }
        let places = t.rows().filter(|r| r.rank() != 0).count();
        if places != usize::from(bound) {
            return Err("the bound stages do not match the binding places");
        }
        t.bound = bound;
        Ok(t)
    }

    /// Drops everything.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.bound = 0;
        self.trim();
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.ids.heap_bytes()
            + self.positions.heap_bytes()
            + self.stages.heap_bytes()
            + self.states.heap_bytes()
    }

    /// Lets the rows past `len` go (heap storage frees them and their ids).
    fn trim(&mut self) {
        let len = self.len();
        self.ids.trim_to(len);
        self.positions.trim_to(len);
        self.stages.trim_to(len);
        self.states.trim_to(len);
    }

    /// Returns every unique id, then drops everything.
    pub(crate) fn drain(&mut self) -> RequestIds<T> {
        let mut ids = RequestIds::new();
        self.drain_into(&mut ids);
        ids
    }

    /// Replaces `ids` with every unique id, then drops everything (built
    /// where the caller keeps it, without moving the list).
    #[inline]
    pub(crate) fn drain_into(&mut self, ids: &mut RequestIds<T>) {
        ids.refill(self.resource_ids(None, None));
        self.clear();
    }
}
