//! The session's operations, with the seed's signatures: each reads its
//! Python arguments and the clock first, then locks the session, runs the
//! core's operation, and answers with the seed's values.

use duplex_core::{Error as CoreError, Id, StateKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyTuple};

use crate::args;
use crate::classes;
use crate::convert::{self, appended_object, FenceArg, ReservationArg};
use crate::core::on;
use crate::errors::{core_error, generation_mismatch, with_kind, Context};
use crate::session::session_op;
use crate::session::{gone, ids_list, PySession};

#[pymethods]
impl PySession {
    /// Accepts a newer fence (a new epoch resets the input sequence and
    /// the completed-append cache).
    fn accept_fence(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let mut inner = self.lock(py);
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(crate::session::gone)?;
        let result = on!(core, s => arg.fence().map(|f| s.accept_fence(&f)))?;
        match result {
            Ok(()) => {
                self.remember(&mut inner, &arg);
                Ok(())
            }
            Err(e) => Err(self.refuse(py, &mut inner, e, Some(fence), cx)),
        }
    }

    /// Records activity.
    fn touch(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        activity: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let activity = convert::activity(activity)?;
        let now = self.now(py)?;
        let cx = self.cx(py);
        session_op!(self, py, arg, cx, |s, f| s.touch(&f, activity, now))
    }

    /// The client went away (Open → Detached).
    fn detach(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let now = self.now(py)?;
        let mut inner = self.lock(py);
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(gone)?;
        let result = on!(core, s => s.detach(&arg.fence()?, now));
        self.after(py, &mut inner, result, &arg, cx)?;
        self.reschedule(py, &inner);
        Ok(())
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
        let mut inner = self.lock(py);
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(gone)?;
        // For a value that is not a generation, any generation but the
        // current one: the core's checks, in order, end in the mismatch.
        let result = on!(core, s => {
            let f = arg.fence()?;
            let other = s.lease_generation().wrapping_add(1);
            s.resume(&f, given.unwrap_or(other), now)
        });
        match (given, result) {
            (None, Err(CoreError::GenerationMismatch { expected, .. })) => {
                Err(generation_mismatch(expected, expected_lease_generation))
            }
            (_, result) => self.after(py, &mut inner, result, &arg, cx),
        }
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
        session_op!(self, py, arg, cx, |s, f| s.begin_operation(
            &f,
            &convert::id(operation_id)?,
            now
        ))
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
        session_op!(self, py, arg, cx, |s, f| s.end_operation(
            &f,
            &convert::id(operation_id)?,
            now
        ))?;
        let inner = self.lock(py);
        self.reschedule(py, &inner);
        Ok(())
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
        let mut inner = self.lock(py);
        let cx = self.cx(py);
        // The state first (a closing session refuses even an empty call),
        // then the seed's shortcut: nothing given, nothing changes.
        let state = PySession::kind(&inner);
        if !matches!(state, StateKind::Open | StateKind::Detached) {
            let e = CoreError::WrongState {
                operation: "replace_configs",
                state,
            };
            return Err(core_error(e, cx));
        }
        if session_config.is_none() && runtime_config.is_none() {
            return Ok(());
        }
        let core = inner.core.as_mut().ok_or_else(crate::session::gone)?;
        on!(core, s => s.replace_configs(Some(()), None)).map_err(|e| core_error(e, cx))?;
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
        session_op!(self, py, arg, cx, |s, f| s.reserve(
            &f,
            stage_id,
            &convert::id(request_id)?
        ))
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
        session_op!(self, py, arg, cx, |s, f| s.bind(
            &f,
            stage_id,
            &convert::id(request_id)?
        ))
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
        let inner = self.lock(py);
        // A closed session holds nothing.
        let Some(core) = inner.core.as_ref() else {
            return Ok(PyList::empty(py));
        };
        on!(core, s => {
            let at = arg.as_ref().map(FenceArg::fence).transpose();
            match at {
                // One entry per binding, as the seed lists them (a request
                // bound on two stages appears twice).
                Ok(at) => match s.stage_request_ids(at.as_ref()) {
                    Ok(ids) => PyList::new(py, ids.iter().map(Id::as_str)),
                    Err(e) => Err(core_error(e, self.cx(py))),
                },
                // An id no session can have: no binding is at that fence.
                Err(_) => Ok(PyList::empty(py)),
            }
        })
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
        let inner = self.lock(py);
        let Some(core) = inner.core.as_ref() else {
            return Ok(PyList::empty(py));
        };
        on!(core, s => {
            match arg.as_ref().map(FenceArg::fence).transpose() {
                Ok(at) => match s.resource_request_ids(at.as_ref(), state) {
                    Ok(ids) => ids_list(py, ids.iter().map(Id::as_str)),
                    Err(e) => Err(core_error(e, self.cx(py))),
                },
                Err(_) => Ok(PyList::empty(py)),
            }
        })
    }

    /// Drops the bindings and resources of these request ids.
    fn release_request_ids(&self, py: Python<'_>, request_ids: &Bound<'_, PyAny>) -> PyResult<()> {
        let ids = args::str_items(request_ids, "request_ids")?;
        let mut inner = self.lock(py);
        if inner.core.is_none() {
            return Ok(()); // a closed session holds nothing
        }
        PySession::release_ids(&mut inner, &ids)
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
        let m = convert::mode(mode)?;
        let mut inner = self.lock(py);
        let cx = Context {
            mode: Some(m.as_str()),
            ..self.cx(py)
        };
        let core = inner.core.as_ref().ok_or_else(crate::session::gone)?;
        let made = on!(core, s => {
            let f = arg.fence()?;
            match s.prepare_append(&f, m) {
                Ok(r) => Ok::<_, PyErr>(Ok((r.base_fence().epoch, r.base_input(), r.on_commit()))),
                Err(e) => Ok(Err(e)),
            }
        })?;
        let (base_epoch, (seq, turn_seq, key), on_commit) = match made {
            Ok(parts) => parts,
            Err(e) => return Err(self.refuse(py, &mut inner, e, Some(fence), cx)),
        };
        // Preparing changes nothing: the base fence is the session's fence,
        // the object the seed would put there.
        let base_fence = self.fence_obj(py, &mut inner)?;
        let key = key.map(|(turn, response)| (base_epoch, turn, response));
        drop(inner);
        classes::reservation_class(py)?.call1((
            fence,
            mode,
            base_fence,
            seq,
            turn_seq,
            key,
            appended_object(py, on_commit)?,
        ))
    }

    /// Phase two: applies a reservation if the session has not moved.
    fn commit_append<'py>(
        &self,
        py: Python<'py>,
        reservation: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let parts = ReservationArg::read(reservation)?;
        let mut inner = self.lock(py);
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(crate::session::gone)?;
        let committed = on!(core, s => {
            match parts.rebuild() {
                Ok(Some(r)) => s.commit_append(&r),
                Ok(None) | Err(_) => Err(stale()),
            }
        });
        match committed {
            Ok(a) => {
                self.remember(&mut inner, &parts.fence);
                drop(inner);
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
        let m = convert::mode(mode)?;
        let mut inner = self.lock(py);
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        let core = inner.core.as_ref().ok_or_else(crate::session::gone)?;
        let found = on!(core, s => {
            let f = arg.fence()?;
            let op = convert::id(operation_id)?;
            Ok::<_, PyErr>(s.completed(&f, &op, m, r#final.into()).map(|r| r.and_then(|r| r.first().copied())))
        })?;
        let handle = match found {
            Ok(h) => h,
            Err(e) => return Err(self.refuse(py, &mut inner, e, Some(fence), cx)),
        };
        let Some(record) = handle
            .and_then(|h| inner.record(h))
            .map(|r| r.clone_ref(py))
        else {
            return Ok(None);
        };
        drop(inner);
        let out = PyList::empty(py);
        for r in record.bind(py).iter().skip(3) {
            out.append(crate::session::copy_dict(py, &r)?)?;
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
        let r#final = args::flag(r#final, "final")?;
        let arg = self.arg(fence)?;
        let m = convert::mode(mode)?;
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
        // One flat tuple per record, `(fence, mode, final, *stage_results)`:
        // no inner tuple, so a record costs less than the seed's.
        let mut items = vec![
            fence.clone(),
            mode.clone(),
            PyBool::new(py, r#final).to_owned().into_any(),
        ];
        items.extend(copies);
        let record = PyTuple::new(py, items)?;
        let mut inner = self.lock(py);
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        let handle = inner.next_handle;
        let core = inner.core.as_mut().ok_or_else(crate::session::gone)?;
        let recorded = on!(core, s => {
            let f = arg.fence()?;
            let op = convert::id(operation_id)?;
            // The state is checked before the table (SPEC: wrong_state, then
            // the seed's order, then full): a lookup checks it and changes
            // nothing.
            Ok::<_, PyErr>(match (too_many, s.completed(&f, &op, m, r#final.into())) {
                (_, Err(e @ CoreError::WrongState { .. })) => Err(e),
                (Some(max), _) => Err(CoreError::Full { table: duplex_core::Table::StageResults, capacity: max }),
                _ => s.record_completed(&f, &op, m, r#final.into(), &[handle]),
            })
        })?;
        recorded.map_err(|e| core_error(e, cx))?;
        inner.next_handle += 1;
        inner.records.push((handle, record.unbind()));
        crate::lease::prune_records(&mut inner);
        Ok(())
    }

    /// Appends input in one step: a `DuplexInputAppend`.
    #[pyo3(signature = (*, mode, fence))]
    fn append_input<'py>(
        &self,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arg = self.arg(fence)?;
        let m = convert::mode(mode)?;
        let mut inner = self.lock(py);
        let core = inner.core.as_mut().ok_or_else(crate::session::gone)?;
        let appended = on!(core, s => arg.fence().map(|f| s.append(&f, m)))?;
        match appended {
            Ok(a) => {
                if inner.fence_object.as_ref().is_none_or(|o| !o.is(fence)) {
                    self.remember(&mut inner, &arg);
                }
                drop(inner);
                appended_object(py, a)
            }
            Err(e) => {
                let cx = Context {
                    mode: Some(m.as_str()),
                    ..self.cx(py)
                };
                Err(self.refuse(py, &mut inner, e, Some(fence), cx))
            }
        }
    }

    /// Returns and drops the requests held at exactly `fence`.
    fn release_fence<'py>(
        &self,
        py: Python<'py>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let arg = self.arg(fence)?;
        let mut inner = self.lock(py);
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(crate::session::gone)?;
        on!(core, s => match arg.fence() {
            Ok(f) => match s.release_fence(&f) {
                Ok(ids) => ids_list(py, ids.iter().map(Id::as_str)),
                Err(e) => Err(core_error(e, cx)),
            },
            Err(_) => Ok(PyList::empty(py)),
        })
    }

    /// Barge-in: advance to `next_fence`, return and release the requests
    /// of `cancelled_fence`.
    fn cancel_fence<'py>(
        &self,
        py: Python<'py>,
        cancelled_fence: &Bound<'py, PyAny>,
        next_fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.cancel(py, cancelled_fence, next_fence, true)
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
        let mut inner = self.lock(py);
        self.begin_close_locked(py, &mut inner, &arg, reason)
    }

    /// Closing → Closed: the request ids it still held.
    fn finalize_close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut inner = self.lock(py);
        let ids = self.finalize_locked(py, &mut inner)?;
        PyList::new(py, ids)
    }

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
        let mut inner = self.lock(py);
        let ids: Vec<String> = match PySession::kind(&inner) {
            StateKind::Closing => self.finalize_locked(py, &mut inner)?,
            StateKind::Closed => Vec::new(),
            StateKind::Open | StateKind::Detached => {
                let core = inner.core.as_mut().ok_or_else(gone)?;
                on!(core, s => s.release_all().map(|ids| {
                    ids.iter().map(|id| id.as_str().to_owned()).collect()
                }))
                .map_err(|e| core_error(e, self.cx(py)))?
            }
        };
        PyList::new(py, ids)
    }

    /// Begin closing and finalize; False if the session was already closing.
    #[pyo3(signature = (fence, *, reason))]
    fn terminate(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        reason: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let reason = args::string(reason, "reason")?;
        let arg = self.arg(fence)?;
        Ok(self.terminate_now(py, &arg, reason)?.is_some())
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
