//! `DuplexSessionRuntimeState`: one session, its core state in Rust and its
//! opaque values (configs, capabilities, stage results) as the Python
//! objects the host gave.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use duplex_core::{CloseReason, Error as CoreError, Instant, RequestState, StateKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::{self, fence_object, resource_class, FenceArg};
use crate::core::{on, transition, CoreAny, Profile};
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
    input_seq: u64,
    input_turn_seq: u64,
    last_activity: Instant,
    config_generation: u64,
    completed_limit: usize,
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
    /// `(last_activity,)` of a closed session.
    pub(crate) fn facts(&self) -> Option<(Instant,)> {
        self.facts.map(|f| (f.last_activity,))
    }

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
    inner: Mutex<Inner>,
    session_id: Py<PyString>,
    clock: Py<PyAny>,
    pub(crate) profile: Profile,
    timers: Option<Arc<Timers>>,
    /// Never held while Python code runs (only a pointer comparison and
    /// reference counts happen under it).
    arg_cache: Mutex<Option<CachedFence>>,
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
    let ttl: Option<f64> = config.getattr(pyo3::intern!(py, "idle_ttl_s"))?.extract()?;
    let grace: f64 = config
        .getattr(pyo3::intern!(py, "disconnect_grace_s"))?
        .extract()?;
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
            (Profile::Server, Some(CoreAny::Server(mut boxed))) if boxed.as_open().is_some() => {
                let fence = o.fence.fence()?;
                match boxed.as_open_mut() {
                    Some(open) => open
                        .recycle(fence, options, o.now)
                        .map_err(|e| core_error(e, cx))?,
                    None => return Err(gone()),
                }
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
        if fence.is_exact_instance(convert::fence_class(py)?) {
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

    /// Closes in one step (begin_close + finalize), for the manager.
    /// Closes in one step (the manager's `close_session`): `None` if the
    /// session was already closing. An open or detached session accepts
    /// the fence, hands back every request id it held and becomes closed
    /// without moving its storage, which comes back (if it was open) for
    /// the next session to reuse.
    pub(crate) fn terminate_now(
        &self,
        py: Python<'_>,
        fence: &FenceArg<'_>,
        reason: &Bound<'_, PyString>,
    ) -> PyResult<Option<(Vec<String>, Option<CoreAny>)>> {
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
        let ids = self.all_request_ids_locked(&inner);
        let facts = Self::facts_of(&inner);
        let generation = inner
            .core
            .as_ref()
            .map_or(0, |c| on!(c, s => s.lease_generation()));
        inner.facts = facts;
        inner.closed = Some(Closed {
            fence: fence.object.clone().unbind(),
            epoch: fence.epoch,
            turn: fence.turn,
            // Closing bumps the generation, as the seed's mark_terminal does.
            generation: generation + 1,
        });
        inner.fence_object = Some(fence.object.clone().unbind());
        inner.terminal_reason = Some(reason.clone().unbind());
        inner.records.clear();
        let storage = inner
            .core
            .take()
            .filter(|c| on!(c, s => s.as_open().is_some()));
        Ok(Some((ids, storage)))
    }

    fn facts_of(inner: &Inner) -> Option<Facts> {
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
        let result = transition!(inner.core, s => {
            match fence.fence() {
                Ok(f) => s.begin_close(&f, core_reason).map(|n| (n, ())),
                Err(_) => Err(duplex_core::Rejected { error: CoreError::InvalidId { len: 0, max: 0 }, session: s }),
            }
        });
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
        let ids = transition!(inner.core, s => s.finalize().map(|(n, ids)| {
            (n, ids.iter().map(|id| id.as_str().to_owned()).collect::<Vec<String>>())
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
        let core = inner.core.as_ref()?;
        let reason = on!(core, s => s.due(now))?;
        let (submitted, reserved) = self.ids_by_state(&inner);
        let expired = transition!(inner.core, s => s.expire(now).map_err(|s| duplex_core::Rejected { error: CoreError::OperationActive, session: s }));
        expired.ok()?;
        inner.terminal_reason = Some(PyString::new(py, reason.as_str()).unbind());
        let fence = self.fence_obj(py, &mut inner).ok()?;
        let generation = inner
            .core
            .as_ref()
            .map_or(0, |c| on!(c, s => s.lease_generation()));
        Some((reason, fence, generation, submitted, reserved))
    }

    fn ids_by_state(&self, inner: &Inner) -> (Vec<String>, Vec<String>) {
        let mut submitted = Vec::new();
        let mut reserved = Vec::new();
        if let Some(core) = &inner.core {
            on!(core, s => {
                unfinished!(&**s, t => {
                    for (_, id, state) in t.resources() {
                        let list = if state == RequestState::Submitted { &mut submitted } else { &mut reserved };
                        if !list.iter().any(|x: &String| x == id.as_str()) {
                            list.push(id.as_str().to_owned());
                        }
                    }
                })
            });
        }
        (submitted, reserved)
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

#[pymethods]
impl PySession {
    /// A session on its own, as the seed's dataclass constructor makes one
    /// (a manager's `open_session` is the usual way). It starts empty: the
    /// tables, sequences and cache come from its operations, so any other
    /// initial value is refused. `lease` gives the configuration and the
    /// time of the first activity (its generation must be 0).
    #[new]
    #[pyo3(signature = (
        fence, lease, _clock, capabilities = None, session_config = None, runtime_config = None,
        config_generation = 0, stage_bindings = None, request_resources = None, input_seq = 0,
        input_turn_seq = 0, _append_turn_key = None, completed_append_limit = 256,
        completed_appends = None
    ))]
    #[allow(clippy::too_many_arguments, clippy::used_underscore_binding)]
    fn new(
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        lease: &Bound<'_, PyAny>,
        _clock: Py<PyAny>,
        capabilities: Option<&Bound<'_, PyAny>>,
        session_config: Option<&Bound<'_, PyAny>>,
        runtime_config: Option<&Bound<'_, PyAny>>,
        config_generation: u64,
        stage_bindings: Option<&Bound<'_, PyAny>>,
        request_resources: Option<&Bound<'_, PyAny>>,
        input_seq: u64,
        input_turn_seq: u64,
        _append_turn_key: Option<&Bound<'_, PyAny>>,
        completed_append_limit: i64,
        completed_appends: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if completed_append_limit <= 0 {
            return Err(with_kind(
                pyo3::exceptions::PyValueError::new_err("completed_append_limit must be positive"),
                "invalid_config",
            ));
        }
        let generation: u64 = lease.getattr("generation")?.extract()?;
        let filled = |v: Option<&Bound<'_, PyAny>>| {
            v.is_some_and(|v| !v.is_none() && v.is_truthy().unwrap_or(true))
        };
        let empty = config_generation == 0
            && input_seq == 0
            && input_turn_seq == 0
            && generation == 0
            && !filled(stage_bindings)
            && !filled(request_resources)
            && !filled(completed_appends)
            && _append_turn_key.is_none_or(PyAnyMethods::is_none);
        if !empty {
            return Err(with_kind(
                pyo3::exceptions::PyValueError::new_err(
                    "a DuplexSessionRuntimeState starts empty: its sequences, tables and lease generation come from its operations",
                ),
                "invalid_config",
            ));
        }
        let last: f64 = lease.getattr("last_activity")?.extract()?;
        let config = lease.getattr("config")?;
        let opening = Opening {
            fence: FenceArg::read(fence)?,
            now: convert::instant(last)?,
            capabilities: match capabilities {
                Some(c) if !c.is_none() => c.clone(),
                _ => convert::capabilities_class(py)?.call0()?,
            },
            session_config: session_config.filter(|c| !c.is_none()).cloned(),
            runtime_config: runtime_config.filter(|c| !c.is_none()).cloned(),
            lease: lease_of(&config)?,
            lease_config: config,
            completed_limit: usize::try_from(completed_append_limit).unwrap_or(usize::MAX),
        };
        PySession::open(py, opening, _clock, Profile::Server, None, None)
    }

    // ----- identity and views -------------------------------------------

    /// The session id.
    #[getter]
    fn session_id(&self, py: Python<'_>) -> Py<PyString> {
        self.session_id.clone_ref(py)
    }

    /// The session's fence (`DuplexFence`).
    #[getter]
    fn fence<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut inner = self.lock(py);
        self.fence_obj(py, &mut inner)
    }

    /// The fence's epoch.
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.lock(py);
        if let (None, Some(c)) = (&inner.core, &inner.closed) {
            return Ok(c.epoch);
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        Ok(on!(core, s => s.fence().epoch))
    }

    /// The fence's turn.
    #[getter]
    fn turn_id(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.lock(py);
        if let (None, Some(c)) = (&inner.core, &inner.closed) {
            return Ok(c.turn);
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        Ok(on!(core, s => s.fence().turn))
    }

    /// The capabilities the session was opened with.
    #[getter]
    fn capabilities(&self, py: Python<'_>) -> Py<PyAny> {
        self.lock(py).capabilities.clone_ref(py)
    }

    /// The session configuration (a dict).
    #[getter]
    fn session_config(&self, py: Python<'_>) -> Py<PyAny> {
        let mut inner = self.lock(py);
        inner
            .session_config
            .get_or_insert_with(|| PyDict::new(py).into_any().unbind())
            .clone_ref(py)
    }

    /// The runtime configuration (a dict).
    #[getter]
    fn runtime_config(&self, py: Python<'_>) -> Py<PyAny> {
        let mut inner = self.lock(py);
        inner
            .runtime_config
            .get_or_insert_with(|| PyDict::new(py).into_any().unbind())
            .clone_ref(py)
    }

    /// Configuration generation.
    #[getter]
    fn config_generation(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.lock(py);
        if let Some(f) = inner.facts {
            return Ok(f.config_generation);
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        Ok(on!(core, s => unfinished!(&**s, t => t.config_generation())).unwrap_or(0))
    }

    /// Position in the epoch's input sequence.
    #[getter]
    fn input_seq(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.lock(py);
        if let Some(f) = inner.facts {
            return Ok(f.input_seq);
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        Ok(on!(core, s => unfinished!(&**s, t => t.input_seq())).unwrap_or(0))
    }

    /// Position within the current turn.
    #[getter]
    fn input_turn_seq(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.lock(py);
        if let Some(f) = inner.facts {
            return Ok(f.input_turn_seq);
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        Ok(on!(core, s => unfinished!(&**s, t => t.input_turn_seq())).unwrap_or(0))
    }

    /// The completed-append limit.
    #[getter]
    fn completed_append_limit(&self, py: Python<'_>) -> PyResult<usize> {
        let inner = self.lock(py);
        if let Some(f) = inner.facts {
            return Ok(f.completed_limit);
        }
        let core = inner.core.as_ref().ok_or_else(gone)?;
        Ok(on!(core, s => unfinished!(&**s, t => t.completed_limit())).unwrap_or(0))
    }

    /// `{stage_id: DuplexStageBinding}` in binding order.
    #[getter]
    fn stage_bindings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = self.lock(py);
        let out = PyDict::new(py);
        let Some(core) = inner.core.as_ref() else {
            return Ok(out);
        };
        let class = convert::binding_class(py)?;
        on!(core, s => unfinished!(&**s, t => {
            for (stage, id, fence) in t.bindings_with_fences() {
                let binding = class.call1((id.as_str(), fence_object(py, &fence)?))?;
                out.set_item(stage, binding)?;
            }
            Ok::<_, PyErr>(())
        }))
        .transpose()?;
        Ok(out)
    }

    /// `{(stage_id, request_id): DuplexRequestResource}` in reservation order.
    #[getter]
    fn request_resources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = self.lock(py);
        let out = PyDict::new(py);
        let Some(core) = inner.core.as_ref() else {
            return Ok(out);
        };
        let class = resource_class(py)?;
        on!(core, s => unfinished!(&**s, t => {
            for (stage, id, state, fence) in t.resources_with_fences() {
                let submitted = state == RequestState::Submitted;
                let resource = class.call1((stage, id.as_str(), fence_object(py, &fence)?, submitted))?;
                out.set_item((stage, id.as_str()), resource)?;
            }
            Ok::<_, PyErr>(())
        }))
        .transpose()?;
        Ok(out)
    }

    /// `OrderedDict[operation_id, DuplexCompletedAppend]`, oldest first.
    #[getter]
    fn completed_appends<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.lock(py);
        let ordered = py.import("collections")?.getattr("OrderedDict")?.call0()?;
        let class = convert::completed_class(py)?;
        let Some(core) = inner.core.as_ref() else {
            return Ok(ordered);
        };
        let mut rows: Vec<(String, i64)> = Vec::new();
        on!(core, s => unfinished!(&**s, t => {
            for (op, results) in t.completed_records() {
                rows.push((op.as_str().to_owned(), results.first().copied().unwrap_or(-1)));
            }
        }));
        for (op, handle) in rows {
            if let Some(record) = inner.record(handle) {
                let r = record.bind(py);
                let results = PyTuple::new(py, r.iter().skip(3))?;
                let record =
                    class.call1((r.get_item(0)?, r.get_item(1)?, r.get_item(2)?, results))?;
                ordered.set_item(op, record)?;
            }
        }
        Ok(ordered)
    }

    /// Bytes this session holds outside Python's allocator (which
    /// tracemalloc does not see): the boxed core session and the table of
    /// completed-append handles.
    fn _native_bytes(&self, py: Python<'_>) -> usize {
        let inner = self.lock(py);
        let core = match &inner.core {
            Some(CoreAny::Server(_)) => std::mem::size_of::<crate::core::ServerAny>(),
            Some(CoreAny::Conformance(_)) => std::mem::size_of::<crate::core::ConformanceAny>(),
            None => 0,
        };
        let slot = std::mem::size_of::<(i64, Py<PyTuple>)>() + 1;
        core + inner.records.capacity() * slot
    }

    /// The session's lease (a `DuplexLeaseState` view of it).
    #[getter]
    fn lease<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("duplex_session._lease")?
            .getattr("SessionLease")?
            .call1((slf,))
    }
}
