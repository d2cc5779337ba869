//! `DuplexSessionRuntimeManager`: a host's `duplex_std::SessionManager`
//! (admission, the expiry index, request cleanup, slot reuse) with the
//! seed's signatures, listing each session's object.

use std::sync::{Arc, Mutex, PoisonError};

use duplex_core::{Id, StateKind};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::args;
use crate::classes::HostClasses;
use crate::convert::{self, names, FenceArg, FenceValues};
use crate::errors::with_kind;
use crate::host::{each, Profile};
use crate::opening::{LimitArgs, SessionLimits};
use crate::patch::{kwargs, shadowed};
use crate::session::{let_go, Opening, PySession, SessionHost};

/// The seed's `DuplexSessionRuntimeManager`, thread-safe: a manager shared
/// between Python threads takes its host's lock for each call, releasing
/// the interpreter while it waits.
///
/// A host that keeps its own value classes uses a subclass made for it
/// (`duplex_session._host`), whose `_duplex_classes` names them; its
/// methods, like a session's, can be shadowed on one object.
#[pyclass(
    frozen,
    subclass,
    dict,
    name = "DuplexSessionRuntimeManager",
    module = "duplex_session"
)]
pub(crate) struct PyManager {
    host: Arc<SessionHost>,
    /// The host's value classes.
    classes: Py<HostClasses>,
    /// Whether a method is shadowed on this object.
    pub(crate) patched: std::sync::atomic::AtomicBool,
    clock: Arc<crate::shapes::PyClock>,
    max_sessions: Option<usize>,
    completed_limit: usize,
    /// Each session's input limits and overlap rule.
    limits: SessionLimits,
    profile: Profile,
    default_lease: pyo3::sync::PyOnceLock<Py<PyAny>>,
    last_lease: Mutex<Option<(Py<PyAny>, duplex_core::LeaseConfig)>>,
}

impl Drop for PyManager {
    /// The host lists each session's object and each object holds the
    /// host: a manager that goes lets its objects go (they keep working,
    /// as sessions on their own).
    fn drop(&mut self) {
        Python::attach(|py| {
            let handles: Vec<Py<PySession>> = {
                let mut host = self.host.lock(py);
                host.side
                    .iter_mut()
                    .flatten()
                    .filter_map(|(_, inner)| inner.handle.take())
                    .collect()
            };
            drop(handles);
        });
    }
}

/// A close reason argument: the given `str`, or `"explicit_close"`.
fn reason_arg<'py>(
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
    /// The host's value classes.
    #[inline]
    pub(crate) fn classes(&self) -> &HostClasses {
        self.classes.get()
    }

    /// The object of the session named `id`, if the manager lists one.
    fn lookup(&self, py: Python<'_>, id: &str) -> Option<Py<PySession>> {
        let mut host = self.host.lock(py);
        let key = each!(&host.managers, |m| Id::new(id)
            .ok()
            .and_then(|id| m.key(&id)))?;
        host.side(key)?.handle.as_ref().map(|h| h.clone_ref(py))
    }

    /// Stops listing `session` if this manager lists it and it is closed
    /// (the seed's `if self._sessions.get(id) is session: pop`).
    fn remove(&self, py: Python<'_>, session: &PySession) {
        if !Arc::ptr_eq(&self.host, &session.host) {
            return;
        }
        let Some(&key) = session.key.get() else {
            return;
        };
        let mut host = self.host.lock(py);
        let removed = each!(&mut host.managers, |m| m.remove_closed_at(key));
        let handle = match removed {
            Some(Ok(())) => let_go(&mut host, key),
            _ => None,
        };
        drop(host);
        drop(handle);
    }
}

#[pymethods]
impl PyManager {
    /// A manager. `clock` returns float seconds (default `time.monotonic`);
    /// `completed_append_limit` is the seed's 256 by default (the profile's
    /// window when that is smaller); `profile` is `"server"` (real sizes,
    /// the default) or `"conformance"` (the traces' sizes, whose window is
    /// 8). `max_pending_input_bytes_per_session` and
    /// `max_pending_turns_per_session` are each session's input limits
    /// (vllm-omni 0.30's names and defaults: 16 MiB and 4);
    /// `overlap_policy` (`"listen_only"`, `"barge_in_on_speech"` or
    /// `"thresholds"`), `overlap_short_ack_ms` and `overlap_barge_in_ms`
    /// its overlap rule (the release's names and defaults: `listen_only`,
    /// 700, 1,200).
    #[new]
    #[classmethod]
    // The defaults are applied in the body, so that a value of the wrong
    // type is refused with `.kind`; the signature shows the seed's.
    #[pyo3(
        signature = (*, clock = None, max_sessions = None, completed_append_limit = None, profile = None, max_pending_input_bytes_per_session = None, max_pending_turns_per_session = None, overlap_policy = None, overlap_short_ack_ms = None, overlap_barge_in_ms = None),
        text_signature = "(*, clock=None, max_sessions=None, completed_append_limit=256, profile='server', max_pending_input_bytes_per_session=16777216, max_pending_turns_per_session=4, overlap_policy='listen_only', overlap_short_ack_ms=700, overlap_barge_in_ms=1200)"
    )]
    // One parameter per Python keyword argument: the seed's, and the
    // release's input limits and overlap rule.
    #[allow(clippy::too_many_arguments)]
    fn new(
        cls: &Bound<'_, pyo3::types::PyType>,
        py: Python<'_>,
        clock: Option<Py<PyAny>>,
        max_sessions: Option<&Bound<'_, PyAny>>,
        completed_append_limit: Option<&Bound<'_, PyAny>>,
        profile: Option<&Bound<'_, PyAny>>,
        max_pending_input_bytes_per_session: Option<&Bound<'_, PyAny>>,
        max_pending_turns_per_session: Option<&Bound<'_, PyAny>>,
        overlap_policy: Option<&Bound<'_, PyAny>>,
        overlap_short_ack_ms: Option<&Bound<'_, PyAny>>,
        overlap_barge_in_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let limits = LimitArgs {
            max_pending_input_bytes_per_session,
            max_pending_turns_per_session,
            overlap_policy,
            overlap_short_ack_ms,
            overlap_barge_in_ms,
        }
        .read()?;
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
        let host = SessionHost::new(profile, max_sessions, limit).map_err(invalid)?;
        Ok(PyManager {
            host: Arc::new(host),
            classes: HostClasses::of_class(cls)?,
            patched: std::sync::atomic::AtomicBool::new(false),
            clock: Arc::new(crate::shapes::PyClock::new(py, clock)),
            max_sessions,
            completed_limit: limit,
            limits,
            profile,
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
        let arg = FenceArg::read_exact(fence, "open_session", self.classes())?;
        let mut opening = Opening {
            now: convert::now(py, &self.clock, None)?,
            capabilities: or_default(capabilities, || self.classes().capabilities(py).call0())?,
            session_config: session_config.filter(|c| !c.is_none()).cloned(),
            runtime_config: runtime_config.filter(|c| !c.is_none()).cloned(),
            // The default `DuplexLeaseConfig()` is frozen: one instance serves
            // every session that takes the default.
            lease_config: or_default(lease_config, || {
                Ok(self
                    .default_lease
                    .get_or_try_init(py, || {
                        self.classes().lease_config(py).call0().map(Bound::unbind)
                    })?
                    .bind(py)
                    .clone())
            })?,
            lease: duplex_core::LeaseConfig::default(),
            limits: self.limits,
            fence: arg,
            classes: self.classes.clone_ref(py),
        };
        opening.lease = self.lease(&opening.lease_config)?;
        PySession::open(
            py,
            Arc::clone(&self.host),
            opening,
            Arc::clone(&self.clock),
            self.profile,
            true,
        )
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
        FenceArg::check_type(fence, "close_session", self.classes())?;
        let reason = reason_arg(py, reason)?;
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
        // A session whose close steps are shadowed closes through its
        // attributes, as the seed's manager calls `session.terminate`.
        let s = session.bind(py);
        if s.get().is_patched()
            && shadowed(s, &["terminate", "begin_close", "finalize_close", "close"])
        {
            if !matches!(
                s.get().lock(py).kind()?,
                StateKind::Open | StateKind::Detached
            ) {
                return Ok(None);
            }
            let kw = kwargs(py, &[("reason", reason.as_any())])?;
            if !s
                .call_method(pyo3::intern!(py, "terminate"), (fence,), Some(&kw))?
                .is_truthy()?
            {
                return Ok(None);
            }
            self.remove(py, s.get());
            return Ok(Some(session));
        }
        // The session remembers the last fence it read, by identity.
        let arg = session.get().arg(fence)?;
        if !session.get().terminate_now(py, &arg, &reason)? {
            return Ok(None);
        }
        self.remove(py, session.get());
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
        let arg = FenceArg::read_exact(fence, "begin_close_session", self.classes())?;
        let reason = reason_arg(py, reason)?;
        let Some(session) = self.lookup(py, arg.session_id.to_str()?) else {
            return Ok(None);
        };
        let bound = session.bind(py);
        if bound.get().is_patched() && shadowed(bound, &["begin_close"]) {
            let kw = kwargs(py, &[("reason", reason.as_any())])?;
            bound.call_method(pyo3::intern!(py, "begin_close"), (fence,), Some(&kw))?;
            return Ok(Some(session));
        }
        let s = session.get();
        let mut g = s.lock(py);
        s.begin_close_locked(py, &mut g, &arg, &reason)?;
        drop(g);
        Ok(Some(session))
    }

    /// Finalizes a closing session and removes it.
    fn finalize_close_session(&self, py: Python<'_>, session: Py<PySession>) -> PyResult<()> {
        let bound = session.bind(py);
        if bound.get().is_patched() && shadowed(bound, &["finalize_close", "close"]) {
            bound.call_method0(pyo3::intern!(py, "finalize_close"))?;
            self.remove(py, bound.get());
            return Ok(());
        }
        let s = session.get();
        let mut g = s.lock(py);
        // A session closed where it sits (the seed's `terminate`) only
        // leaves the manager, as the seed pops it.
        if g.kind()? != StateKind::Closed {
            let ids = s.finalize_locked(py, &mut g)?;
            drop(ids);
        }
        drop(g);
        self.remove(py, s);
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
        let now = convert::now(py, &self.clock, now)?;
        let excluded = match excluded_session_ids.filter(|e| !e.is_none()) {
            Some(e) => args::str_items(e, "excluded_session_ids")?,
            None => Vec::new(),
        };
        let excluded = args::texts(&excluded)?;
        let mut host = self.host.lock(py);
        // The manager's reaper: O(due), nothing allocated when nothing is.
        let due = each!(&mut host.managers, |m| {
            // An id no session can have is excluded already.
            let excluded: Vec<_> = excluded.iter().filter_map(|e| Id::new(e).ok()).collect();
            m.at(now)
                .collect_expired(&excluded)
                .into_iter()
                .map(|e| Expired {
                    key: m.key(&e.session),
                    id: e.session.as_str().to_owned(),
                    reason: e.reason,
                    fence: FenceValues::of(&e.fence),
                    generation: e.lease_generation,
                    submitted: names(&e.submitted),
                    reserved: names(&e.reserved),
                })
                .collect::<Vec<_>>()
        });
        let mut rows = Vec::with_capacity(due.len());
        for e in due {
            let Some(inner) = e.key.and_then(|key| host.side(key)) else {
                continue;
            };
            if inner.terminal_reason.is_none() {
                inner.terminal_reason = Some(PyString::new(py, e.reason.as_str()).unbind());
            }
            let object = inner.fence_object.as_ref().map(|o| o.clone_ref(py));
            rows.push((inner.order, object, e));
        }
        drop(host);
        if rows.is_empty() {
            return Ok(PyList::empty(py));
        }
        rows.sort_by_key(|(order, _, _)| *order);
        let classes = self.classes();
        let class = classes.expiry(py);
        let mut expired = Vec::with_capacity(rows.len());
        for (_, object, e) in rows {
            let fence = e.fence.current(py, object, classes)?;
            let values = (
                e.id.as_str(),
                fence,
                e.generation,
                e.reason.as_str(),
                PyTuple::new(py, e.submitted)?,
                PyTuple::new(py, e.reserved)?,
            );
            // A host's class by keyword: its field order is its own.
            expired.push(if classes.is_own() {
                class.call1(values)?
            } else {
                let kwargs = PyDict::new(py);
                kwargs.set_item(pyo3::intern!(py, "session_id"), values.0)?;
                kwargs.set_item(pyo3::intern!(py, "fence"), values.1)?;
                kwargs.set_item(pyo3::intern!(py, "lease_generation"), values.2)?;
                kwargs.set_item(pyo3::intern!(py, "reason"), values.3)?;
                kwargs.set_item(pyo3::intern!(py, "submitted_request_ids"), values.4)?;
                kwargs.set_item(pyo3::intern!(py, "reserved_request_ids"), values.5)?;
                class.call((), Some(&kwargs))?
            });
        }
        PyList::new(py, expired)
    }

    /// Begins closing every session holding one of `request_ids`; their
    /// request ids by session id.
    fn close_sessions_for_request_ids<'py>(
        &self,
        py: Python<'py>,
        request_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let wanted = args::str_items(request_ids, "request_ids")?;
        let wanted = args::texts(&wanted)?;
        let mut host = self.host.lock(py);
        let closing = each!(&mut host.managers, |m| {
            m.close_for_requests(&wanted)
                .into_iter()
                .map(|r| {
                    (
                        m.key(&r.session),
                        r.session.as_str().to_owned(),
                        names(&r.ids),
                    )
                })
                .collect::<Vec<_>>()
        });
        let mut rows = Vec::with_capacity(closing.len());
        for (key, id, ids) in closing {
            let Some(inner) = key.and_then(|key| host.side(key)) else {
                continue;
            };
            if inner.terminal_reason.is_none() {
                inner.terminal_reason = Some(pyo3::intern!(py, "request_cleanup").clone().unbind());
            }
            rows.push((inner.order, id, ids));
        }
        drop(host);
        rows.sort_by_key(|(order, _, _)| *order);
        let out = PyDict::new(py);
        for (_, id, ids) in rows {
            out.set_item(id, PyList::new(py, ids)?)?;
        }
        Ok(out)
    }

    /// Finalizes the named sessions that are closing.
    fn finalize_closed_sessions(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        session_ids: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let this = slf.get();
        let through = this.patched.load(std::sync::atomic::Ordering::Relaxed)
            && shadowed(slf, &["finalize_close_session"]);
        for id in args::str_items(session_ids, "session_ids")? {
            let Some(session) = this.lookup(py, id.to_str()?) else {
                continue;
            };
            let kind = session.get().lock(py).kind()?;
            if matches!(kind, StateKind::Closing | StateKind::Closed) {
                if through {
                    slf.call_method1(pyo3::intern!(py, "finalize_close_session"), (session,))?;
                } else {
                    this.finalize_close_session(py, session)?;
                }
            }
        }
        Ok(())
    }

    /// How many sessions the manager holds (Closing ones included).
    fn __len__(&self, py: Python<'_>) -> usize {
        each!(&self.host.lock(py).managers, |m| m.len())
    }

    /// Profile, sessions held and limits.
    fn __repr__(&self, py: Python<'_>) -> String {
        let max = self
            .max_sessions
            .map_or_else(|| "None".to_owned(), |n| n.to_string());
        format!(
            "<DuplexSessionRuntimeManager profile='{}' sessions={} max_sessions={max} completed_append_limit={}>",
            self.profile.name(),
            self.__len__(py),
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
        if config.is_exact_instance(self.classes().lease_config(config.py())) {
            last = self
                .last_lease
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *last = Some((config.clone().unbind(), lease));
        }
        Ok(lease)
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

/// One session's expiry, read under the host's lock.
struct Expired {
    key: Option<duplex_std::SessionKey>,
    id: String,
    reason: duplex_core::CloseReason,
    fence: FenceValues,
    generation: u64,
    submitted: Vec<String>,
    reserved: Vec<String>,
}
