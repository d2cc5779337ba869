//! `DuplexSessionRuntimeManager`: the sessions by id, admission, and the
//! reaper's deadlines.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::args;
use crate::classes;
use crate::convert::{self, FenceArg};
use crate::core::Profile;
use crate::errors::with_kind;
use crate::session::{Opening, PySession};
use crate::timers::Timers;

/// The sessions, each with the order it was opened in.
type Table = HashMap<String, (u64, Py<PySession>)>;

/// The seed's `DuplexSessionRuntimeManager`, thread-safe: a manager shared
/// between Python threads takes its lock for each call (and each session
/// its own), releasing the interpreter while it waits.
#[pyclass(
    frozen,
    name = "DuplexSessionRuntimeManager",
    module = "duplex_session"
)]
pub(crate) struct PyManager {
    sessions: Mutex<Table>,
    clock: Py<PyAny>,
    max_sessions: Option<usize>,
    completed_limit: usize,
    profile: Profile,
    timers: Arc<Timers>,
    next_order: AtomicU64,
    /// Storage of closed sessions, reused by the next opens (never held
    /// while Python code runs).
    pool: Mutex<Vec<crate::core::CoreAny>>,
    default_lease: pyo3::sync::PyOnceLock<Py<PyAny>>,
    last_lease: Mutex<Option<(Py<PyAny>, duplex_core::LeaseConfig)>>,
}

/// Closed sessions' storage kept for reuse: at most this many.
const POOL: usize = 16;

/// A close reason argument: the given `str`, or `"explicit_close"`.
fn close_reason<'py>(
    py: Python<'py>,
    reason: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyString>> {
    match reason.filter(|r| !r.is_none()) {
        Some(r) => args::string(r, "reason").cloned(),
        None => Ok(pyo3::intern!(py, "explicit_close").clone()),
    }
}

fn invalid(message: String) -> PyErr {
    with_kind(PyValueError::new_err(message), "invalid_config")
}

impl PyManager {
    fn table(&self, py: Python<'_>) -> MutexGuard<'_, Table> {
        self.sessions
            .lock_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lookup(&self, py: Python<'_>, id: &str) -> Option<Py<PySession>> {
        self.table(py).get(id).map(|(_, s)| s.clone_ref(py))
    }

    /// Removes `id` if it is still `session`.
    fn remove_if(&self, py: Python<'_>, id: &str, session: &Py<PySession>) {
        let mut table = self.table(py);
        if table.get(id).is_some_and(|(_, s)| s.is(session)) {
            table.remove(id);
        }
    }

    /// Sessions in the order they were opened.
    fn ordered(&self, py: Python<'_>) -> Vec<(String, Py<PySession>)> {
        let table = self.table(py);
        let mut rows: Vec<(u64, String, Py<PySession>)> = table
            .iter()
            .map(|(id, (order, s))| (*order, id.clone(), s.clone_ref(py)))
            .collect();
        drop(table);
        rows.sort_by_key(|r| r.0);
        rows.into_iter().map(|(_, id, s)| (id, s)).collect()
    }
}

#[pymethods]
impl PyManager {
    /// A manager. `clock` returns float seconds (default `time.monotonic`);
    /// `completed_append_limit` is the seed's 256 by default (the profile's
    /// window when that is smaller); `profile` is `"server"` (real sizes,
    /// the default) or `"conformance"` (the traces' sizes, whose window is
    /// 8).
    #[new]
    // The defaults are applied in the body, so that a value of the wrong
    // type is refused with `.kind`; the signature shows the seed's.
    #[pyo3(
        signature = (*, clock = None, max_sessions = None, completed_append_limit = None, profile = None),
        text_signature = "(*, clock=None, max_sessions=None, completed_append_limit=256, profile='server')"
    )]
    fn new(
        py: Python<'_>,
        clock: Option<Py<PyAny>>,
        max_sessions: Option<&Bound<'_, PyAny>>,
        completed_append_limit: Option<&Bound<'_, PyAny>>,
        profile: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config_int = |value: &Bound<'_, PyAny>, name: &str| -> PyResult<i64> {
            args::integer::<i64>(value, name, "1..2**63")
                .map_err(|e| with_kind(e, "invalid_config"))
        };
        let max_sessions = max_sessions
            .filter(|v| !v.is_none())
            .map(|v| config_int(v, "max_sessions"))
            .transpose()?;
        let completed_append_limit = completed_append_limit
            .filter(|v| !v.is_none())
            .map(|v| config_int(v, "completed_append_limit"))
            .transpose()?;
        let profile = match profile.filter(|v| !v.is_none()) {
            Some(v) => args::text(v, "profile").map_err(|e| with_kind(e, "invalid_config"))?,
            None => "server",
        };
        let profile = match profile {
            "server" => Profile::Server,
            "conformance" => Profile::Conformance,
            other => {
                return Err(invalid(format!(
                    "profile must be \"server\" or \"conformance\", got {other:?}"
                )))
            }
        };
        let max_sessions = match max_sessions {
            Some(n) if n <= 0 => {
                return Err(invalid("max_sessions must be positive or null".into()))
            }
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => None,
        };
        let capacity = profile.completed();
        // The seed's 256 on the server profile; a profile's own window
        // when it is smaller (the conformance profile's 8).
        let limit = completed_append_limit
            .unwrap_or_else(|| i64::try_from(capacity.min(256)).unwrap_or(256));
        if limit <= 0 {
            return Err(invalid("completed_append_limit must be positive".into()));
        }
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        if limit > capacity {
            return Err(invalid(format!(
                "completed_append_limit must be at most {capacity} (the {} profile's capacity), got {limit}",
                profile.name()
            )));
        }
        let clock = match clock.filter(|c| !c.is_none(py)) {
            // Checked now, not at the first open: a clock is called.
            Some(c) if !c.bind(py).is_callable() => {
                return Err(with_kind(
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "clock must be a callable returning float seconds, got {}",
                        c.bind(py).get_type().name()?
                    )),
                    "invalid_config",
                ))
            }
            Some(c) => c,
            None => py.import("time")?.getattr("monotonic")?.unbind(),
        };
        Ok(PyManager {
            sessions: Mutex::new(HashMap::new()),
            clock,
            max_sessions,
            completed_limit: limit,
            profile,
            timers: Arc::new(Timers::default()),
            next_order: AtomicU64::new(0),
            pool: Mutex::new(Vec::new()),
            default_lease: pyo3::sync::PyOnceLock::new(),
            last_lease: Mutex::new(None),
        })
    }

    /// The compiled profile the sessions have (`"server"` or `"conformance"`).
    #[getter]
    fn profile(&self) -> &'static str {
        self.profile.name()
    }

    /// Opens a session.
    #[pyo3(signature = (fence, *, capabilities = None, session_config = None, runtime_config = None, lease_config = None))]
    fn open_session(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        capabilities: Option<&Bound<'_, PyAny>>,
        session_config: Option<&Bound<'_, PyAny>>,
        runtime_config: Option<&Bound<'_, PyAny>>,
        lease_config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PySession>> {
        let arg = FenceArg::read_exact(fence, "open_session")?;
        let id = arg.session_id.to_str()?.to_owned();
        let mut opening = Opening {
            now: convert::now(self.clock.bind(py), None)?,
            capabilities: or_default(capabilities, || classes::capabilities_class(py)?.call0())?,
            session_config: session_config.filter(|c| !c.is_none()).cloned(),
            runtime_config: runtime_config.filter(|c| !c.is_none()).cloned(),
            // The default `DuplexLeaseConfig()` is frozen: one instance serves
            // every session that takes the default.
            lease_config: or_default(lease_config, || {
                Ok(self
                    .default_lease
                    .get_or_try_init(py, || {
                        classes::lease_config_class(py)?.call0().map(Bound::unbind)
                    })?
                    .bind(py)
                    .clone())
            })?,
            lease: duplex_core::LeaseConfig::default(),
            completed_limit: self.completed_limit,
            fence: arg,
        };
        opening.lease = self.lease(&opening.lease_config)?;
        let reuse = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let session = PySession::open(
            py,
            opening,
            self.clock.clone_ref(py),
            self.profile,
            Some(Arc::clone(&self.timers)),
            reuse,
        )?;
        let session = Py::new(py, session)?;
        let mut table = self.table(py);
        if table.contains_key(&id) {
            return Err(exists(&id));
        }
        if let Some(limit) = self.max_sessions {
            if table.len() >= limit {
                return Err(with_kind(
                    PyRuntimeError::new_err(format!(
                        "duplex_session_capacity_exhausted: limit={limit}"
                    )),
                    "capacity_exhausted",
                ));
            }
        }
        let order = self.next_order.fetch_add(1, Ordering::Relaxed);
        table.insert(id, (order, session.clone_ref(py)));
        drop(table);
        if order % 64 == 63 {
            self.compact(py);
        }
        let s = session.get();
        let inner = s.lock(py);
        s.reschedule(py, &inner);
        drop(inner);
        Ok(session)
    }

    /// The session, or None (also for an id that is not a `str`, which no
    /// session has, as the seed's dict lookup answers).
    fn get(
        &self,
        py: Python<'_>,
        session_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PySession>>> {
        if let Ok(id) = session_id.cast::<PyString>() {
            return Ok(self.lookup(py, id.to_str()?));
        }
        // An unhashable key is refused, as a dict refuses it.
        session_id
            .hash()
            .map_err(|e| with_kind(e, args::INVALID_ARGUMENT))?;
        Ok(None)
    }

    /// The session, or `KeyError`.
    fn require(&self, py: Python<'_>, session_id: &Bound<'_, PyAny>) -> PyResult<Py<PySession>> {
        self.get(py, session_id)?.ok_or_else(|| {
            with_kind(
                PyKeyError::new_err(format!("Unknown duplex session: {session_id}")),
                "unknown_session",
            )
        })
    }

    /// Closes in one step; the session, or None if absent or already closing.
    #[pyo3(signature = (fence, *, reason = None), text_signature = "($self, fence, *, reason='explicit_close')")]
    fn close_session(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        reason: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PySession>>> {
        FenceArg::check_type(fence, "close_session")?;
        let reason = close_reason(py, reason)?;
        let id: String = fence
            .getattr(pyo3::intern!(py, "session_id"))?
            .extract()
            .map_err(|_| {
                with_kind(
                    PyValueError::new_err("fence session_id must be a str"),
                    crate::args::INVALID_ARGUMENT,
                )
            })?;
        let Some(session) = self.lookup(py, &id) else {
            return Ok(None);
        };
        // The session remembers the last fence it read, by identity.
        let arg = session.get().arg(fence)?;
        let Some(storage) = session.get().terminate_now(py, &arg, &reason)? else {
            return Ok(None);
        };
        if let Some(storage) = storage {
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            if pool.len() < POOL {
                pool.push(storage);
            }
        }
        self.remove_if(py, &id, &session);
        Ok(Some(session))
    }

    /// Begins closing (irreversible, resources kept); the session or None.
    #[pyo3(signature = (fence, *, reason = None), text_signature = "($self, fence, *, reason='explicit_close')")]
    fn begin_close_session(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        reason: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PySession>>> {
        let arg = FenceArg::read_exact(fence, "begin_close_session")?;
        let reason = close_reason(py, reason)?;
        let Some(session) = self.lookup(py, arg.session_id.to_str()?) else {
            return Ok(None);
        };
        let s = session.get();
        let mut inner = s.lock(py);
        s.begin_close_locked(py, &mut inner, &arg, &reason)?;
        drop(inner);
        Ok(Some(session))
    }

    /// Finalizes a closing session and removes it.
    fn finalize_close_session(&self, py: Python<'_>, session: Py<PySession>) -> PyResult<()> {
        let s = session.get();
        let mut inner = s.lock(py);
        s.finalize_locked(py, &mut inner)?;
        drop(inner);
        let id = s.id(py).to_str()?.to_owned();
        self.remove_if(py, &id, &session);
        Ok(())
    }

    /// Sessions past their grace or idle TTL begin closing; their expiry
    /// records. O(due): only sessions whose deadline has come are looked at.
    #[pyo3(signature = (now = None, *, excluded_session_ids = None))]
    fn collect_expired<'py>(
        &self,
        py: Python<'py>,
        now: Option<&Bound<'py, PyAny>>,
        excluded_session_ids: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let now = convert::now(self.clock.bind(py), now)?;
        let excluded: Vec<String> = match excluded_session_ids.filter(|e| !e.is_none()) {
            Some(e) => args::str_items(e, "excluded_session_ids")?,
            None => Vec::new(),
        };
        let mut due = self.timers.due(now);
        due.sort_unstable();
        due.dedup();
        let mut expired: Vec<(u64, Bound<'py, PyAny>)> = Vec::new();
        let class = classes::expiry_class(py)?;
        for id in due {
            let Some((order, session)) =
                self.table(py).get(&id).map(|(o, s)| (*o, s.clone_ref(py)))
            else {
                continue;
            };
            let s = session.get();
            if excluded.contains(&id) {
                if let Some(at) = s.deadline(py) {
                    self.timers.push(at, &id);
                }
                continue;
            }
            match s.expire_if_due(py, now) {
                Some((reason, fence, generation, submitted, reserved)) => {
                    let record = class.call1((
                        id.as_str(),
                        fence,
                        generation,
                        reason.as_str(),
                        PyTuple::new(py, submitted)?,
                        PyTuple::new(py, reserved)?,
                    ))?;
                    expired.push((order, record));
                }
                None => {
                    if let Some(at) = s.deadline(py) {
                        self.timers.push(at, &id);
                    }
                }
            }
        }
        self.compact(py);
        expired.sort_by_key(|(order, _)| *order);
        PyList::new(py, expired.into_iter().map(|(_, e)| e))
    }

    /// Begins closing every session holding one of `request_ids`; their
    /// request ids by session id.
    fn close_sessions_for_request_ids<'py>(
        &self,
        py: Python<'py>,
        request_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let wanted = args::str_items(request_ids, "request_ids")?;
        let out = PyDict::new(py);
        for (id, session) in self.ordered(py) {
            let s = session.get();
            let held = s.all_request_ids(py);
            if !held.iter().any(|r| wanted.contains(r)) {
                continue;
            }
            if s.begin_close_current(py, "request_cleanup")? {
                out.set_item(id, PyList::new(py, held)?)?;
            }
        }
        Ok(out)
    }

    /// Finalizes the named sessions that are closing.
    fn finalize_closed_sessions(
        &self,
        py: Python<'_>,
        session_ids: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        for id in args::str_items(session_ids, "session_ids")? {
            let Some(session) = self.lookup(py, &id) else {
                continue;
            };
            let s = session.get();
            let terminal = PySession::is_terminal(&s.lock(py));
            if terminal {
                self.finalize_close_session(py, session)?;
            }
        }
        Ok(())
    }

    /// How many sessions the manager holds (Closing ones included).
    fn __len__(&self, py: Python<'_>) -> usize {
        self.table(py).len()
    }

    /// Profile, sessions held and limits.
    fn __repr__(&self, py: Python<'_>) -> String {
        let max = self
            .max_sessions
            .map_or_else(|| "None".to_owned(), |n| n.to_string());
        format!(
            "<DuplexSessionRuntimeManager profile='{}' sessions={} max_sessions={max} completed_append_limit={}>",
            self.profile.name(),
            self.table(py).len(),
            self.completed_limit
        )
    }
}

impl PyManager {
    /// A lease configuration converted, remembering the last one by
    /// identity (`DuplexLeaseConfig` is frozen).
    fn lease(&self, config: &Bound<'_, PyAny>) -> PyResult<duplex_core::LeaseConfig> {
        let mut last = self
            .last_lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((object, lease)) = last.as_ref() {
            if object.is(config) {
                return Ok(*lease);
            }
        }
        drop(last);
        let lease = crate::session::lease_of(config)?;
        if config.is_exact_instance(classes::lease_config_class(config.py())?) {
            last = self
                .last_lease
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *last = Some((config.clone().unbind(), lease));
        }
        Ok(lease)
    }

    /// Rebuilds the deadline hints when stale ones pile up.
    fn compact(&self, py: Python<'_>) {
        let sessions = self.table(py).len();
        if self.timers.len() <= 2 * sessions + 64 {
            return;
        }
        let mut hints = Vec::with_capacity(sessions);
        for (id, session) in self.ordered(py) {
            if let Some(at) = session.get().deadline(py) {
                hints.push((at, id));
            }
        }
        self.timers.replace(hints);
    }
}

/// `value`, or `make()` when it is absent or None.
fn or_default<'py>(
    value: Option<&Bound<'py, PyAny>>,
    make: impl FnOnce() -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Some(v) if !v.is_none() => Ok(v.clone()),
        _ => make(),
    }
}

fn exists(id: &str) -> PyErr {
    with_kind(
        PyValueError::new_err(format!("Duplex session already exists: {id}")),
        "session_exists",
    )
}
