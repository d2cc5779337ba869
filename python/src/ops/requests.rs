//! The requests a session owns: reserve, bind, list, release, and the
//! fence's requests (release, cancel).

use duplex_core::Error as CoreError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::args;
use crate::convert::{self, names, FenceArg};
use crate::errors::{core_error, gone, Context};
use crate::host::each;
use crate::patch::shadowed;
use crate::session::{ids_list, PySession};

#[pymethods]
impl PySession {
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
        self.op(py, &arg, cx, |core, inner| {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = inner.fence(&arg, self.classes())?;
                let request = convert::id(request_id)?;
                m.update_at(key, |s| s.reserve(&f, stage_id, &request))
                    .ok_or_else(gone)
            })
        })
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
        self.op(py, &arg, cx, |core, inner| {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = inner.fence(&arg, self.classes())?;
                let request = convert::id(request_id)?;
                m.update_at(key, |s| s.bind(&f, stage_id, &request))
                    .ok_or_else(gone)
            })
        })
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
        let ids: Result<Vec<String>, CoreError> = each!(&*core.managers, |mgr| {
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
        let ids: Result<Vec<String>, CoreError> = each!(&*core.managers, |mgr| {
            match arg.as_ref().map(FenceArg::fence).transpose() {
                Ok(at) => mgr.get_at(core.key).map_or(Ok(Vec::new()), |s| {
                    s.resource_request_ids(at.as_ref(), state)
                        .map(|ids| names(&ids))
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
        let Some(core) = g.parts()?.0 else {
            return Ok(()); // a closed session holds nothing
        };
        let key = core.key;
        each!(&mut *core.managers, |m| m.update_at(key, |s| s
            .release_where(|id| ids.contains(&id.as_str()))))
        .ok_or_else(gone)?
        .map_err(|e| core_error(e, Context::default()))
    }

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
        let core = g.core()?;
        let key = core.key;
        let released = each!(core.managers, |m| {
            let f = arg.fence();
            m.update_at(key, |s| match &f {
                Ok(f) => s.release_fence(f).map(|ids| names(&ids)),
                Err(_) => Ok(Vec::new()),
            })
        })
        .ok_or_else(gone)?;
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
            .cancel(py, cancelled_fence, next_fence, true, None)?
            .into_any())
    }

    /// Advance the cancellation fence without dropping cleanup records.
    fn prepare_cancel_fence<'py>(
        &self,
        py: Python<'py>,
        cancelled_fence: &Bound<'py, PyAny>,
        next_fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.cancel(py, cancelled_fence, next_fence, false, None)
    }
}
