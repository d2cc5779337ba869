//! A session's views and constructor: the seed's attributes (`fence`,
//! `lease`, `stage_bindings`, `request_resources`, `completed_appends`,
//! sequences and configs) read from the core and the Python objects the
//! host gave, and the seed's dataclass constructor.

use duplex_core::{AnySession, InputMode, RequestState};
use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::args;
use crate::classes;
use crate::classes::{resource_class, HostClasses};
use crate::convert::{self, FenceArg, FenceValues};
use crate::errors::{ensure_kind, gone, with_kind};
use crate::host::{each, Profile};
use crate::manager::PyManager;
use crate::session::{lease_of, unfinished, Facts, Opening, PySession, Record, SessionHost};

#[pymethods]
impl PySession {
    /// A session on its own, as the seed's dataclass constructor makes one
    /// (a manager's `open_session` is the usual way). It starts empty: the
    /// tables, sequences and cache come from its operations, so any other
    /// initial value is refused. `lease` gives the configuration and the
    /// time of the first activity (its generation must be 0).
    #[new]
    #[pyo3(
        signature = (
            fence, lease, _clock, capabilities = None, session_config = None, runtime_config = None,
            config_generation = None, stage_bindings = None, request_resources = None, input_seq = None,
            input_turn_seq = None, _append_turn_key = None, completed_append_limit = None,
            completed_appends = None
        ),
        text_signature = "(fence, lease, _clock, capabilities=None, session_config=None, runtime_config=None, config_generation=0, stage_bindings=None, request_resources=None, input_seq=0, input_turn_seq=0, _append_turn_key=None, completed_append_limit=256, completed_appends=None)"
    )]
    #[allow(clippy::too_many_arguments, clippy::used_underscore_binding)]
    fn new(
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        lease: &Bound<'_, PyAny>,
        _clock: Py<PyAny>,
        capabilities: Option<&Bound<'_, PyAny>>,
        session_config: Option<&Bound<'_, PyAny>>,
        runtime_config: Option<&Bound<'_, PyAny>>,
        config_generation: Option<&Bound<'_, PyAny>>,
        stage_bindings: Option<&Bound<'_, PyAny>>,
        request_resources: Option<&Bound<'_, PyAny>>,
        input_seq: Option<&Bound<'_, PyAny>>,
        input_turn_seq: Option<&Bound<'_, PyAny>>,
        _append_turn_key: Option<&Bound<'_, PyAny>>,
        completed_append_limit: Option<&Bound<'_, PyAny>>,
        completed_appends: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Self>> {
        // Anything wrong with the arguments is a configuration the
        // constructor refuses: every error says so in `.kind`.
        let build = || -> PyResult<Py<Self>> {
            let limit = match completed_append_limit.filter(|v| !v.is_none()) {
                Some(v) => args::integer::<i64>(v, "completed_append_limit", "1..2**63")
                    .map_err(|e| with_kind(e, "invalid_config"))?,
                None => 256,
            };
            if limit <= 0 {
                return Err(with_kind(
                    pyo3::exceptions::PyValueError::new_err(
                        "completed_append_limit must be positive",
                    ),
                    "invalid_config",
                ));
            }
            let generation = lease.getattr("generation")?;
            // A counter that is given must be 0: an int (or None, taken
            // as not given).
            let zero = |v: Option<&Bound<'_, PyAny>>| {
                v.is_none_or(|v| v.is_none() || v.extract::<u64>().is_ok_and(|n| n == 0))
            };
            let filled = |v: Option<&Bound<'_, PyAny>>| {
                v.is_some_and(|v| !v.is_none() && v.is_truthy().unwrap_or(true))
            };
            let empty = zero(config_generation)
                && zero(input_seq)
                && zero(input_turn_seq)
                && zero(Some(&generation))
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
            let last = convert::reading(&lease.getattr("last_activity")?)?;
            let config = lease.getattr("config")?;
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            // A session of its own: a private host of one.
            let host = SessionHost::new(Profile::Server, Some(1), limit).map_err(|message| {
                with_kind(
                    pyo3::exceptions::PyValueError::new_err(message),
                    "invalid_config",
                )
            })?;
            // The classes of the host whose fence this is (a host's
            // `DuplexFence` when it bound the package to its modules).
            let classes = HostClasses::of_fence(fence)?;
            let opening = Opening {
                fence: FenceArg::read(fence)?,
                now: last,
                capabilities: match capabilities {
                    Some(c) if !c.is_none() => c.clone(),
                    _ => classes.get().capabilities(py).call0()?,
                },
                session_config: session_config.filter(|c| !c.is_none()).cloned(),
                runtime_config: runtime_config.filter(|c| !c.is_none()).cloned(),
                lease: lease_of(&config)?,
                lease_config: config,
                limits: crate::opening::SessionLimits::default(),
                classes,
            };
            PySession::open(
                py,
                std::sync::Arc::new(host),
                opening,
                std::sync::Arc::new(crate::shapes::PyClock::new(py, _clock)),
                Profile::Server,
                false,
            )
        };
        build().map_err(|e| ensure_kind(e, "invalid_config"))
    }

    // ----- identity and views -------------------------------------------

    /// Id, state, fence position, lease generation, input sequence and the
    /// number of requests held: what a log line or a debugger needs.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let id = self.session_id.bind(py).repr()?;
        let (epoch, turn) = self.epoch_turn(py).unwrap_or_default();
        let input_seq = self.counters(py).map_or(0, |f| f.input_seq);
        let mut g = self.lock(py);
        let state = g.kind()?;
        let (generation, requests) = match g.parts()? {
            (Some(core), _) => each!(&*core.managers, |m| m.get_at(core.key).map(|s| (
                s.lease_generation(),
                s.resource_request_ids(None, None)
                    .map_or(0, |ids| ids.len()),
            )))
            .unwrap_or_default(),
            (None, inner) => (inner.closed.as_ref().map_or(0, |c| c.generation), 0),
        };
        drop(g);
        Ok(format!(
            "<DuplexSessionRuntimeState {id} {state} epoch={epoch} turn={turn} \
             lease_generation={generation} input_seq={input_seq} requests={requests}>"
        ))
    }

    /// The session id.
    #[getter]
    fn session_id(&self, py: Python<'_>) -> Py<PyString> {
        self.session_id.clone_ref(py)
    }

    /// The session's fence (`DuplexFence`).
    #[getter]
    fn fence<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut g = self.lock(py);
        self.fence_obj(py, &mut g)
    }

    /// The fence's epoch.
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.epoch_turn(py)?.0)
    }

    /// The fence's turn.
    #[getter]
    fn turn_id(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.epoch_turn(py)?.1)
    }

    /// The capabilities the session was opened with.
    #[getter]
    fn capabilities(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.lock(py).inner()?.capabilities.clone_ref(py))
    }

    /// The session configuration (a dict).
    #[getter]
    fn session_config(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut g = self.lock(py);
        Ok(g.inner()?
            .session_config
            .get_or_insert_with(|| PyDict::new(py).into_any().unbind())
            .clone_ref(py))
    }

    /// The runtime configuration (a dict).
    #[getter]
    fn runtime_config(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut g = self.lock(py);
        Ok(g.inner()?
            .runtime_config
            .get_or_insert_with(|| PyDict::new(py).into_any().unbind())
            .clone_ref(py))
    }

    /// Configuration generation.
    #[getter]
    fn config_generation(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.counters(py)?.config_generation)
    }

    /// Position in the epoch's input sequence.
    #[getter]
    fn input_seq(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.counters(py)?.input_seq)
    }

    /// Position within the current turn.
    #[getter]
    fn input_turn_seq(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.counters(py)?.input_turn_seq)
    }

    /// The completed-append limit.
    #[getter]
    fn completed_append_limit(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.counters(py)?.completed_limit)
    }

    /// `{stage_id: DuplexStageBinding}` in binding order.
    #[getter]
    fn stage_bindings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let Some(core) = core else {
            return Ok(out);
        };
        let remembered = inner.fence_object.as_ref().map(|o| o.clone_ref(py));
        // Read under the lock, built after it.
        let mut rows = Vec::new();
        each!(&*core.managers, |m| {
            if let Some(t) = m.get_at(core.key) {
                unfinished!(t, t => {
                    for (stage, id, fence) in t.bindings_with_fences() {
                        rows.push((stage, id.as_str().to_owned(), FenceValues::of(&fence)));
                    }
                });
            }
        });
        drop(g);
        let class = classes::binding_class(py)?;
        for (stage, id, fence) in rows {
            // The fence object the host passed, while it is the session's.
            let fence = fence.current(
                py,
                remembered.as_ref().map(|o| o.clone_ref(py)),
                self.classes(),
            )?;
            out.set_item(stage, class.call1((id, fence))?)?;
        }
        Ok(out)
    }

    /// `{(stage_id, request_id): DuplexRequestResource}` in reservation order.
    #[getter]
    fn request_resources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let Some(core) = core else {
            return Ok(out);
        };
        let remembered = inner.fence_object.as_ref().map(|o| o.clone_ref(py));
        let mut rows = Vec::new();
        each!(&*core.managers, |m| {
            if let Some(t) = m.get_at(core.key) {
                unfinished!(t, t => {
                    for (stage, id, state, fence) in t.resources_with_fences() {
                        let submitted = state == RequestState::Submitted;
                        rows.push((stage, id.as_str().to_owned(), FenceValues::of(&fence), submitted));
                    }
                });
            }
        });
        drop(g);
        let class = resource_class(py)?;
        for (stage, id, fence, submitted) in rows {
            let fence = fence.current(
                py,
                remembered.as_ref().map(|o| o.clone_ref(py)),
                self.classes(),
            )?;
            let resource = class.call1((stage, id.as_str(), fence, submitted))?;
            out.set_item((stage, id), resource)?;
        }
        Ok(out)
    }

    /// `OrderedDict[operation_id, DuplexCompletedAppend]`, oldest first.
    #[getter]
    fn completed_appends<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let ordered = py.import("collections")?.getattr("OrderedDict")?.call0()?;
        let class = classes::completed_class(py)?;
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let Some(core) = core else {
            return Ok(ordered);
        };
        let remembered = inner.fence_object.as_ref().map(|o| o.clone_ref(py));
        // (op, handle, record, what a compact record takes from the core)
        let mut rows: Vec<(String, i64, Py<PyTuple>, FenceValues, InputMode, bool)> = Vec::new();
        each!(&*core.managers, |m| {
            m.get_at(core.key).map(|s| unfinished!(s, t => {
            let own = t.fence();
            for r in t.completed_appends() {
                let handle = r.results.first().copied().unwrap_or(-1);
                if let Some(record) = inner.record(handle) {
                    let mut fence = FenceValues::of(own);
                    fence.position(r.epoch, r.turn, r.response);
                    rows.push((r.operation.as_str().to_owned(), handle, record.clone_ref(py), fence, r.mode, r.finality.is_final()));
                }
            }
        }))
        });
        drop(g);
        for (op, handle, record, fence, mode, r#final) in rows {
            let r = record.bind(py);
            let results = PyTuple::new(py, Record::results(py, handle, r)?)?;
            let record = if handle & Record::COMPACT != 0 {
                class.call1((
                    fence.current(
                        py,
                        remembered.as_ref().map(|o| o.clone_ref(py)),
                        self.classes(),
                    )?,
                    convert::mode_object(py, mode, self.classes())?,
                    r#final,
                    results,
                ))?
            } else {
                class.call1((r.get_item(0)?, r.get_item(1)?, r.get_item(2)?, results))?
            };
            ordered.set_item(op, record)?;
        }
        Ok(ordered)
    }

    /// Bytes this session holds outside Python's allocator (which
    /// tracemalloc does not see): its slot in the manager, what its tables
    /// hold on the heap, its Python side's entry and the table of
    /// completed-append handles.
    fn _native_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        let mut g = self.lock(py);
        let listed = g.key.is_some_and(|key| g.host.side(key).is_some());
        let side = std::mem::size_of::<Option<(duplex_std::SessionKey, crate::session::Inner)>>();
        let core = match g.key {
            Some(key) if listed => {
                let heap = each!(&g.host.managers, |m| m
                    .get_at(key)
                    .map(AnySession::heap_bytes))
                .unwrap_or(0);
                self.profile.session_bytes() + side + heap
            }
            _ => 0,
        };
        let record = std::mem::size_of::<(i64, Py<PyTuple>)>();
        let inner = g.inner()?;
        let fence_cache = inner
            .arg_fence
            .as_ref()
            .map_or(0, |b| std::mem::size_of_val(&**b));
        let closed = inner
            .closed
            .as_ref()
            .map_or(0, |b| std::mem::size_of_val(&**b));
        Ok(core + inner.records.capacity() * record + fence_cache + closed)
    }

    /// The session's lease: a view of it that is an instance of the
    /// host's `DuplexLeaseState`.
    #[getter]
    fn lease<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        slf.get().classes().lease_view(py).call1((slf,))
    }
}

impl PySession {
    /// The fence's epoch and turn: the closed session's record once its
    /// core is gone, the core's before.
    fn epoch_turn(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        let mut g = self.lock(py);
        match g.parts()? {
            (Some(core), _) => each!(&*core.managers, |m| m
                .get_at(core.key)
                .map(|s| (s.fence().epoch, s.fence().turn)))
            .ok_or_else(gone),
            (None, inner) => inner
                .closed
                .as_ref()
                .map(|c| (c.epoch, c.turn))
                .ok_or_else(gone),
        }
    }

    /// The session's sequences, limit and generation: its final facts once
    /// closed, the live core's before (zeros for a session that is neither).
    fn counters(&self, py: Python<'_>) -> PyResult<Facts> {
        let mut g = self.lock(py);
        match g.parts()? {
            (Some(core), _) => Ok(PySession::facts_of(&core).unwrap_or_default()),
            (None, inner) => inner.closed.as_ref().map(|c| c.facts).ok_or_else(gone),
        }
    }
}

/// The refusal of assigning or deleting an attribute of a native object:
/// its state changes only through its operations. The message is CPython's
/// for a read-only attribute (or a missing one), with `.kind`.
fn read_only(object: &Bound<'_, PyAny>, name: &Bound<'_, PyString>) -> PyErr {
    let class = object
        .get_type()
        .fully_qualified_name()
        .map_or_else(|_| String::from("object"), |n| n.to_string());
    let message = if object.get_type().hasattr(name).unwrap_or(false) {
        format!("attribute '{name}' of '{class}' objects is not writable")
    } else {
        format!("'{class}' object has no attribute '{name}'")
    };
    with_kind(PyAttributeError::new_err(message), args::INVALID_ARGUMENT)
}

/// Whether `name` names a method of the object's class (a routine, not a
/// property or other data descriptor): such an attribute may be shadowed
/// on one object, as on the seed's dataclass.
fn names_method(object: &Bound<'_, PyAny>, name: &Bound<'_, PyString>) -> bool {
    let py = object.py();
    object.get_type().getattr(name).is_ok_and(|attr| {
        attr.is_callable()
            && !attr
                .get_type()
                .hasattr(pyo3::intern!(py, "__set__"))
                .unwrap_or(true)
    })
}

/// The object's instance `__dict__`, where a shadow lives (what the
/// generic `object.__setattr__` would write to, which CPython does not let
/// a class with its own `__setattr__` call).
fn instance_dict<'py>(object: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    object.getattr(pyo3::intern!(object.py(), "__dict__"))
}

/// Whether the object's `__dict__` holds anything (a shadowed method).
fn has_shadows(object: &Bound<'_, PyAny>) -> bool {
    instance_dict(object)
        .and_then(|d| d.len())
        .is_ok_and(|n| n > 0)
}

/// `__setattr__` and `__delattr__` of a native class: an attribute that
/// names one of the class's methods may be shadowed on the object (and the
/// shadow deleted, which restores the method); every other attribute is
/// read-only ([`read_only`]). A shadow sets the object's `patched` flag:
/// the seed's methods that call others on `self` then call them through
/// the object, so the shadow is what they call, as on the seed.
macro_rules! read_only_attributes {
    ($($class:ty),*) => {$(
        #[pymethods]
        impl $class {
            fn __setattr__(
                slf: &Bound<'_, Self>,
                name: &Bound<'_, PyString>,
                value: &Bound<'_, PyAny>,
            ) -> PyResult<()> {
                if !names_method(slf.as_any(), name) {
                    return Err(read_only(slf.as_any(), name));
                }
                instance_dict(slf.as_any())?.set_item(name, value)?;
                slf.get().patched.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }

            fn __delattr__(slf: &Bound<'_, Self>, name: &Bound<'_, PyString>) -> PyResult<()> {
                let dict = instance_dict(slf.as_any())?;
                if !dict.contains(name)? {
                    return Err(read_only(slf.as_any(), name));
                }
                dict.del_item(name)?;
                let still = has_shadows(slf.as_any());
                slf.get().patched.store(still, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
        }
    )*};
}

read_only_attributes!(PySession, PyManager);
