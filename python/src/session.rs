//! `DuplexSessionRuntimeState`: one session, its core state in Rust and its
//! opaque values (configs, capabilities, stage results) as the Python
//! objects the host gave.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use duplex_core::{CloseReason, Error as CoreError, Instant, StateKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::classes;
use crate::convert::{self, fence_object, FenceArg};
use crate::core::{on, CoreAny, Profile};
use crate::errors::{core_error, fence_mismatch, with_kind, Context};
use crate::timers::Timers;

/// Reads of a session's typed state (Open, Detached or Closing).
macro_rules! unfinished {
    ($any:expr, $s:ident => $body:expr) => {{
        let any = $any;
        if let Some($s) = any.as_open() {
            Some($body)
        } else if let Some($s) = any.as_detached() {
            Some($body)
        } else if let Some($s) = any.as_closing() {
            Some($body)
        } else {
            None
        }
    }};
}

pub(crate) use unfinished;

/// Runs one operation on the session under its lock: `$body` sees the
/// session as `$s` and the converted fence as `$f`, and returns
/// `Result<T, duplex_core::Error>`. On success the fence object is
/// remembered; a refusal becomes the seed's exception.
macro_rules! session_op {
    ($this:expr, $py:expr, $arg:expr, $cx:expr, |$s:ident, $f:ident| $body:expr) => {{
        let mut inner = $this.lock($py);
        let core = inner.core.as_mut().ok_or_else($crate::session::gone)?;
        let result = $crate::core::on!(core, $s => {
            let $f = $arg.fence()?;
            Ok::<_, pyo3::PyErr>($body)
        })?;
        match result {
            Ok(value) => {
                $this.remember(&mut inner, &$arg);
                Ok(value)
            }
            Err(e) => Err($this.refuse($py, &mut inner, e, Some(&$arg.object), $cx)),
        }
    }};
}
pub(crate) use session_op;

/// What a closed session still shows (the core keeps only its fence and
/// generation once finalized).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Facts {
    pub(crate) input_seq: u64,
    pub(crate) input_turn_seq: u64,
    pub(crate) last_activity: Instant,
    pub(crate) config_generation: u64,
    pub(crate) completed_limit: usize,
}

/// The mutable part of a session, behind its lock.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) core: Option<CoreAny>,
    pub(crate) capabilities: Py<PyAny>,
    /// `None` until read: a session opened without one gets its empty
    /// dict when it is first asked for.
    pub(crate) session_config: Option<Py<PyAny>>,
    pub(crate) runtime_config: Option<Py<PyAny>>,
    pub(crate) lease_config: Py<PyAny>,
    /// Completed appends' records, by the handle the core keeps:
    /// `(fence, mode, final, stage_results)`.
    pub(crate) records: Vec<(i64, Py<PyTuple>)>,
    pub(crate) next_handle: i64,
    /// The close reason as the host named it.
    pub(crate) terminal_reason: Option<Py<PyString>>,
    /// The last fence object whose values are the session's fence.
    pub(crate) fence_object: Option<Py<PyAny>>,
    pub(crate) facts: Option<Facts>,
    /// A closed session's fence and lease generation (its core is gone).
    pub(crate) closed: Option<Closed>,
}

/// What a closed session's fence and lease read.
#[derive(Debug)]
pub(crate) struct Closed {
    pub(crate) fence: Py<PyAny>,
    pub(crate) epoch: u64,
    pub(crate) turn: u64,
    pub(crate) generation: u64,
}

impl Inner {
    pub(crate) fn records_len(&self) -> usize {
        self.records.len()
    }

    /// Keeps only the records with these handles.
    pub(crate) fn retain_records(&mut self, handles: &mut [i64]) {
        handles.sort_unstable();
        self.records
            .retain(|(h, _)| handles.binary_search(h).is_ok());
    }

    /// The record of a handle (handles are issued in increasing order, so
    /// the records are sorted by handle).
    pub(crate) fn record(&self, handle: i64) -> Option<&Py<PyTuple>> {
        let at = self
            .records
            .binary_search_by_key(&handle, |(h, _)| *h)
            .ok()?;
        self.records.get(at).map(|(_, r)| r)
    }
}

/// The last fence argument read, by identity.
#[derive(Debug)]
pub(crate) struct CachedFence {
    object: Py<PyAny>,
    session_id: Py<PyString>,
    epoch: u64,
    turn: u64,
    response: u64,
    incarnation: u64,
}

/// A duplex session: the seed's `DuplexSessionRuntimeState`.
#[pyclass(frozen, name = "DuplexSessionRuntimeState", module = "duplex_session")]
pub(crate) struct PySession {
    pub(crate) inner: Mutex<Inner>,
    pub(crate) session_id: Py<PyString>,
    pub(crate) clock: Py<PyAny>,
    pub(crate) profile: Profile,
    pub(crate) timers: Option<Arc<Timers>>,
    /// Never held while Python code runs (only a pointer comparison and
    /// reference counts happen under it).
    pub(crate) arg_cache: Mutex<Option<CachedFence>>,
}

/// Everything a session is opened with.
pub(crate) struct Opening<'py> {
    pub(crate) fence: FenceArg<'py>,
    pub(crate) now: Instant,
    pub(crate) capabilities: Bound<'py, PyAny>,
    pub(crate) session_config: Option<Bound<'py, PyAny>>,
    pub(crate) runtime_config: Option<Bound<'py, PyAny>>,
    pub(crate) lease_config: Bound<'py, PyAny>,
    pub(crate) completed_limit: usize,
    /// `lease_config` converted.
    pub(crate) lease: duplex_core::LeaseConfig,
}

pub(crate) fn lease_of(config: &Bound<'_, PyAny>) -> PyResult<duplex_core::LeaseConfig> {
    let py = config.py();
    let read = |name: &Bound<'_, PyString>| -> PyResult<Option<f64>> {
        config
            .getattr(name)
            .and_then(|v| v.extract())
            .map_err(|e| crate::errors::ensure_kind(e, "invalid_config"))
    };
    let ttl = read(pyo3::intern!(py, "idle_ttl_s"))?;
    let grace = read(pyo3::intern!(py, "disconnect_grace_s"))?.ok_or_else(|| {
        with_kind(
            pyo3::exceptions::PyValueError::new_err(
                "disconnect_grace_s must be a number of seconds",
            ),
            "invalid_config",
        )
    })?;
    let ms =
        |s: f64| convert::instant(s).map(|i| duplex_core::Duration::from_millis(i.as_millis()));
    let ttl = ttl.map(ms).transpose()?;
    duplex_core::LeaseConfig::new(ttl, ms(grace)?).map_err(|e| core_error(e, Context::default()))
}

pub(crate) fn copy_dict<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyDict::type_object(py).call1((value,))?.into_any())
}

use pyo3::type_object::PyTypeInfo;

impl PySession {
    /// Opens a session (the manager's `open_session`).
    pub(crate) fn open(
        py: Python<'_>,
        o: Opening<'_>,
        clock: Py<PyAny>,
        profile: Profile,
        timers: Option<Arc<Timers>>,
        reuse: Option<CoreAny>,
    ) -> PyResult<Self> {
        let lease = o.lease;
        let modes = convert::modes(&o.capabilities)?;
        let options = duplex_core::OpenOptions::default()
            .modes(modes)
            .lease(lease)
            .completed_limit(o.completed_limit);
        let cx = Context {
            session: o.fence.session_id.to_str()?,
            ..Context::default()
        };
        let core = match (profile, reuse) {
            // A closed session's storage, opened again in place: the tables
            // are emptied, not rewritten (a server session is ~45 KiB).
            (Profile::Server, Some(CoreAny::Server(mut boxed))) => {
                boxed
                    .recycle(o.fence.fence()?, options, o.now)
                    .map_err(|e| core_error(e, cx))?;
                CoreAny::Server(boxed)
            }
            (Profile::Server, _) => {
                let s =
                    duplex_core::Session::open_with_capacities(o.fence.fence()?, options, o.now)
                        .map_err(|e| core_error(e, cx))?;
                CoreAny::Server(Box::new(s.into()))
            }
            (Profile::Conformance, _) => {
                let s =
                    duplex_core::Session::open_with_capacities(o.fence.fence()?, options, o.now)
                        .map_err(|e| core_error(e, cx))?;
                CoreAny::Conformance(Box::new(s.into()))
            }
        };
        Ok(PySession {
            session_id: o.fence.session_id.clone().unbind(),
            inner: Mutex::new(Inner {
                core: Some(core),
                capabilities: o.capabilities.unbind(),
                session_config: o
                    .session_config
                    .map(|c| copy_dict(py, &c).map(Bound::unbind))
                    .transpose()?,
                runtime_config: o
                    .runtime_config
                    .map(|c| copy_dict(py, &c).map(Bound::unbind))
                    .transpose()?,
                lease_config: o.lease_config.unbind(),
                records: Vec::new(),
                next_handle: 0,
                terminal_reason: None,
                fence_object: Some(o.fence.object.clone().unbind()),
                facts: None,
                closed: None,
            }),
            clock,
            profile,
            timers,
            arg_cache: Mutex::new(Some(CachedFence {
                object: o.fence.object.clone().unbind(),
                session_id: o.fence.session_id.clone().unbind(),
                epoch: o.fence.epoch,
                turn: o.fence.turn,
                response: o.fence.response,
                incarnation: o.fence.incarnation,
            })),
        })
    }

    pub(crate) fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Inner> {
        self.inner
            .lock_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn id<'py>(&self, py: Python<'py>) -> &Bound<'py, PyString> {
        self.session_id.bind(py)
    }

    pub(crate) fn cx<'a>(&'a self, py: Python<'a>) -> Context<'a> {
        Context {
            session: self.session_id.bind(py).to_str().unwrap_or_default(),
            ..Context::default()
        }
    }

    pub(crate) fn now(&self, py: Python<'_>) -> PyResult<Instant> {
        convert::now(self.clock.bind(py), None)
    }

    /// Reads a fence argument. The last fence read is remembered by
    /// identity: a `DuplexFence` is frozen, so a host that passes the same
    /// object again (the common case: one fence per turn) skips reading
    /// its five attributes.
    pub(crate) fn arg<'py>(&self, fence: &Bound<'py, PyAny>) -> PyResult<FenceArg<'py>> {
        let py = fence.py();
        {
            let cache = self
                .arg_cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = cache.as_ref().filter(|c| c.object.is(fence)) {
                return Ok(FenceArg {
                    object: fence.clone(),
                    session_id: c.session_id.bind(py).clone(),
                    epoch: c.epoch,
                    turn: c.turn,
                    response: c.response,
                    incarnation: c.incarnation,
                });
            }
        }
        let arg = FenceArg::read(fence)?;
        if fence.is_exact_instance(classes::fence_class(py)?) {
            let mut cache = self
                .arg_cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *cache = Some(CachedFence {
                object: fence.clone().unbind(),
                session_id: arg.session_id.clone().unbind(),
                epoch: arg.epoch,
                turn: arg.turn,
                response: arg.response,
                incarnation: arg.incarnation,
            });
        }
        Ok(arg)
    }

    /// The outcome of a transition: the fence remembered, or the refusal.
    pub(crate) fn after<T>(
        &self,
        py: Python<'_>,
        inner: &mut Inner,
        result: Result<T, CoreError>,
        arg: &FenceArg<'_>,
        cx: Context<'_>,
    ) -> PyResult<T> {
        match result {
            Ok(v) => {
                self.remember(inner, arg);
                Ok(v)
            }
            Err(e) => Err(self.refuse(py, inner, e, Some(&arg.object), cx)),
        }
    }

    /// Tells the manager's reaper this session's deadline may be earlier.
    pub(crate) fn reschedule(&self, py: Python<'_>, inner: &Inner) {
        if let (Some(timers), Some(core)) = (&self.timers, &inner.core) {
            if let Some(at) = on!(core, s => s.deadline()) {
                timers.push(at, self.session_id.bind(py).to_str().unwrap_or_default());
            }
        }
    }

    /// The session's fence as a `DuplexFence` (the last one given, when it
    /// is still the session's).
    pub(crate) fn fence_obj<'py>(
        &self,
        py: Python<'py>,
        inner: &mut Inner,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let (None, Some(closed)) = (&inner.core, &inner.closed) {
            return Ok(closed.fence.bind(py).clone());
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        if let Some(obj) = &inner.fence_object {
            let arg = FenceArg::read(obj.bind(py))?;
            if on!(core, s => arg.is(s.fence())) {
                return Ok(obj.bind(py).clone());
            }
        }
        let obj = on!(core, s => fence_object(py, s.fence()))?;
        inner.fence_object = Some(obj.clone().unbind());
        Ok(obj)
    }

    /// Maps a core refusal: a fence mismatch becomes the seed's
    /// `DuplexFenceMismatchError(current, given)`.
    pub(crate) fn refuse(
        &self,
        py: Python<'_>,
        inner: &mut Inner,
        e: CoreError,
        given: Option<&Bound<'_, PyAny>>,
        cx: Context<'_>,
    ) -> PyErr {
        if let (CoreError::FenceMismatch { .. }, Some(given)) = (e, given) {
            match self.fence_obj(py, inner) {
                Ok(current) => return fence_mismatch(&current, given),
                Err(err) => return err,
            }
        }
        core_error(e, cx)
    }

    /// Remembers `arg` as the fence object if the session now has its values.
    pub(crate) fn remember(&self, inner: &mut Inner, arg: &FenceArg<'_>) {
        // The same object again: an operation that admitted it leaves the
        // session at its values (a fence never moves backwards).
        if inner
            .fence_object
            .as_ref()
            .is_some_and(|o| o.is(&arg.object))
        {
            return;
        }
        if let Some(core) = &inner.core {
            if on!(core, s => arg.is(s.fence())) {
                inner.fence_object = Some(arg.object.clone().unbind());
            }
        }
    }

    /// Releases the session's requests whose ids are in `ids`; their count.
    pub(crate) fn release_ids(inner: &mut Inner, ids: &[String]) -> PyResult<()> {
        let core = inner.core.as_mut().ok_or_else(gone)?;
        on!(core, s => s.release_where(|id| ids.iter().any(|r| r == id.as_str())))
            .map_err(|e| core_error(e, Context::default()))
    }

    /// Closes in one step (the manager's `close_session`): `None` if the
    /// session was already closing. An open or detached session accepts
    /// the fence and is closed by the core where it sits (the generation
    /// bump and the release are the core's); its storage comes back for
    /// the next session to recycle.
    // `None`: already closing; `Some(storage)`: closed now, with its
    // storage.
    #[allow(clippy::option_option)]
    pub(crate) fn terminate_now(
        &self,
        py: Python<'_>,
        fence: &FenceArg<'_>,
        reason: &Bound<'_, PyString>,
    ) -> PyResult<Option<Option<CoreAny>>> {
        let mut inner = self.lock(py);
        if inner.terminal_reason.is_some() {
            return Ok(None);
        }
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(gone)?;
        let accepted = on!(core, s => match fence.fence() {
            Ok(f) => Ok(s.accept_fence(&f)),
            Err(e) => Err(e),
        })?;
        if let Err(e) = accepted {
            return Err(self.refuse(py, &mut inner, e, Some(&fence.object), cx));
        }
        let facts = Self::facts_of(&inner);
        // The core closes (its rule: the generation bump, the requests
        // released) where the session sits; nobody reads the ids here.
        let core = inner.core.as_mut().ok_or_else(gone)?;
        let core_reason = close_reason(reason.to_str()?);
        let generation = on!(core, s => {
            let mut released = duplex_core::RequestIds::new();
            s.close_into(&fence.fence()?, core_reason, &mut released)
                .map(|()| s.lease_generation())
        })
        .map_err(|e| core_error(e, cx))?;
        inner.facts = facts;
        inner.closed = Some(Closed {
            fence: fence.object.clone().unbind(),
            epoch: fence.epoch,
            turn: fence.turn,
            generation,
        });
        inner.fence_object = Some(fence.object.clone().unbind());
        inner.terminal_reason = Some(reason.clone().unbind());
        inner.records.clear();
        // The storage goes back for the next open to recycle.
        Ok(Some(inner.core.take()))
    }

    pub(crate) fn facts_of(inner: &Inner) -> Option<Facts> {
        inner.core.as_ref().and_then(|core| {
            on!(core, s => unfinished!(&**s, t => Facts {
                input_seq: t.input_seq(),
                input_turn_seq: t.input_turn_seq(),
                last_activity: t.last_activity(),
                config_generation: t.config_generation(),
                completed_limit: t.completed_limit(),
            }))
        })
    }

    pub(crate) fn begin_close_locked(
        &self,
        py: Python<'_>,
        inner: &mut Inner,
        fence: &FenceArg<'_>,
        reason: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        let core_reason = close_reason(reason.to_str()?);
        let cx = self.cx(py);
        let core = inner.core.as_mut().ok_or_else(gone)?;
        let result = on!(core, s => s.begin_close(&fence.fence()?, core_reason));
        match result {
            Ok(()) => {
                self.remember(inner, fence);
                // Already closing: the seed answers True, and keeps the
                // first reason.
                if inner.terminal_reason.is_none() {
                    inner.terminal_reason = Some(reason.clone().unbind());
                }
                Ok(true)
            }
            Err(e) => Err(self.refuse(py, inner, e, Some(&fence.object), cx)),
        }
    }

    /// Closing → Closed: the requests it still held.
    pub(crate) fn finalize_locked(
        &self,
        py: Python<'_>,
        inner: &mut Inner,
    ) -> PyResult<Vec<String>> {
        let facts = Self::facts_of(inner);
        let core = inner.core.as_mut().ok_or_else(gone)?;
        let ids: Vec<String> = on!(core, s => s.finalize().map(|ids| {
            ids.iter().map(|id| id.as_str().to_owned()).collect()
        }))
        .map_err(|e| core_error(e, self.cx(py)))?;
        let fence = self.fence_obj(py, inner)?.unbind();
        let (epoch, turn, generation) = inner.core.as_ref().map_or(
            (0, 0, 0),
            |c| on!(c, s => (s.fence().epoch, s.fence().turn, s.lease_generation())),
        );
        inner.facts = facts;
        inner.closed = Some(Closed {
            fence,
            epoch,
            turn,
            generation,
        });
        inner.core = None;
        inner.records.clear();
        Ok(ids)
    }

    /// The session's kind (`Closed` if it has none).
    pub(crate) fn kind(inner: &Inner) -> StateKind {
        inner
            .core
            .as_ref()
            .map_or(StateKind::Closed, |c| on!(c, s => s.kind()))
    }

    /// Whether the session is closing (or closed): the seed's terminal lease.
    pub(crate) fn is_terminal(inner: &Inner) -> bool {
        inner.terminal_reason.is_some()
    }

    /// Due at `now`? Then begin closing with the reason; the request ids
    /// `(submitted, reserved)` it holds.
    pub(crate) fn expire_if_due<'py>(
        &self,
        py: Python<'py>,
        now: Instant,
    ) -> Option<(
        CloseReason,
        Bound<'py, PyAny>,
        u64,
        Vec<String>,
        Vec<String>,
    )> {
        let mut inner = self.lock(py);
        let core = inner.core.as_mut()?;
        let (reason, generation, submitted, reserved) = on!(core, s => {
            let e = s.expire(now)?;
            let names = |ids: &duplex_core::RequestIds<_, _>| -> Vec<String> {
                ids.iter().map(|id| id.as_str().to_owned()).collect()
            };
            (e.reason, e.lease_generation, names(&e.submitted), names(&e.reserved))
        });
        inner.terminal_reason = Some(PyString::new(py, reason.as_str()).unbind());
        let fence = self.fence_obj(py, &mut inner).ok()?;
        Some((reason, fence, generation, submitted, reserved))
    }

    /// The deadline now, for the manager's timers.
    pub(crate) fn deadline(&self, py: Python<'_>) -> Option<Instant> {
        let inner = self.lock(py);
        inner.core.as_ref().and_then(|c| on!(c, s => s.deadline()))
    }

    /// The resource request ids (unique, in order), for request cleanup.
    pub(crate) fn all_request_ids(&self, py: Python<'_>) -> Vec<String> {
        let inner = self.lock(py);
        self.all_request_ids_locked(&inner)
    }

    fn all_request_ids_locked(&self, inner: &Inner) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(core) = &inner.core {
            on!(core, s => {
                unfinished!(&**s, t => {
                    for (_, id, _) in t.resources() {
                        if !out.iter().any(|x| x == id.as_str()) {
                            out.push(id.as_str().to_owned());
                        }
                    }
                })
            });
        }
        out
    }

    /// Begins closing with the session's own fence (request cleanup).
    pub(crate) fn begin_close_current(&self, py: Python<'_>, reason: &str) -> PyResult<bool> {
        let mut inner = self.lock(py);
        let fence = self.fence_obj(py, &mut inner)?;
        let arg = FenceArg::read(&fence)?;
        self.begin_close_locked(py, &mut inner, &arg, &PyString::new(py, reason))
    }
}

pub(crate) fn gone() -> PyErr {
    with_kind(
        PyRuntimeError::new_err("duplex session is closed: only its final facts can be read"),
        "wrong_state",
    )
}

/// The core's close reason for a reason string (free strings, as the seed
/// takes them, are kept as given; the core records the nearest).
fn close_reason(reason: &str) -> CloseReason {
    CloseReason::ALL
        .iter()
        .copied()
        .find(|r| r.as_str() == reason)
        .unwrap_or(CloseReason::ExplicitClose)
}

pub(crate) fn ids_list<'py, 'a>(
    py: Python<'py>,
    ids: impl Iterator<Item = &'a str>,
) -> PyResult<Bound<'py, PyList>> {
    let mut seen: Vec<&str> = Vec::new();
    for id in ids {
        if !seen.contains(&id) {
            seen.push(id);
        }
    }
    PyList::new(py, seen)
}
