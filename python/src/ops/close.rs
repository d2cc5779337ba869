//! Closing: begin, finalize, the seed's `close` and `terminate`.

use duplex_core::{CloseReason, StateKind};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::args;
use crate::convert::{names, FenceArg, FenceValues};
use crate::errors::{core_error, gone};
use crate::host::each;
use crate::patch::{kwargs, shadowed};
use crate::session::{Closed, Locked, PySession};

#[pymethods]
impl PySession {
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
            StateKind::Open | StateKind::Detached => {
                let (managers, key) = g.core()?.into_parts();
                each!(managers, |m| {
                    m.update_at(key, |s| s.release_all().map(|ids| names(&ids)))
                        .ok_or_else(gone)
                })
            }?
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

impl PySession {
    /// Closes in one step (the seed's `terminate` and the manager's
    /// `close_session`): `false` if the session was already closing. The
    /// fence is accepted first (a refusal changes nothing); the core closes
    /// the session where it sits (the generation bump and the release are
    /// its rule); nobody reads the released ids here.
    pub(crate) fn terminate_now(
        &self,
        py: Python<'_>,
        fence: &FenceArg<'_>,
        reason: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        let mut g = self.lock(py);
        let cx = self.cx(py);
        // Already closing (or closed): the seed answers False.
        if !matches!(g.kind()?, StateKind::Open | StateKind::Detached) {
            return Ok(false);
        }
        let accepted = {
            let (managers, key) = g.core()?.into_parts();
            each!(managers, |m| {
                let f = fence.fence()?;
                m.update_at(key, |s| s.accept_fence(&f)).ok_or_else(gone)
            })
        }?;
        if let Err(e) = accepted {
            return Err(self.refuse(py, &mut g, e, Some(&fence.object), cx));
        }
        let (core, inner) = g.parts()?;
        let core = core.ok_or_else(gone)?;
        let facts = Self::facts_of(&core).unwrap_or_default();
        let core_reason = close_reason(reason.to_str()?);
        let generation = {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = fence.fence()?;
                m.update_at(key, |s| {
                    let mut released = duplex_core::RequestIds::new();
                    s.close_into(&f, core_reason, &mut released)
                        .map(|()| s.lease_generation())
                })
                .ok_or_else(gone)
            })
        }?
        .map_err(|e| core_error(e, cx))?;
        inner.closed = Some(Box::new(Closed {
            fence: fence.object.clone().unbind(),
            epoch: fence.epoch,
            turn: fence.turn,
            generation,
            facts,
        }));
        inner.fence_object = Some(fence.object.clone().unbind());
        inner.terminal_reason = Some(reason.clone().unbind());
        let records = std::mem::take(&mut inner.records);
        drop(g);
        drop(records);
        Ok(true)
    }

    pub(crate) fn begin_close_locked(
        &self,
        py: Python<'_>,
        g: &mut Locked<'_>,
        fence: &FenceArg<'_>,
        reason: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        let core_reason = close_reason(reason.to_str()?);
        let cx = self.cx(py);
        let result = {
            let (managers, key) = g.core()?.into_parts();
            each!(managers, |m| {
                let f = fence.fence()?;
                m.update_at(key, |s| s.begin_close(&f, core_reason))
                    .ok_or_else(gone)
            })
        }?;
        match result {
            Ok(()) => {
                Self::remember(g, fence)?;
                let inner = g.inner()?;
                // Already closing: the seed answers True, and keeps the
                // first reason.
                if inner.terminal_reason.is_none() {
                    inner.terminal_reason = Some(reason.clone().unbind());
                }
                Ok(true)
            }
            Err(e) => Err(self.refuse(py, g, e, Some(&fence.object), cx)),
        }
    }

    /// Closing → Closed, where the session sits: the requests it still
    /// held.
    pub(crate) fn finalize_locked(
        &self,
        py: Python<'_>,
        g: &mut Locked<'_>,
    ) -> PyResult<Vec<String>> {
        let cx = self.cx(py);
        let (core, inner) = g.parts()?;
        let core = core.ok_or_else(gone)?;
        let facts = Self::facts_of(&core).unwrap_or_default();
        let ids: Vec<String> = {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                m.update_at(key, |s| {
                    s.finalize()
                        .map(|ids| ids.iter().map(|id| id.as_str().to_owned()).collect())
                })
                .ok_or_else(gone)
            })
        }?
        .map_err(|e| core_error(e, cx))?;
        // The fence object the seed shows: the remembered one if the core's
        // fence (kept once closed) still has its values.
        let (values, current) = each!(&*core.managers, |m| m.get_at(core.key).map(|s| {
            (
                FenceValues::of(s.fence()),
                inner
                    .fence_object
                    .as_ref()
                    .is_some_and(|o| FenceArg::read(o.bind(py)).is_ok_and(|arg| arg.is(s.fence()))),
            )
        }))
        .ok_or_else(gone)?;
        let fence = match (&inner.fence_object, current) {
            (Some(object), true) => object.clone_ref(py),
            _ => values.object(py, self.classes.get())?.unbind(),
        };
        let (epoch, turn, generation) = each!(&*core.managers, |m| m
            .get_at(core.key)
            .map(|s| { (s.fence().epoch, s.fence().turn, s.lease_generation()) }))
        .unwrap_or_default();
        inner.closed = Some(Box::new(Closed {
            fence,
            epoch,
            turn,
            generation,
            facts,
        }));
        let records = std::mem::take(&mut inner.records);
        drop(records);
        Ok(ids)
    }
}

/// The core's close reason for a reason string (free strings, as the seed
/// takes them, are kept as given; the core records the nearest).
pub(crate) fn close_reason(reason: &str) -> CloseReason {
    CloseReason::ALL
        .iter()
        .copied()
        .find(|r| r.as_str() == reason)
        .unwrap_or(CloseReason::ExplicitClose)
}
