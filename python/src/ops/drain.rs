//! Draining requests, with vllm-omni 0.30's names where it has them
//! (`is_draining_request`, `draining_request_ids`): a barge-in that keeps
//! some stages' requests bound (`drain_fence`), whose output a request's
//! output is (`route_output`), and their release (`release_drained`).

use duplex_core::drain::OutputRoute;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::args;
use crate::convert::names;
use crate::session::{ids_list, PySession};

/// The route as a dict: `owner` (`"current"`, `"draining"` or `"stale"`),
/// `stage_id`, and the `epoch`, `turn_id` and `response_id` it was bound
/// under.
fn route_dict<'py>(py: Python<'py>, r: &OutputRoute) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("owner", r.owner.as_str())?;
    out.set_item("stage_id", r.stage)?;
    out.set_item("epoch", r.bound_at.epoch)?;
    out.set_item("turn_id", r.bound_at.turn)?;
    out.set_item("response_id", r.bound_at.response)?;
    Ok(out)
}

/// The stage ids of an iterable of ints.
fn stages(value: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    let items = value.try_iter().map_err(|_| {
        args::type_error(format!(
            "keep_stages must be an iterable of int, got {}",
            args::type_name(value)
        ))
    })?;
    items.map(|item| args::stage_id(&item?)).collect()
}

#[pymethods]
impl PySession {
    /// Moves on from `cancelled_fence` to `next_fence` (the next turn, or a
    /// barge-in's new epoch) as `cancel_fence` does, but the requests at
    /// `cancelled_fence` on the stages in `keep_stages` stay bound until
    /// `release_drained` (their output routes `"draining"` after a new turn,
    /// `"stale"` after a new epoch). Returns the requests released now.
    #[pyo3(signature = (cancelled_fence, next_fence, keep_stages = None))]
    fn drain_fence<'py>(
        &self,
        py: Python<'py>,
        cancelled_fence: &Bound<'py, PyAny>,
        next_fence: &Bound<'py, PyAny>,
        keep_stages: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let keep = match args::given(keep_stages) {
            Some(v) => stages(v)?,
            None => Vec::new(),
        };
        self.cancel(py, cancelled_fence, next_fence, true, Some(&keep))
    }

    /// Where `request_id`'s output goes: a dict (`owner`, `stage_id`,
    /// `epoch`, `turn_id`, `response_id`), or `None` if the session does
    /// not own it (or is closed).
    fn route_output<'py>(
        &self,
        py: Python<'py>,
        request_id: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let request = args::text(request_id, "request_id")?;
        let route = budget!(self, py, None, |s| s.route_output(request))?;
        route.map(|r| route_dict(py, &r)).transpose()
    }

    /// Whether `request_id` is the session's and not the current
    /// response's: draining, or stale after a barge-in (the release's
    /// `is_draining_request`). A value that is not a `str` names no
    /// request.
    fn is_draining_request(&self, py: Python<'_>, request_id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(request) = request_id.extract::<&str>() else {
            return Ok(false);
        };
        let route = budget!(self, py, None, |s| s.route_output(request))?;
        Ok(route.is_some_and(|r| !r.owner.is_current()))
    }

    /// The draining and stale request ids, in reservation order.
    fn draining_request_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ids = budget!(self, py, Vec::new(), |s| s
            .draining()
            .map(|ids| names(&ids)))?;
        ids_list(py, ids.iter().map(String::as_str))
    }

    /// Returns and drops the draining and stale requests, each once.
    fn release_drained<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ids = budget!(self, py, Vec::new(), |s| s
            .release_drained()
            .map(|ids| names(&ids)))?;
        ids_list(py, ids.iter().map(String::as_str))
    }
}
