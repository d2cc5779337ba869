//! The session's lease as the seed's `DuplexLeaseState` shows it
//! (`session.lease`, a view in `_lease.py`), barge-in, and the cleanup of
//! completed-append records the core has evicted.

use duplex_core::{Error as CoreError, Id, Instant, StateKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PySet, PyTuple};

use crate::args;
use crate::convert::{self, names, FenceArg};
use crate::errors::{core_error, fence_mismatch, generation_mismatch, gone, with_kind, Context};
use crate::host::{each, Core};
use crate::session::{ids_list, unfinished, Inner, PySession};

/// The lease view's operations (`session.lease`, in `_lease.py`).
#[pymethods]
impl PySession {
    /// `(config, generation, last_activity, detached_at, active_operations,
    /// terminal_reason, resumed_by)` in the seed's types (`resumed_by`:
    /// vllm-omni 0.30's).
    fn _lease_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut g = self.lock(py);
        let ops = PySet::empty(py)?;
        let (core, inner) = g.parts()?;
        let reason = inner.terminal_reason.as_ref().map(|r| r.clone_ref(py));
        let config = inner.lease_config.clone_ref(py).into_bound(py);
        let Some(core) = core else {
            let (generation, last) = inner.closed.as_ref().map_or((0, Instant::ZERO), |c| {
                (c.generation, c.facts.last_activity)
            });
            drop(g);
            return PyTuple::new(
                py,
                [
                    config,
                    generation.into_pyobject(py)?.into_any(),
                    convert::seconds(last).into_pyobject(py)?.into_any(),
                    py.None().into_bound(py),
                    ops.into_any(),
                    reason.into_pyobject(py)?.into_any(),
                    py.None().into_bound(py),
                ],
            );
        };
        let (generation, detached, last, active, resumed_by) =
            each!(&*core.managers, |m| m.get_at(core.key).map(|s| {
                let detached = s.as_detached().map(|d| d.state().since());
                let (last, active) =
                    unfinished!(s, t => (t.last_activity(), names(t.active_operations())))
                        .unwrap_or_default();
                let resumed_by = s.resumed_by().map(str::to_owned);
                (s.lease_generation(), detached, last, active, resumed_by)
            }))
            .unwrap_or_default();
        drop(g);
        for op in active {
            ops.add(op)?;
        }
        PyTuple::new(
            py,
            [
                config,
                generation.into_pyobject(py)?.into_any(),
                convert::seconds(last).into_pyobject(py)?.into_any(),
                detached.map(convert::seconds).into_pyobject(py)?.into_any(),
                ops.into_any(),
                reason.into_pyobject(py)?.into_any(),
                resumed_by.into_pyobject(py)?.into_any(),
            ],
        )
    }

    /// A lease operation at an explicit `now`, with the session's own
    /// fence: `touch` (arg: activity), `detach`, `resume` (arg: expected
    /// generation; `control_id`: the resume's, idempotent), `begin` and
    /// `end` (arg: operation id).
    #[pyo3(signature = (op, now, arg, control_id = None))]
    fn _lease_op(
        &self,
        py: Python<'_>,
        op: &str,
        now: &Bound<'_, PyAny>,
        arg: Option<&Bound<'_, PyAny>>,
        control_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<u64>> {
        let now = convert::reading(now)?;
        let control: Option<String> = control_id
            .filter(|c| !c.is_none())
            .map(|c| args::text(c, "control_id").map(str::to_owned))
            .transpose()?;
        let activity = match (op, arg) {
            ("touch", Some(a)) => Some(convert::activity(a, self.classes())?),
            _ => None,
        };
        let text: Option<String> = match (op, arg) {
            ("begin" | "end", Some(a)) => Some(args::text(a, "operation_id")?.to_owned()),
            _ => None,
        };
        if op == "begin" && text.as_deref() == Some("") {
            return Err(with_kind(
                pyo3::exceptions::PyValueError::new_err(
                    "duplex lease operation_id must not be empty",
                ),
                "invalid_id",
            ));
        }
        // A value that is not a generation equals none (see `resume`).
        let expected: Option<u64> = match (op, arg) {
            ("resume", Some(a)) => a.extract::<u64>().ok(),
            _ => None,
        };
        let mut g = self.lock(py);
        // Terminal: the core's Closing or Closed; the reason as the host
        // named it.
        if matches!(g.kind()?, StateKind::Closing | StateKind::Closed) {
            let reason = match &g.inner()?.terminal_reason {
                Some(reason) => reason.bind(py).to_str()?.to_owned(),
                None => String::from("closed"),
            };
            return Err(with_kind(
                PyRuntimeError::new_err(format!("duplex lease is terminal: {reason}")),
                "wrong_state",
            ));
        }
        let cx = Context {
            operation: text.as_deref(),
            ..self.cx(py)
        };
        // Each with the session's own fence.
        let result: Result<Option<u64>, CoreError> = {
            let (managers, key) = g.core()?.into_parts();
            each!(managers, |m| {
                m.at(now)
                    .apply_at(key, |s, now| {
                        let f = s.fence().clone();
                        match (op, activity, text.as_deref()) {
                            ("detach", _, _) => s.detach(&f, now).map(|()| None),
                            ("resume", _, _) => {
                                let other = s.lease_generation().wrapping_add(1);
                                let expected = expected.unwrap_or(other);
                                match control.as_deref().map(Id::new) {
                                    Some(Ok(c)) => {
                                        s.resume_idempotent(&f, expected, &c, now).map(Some)
                                    }
                                    Some(Err(e)) => Err(e),
                                    None => s.resume(&f, expected, now).map(Some),
                                }
                            }
                            ("touch", Some(a), _) => s.touch(&f, a, now).map(|()| None),
                            ("begin", _, Some(t)) => match Id::new(t) {
                                Ok(id) => s.begin_operation(&f, &id, now).map(|()| None),
                                Err(e) => Err(e),
                            },
                            ("end", _, Some(t)) => match Id::new(t) {
                                Ok(id) => s.end_operation(&f, &id, now).map(|()| None),
                                Err(_) => Err(CoreError::OperationNotActive),
                            },
                            _ => Err(CoreError::WrongState {
                                operation: "lease operation",
                                state: s.kind(),
                            }),
                        }
                    })
                    .ok_or_else(gone)
            })
        }?;
        let out = match (op, expected, arg, result) {
            (
                "resume",
                None,
                Some(given),
                Err(CoreError::GenerationMismatch {
                    expected: current, ..
                }),
            ) => return Err(generation_mismatch(current, given)),
            (_, _, _, result) => result.map_err(|e| core_error(e, cx))?,
        };
        Ok(out)
    }

    /// The lease's `mark_terminal`: begin closing at the session's fence.
    fn _lease_mark_terminal(&self, py: Python<'_>, reason: &Bound<'_, PyAny>) -> PyResult<bool> {
        let reason = args::string(reason, "reason")?;
        let mut g = self.lock(py);
        if matches!(g.kind()?, StateKind::Closing | StateKind::Closed) {
            return Ok(false);
        }
        let fence = self.fence_obj(py, &mut g)?;
        let arg = FenceArg::read(&fence)?;
        self.begin_close_locked(py, &mut g, &arg, reason)
    }
}

impl PySession {
    /// Barge-in (`release`) or its first half: the seed's checks and
    /// exceptions first, then the core. With `drain`, the stages it names
    /// stay bound, and `next` need only be ahead of `cancelled` (the core's
    /// rule for `drain`), not in a later epoch.
    pub(crate) fn cancel<'py>(
        &self,
        py: Python<'py>,
        cancelled: &Bound<'py, PyAny>,
        next: &Bound<'py, PyAny>,
        release: bool,
        drain: Option<&[u32]>,
    ) -> PyResult<Bound<'py, PyList>> {
        let c = self.arg(cancelled)?;
        let n = self.arg(next)?;
        let mut g = self.lock(py);
        // The state comes before the fences (SPEC §8's precedence).
        let state = g.kind()?;
        if !matches!(state, StateKind::Open | StateKind::Detached) {
            let e = CoreError::WrongState {
                operation: "cancel",
                state,
            };
            return Err(core_error(e, self.cx(py)));
        }
        let current = self.fence_obj(py, &mut g)?;
        let cur = FenceArg::read(&current)?;
        let sid = self.id(py).to_str()?;
        if c.session_id.to_str()? != sid || c.incarnation != cur.incarnation {
            return Err(fence_mismatch(&current, cancelled));
        }
        // The core's fence order: a later epoch, or in the same epoch a later
        // turn or response.
        let ahead = n.epoch > c.epoch
            || (n.epoch == c.epoch && (n.turn > c.turn || n.response > c.response));
        let advancing = if drain.is_some() {
            ahead
        } else {
            n.epoch > c.epoch
        };
        if n.session_id.to_str()? != sid || n.incarnation != cur.incarnation || !advancing {
            return Err(fence_mismatch(cancelled, next));
        }
        let key = |f: &FenceArg<'_>| (f.epoch, f.turn, f.response);
        if key(&c) > key(&cur) {
            return Err(fence_mismatch(&current, cancelled));
        }
        let cx = self.cx(py);
        let advance = key(&n) > key(&cur);
        let ids = {
            let (managers, key) = g.core()?.into_parts();
            each!(managers, |m| {
                let cf = c.fence()?;
                let nf = n.fence()?;
                m.update_at(key, |s| {
                    if release {
                        match drain {
                            Some(keep) => s.drain(&cf, &nf, |stage| keep.contains(&stage)),
                            None => s.cancel(&cf, &nf),
                        }
                        .map(|ids| names(&ids))
                    } else {
                        let advanced = if advance { s.accept_fence(&nf) } else { Ok(()) };
                        advanced
                            .and_then(|()| s.resource_request_ids(Some(&cf), None))
                            .map(|ids| names(&ids))
                    }
                })
                .ok_or_else(gone)
            })
        }?
        .map_err(|e| core_error(e, cx))?;
        PySession::remember(&mut g, &n)?;
        drop(g);
        ids_list(py, ids.iter().map(String::as_str))
    }
}

/// Drops the Python records of completed appends the core no longer holds
/// (evicted, replaced, or cleared by a new epoch), once they are as many
/// again as the live ones: amortised O(1) per record.
/// Returns the records dropped, for the caller to release after it
/// unlocks the host (dropping a Python object can run Python code).
pub(crate) fn prune_records(core: &Core<'_>, inner: &mut Inner) -> Vec<(i64, Py<PyTuple>)> {
    let live = each!(&*core.managers, |m| m
        .get_at(core.key)
        .map(|s| { unfinished!(s, t => t.completed_len()) }))
    .flatten()
    .unwrap_or(0);
    if inner.records.len() <= 2 * live + 16 {
        return Vec::new();
    }
    let mut keep: Vec<i64> = Vec::with_capacity(live);
    each!(&*core.managers, |m| m.get_at(core.key).map(|s| {
        unfinished!(s, t => {
            keep.extend(t.completed_records().filter_map(|(_, r)| r.first().copied()));
        })
    }));
    inner.retain_records(&mut keep)
}
