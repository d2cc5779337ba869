//! `DuplexSessionRuntimeState`: a handle on one session of a host (its
//! manager's, or a private host's for a session made by its constructor).
//! The session's state is the core's, in the host's `SessionManager`; its
//! opaque values (configs, capabilities, stage results) are the Python
//! objects the host gave, kept beside it; once a manager has let it go the
//! handle keeps what the seed's object still shows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use std::borrow::Cow;

use duplex_core::{AnySession, Error as CoreError, Fence, Id, Instant, StateKind};
use duplex_std::SessionKey;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::classes::HostClasses;
use crate::convert::{self, fence_object, FenceArg};
use crate::errors::{core_error, fence_mismatch, gone, std_error, Context};
use crate::host::{each, Core, CoreFence, Host, HostCell, Managers, Profile, ProfileFence};
pub(crate) use crate::opening::{copy_dict, lease_of, Opening};
pub(crate) use crate::records::Record;

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

/// What a closed session still shows (the core keeps only its fence and
/// generation once closed).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Facts {
    pub(crate) input_seq: u64,
    pub(crate) input_turn_seq: u64,
    pub(crate) last_activity: Instant,
    pub(crate) config_generation: u64,
    pub(crate) completed_limit: usize,
}

/// A host of Python sessions.
pub(crate) type SessionHost = HostCell<Inner>;

/// The Python side of one session, beside its slot in the host.
#[derive(Debug)]
pub(crate) struct Inner {
    /// The order the session was opened in.
    pub(crate) order: u64,
    /// The session's object, while a manager lists it (a manager's `get`
    /// returns it).
    pub(crate) handle: Option<Py<PySession>>,
    pub(crate) capabilities: Py<PyAny>,
    /// `None` until read: a session opened without one gets its empty
    /// dict when it is first asked for.
    pub(crate) session_config: Option<Py<PyAny>>,
    pub(crate) runtime_config: Option<Py<PyAny>>,
    pub(crate) lease_config: Py<PyAny>,
    /// Completed appends' records, by the handle the core keeps (see
    /// [`Record`]).
    pub(crate) records: Vec<(i64, Py<PyTuple>)>,
    pub(crate) next_handle: i64,
    /// The close reason as the host named it.
    pub(crate) terminal_reason: Option<Py<PyString>>,
    /// The last fence object whose values are the session's fence.
    pub(crate) fence_object: Option<Py<PyAny>>,
    /// A closed session's final facts, fence and lease generation.
    pub(crate) closed: Option<Box<Closed>>,
    /// The last `DuplexFence` argument, converted (see [`Inner::fence`]).
    /// Boxed, so that a session that never gets a fence argument (and its
    /// slot while it opens) does not carry a 128-byte id twice.
    pub(crate) arg_fence: Option<Box<(Py<PyAny>, CoreFence)>>,
    /// The last reservation `prepare_append` made (see [`LastReservation`]).
    pub(crate) last_reservation: Option<Box<LastReservation>>,
}

/// The last `DuplexAppendReservation` a session made, with the core's
/// reservation it stands for: a commit of that object (its `update`
/// unchanged) commits the kept one instead of reading twelve attributes
/// and two fences back.
#[derive(Debug)]
pub(crate) struct LastReservation {
    pub(crate) object: Py<PyAny>,
    pub(crate) update: Py<PyAny>,
    /// The reservation's fence object (the session's once it commits).
    pub(crate) fence: Py<PyAny>,
    pub(crate) on_commit: duplex_core::Appended,
    pub(crate) core: crate::host::CoreReservation,
}

/// What a closed session's fence, lease and counters read.
#[derive(Debug)]
pub(crate) struct Closed {
    pub(crate) fence: Py<PyAny>,
    pub(crate) epoch: u64,
    pub(crate) turn: u64,
    pub(crate) generation: u64,
    pub(crate) facts: Facts,
}

impl Inner {
    /// The fence argument in the core's type. A `DuplexFence` is frozen,
    /// so the conversion of the last one is kept, by identity: the calls
    /// of a turn, which share one, convert it once.
    #[inline]
    pub(crate) fn fence<const L: usize>(
        &mut self,
        arg: &FenceArg<'_>,
        classes: &HostClasses,
    ) -> PyResult<Cow<'_, Fence<Id<L>>>>
    where
        CoreFence: ProfileFence<L>,
    {
        let cached = self.arg_fence.as_deref().is_some_and(|(object, fence)| {
            object.is(&arg.object) && ProfileFence::<L>::get(fence).is_some()
        });
        if !cached {
            let fence = arg.fence::<L>()?;
            if !arg.object.is_exact_instance(classes.fence(arg.object.py())) {
                return Ok(Cow::Owned(fence));
            }
            let entry = (arg.object.clone().unbind(), CoreFence::wrap(fence));
            match self.arg_fence.as_deref_mut() {
                Some(cached) => *cached = entry,
                None => self.arg_fence = Some(Box::new(entry)),
            }
        }
        self.arg_fence
            .as_deref()
            .and_then(|(_, fence)| ProfileFence::<L>::get(fence))
            .map(Cow::Borrowed)
            .ok_or_else(gone)
    }

    /// Keeps only the records with these handles; the others, to be
    /// dropped once the host is unlocked.
    pub(crate) fn retain_records(&mut self, handles: &mut [i64]) -> Vec<(i64, Py<PyTuple>)> {
        handles.sort_unstable();
        let (kept, dropped) = std::mem::take(&mut self.records)
            .into_iter()
            .partition(|(h, _)| handles.binary_search(h).is_ok());
        self.records = kept;
        dropped
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
///
/// Its state is read-only; its methods can be shadowed on one object (a
/// test's monkeypatch, as on the seed's dataclass), which is what the
/// instance `__dict__` is for.
#[pyclass(
    frozen,
    dict,
    name = "DuplexSessionRuntimeState",
    module = "duplex_session"
)]
pub(crate) struct PySession {
    /// The host the session lives in.
    pub(crate) host: Arc<SessionHost>,
    /// The host's value classes.
    pub(crate) classes: Py<HostClasses>,
    /// Whether a method is shadowed on this object: the seed's methods
    /// that call others then call them through the object (`patch`).
    pub(crate) patched: AtomicBool,
    /// Its key there (set when it opens, before anyone sees the object).
    pub(crate) key: OnceLock<SessionKey>,
    pub(crate) session_id: Py<PyString>,
    pub(crate) clock: Arc<crate::shapes::PyClock>,
    pub(crate) profile: Profile,
    /// Never held while Python code runs (only a pointer comparison and
    /// reference counts happen under it).
    pub(crate) arg_cache: Mutex<Option<CachedFence>>,
    /// The Python side once the session's manager has let it go (taken
    /// under the host's lock, after it).
    /// Boxed: a listed session's handle stays small (its side lives in
    /// the host until then).
    pub(crate) left: Mutex<Option<Box<Inner>>>,
}

/// A session's host locked, and where its Python side is: beside its slot
/// while its manager lists it, in the handle once it has been let go.
pub(crate) struct Locked<'a> {
    pub(crate) host: MutexGuard<'a, Host<Inner>>,
    /// The Python side, once the manager has let the session go.
    left: Option<MutexGuard<'a, Option<Box<Inner>>>>,
    /// The session's key (`None` only for an object whose open failed).
    pub(crate) key: Option<SessionKey>,
}

impl Locked<'_> {
    /// The session's place in its manager (`None` once it is closed or has
    /// left it) and its Python side.
    #[inline]
    pub(crate) fn parts(&mut self) -> PyResult<(Option<Core<'_>>, &mut Inner)> {
        if let Some(left) = self.left.as_mut() {
            return Ok((None, left.as_deref_mut().ok_or_else(gone)?));
        }
        let key = self.key.ok_or_else(gone)?;
        let (core, inner) = self.host.parts(key).ok_or_else(gone)?;
        let core = if inner.closed.is_some() {
            None
        } else {
            Some(core)
        };
        Ok((core, inner))
    }

    /// The session's Python side.
    pub(crate) fn inner(&mut self) -> PyResult<&mut Inner> {
        Ok(self.parts()?.1)
    }

    /// The session's place in its manager, or `wrong_state` once it is
    /// closed.
    pub(crate) fn core(&mut self) -> PyResult<Core<'_>> {
        self.parts()?.0.ok_or_else(gone)
    }

    /// The session's state (`Closed` once closed).
    pub(crate) fn kind(&mut self) -> PyResult<StateKind> {
        Ok(match self.parts()?.0 {
            Some(core) => {
                let key = core.key;
                each!(&*core.managers, |m| m.get_at(key).map(AnySession::kind))
                    .unwrap_or(StateKind::Closed)
            }
            None => StateKind::Closed,
        })
    }
}

impl PySession {
    /// Opens a session in `host` and returns its object; `listed`: the
    /// host's manager lists it (its `get` returns the object).
    pub(crate) fn open(
        py: Python<'_>,
        host: Arc<SessionHost>,
        o: Opening<'_>,
        clock: Arc<crate::shapes::PyClock>,
        profile: Profile,
        listed: bool,
    ) -> PyResult<Py<PySession>> {
        let modes = convert::modes(&o.capabilities, o.classes.get())?;
        let options = duplex_core::OpenOptions::default()
            .modes(modes)
            .lease(o.lease)
            .input_limits(o.limits.input)
            .overlap(o.limits.overlap);
        let id = o.fence.session_id.to_str()?;
        let session = Py::new(
            py,
            PySession {
                host: Arc::clone(&host),
                classes: o.classes.clone_ref(py),
                patched: AtomicBool::new(false),
                key: OnceLock::new(),
                session_id: o.fence.session_id.clone().unbind(),
                clock,
                profile,
                arg_cache: Mutex::new(Some(CachedFence {
                    object: o.fence.object.clone().unbind(),
                    session_id: o.fence.session_id.clone().unbind(),
                    epoch: o.fence.epoch,
                    turn: o.fence.turn,
                    response: o.fence.response,
                    incarnation: o.fence.incarnation,
                })),
                left: Mutex::new(None),
            },
        )?;
        crate::shapes::untrack(session.bind(py).as_any());
        let session_config = o
            .session_config
            .map(|c| copy_dict(py, &c).map(Bound::unbind))
            .transpose()?;
        let runtime_config = o
            .runtime_config
            .map(|c| copy_dict(py, &c).map(Bound::unbind))
            .transpose()?;
        let handle = listed.then(|| session.clone_ref(py));
        let mut host = host.lock(py);
        let key = each!(&mut host.managers, |m| {
            let fence = o.fence.fence()?;
            m.at(o.now)
                .open_keyed(fence, options)
                .map_err(|e| std_error(e, id))
        })?;
        let order = host.next_order;
        host.next_order += 1;
        host.place(
            key,
            Inner {
                order,
                handle,
                capabilities: o.capabilities.unbind(),
                session_config,
                runtime_config,
                lease_config: o.lease_config.unbind(),
                records: Vec::new(),
                next_handle: 0,
                terminal_reason: None,
                fence_object: Some(o.fence.object.clone().unbind()),
                closed: None,
                arg_fence: None,
                last_reservation: None,
            },
        );
        // Set before the object is returned: every call finds the key.
        let _ = session.get().key.set(key);
        drop(host);
        Ok(session)
    }

    /// Locks the session's host.
    #[inline]
    pub(crate) fn lock(&self, py: Python<'_>) -> Locked<'_> {
        let key = self.key.get().copied();
        let mut host = self.host.lock(py);
        // Let go (under this lock) once, for good: else its side is here.
        let here = key.is_some_and(|key| host.side(key).is_some());
        let left = if here {
            None
        } else {
            Some(self.left.lock().unwrap_or_else(PoisonError::into_inner))
        };
        Locked { host, left, key }
    }

    /// The host's value classes.
    #[inline]
    pub(crate) fn classes(&self) -> &HostClasses {
        self.classes.get()
    }

    /// Whether a method is shadowed on this object.
    #[inline]
    pub(crate) fn is_patched(&self) -> bool {
        self.patched.load(Ordering::Relaxed)
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
        convert::now(py, &self.clock, None)
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
        if fence.is_exact_instance(self.classes.get().fence(py)) {
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

    /// The session's fence as a `DuplexFence` (the last one given, when it
    /// is still the session's).
    pub(crate) fn fence_obj<'py>(
        &self,
        py: Python<'py>,
        g: &mut Locked<'_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (core, inner) = g.parts()?;
        let Some(core) = core else {
            return match &inner.closed {
                Some(closed) => Ok(closed.fence.bind(py).clone()),
                None => Err(gone()),
            };
        };
        if let Some(obj) = &inner.fence_object {
            // Known by identity (its conversion kept): compared in Rust.
            let known = inner
                .arg_fence
                .as_deref()
                .filter(|(o, _)| o.is(obj))
                .and_then(|(_, converted)| match (&*core.managers, converted) {
                    (Managers::Server(m), CoreFence::Server(f)) => {
                        m.get_at(core.key).map(|s| s.fence() == f)
                    }
                    (Managers::Conformance(m), CoreFence::Conformance(f)) => {
                        m.get_at(core.key).map(|s| s.fence() == f)
                    }
                    _ => None,
                });
            let current = if let Some(current) = known {
                current
            } else {
                let arg = FenceArg::read(obj.bind(py))?;
                let key = core.key;
                each!(&*core.managers, |m| m
                    .get_at(key)
                    .map(|s| arg.is(s.fence())))
                    == Some(true)
            };
            if current {
                return Ok(obj.bind(py).clone());
            }
        }
        let key = core.key;
        let obj = each!(&*core.managers, |m| m.get_at(key).map(|s| fence_object(
            py,
            s.fence(),
            self.classes.get()
        )))
        .ok_or_else(gone)??;
        inner.fence_object = Some(obj.clone().unbind());
        Ok(obj)
    }

    /// Runs one operation of the session under its host's lock: `run`
    /// gets the session's place in its host and its Python side, and
    /// returns the core's answer; on success the fence argument `arg` is
    /// remembered, and a refusal becomes the seed's exception.
    pub(crate) fn op<T>(
        &self,
        py: Python<'_>,
        arg: &FenceArg<'_>,
        cx: Context<'_>,
        run: impl FnOnce(&mut Core<'_>, &mut Inner) -> PyResult<Result<T, CoreError>>,
    ) -> PyResult<T> {
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let mut core = core.ok_or_else(gone)?;
        match run(&mut core, inner)? {
            Ok(value) => {
                PySession::remember_in(Some(&core), inner, arg);
                Ok(value)
            }
            Err(e) => Err(self.refuse(py, &mut g, e, Some(&arg.object), cx)),
        }
    }

    /// Maps a core refusal: a fence mismatch becomes the seed's
    /// `DuplexFenceMismatchError(current, given)`.
    pub(crate) fn refuse(
        &self,
        py: Python<'_>,
        g: &mut Locked<'_>,
        e: CoreError,
        given: Option<&Bound<'_, PyAny>>,
        cx: Context<'_>,
    ) -> PyErr {
        if let (CoreError::FenceMismatch { .. }, Some(given)) = (e, given) {
            match self.fence_obj(py, g) {
                Ok(current) => return fence_mismatch(&current, given),
                Err(err) => return err,
            }
        }
        core_error(e, cx)
    }

    /// Remembers `arg` as the fence object if the session now has its values.
    pub(crate) fn remember(g: &mut Locked<'_>, arg: &FenceArg<'_>) -> PyResult<()> {
        let (core, inner) = g.parts()?;
        Self::remember_in(core.as_ref(), inner, arg);
        Ok(())
    }

    /// [`remember`](Self::remember) with the session's parts in hand.
    #[inline]
    pub(crate) fn remember_in(core: Option<&Core<'_>>, inner: &mut Inner, arg: &FenceArg<'_>) {
        // The same object again: an operation that admitted it leaves the
        // session at its values (a fence never moves backwards).
        if inner
            .fence_object
            .as_ref()
            .is_some_and(|o| o.is(&arg.object))
        {
            return;
        }
        if let Some(core) = core {
            let key = core.key;
            if each!(&*core.managers, |m| m
                .get_at(key)
                .map(|s| arg.is(s.fence())))
                == Some(true)
            {
                inner.fence_object = Some(arg.object.clone().unbind());
            }
        }
    }

    /// The session's sequences, limit and generation before it closes.
    pub(crate) fn facts_of(core: &Core<'_>) -> Option<Facts> {
        let key = core.key;
        each!(&*core.managers, |m| m.get_at(key).and_then(|s| {
            unfinished!(s, t => Facts {
                input_seq: t.input_seq(),
                input_turn_seq: t.input_turn_seq(),
                last_activity: t.last_activity(),
                config_generation: t.config_generation(),
                completed_limit: t.completed_limit(),
            })
        }))
    }
}

/// The handle of a session whose manager has let it go: the closed
/// session's Python side moves into it (under the host's lock, so a call
/// on the handle finds it in one place or the other).
pub(crate) fn let_go(host: &mut Host<Inner>, key: SessionKey) -> Option<Py<PySession>> {
    let mut inner = host.take(key)?;
    let handle = inner.handle.take()?;
    *handle
        .get()
        .left
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(inner));
    Some(handle)
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
