//! The session's operations, with the seed's signatures: each reads its
//! Python arguments and the clock first, then locks the session, runs the
//! core's operation, and answers with the seed's values.

use duplex_core::{Error as CoreError, StateKind};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyTuple};

use crate::args;
use crate::classes;
use crate::convert::{self, appended_object, names, FenceArg, ReservationArg};
use crate::errors::gone;
use crate::errors::{core_error, generation_mismatch, with_kind, Context};
use crate::host::{apply, each, update};
use crate::host::{CoreReservation, ProfileReservation};
use crate::patch::{kwargs, shadowed};
use crate::session::{ids_list, op, LastReservation, PySession};

#[pymethods]
impl PySession {
    /// Accepts a newer fence (a new epoch resets the input sequence and
    /// the completed-append cache).
    fn accept_fence(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let cx = self.cx(py);
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| update!(core, [let f = inner.fence(&arg, self.classes())?], |s| s.accept_fence(&f))
        )
    }

    /// Records activity.
    fn touch(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        activity: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        // The common call: the fence object of the session's last call
        // (one per turn) with an activity member. A refusal of either
        // argument reads the fence first, as the general path does.
        let activity = match convert::activity(activity, self.classes()) {
            Ok(a) => a,
            Err(e) => {
                self.arg(fence)?;
                return Err(e);
            }
        };
        let now = match self.now(py) {
            Ok(now) => now,
            Err(e) => {
                self.arg(fence)?;
                return Err(e);
            }
        };
        if let Some(done) = self.touch_known(py, fence, activity, now) {
            return done;
        }
        let arg = self.arg(fence)?;
        let cx = self.cx(py);
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| apply!(core, now, [let f = inner.fence(&arg, self.classes())?], |s, t| s.touch(&f, activity, t))
        )
    }

    /// The client went away (Open → Detached).
    fn detach(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let now = self.now(py)?;
        let cx = self.cx(py);
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| apply!(core, now, [let f = inner.fence(&arg, self.classes())?], |s, t| s.detach(&f, t))
        )
    }

    /// Resume with the lease generation; returns the new generation.
    #[pyo3(signature = (fence, *, expected_lease_generation))]
    fn resume(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        expected_lease_generation: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        // A value that is not a generation (not an integer in 0..2**64)
        // equals no generation: the seed's comparison refuses it as a
        // mismatch, after the same checks.
        let given = expected_lease_generation.extract::<u64>().ok();
        let arg = self.arg(fence)?;
        let now = self.now(py)?;
        let cx = self.cx(py);
        // For a value that is not a generation, any generation but the
        // current one: the core's checks, in order, end in the mismatch.
        op!(self, py, arg, cx, |core, inner| {
            let result = apply!(core, now, [let f = inner.fence(&arg, self.classes())?], |s, t| {
                let other = s.lease_generation().wrapping_add(1);
                s.resume(&f, given.unwrap_or(other), t)
            })?;
            match (given, result) {
                (None, Err(CoreError::GenerationMismatch { expected, .. })) => {
                    Err(generation_mismatch(expected, expected_lease_generation))
                }
                (_, result) => Ok(result),
            }
        })
    }

    /// Starts a lease operation.
    fn begin_operation(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        operation_id: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let arg = self.arg(fence)?;
        lease_op_id(operation_id)?;
        let now = self.now(py)?;
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| apply!(core, now, [let f = inner.fence(&arg, self.classes())?, let op = convert::id(operation_id)?], |s, t| s.begin_operation(&f, &op, t))
        )
    }

    /// Ends a lease operation.
    fn end_operation(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        operation_id: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let arg = self.arg(fence)?;
        let now = self.now(py)?;
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| apply!(core, now, [let f = inner.fence(&arg, self.classes())?, let op = convert::id(operation_id)?], |s, t| s.end_operation(&f, &op, t))
        )
    }

    /// Replaces the session configuration (a new generation).
    fn replace_session_config(
        &self,
        py: Python<'_>,
        session_config: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.replace_configs(py, Some(session_config), None)
    }

    /// Replaces the runtime configuration (a new generation).
    fn replace_runtime_config(
        &self,
        py: Python<'_>,
        runtime_config: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.replace_configs(py, None, Some(runtime_config))
    }

    /// Publishes one configuration generation atomically.
    #[pyo3(signature = (*, session_config = None, runtime_config = None))]
    fn replace_configs(
        &self,
        py: Python<'_>,
        session_config: Option<&Bound<'_, PyAny>>,
        runtime_config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let session_config = session_config
            .filter(|c| !c.is_none())
            .map(|c| crate::session::copy_dict(py, c))
            .transpose()?;
        let runtime_config = runtime_config
            .filter(|c| !c.is_none())
            .map(|c| crate::session::copy_dict(py, c))
            .transpose()?;
        let cx = self.cx(py);
        let given = (session_config.is_some(), runtime_config.is_some());
        let mut g = self.lock(py);
        // The core's rule: the state first (a closing session refuses even
        // an empty call), then nothing given changes nothing.
        let published = match g.parts()?.0 {
            Some(mut core) => update!(&mut core, [], |s| s
                .replace_configs(given.0.then_some(()), given.1.then_some(())))?,
            None => Err(CoreError::WrongState {
                operation: "replace_configs",
                state: StateKind::Closed,
            }),
        };
        published.map_err(|e| core_error(e, cx))?;
        let inner = g.inner()?;
        if let Some(c) = session_config {
            inner.session_config = Some(c.unbind());
        }
        if let Some(c) = runtime_config {
            inner.runtime_config = Some(c.unbind());
        }
        Ok(())
    }

    /// Reserves `(stage_id, request_id)` without submitting it.
    #[pyo3(signature = (stage_id, request_id, *, fence))]
    fn reserve_stage_request(
        &self,
        py: Python<'_>,
        stage_id: &Bound<'_, PyAny>,
        request_id: &Bound<'_, PyAny>,
        fence: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request_id = args::text(request_id, "request_id")?;
        let stage_id = args::stage_id(stage_id)?;
        let arg = self.arg(fence)?;
        let cx = Context {
            request: Some(request_id),
            ..self.cx(py)
        };
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| update!(core, [let f = inner.fence(&arg, self.classes())?, let request = convert::id(request_id)?], |s| s.reserve(&f, stage_id, &request))
        )
    }

    /// Binds a stage request (reserve, accept the fence, submit).
    #[pyo3(signature = (stage_id, request_id, *, fence))]
    fn bind_stage_request(
        &self,
        py: Python<'_>,
        stage_id: &Bound<'_, PyAny>,
        request_id: &Bound<'_, PyAny>,
        fence: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let request_id = args::text(request_id, "request_id")?;
        let stage_id = args::stage_id(stage_id)?;
        let arg = self.arg(fence)?;
        let cx = Context {
            request: Some(request_id),
            ..self.cx(py)
        };
        op!(
            self,
            py,
            arg,
            cx,
            |core, inner| update!(core, [let f = inner.fence(&arg, self.classes())?, let request = convert::id(request_id)?], |s| s.bind(&f, stage_id, &request))
        )
    }

    /// Request ids of the stage bindings (at exactly `fence`, if given).
    #[pyo3(signature = (fence = None))]
    fn stage_request_ids<'py>(
        &self,
        py: Python<'py>,
        fence: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let arg = fence
            .filter(|f| !f.is_none())
            .map(|f| self.arg(f))
            .transpose()?;
        let mut g = self.lock(py);
        // A closed session holds nothing.
        let Some(core) = g.parts()?.0 else {
            return Ok(PyList::empty(py));
        };
        let ids: Result<Vec<String>, CoreError> = each!(&*core.managers, mgr => {
            match arg.as_ref().map(FenceArg::fence).transpose() {
                // One entry per binding, as the seed lists them (a request
                // bound on two stages appears twice).
                Ok(at) => mgr.get_at(core.key).map_or(Ok(Vec::new()), |s| {
                    s.stage_request_ids(at.as_ref()).map(|ids| names(&ids))
                }),
                // An id no session can have: no binding is at that fence.
                Err(_) => Ok(Vec::new()),
            }
        });
        drop(g);
        PyList::new(py, ids.map_err(|e| core_error(e, self.cx(py)))?)
    }

    /// Unique request ids of the resources, optionally at `fence` and by
    /// `submitted`.
    #[pyo3(signature = (fence = None, *, submitted = None))]
    fn resource_request_ids<'py>(
        &self,
        py: Python<'py>,
        fence: Option<&Bound<'py, PyAny>>,
        submitted: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let submitted = submitted
            .filter(|s| !s.is_none())
            .map(|s| args::flag(s, "submitted"))
            .transpose()?;
        let arg = fence
            .filter(|f| !f.is_none())
            .map(|f| self.arg(f))
            .transpose()?;
        let state = submitted.map(|s| {
            if s {
                duplex_core::RequestState::Submitted
            } else {
                duplex_core::RequestState::Reserved
            }
        });
        let mut g = self.lock(py);
        let Some(core) = g.parts()?.0 else {
            return Ok(PyList::empty(py));
        };
        let ids: Result<Vec<String>, CoreError> = each!(&*core.managers, mgr => {
            match arg.as_ref().map(FenceArg::fence).transpose() {
                Ok(at) => mgr.get_at(core.key).map_or(Ok(Vec::new()), |s| {
                    s.resource_request_ids(at.as_ref(), state).map(|ids| names(&ids))
                }),
                Err(_) => Ok(Vec::new()),
            }
        });
        drop(g);
        let ids = ids.map_err(|e| core_error(e, self.cx(py)))?;
        ids_list(py, ids.iter().map(String::as_str))
    }

    /// Drops the bindings and resources of these request ids.
    fn release_request_ids(&self, py: Python<'_>, request_ids: &Bound<'_, PyAny>) -> PyResult<()> {
        let ids = args::str_items(request_ids, "request_ids")?;
        let ids = args::texts(&ids)?;
        let mut g = self.lock(py);
        let Some(mut core) = g.parts()?.0 else {
            return Ok(()); // a closed session holds nothing
        };
        update!(&mut core, [], |s| s
            .release_where(|id| ids.contains(&id.as_str())))?
        .map_err(|e| core_error(e, Context::default()))
    }

    /// Phase one of an append: a `DuplexAppendReservation`; nothing changes.
    #[pyo3(signature = (*, mode, fence))]
    fn prepare_append<'py>(
        &self,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let cx = Context {
            mode: Some(m.as_str()),
            ..self.cx(py)
        };
        let mut g = self.lock(py);
        let core = g.core()?;
        let made = each!(&*core.managers, mgr => {
            let f = arg.fence()?;
            mgr.get_at(core.key).ok_or_else(gone)?.prepare_append(&f, m).map(|r| {
                let parts = (r.base_fence().epoch, r.base_input(), r.on_commit());
                (parts, CoreReservation::wrap(r))
            })
        });
        let ((base_epoch, (seq, turn_seq, key), on_commit), kept) = match made {
            Ok(parts) => parts,
            Err(e) => return Err(self.refuse(py, &mut g, e, Some(fence), cx)),
        };
        // Preparing changes nothing: the base fence is the session's fence,
        // the object the seed would put there.
        let base_fence = self.fence_obj(py, &mut g)?;
        let key = key.map(|(turn, response)| (base_epoch, turn, response));
        drop(g);
        let update = appended_object(py, on_commit)?;
        let reservation = convert::record_object(
            classes::reservation_class(py)?,
            &[
                (intern!(py, "fence"), fence.clone()),
                (intern!(py, "mode"), mode.clone()),
                (intern!(py, "base_fence"), base_fence),
                (
                    intern!(py, "base_input_seq"),
                    seq.into_pyobject(py)?.into_any(),
                ),
                (
                    intern!(py, "base_input_turn_seq"),
                    turn_seq.into_pyobject(py)?.into_any(),
                ),
                (
                    intern!(py, "base_append_turn_key"),
                    key.into_pyobject(py)?.into_any(),
                ),
                (intern!(py, "update"), update.clone()),
            ],
        )?;
        let last = Box::new(LastReservation {
            object: reservation.clone().unbind(),
            update: update.unbind(),
            fence: fence.clone().unbind(),
            on_commit,
            core: kept,
        });
        let mut g = self.lock(py);
        if let Ok(inner) = g.inner() {
            let previous = inner.last_reservation.replace(last);
            drop(g);
            drop(previous);
        }
        Ok(reservation)
    }

    /// Phase two: applies a reservation if the session has not moved.
    fn commit_append<'py>(
        &self,
        py: Python<'py>,
        reservation: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(done) = self.commit_known(py, reservation) {
            return done;
        }
        let parts = ReservationArg::read(reservation, self.classes())?;
        let cx = self.cx(py);
        let mut g = self.lock(py);
        let committed = update!(&mut g.core()?, [let r = parts.rebuild()], |s| match &r {
            Ok(Some(r)) => s.commit_append(r),
            Ok(None) | Err(_) => Err(stale()),
        })?;
        match committed {
            Ok(a) => {
                PySession::remember(&mut g, &parts.fence)?;
                drop(g);
                appended_object(py, a)
            }
            Err(e) => Err(core_error(e, cx)),
        }
    }

    /// The recorded stage results of a completed append (copies), or None.
    #[pyo3(signature = (operation_id, *, fence, mode, r#final))]
    fn completed_append<'py>(
        &self,
        py: Python<'py>,
        operation_id: &Bound<'_, PyAny>,
        fence: &Bound<'py, PyAny>,
        mode: &Bound<'py, PyAny>,
        r#final: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let r#final = args::flag(r#final, "final")?;
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let core = core.ok_or_else(gone)?;
        let found = each!(&*core.managers, mgr => {
            let f = inner.fence(&arg, self.classes())?;
            let op = convert::id(operation_id)?;
            mgr.get_at(core.key)
                .ok_or_else(gone)?
                .completed(&f, &op, m, r#final.into())
                .map(|r| r.and_then(|r| r.first().copied()))
        });
        let handle = match found {
            Ok(h) => h,
            Err(e) => return Err(self.refuse(py, &mut g, e, Some(fence), cx)),
        };
        let Some((handle, record)) =
            handle.and_then(|h| inner.record(h).map(|r| (h, r.clone_ref(py))))
        else {
            return Ok(None);
        };
        drop(g);
        let out = PyList::empty(py);
        for r in crate::session::Record::results(py, handle, record.bind(py))? {
            out.append(r)?;
        }
        Ok(Some(out))
    }

    /// Records a completed append (no fence validation): newest, evicting
    /// the oldest beyond the limit.
    #[pyo3(signature = (operation_id, *, fence, mode, r#final, stage_results))]
    fn record_completed_append(
        &self,
        py: Python<'_>,
        operation_id: &Bound<'_, PyAny>,
        fence: &Bound<'_, PyAny>,
        mode: &Bound<'_, PyAny>,
        r#final: &Bound<'_, PyAny>,
        stage_results: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let final_is_bool = r#final.is_instance_of::<PyBool>();
        let r#final = args::flag(r#final, "final")?;
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let mut copies = Vec::new();
        let mut read = || -> PyResult<()> {
            for r in stage_results.try_iter()? {
                copies.push(crate::session::copy_dict(py, &r?)?);
            }
            Ok(())
        };
        read().map_err(|e| crate::errors::ensure_kind(e, args::INVALID_ARGUMENT))?;
        let too_many = self
            .profile
            .stage_results()
            .filter(|max| copies.len() > *max);
        // A compact record if the core keeps all but the one result
        // (`Record`); whether the fence names the session is known under
        // the lock.
        let plain = copies.len() == 1
            && mode.is(&convert::mode_object(py, m, self.classes())?)
            && final_is_bool;
        // Both shapes are made before the lock (no Python allocation, and so
        // no collection and no finalizer, runs under it); the one not kept
        // is dropped after it.
        let mut items = vec![
            fence.clone(),
            mode.clone(),
            PyBool::new(py, r#final).to_owned().into_any(),
        ];
        items.extend(copies.iter().cloned());
        let full = PyTuple::new(py, items)?;
        let compact = match copies.first() {
            Some(one) if plain => Some(crate::session::Record::compact(one)?),
            _ => None,
        };
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let mut core = core.ok_or_else(gone)?;
        let counter = inner.next_handle;
        let recorded = update!(&mut core, [let f = inner.fence(&arg, self.classes())?, let op = convert::id(operation_id)?], |s| {
            let own = compact.is_some() && f.same_identity(s.fence());
            let handle = crate::session::Record::handle(counter, own);
            // The state is checked before the table (SPEC: wrong_state, then
            // the seed's order, then full): a lookup checks it and changes
            // nothing.
            match (too_many, s.completed(&f, &op, m, r#final.into())) {
                (_, Err(e @ CoreError::WrongState { .. })) => Err(e),
                (Some(max), _) => Err(CoreError::Full { table: duplex_core::Table::StageResults, capacity: max }),
                _ => s.record_completed(&f, &op, m, r#final.into(), &[handle]).map(|()| (handle, own)),
            }
        })?;
        let (handle, own) = recorded.map_err(|e| core_error(e, cx))?;
        let record = match &compact {
            Some(items) if own => items.clone(),
            _ => full.clone(),
        };
        inner.next_handle += 1;
        inner.records.push((handle, record.unbind()));
        let pruned = crate::lease::prune_records(&core, inner);
        drop(g);
        drop(pruned);
        Ok(())
    }

    /// Appends input in one step: a `DuplexInputAppend`.
    #[pyo3(signature = (*, mode, fence))]
    fn append_input<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        if this.is_patched() && shadowed(slf, &["prepare_append", "commit_append"]) {
            let kw = kwargs(py, &[("mode", mode), ("fence", fence)])?;
            let reservation = slf.call_method(intern!(py, "prepare_append"), (), Some(&kw))?;
            return slf.call_method1(intern!(py, "commit_append"), (reservation,));
        }
        this.append_input_native(py, mode, fence)
    }
}

impl PySession {
    /// `append_input` on the core: one step, no reservation object.
    fn append_input_native<'py>(
        &self,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let mut core = core.ok_or_else(gone)?;
        let appended =
            update!(&mut core, [let f = inner.fence(&arg, self.classes())?], |s| s.append(&f, m))?;
        match appended {
            Ok(a) => {
                if inner.fence_object.as_ref().is_none_or(|o| !o.is(fence)) {
                    PySession::remember_in(Some(&core), inner, &arg);
                }
                drop(g);
                appended_object(py, a)
            }
            Err(e) => {
                let cx = Context {
                    mode: Some(m.as_str()),
                    ..self.cx(py)
                };
                Err(self.refuse(py, &mut g, e, Some(fence), cx))
            }
        }
    }
}

#[pymethods]
impl PySession {
    /// Returns and drops the requests held at exactly `fence`.
    fn release_fence<'py>(
        &self,
        py: Python<'py>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let arg = self.arg(fence)?;
        let cx = self.cx(py);
        let mut g = self.lock(py);
        // A fence with an id no session can have holds nothing.
        let released = update!(&mut g.core()?, [let f = arg.fence()], |s| match &f {
            Ok(f) => s.release_fence(f).map(|ids| names(&ids)),
            Err(_) => Ok(Vec::new()),
        })?;
        drop(g);
        let ids = released.map_err(|e| core_error(e, cx))?;
        ids_list(py, ids.iter().map(String::as_str))
    }

    /// Barge-in: advance to `next_fence`, return and release the requests
    /// of `cancelled_fence`.
    fn cancel_fence<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        cancelled_fence: &Bound<'py, PyAny>,
        next_fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        if this.is_patched() && shadowed(slf, &["prepare_cancel_fence", "release_fence"]) {
            let stale = slf.call_method1(
                intern!(py, "prepare_cancel_fence"),
                (cancelled_fence, next_fence),
            )?;
            slf.call_method1(intern!(py, "release_fence"), (cancelled_fence,))?;
            return Ok(stale);
        }
        Ok(this
            .cancel(py, cancelled_fence, next_fence, true)?
            .into_any())
    }

    /// Advance the cancellation fence without dropping cleanup records.
    fn prepare_cancel_fence<'py>(
        &self,
        py: Python<'py>,
        cancelled_fence: &Bound<'py, PyAny>,
        next_fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.cancel(py, cancelled_fence, next_fence, false)
    }

    /// Makes close irreversible while keeping resources for cleanup retry.
    #[pyo3(signature = (fence, *, reason))]
    fn begin_close(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        reason: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let reason = args::string(reason, "reason")?;
        let arg = self.arg(fence)?;
        let mut g = self.lock(py);
        self.begin_close_locked(py, &mut g, &arg, reason)
    }

    /// Closing → Closed: the request ids it still held.
    fn finalize_close<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        // The seed's `finalize_close` is `return self.close()`.
        if this.is_patched() && shadowed(slf, &["close"]) {
            return slf.call_method0(intern!(py, "close"));
        }
        Ok(this.finalize_native(py)?.into_any())
    }
}

impl PySession {
    /// `finalize_close` on the core.
    pub(crate) fn finalize_native<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut g = self.lock(py);
        let ids = self.finalize_locked(py, &mut g)?;
        drop(g);
        PyList::new(py, ids)
    }
}

#[pymethods]
impl PySession {
    /// The seed's `close`: accepts `fence` first, if given, then releases
    /// every request the session holds and returns their ids, each once
    /// (a second call returns none). An open or detached session stays
    /// open or detached, as in the seed; a closing one is finalized; a
    /// finalized one holds nothing.
    #[pyo3(signature = (fence = None))]
    fn close<'py>(
        &self,
        py: Python<'py>,
        fence: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        if let Some(fence) = fence.filter(|f| !f.is_none()) {
            self.accept_fence(py, fence)?;
        }
        let mut g = self.lock(py);
        let ids: Vec<String> = match g.kind()? {
            StateKind::Closing => self.finalize_locked(py, &mut g)?,
            StateKind::Closed => Vec::new(),
            StateKind::Open | StateKind::Detached => update!(&mut g.core()?, [], |s| s
                .release_all()
                .map(|ids| names(&ids)))?
            .map_err(|e| core_error(e, self.cx(py)))?,
        };
        drop(g);
        PyList::new(py, ids)
    }

    /// Begin closing and finalize; False if the session was already closing.
    #[pyo3(signature = (fence, *, reason))]
    fn terminate<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        fence: &Bound<'py, PyAny>,
        reason: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        let this = slf.get();
        let reason = args::string(reason, "reason")?;
        if this.is_patched() && shadowed(slf, &["begin_close", "finalize_close", "close"]) {
            // Already closing (or closed): False, as on the core's path.
            if !matches!(this.lock(py).kind()?, StateKind::Open | StateKind::Detached) {
                return Ok(false);
            }
            let kw = kwargs(py, &[("reason", reason.as_any())])?;
            let begun = slf.call_method(intern!(py, "begin_close"), (fence,), Some(&kw))?;
            if !begun.is_truthy()? {
                return Ok(false);
            }
            slf.call_method0(intern!(py, "finalize_close"))?;
            return Ok(true);
        }
        let arg = this.arg(fence)?;
        this.terminate_now(py, &arg, reason)
    }
}

fn stale() -> CoreError {
    CoreError::StaleReservation {
        staleness: duplex_core::Staleness::EpochMoved { from: 0, to: 0 },
    }
}

/// Refuses an empty lease operation id as the seed does.
fn lease_op_id(operation_id: &str) -> PyResult<()> {
    if operation_id.is_empty() {
        return Err(with_kind(
            PyValueError::new_err("duplex lease operation_id must not be empty"),
            "invalid_id",
        ));
    }
    Ok(())
}

impl PySession {
    /// `touch` with a fence the session knows by identity: the object its
    /// last calls gave, already converted, and the session's current fence
    /// (so nothing is remembered anew). One lock, no attribute read.
    /// `None`: not such a fence; the general path takes it.
    #[inline]
    fn touch_known(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        activity: duplex_core::Activity,
        now: duplex_core::Instant,
    ) -> Option<PyResult<()>> {
        use crate::host::{CoreFence, Managers};
        let mut g = self.lock(py);
        let result = {
            let (core, inner) = g.parts().ok()?;
            let core = core?;
            if !inner.fence_object.as_ref().is_some_and(|o| o.is(fence)) {
                return None;
            }
            let (object, converted) = inner.arg_fence.as_deref()?;
            if !object.is(fence) {
                return None;
            }
            let key = core.key;
            match (core.managers, converted) {
                (Managers::Server(m), CoreFence::Server(f)) => {
                    m.clock().set(now);
                    m.apply_at(key, |s, t| s.touch(f, activity, t))
                }
                (Managers::Conformance(m), CoreFence::Conformance(f)) => {
                    m.clock().set(now);
                    m.apply_at(key, |s, t| s.touch(f, activity, t))
                }
                _ => return None,
            }
        };
        Some(match result {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(self.refuse(py, &mut g, e, Some(fence), self.cx(py))),
            None => Err(gone()),
        })
    }
}

impl PySession {
    /// `commit_append` of the reservation this session made last, its
    /// `update` the same object with the same values: the kept core
    /// reservation is committed (the same check of the session's position
    /// as a reservation read back would get). `None`: another reservation;
    /// the general path reads it.
    fn commit_known<'py>(
        &self,
        py: Python<'py>,
        reservation: &Bound<'py, PyAny>,
    ) -> Option<PyResult<Bound<'py, PyAny>>> {
        use crate::host::{CoreReservation, Managers};
        let update = reservation.getattr(intern!(py, "update")).ok()?;
        let read = |name: &Bound<'py, pyo3::types::PyString>| {
            update.getattr(name).ok()?.extract::<u64>().ok()
        };
        let values = (
            read(intern!(py, "seq"))?,
            read(intern!(py, "turn_seq"))?,
            read(intern!(py, "turn_id"))?,
        );
        let mut g = self.lock(py);
        let result = {
            let (core, inner) = g.parts().ok()?;
            let core = core?;
            let last = inner.last_reservation.as_deref()?;
            let kept = (
                last.on_commit.seq,
                last.on_commit.turn_seq,
                last.on_commit.turn_id,
            );
            if !last.object.is(reservation) || !last.update.is(&update) || kept != values {
                return None;
            }
            let key = core.key;
            let committed = match (core.managers, &last.core) {
                (Managers::Server(m), CoreReservation::Server(r)) => {
                    m.update_at(key, |s| s.commit_append(r))
                }
                (Managers::Conformance(m), CoreReservation::Conformance(r)) => {
                    m.update_at(key, |s| s.commit_append(r))
                }
                _ => return None,
            };
            // Committed: the session's fence is the reservation's.
            if let Some(Ok(_)) = committed {
                inner.fence_object = Some(last.fence.clone_ref(py));
            }
            committed
        };
        drop(g);
        Some(match result {
            Some(Ok(a)) => appended_object(py, a),
            Some(Err(e)) => Err(core_error(e, self.cx(py))),
            None => Err(gone()),
        })
    }
}
