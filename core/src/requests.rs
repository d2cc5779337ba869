//! Stage bindings and request resources (SPEC §4): which engine requests the
//! session owns, under which fence, and which one each stage currently runs.
//!
//! Every stored fence has the session's id and incarnation (`reserve`
//! validates the fence, and a session's incarnation never changes), so only
//! its [`Position`] is kept. Order is insertion order; a replaced binding
//! keeps its stage's place.
//!
//! A binding `stage -> (request, fence)` is always the resource
//! `(stage, request)` with the same fence (`bind` sets both, nothing else
//! moves either), so a binding is stored as a `bound` flag on its resource
//! plus the stage's place in the binding order.

use crate::error::{Error, Table};
use crate::fence::Position;
use crate::id::Id;

/// Request ids returned by an operation that released them: unique, in
/// insertion order, at most `R` (the resource capacity).
pub type RequestIds<const L: usize, const R: usize> = heapless::Vec<Id<L>, R, u8>;

#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Resource<const L: usize> {
    pub(crate) stage: u32,
    pub(crate) request: Id<L>,
    pub(crate) position: Position,
    pub(crate) submitted: bool,
    /// Whether this is its stage's binding (at most one per stage).
    pub(crate) bound: bool,
}

/// What a checked `bind` will do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BindPlan {
    resource: Option<usize>,
    stage_bound: bool,
}

#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Requests<const R: usize, const B: usize, const L: usize> {
    pub(crate) resources: heapless::Vec<Resource<L>, R, u8>,
    /// Bound stages, in binding order.
    pub(crate) bound_stages: heapless::Vec<u32, B, u8>,
}

impl<const R: usize, const B: usize, const L: usize> Requests<R, B, L> {
    pub(crate) const fn new() -> Self {
        Requests {
            resources: heapless::Vec::new(),
            bound_stages: heapless::Vec::new(),
        }
    }

    fn find(&self, stage: u32, request: &Id<L>) -> Option<usize> {
        self.resources
            .iter()
            .position(|r| r.stage == stage && r.request == *request)
    }

    /// The existing resource for `(stage, request)`, if its epoch matches;
    /// `resource_conflict` if another epoch holds it.
    fn existing(&self, stage: u32, request: &Id<L>, at: Position) -> Result<Option<usize>, Error> {
        match self.find(stage, request) {
            Some(i) if self.resources[i].position.epoch != at.epoch => {
                Err(Error::ResourceConflict {
                    stage,
                    held_epoch: self.resources[i].position.epoch,
                    requested_epoch: at.epoch,
                })
            }
            found => Ok(found),
        }
    }

    fn room_for_resource(&self) -> Result<(), Error> {
        if self.resources.is_full() {
            return Err(Error::Full {
                table: Table::Resources,
                capacity: R,
            });
        }
        Ok(())
    }

    /// SPEC `reserve` after fence validation: checks, then inserts.
    pub(crate) fn reserve(
        &mut self,
        stage: u32,
        request: &Id<L>,
        at: Position,
    ) -> Result<(), Error> {
        if self.existing(stage, request, at)?.is_some() {
            return Ok(());
        }
        self.room_for_resource()?;
        let _ = self.resources.push(Resource {
            stage,
            request: request.clone(),
            position: at,
            submitted: false,
            bound: false,
        });
        Ok(())
    }

    /// Checks a `bind` without changing anything.
    pub(crate) fn plan_bind(
        &self,
        stage: u32,
        request: &Id<L>,
        at: Position,
    ) -> Result<BindPlan, Error> {
        let resource = self.existing(stage, request, at)?;
        if resource.is_none() {
            self.room_for_resource()?;
        }
        let stage_bound = self.bound_stages.contains(&stage);
        if !stage_bound && self.bound_stages.is_full() {
            return Err(Error::Full {
                table: Table::Bindings,
                capacity: B,
            });
        }
        Ok(BindPlan {
            resource,
            stage_bound,
        })
    }

    /// Applies a checked `bind`.
    pub(crate) fn bind(&mut self, plan: BindPlan, stage: u32, request: &Id<L>, at: Position) {
        for r in self.resources.iter_mut().filter(|r| r.stage == stage) {
            r.bound = false;
        }
        let resource = Resource {
            stage,
            request: request.clone(),
            position: at,
            submitted: true,
            bound: true,
        };
        match plan.resource {
            Some(i) => self.resources[i] = resource,
            None => {
                let _ = self.resources.push(resource);
            }
        }
        if !plan.stage_bound {
            let _ = self.bound_stages.push(stage);
        }
    }

    /// The bound resources, in binding order.
    pub(crate) fn bindings(&self) -> impl Iterator<Item = &Resource<L>> {
        self.bound_stages
            .iter()
            .filter_map(|s| self.resources.iter().find(|r| r.bound && r.stage == *s))
    }

    /// Request ids of the stage bindings, optionally only those at `at`.
    pub(crate) fn stage_ids(&self, at: Option<Position>) -> impl Iterator<Item = &Id<L>> {
        self.bindings()
            .filter(move |b| at.is_none_or(|p| b.position == p))
            .map(|b| &b.request)
    }

    /// Unique request ids of the resources, filtered by position and flag.
    pub(crate) fn resource_ids(
        &self,
        at: Option<Position>,
        submitted: Option<bool>,
    ) -> impl Iterator<Item = &Id<L>> {
        let keep = move |r: &Resource<L>| {
            at.is_none_or(|p| r.position == p) && submitted.is_none_or(|s| r.submitted == s)
        };
        let resources = &self.resources;
        resources.iter().enumerate().filter_map(move |(i, r)| {
            let first = keep(r)
                && !resources[..i]
                    .iter()
                    .any(|e| keep(e) && e.request == r.request);
            first.then_some(&r.request)
        })
    }

    fn collect(ids: impl Iterator<Item = Id<L>>) -> RequestIds<L, R> {
        let mut out = RequestIds::new();
        for id in ids {
            // At most one id per resource: never more than R.
            let _ = out.push(id);
        }
        out
    }

    /// Drops bindings and resources whose request id is in `ids`.
    pub(crate) fn release<I: AsRef<str>>(&mut self, ids: &[I]) {
        let hit = |request: &Id<L>| ids.iter().any(|i| i.as_ref() == request.as_str());
        self.resources.retain(|r| !hit(&r.request));
        self.forget_unbound_stages();
    }

    /// Drops stages whose bound resource was released.
    fn forget_unbound_stages(&mut self) {
        let resources = &self.resources;
        self.bound_stages
            .retain(|s| resources.iter().any(|r| r.bound && r.stage == *s));
    }

    /// Returns the unique ids at exactly `at`, then drops everything at `at`.
    pub(crate) fn release_position(&mut self, at: Position) -> RequestIds<L, R> {
        let ids = Self::collect(self.resource_ids(Some(at), None).cloned());
        self.resources.retain(|r| r.position != at);
        self.forget_unbound_stages();
        ids
    }

    /// Returns every unique id, then drops everything.
    pub(crate) fn drain(&mut self) -> RequestIds<L, R> {
        let ids = Self::collect(self.resource_ids(None, None).cloned());
        self.bound_stages.clear();
        self.resources.clear();
        ids
    }
}
