//! Calls of the wrong shape carry `.kind` too.
//!
//! A call with too many positional arguments, a missing one, an unknown
//! keyword or one given twice is refused before the method runs: by PyO3's
//! argument binding for the native classes, by CPython's frame set-up for
//! the package's Python value types. Both raise a plain `TypeError`. The
//! package promises `.kind` on every exception it raises, so each entry
//! point is wrapped once, at import, in a trampoline that calls the
//! original and, when it fails with a `TypeError` that has no `kind`, sets
//! `kind = "invalid_argument"`. A trampoline adds a direct call and a null
//! check; the calling convention stays vectorcall, so no tuple or dict is
//! built (binding `*args, **kwargs` instead costs 35 ns a call, and a dict
//! per keyword call).
//!
//! Wrapped entry points:
//! - each `#[pymethods]` method's `ml_meth` (PyO3 binds them
//!   `METH_FASTCALL | METH_KEYWORDS`; the argument-less ones,
//!   `METH_NOARGS`, are moved to that convention with the same refusals);
//! - `tp_new` of the two native classes;
//! - `tp_init` of the Python classes the package exports ([`wrap_init`]).
//!
//! This module is the crate's one hand-written `unsafe`: the entry points
//! live in CPython's method descriptors and type objects, which PyO3 does
//! not expose safely. Why it is sound:
//! - Everything is installed while the module initializes, under the
//!   interpreter's lock and before any of the wrapped callables can run;
//!   the original pointer is stored (once, in a `OnceLock`) before the
//!   trampoline that reads it is written.
//! - PyO3 allocates each class's `PyMethodDef` array on the heap and never
//!   frees it (the type keeps pointing to it), so the descriptor's
//!   `d_method` is live, writable memory that only CPython reads.
//! - Only descriptors of the exact type `method_descriptor` with one of the
//!   two flag sets above are touched, and a trampoline has the signature of
//!   the flag set it is installed under. Moving a `METH_NOARGS` method also
//!   moves its descriptor's `vectorcall` to the one CPython uses for
//!   `METH_FASTCALL | METH_KEYWORDS`, read from a descriptor that has it.
//! - Only a `TypeError` is taken and restored (a PyO3 `PanicException` is
//!   left where it is).
//! - The crate is built for the full (non-limited) C API of the running
//!   interpreter, whose struct layouts `pyo3-ffi` declares per version.
#![allow(unsafe_code)]

use std::os::raw::c_int;
use std::ptr;
use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::args::INVALID_ARGUMENT as KIND;
use crate::errors;

/// `METH_FASTCALL | METH_KEYWORDS`: how PyO3 binds a method with arguments.
const FASTCALL_KEYWORDS: c_int = ffi::METH_FASTCALL | ffi::METH_KEYWORDS;

/// A method's original entry point.
enum Method {
    /// `METH_FASTCALL | METH_KEYWORDS`: called as is.
    Fast(ffi::PyCFunctionFastWithKeywords),
    /// `METH_NOARGS`: called after checking that no argument was given;
    /// the method's qualified name is for the refusal's message.
    NoArgs(ffi::PyCFunction, String),
}

/// Sets `kind` on the pending exception if it is a `TypeError` without one.
fn tag_pending_type_error() {
    // SAFETY: a trampoline runs only as a CPython entry point, on a thread
    // attached to the interpreter.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: attached (above); `PyExc_TypeError` is a static type object.
    if unsafe { ffi::PyErr_ExceptionMatches(ffi::PyExc_TypeError) } == 0 {
        return;
    }
    if let Some(err) = PyErr::take(py) {
        errors::ensure_kind(err, KIND).restore(py);
    }
}

/// Raises the refusal of an argument given to a method that takes none,
/// with CPython's message.
fn refuse_arguments(name: &str, nargs: ffi::Py_ssize_t) {
    // SAFETY: as in `tag_pending_type_error`.
    let py = unsafe { Python::assume_attached() };
    let message = if nargs > 0 {
        format!("{name}() takes no arguments ({nargs} given)")
    } else {
        format!("{name}() takes no keyword arguments")
    };
    errors::with_kind(PyTypeError::new_err(message), KIND).restore(py);
}

/// Raises the error of a trampoline whose slot holds no original. It cannot
/// happen: a trampoline is installed only after its slot is filled.
fn unfilled_slot() {
    // SAFETY: as in `tag_pending_type_error`.
    let py = unsafe { Python::assume_attached() };
    PyRuntimeError::new_err("duplex_session: a call-shape trampoline has no original").restore(py);
}

/// How many methods of the native classes can be wrapped.
const METHODS: usize = 64;
static METHOD: [OnceLock<Method>; METHODS] = [const { OnceLock::new() }; METHODS];

/// The trampoline of method slot `I`, in the `METH_FASTCALL |
/// METH_KEYWORDS` convention.
unsafe extern "C" fn method<const I: usize>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let result = match METHOD[I].get() {
        // SAFETY: CPython's arguments, passed on unchanged to the entry
        // point CPython would have called.
        Some(Method::Fast(original)) => unsafe { original(slf, args, nargs, kwnames) },
        Some(Method::NoArgs(original, name)) => {
            // SAFETY: `kwnames` is null or a tuple (the vectorcall protocol).
            let keywords = !kwnames.is_null() && unsafe { ffi::PyTuple_Size(kwnames) } > 0;
            if nargs > 0 || keywords {
                refuse_arguments(name, nargs);
                return ptr::null_mut();
            }
            // SAFETY: a `METH_NOARGS` function takes `(self, NULL)`.
            unsafe { original(slf, ptr::null_mut()) }
        }
        None => {
            unfilled_slot();
            return ptr::null_mut();
        }
    };
    if result.is_null() {
        tag_pending_type_error();
    }
    result
}

/// How many native classes' constructors can be wrapped.
const NEWS: usize = 4;
static NEW: [OnceLock<ffi::newfunc>; NEWS] = [const { OnceLock::new() }; NEWS];

/// The `tp_new` trampoline of constructor slot `I`.
unsafe extern "C" fn new<const I: usize>(
    subtype: *mut ffi::PyTypeObject,
    args: *mut ffi::PyObject,
    kwds: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let Some(original) = NEW[I].get() else {
        unfilled_slot();
        return ptr::null_mut();
    };
    // SAFETY: CPython's arguments, passed on to the original `tp_new`.
    let result = unsafe { original(subtype, args, kwds) };
    if result.is_null() {
        tag_pending_type_error();
    }
    result
}

/// How many Python classes' `__init__` can be wrapped.
const INITS: usize = 16;
static INIT: [OnceLock<ffi::initproc>; INITS] = [const { OnceLock::new() }; INITS];

/// The `tp_init` trampoline of initializer slot `I`.
unsafe extern "C" fn init<const I: usize>(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwds: *mut ffi::PyObject,
) -> c_int {
    let Some(original) = INIT[I].get() else {
        unfilled_slot();
        return -1;
    };
    // SAFETY: CPython's arguments, passed on to the original `tp_init`.
    let result = unsafe { original(slf, args, kwds) };
    if result < 0 {
        tag_pending_type_error();
    }
    result
}

/// `DuplexLeaseConfig`'s type and its original `tp_init` (CPython's
/// `slot_tp_init`, which runs the Python `__init__`).
static LEASE_CONFIG: OnceLock<(usize, ffi::initproc)> = OnceLock::new();

/// `DuplexLeaseConfig`'s `tp_init`. A host may build a config per session,
/// so the common call, two plain positive numbers (or `None` for the idle
/// TTL) by position or keyword, is done here: the two slots are set as the
/// dataclass's own `__init__` would set them, and, the values being atomic,
/// the object is left off the cycle collector's list (CPython's rule for
/// its own tuples). Anything else (another value, a subclass, a call of
/// the wrong shape) runs the Python `__init__`, with its checks and
/// messages, and a `TypeError` gets `.kind`.
unsafe extern "C" fn lease_config_init(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwds: *mut ffi::PyObject,
) -> c_int {
    let Some(&(ty, original)) = LEASE_CONFIG.get() else {
        unfilled_slot();
        return -1;
    };
    // SAFETY: a `tp_init` runs on a thread attached to the interpreter.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: CPython passes a live object, a live tuple and a dict or null.
    let (object, args, kwds) = unsafe {
        (
            Bound::from_borrowed_ptr(py, slf),
            Bound::from_borrowed_ptr(py, args),
            Bound::from_borrowed_ptr_or_opt(py, kwds),
        )
    };
    let exact = object.get_type().as_type_ptr() as usize == ty;
    if let Some((ttl, grace)) = exact
        .then(|| plain_lease_values(&args, kwds.as_ref()))
        .flatten()
    {
        let set = |name: &Bound<'_, pyo3::types::PyString>, value: &Bound<'_, PyAny>| {
            // SAFETY: live objects, attached; the generic setter stores
            // into the slot's member descriptor, as `object.__setattr__`
            // in the dataclass's `__init__` does.
            unsafe { ffi::PyObject_GenericSetAttr(slf, name.as_ptr(), value.as_ptr()) }
        };
        if set(pyo3::intern!(py, "idle_ttl_s"), &ttl) < 0
            || set(pyo3::intern!(py, "disconnect_grace_s"), &grace) < 0
        {
            return -1;
        }
        // SAFETY: a live object of a GC type that refers only to atomic
        // values: it can be in no cycle.
        unsafe { ffi::PyObject_GC_UnTrack(slf.cast()) };
        return 0;
    }
    // SAFETY: CPython's arguments, passed on to the original `tp_init`.
    let result = unsafe {
        original(
            slf,
            args.as_ptr(),
            kwds.as_ref().map_or(ptr::null_mut(), Bound::as_ptr),
        )
    };
    if result < 0 {
        tag_pending_type_error();
    }
    result
}

/// The two values of a `DuplexLeaseConfig(idle_ttl_s, disconnect_grace_s)`
/// call if the fast path takes them: at most two positional arguments, no
/// keyword but the two names (none given twice), each value a float or an
/// int that is positive (the idle TTL may be `None`); the defaults are the
/// dataclass's. `None` sends the call to the Python `__init__`.
fn plain_lease_values<'py>(
    args: &Bound<'py, PyAny>,
    kwds: Option<&Bound<'py, PyAny>>,
) -> Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    use pyo3::types::{PyDict, PyFloat, PyInt, PyString, PyTuple};
    let py = args.py();
    let args = args.cast::<PyTuple>().ok()?;
    if args.len() > 2 {
        return None;
    }
    let mut given = args.iter();
    let (mut ttl, mut grace) = (given.next(), given.next());
    if let Some(kwds) = kwds {
        for (key, value) in kwds.cast::<PyDict>().ok()?.iter() {
            let slot = match key.cast::<PyString>().ok()?.to_str().ok()? {
                "idle_ttl_s" => &mut ttl,
                "disconnect_grace_s" => &mut grace,
                _ => return None,
            };
            if slot.replace(value).is_some() {
                return None;
            }
        }
    }
    let positive = |v: &Bound<'py, PyAny>| {
        if let Ok(f) = v.cast_exact::<PyFloat>() {
            f.value() > 0.0
        } else {
            v.is_exact_instance_of::<PyInt>() && v.extract::<i64>().is_ok_and(|i| i > 0)
        }
    };
    // The Python `__init__`'s defaults (`_types.DuplexLeaseConfig`).
    let ttl = ttl.unwrap_or_else(|| PyFloat::new(py, 300.0).into_any());
    let grace = grace.unwrap_or_else(|| PyFloat::new(py, 30.0).into_any());
    ((ttl.is_none() || positive(&ttl)) && positive(&grace)).then_some((ttl, grace))
}

macro_rules! trampolines {
    ($f:ident; $($i:literal)*) => { [$($f::<$i>,)*] };
}

static METHOD_TRAMPOLINES: [ffi::PyCFunctionFastWithKeywords; METHODS] = trampolines!(method;
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
static NEW_TRAMPOLINES: [ffi::newfunc; NEWS] = trampolines!(new; 0 1 2 3);
static INIT_TRAMPOLINES: [ffi::initproc; INITS] =
    trampolines!(init; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);

/// Takes the first free slot of `table` for `entry`.
fn claim<T>(table: &[OnceLock<T>], mut entry: T, what: &str) -> PyResult<usize> {
    for (i, slot) in table.iter().enumerate() {
        match slot.set(entry) {
            Ok(()) => return Ok(i),
            Err(back) => entry = back,
        }
    }
    Err(PyRuntimeError::new_err(format!(
        "duplex_session: more than {} {what} to wrap",
        table.len()
    )))
}

/// Wraps every method and the constructor of a native class.
pub(crate) fn wrap_native(class: &Bound<'_, PyType>) -> PyResult<()> {
    let name = class.qualname()?;
    // The class's own attributes (a copy: the type's dict is not changed).
    let items = class
        .getattr("__dict__")?
        .call_method0("items")?
        .try_iter()?
        .map(|item| item?.extract::<(String, Bound<'_, PyAny>)>())
        .collect::<PyResult<Vec<_>>>()?;
    let descriptor_type = ptr::addr_of_mut!(ffi::PyMethodDescr_Type);
    let mut noargs = Vec::new();
    let mut fast_vectorcall = None;
    for (key, value) in &items {
        let object = value.as_ptr();
        // SAFETY: a live object's type pointer.
        if unsafe { ffi::Py_TYPE(object) } != descriptor_type {
            continue;
        }
        let descriptor = object.cast::<ffi::PyMethodDescrObject>();
        // SAFETY: `object` is a method descriptor (checked above), so it has
        // this layout and a live `d_method` (the module docs).
        let def = unsafe { &mut *(*descriptor).d_method };
        if def.ml_flags == FASTCALL_KEYWORDS {
            // SAFETY: the flags say which member of the union is set.
            let original = unsafe { def.ml_meth.PyCFunctionFastWithKeywords };
            let slot = claim(&METHOD, Method::Fast(original), "methods")?;
            def.ml_meth.PyCFunctionFastWithKeywords = METHOD_TRAMPOLINES[slot];
            // SAFETY: as above.
            fast_vectorcall = unsafe { (*descriptor).vectorcall };
        } else if def.ml_flags == ffi::METH_NOARGS {
            noargs.push((key.as_str(), descriptor));
        }
    }
    for (method, descriptor) in noargs {
        let Some(vectorcall) = fast_vectorcall else {
            return Err(PyRuntimeError::new_err(format!(
                "duplex_session: {name} has no method to take the calling convention from"
            )));
        };
        // SAFETY: as above; `noargs` holds descriptors checked in the loop,
        // kept alive by `items`.
        let def = unsafe { &mut *(*descriptor).d_method };
        // SAFETY: the flags say which member of the union is set.
        let original = unsafe { def.ml_meth.PyCFunction };
        let slot = claim(
            &METHOD,
            Method::NoArgs(original, format!("{name}.{method}")),
            "methods",
        )?;
        def.ml_meth.PyCFunctionFastWithKeywords = METHOD_TRAMPOLINES[slot];
        def.ml_flags = FASTCALL_KEYWORDS;
        // SAFETY: as above; the descriptor now dispatches as its flags say.
        unsafe { (*descriptor).vectorcall = Some(vectorcall) };
    }
    let ty = class.as_type_ptr();
    // SAFETY: a live type object; `tp_new` is read and written under the
    // interpreter's lock before the class is used.
    let Some(original) = (unsafe { (*ty).tp_new }) else {
        return Ok(());
    };
    let slot = claim(&NEW, original, "constructors")?;
    // SAFETY: as above.
    unsafe { (*ty).tp_new = Some(NEW_TRAMPOLINES[slot]) };
    Ok(())
}

/// Wraps a Python class's `__init__` (its `tp_init`), so that a constructor
/// call of the wrong shape carries `.kind`. Called once per class by the
/// package's `__init__.py`; only the package's own classes are taken.
#[pyfunction]
pub(crate) fn wrap_init(class: &Bound<'_, PyType>) -> PyResult<()> {
    let module = class.module()?;
    let ours = module.to_str()?.starts_with("duplex_session.");
    // SAFETY: a live type object.
    let heap = unsafe { ffi::PyType_GetFlags(class.as_type_ptr()) } & ffi::Py_TPFLAGS_HEAPTYPE != 0;
    if !(ours && heap) {
        return Err(errors::with_kind(
            PyTypeError::new_err(format!(
                "wrap_init takes a class of duplex_session, got {}",
                class.fully_qualified_name()?
            )),
            KIND,
        ));
    }
    let ty = class.as_type_ptr();
    // SAFETY: a live type object, read under the interpreter's lock.
    let Some(original) = (unsafe { (*ty).tp_init }) else {
        return Ok(());
    };
    // The package's `DuplexLeaseConfig` gets its own `tp_init` (once: a
    // class made again, by a reload, gets the plain trampoline below).
    if class.qualname()? == "DuplexLeaseConfig"
        && module.to_str()? == "duplex_session._types"
        && LEASE_CONFIG.set((ty as usize, original)).is_ok()
    {
        // SAFETY: as below; written before the package hands the class out.
        unsafe { (*ty).tp_init = Some(lease_config_init) };
        return Ok(());
    }
    let slot = claim(&INIT, original, "initializers")?;
    // SAFETY: as above; written before the package hands the class out.
    unsafe { (*ty).tp_init = Some(INIT_TRAMPOLINES[slot]) };
    Ok(())
}

/// Takes a session object (a `DuplexSessionRuntimeState`) off the cycle
/// collector's list.
///
/// PyO3 makes every class a GC type, but a `DuplexSessionRuntimeState`
/// reports no references to the collector (it has no `__traverse__`: what
/// it refers to lives behind its host's lock, which a collection must not
/// take), so the collector can neither find a cycle through it nor free
/// one: tracking it only costs each collection a visit, and each open a
/// third of its time in a host with many sessions. CPython untracks its own
/// objects the same way (a tuple of atomic values).
pub(crate) fn untrack(object: &Bound<'_, PyAny>) {
    // SAFETY: a live object of a GC type (PyO3 sets `Py_TPFLAGS_HAVE_GC`
    // on every class), under the interpreter's lock; untracking a tracked
    // object is what `tp_dealloc` does first, and CPython's dealloc checks
    // whether the object is tracked before untracking it again.
    unsafe { ffi::PyObject_GC_UnTrack(object.as_ptr().cast()) };
}

/// A host's clock (a zero-argument callable returning float seconds),
/// called as CPython's own specialized calls call an object's `__call__`.
///
/// A clock is often an instance of a small Python class with a
/// `__call__` method (as `seed_bench.py`'s is). Calling such an object
/// goes through `slot_tp_call`, which looks `__call__` up on the type and
/// calls it with the object prepended: about 40 ns more than calling the
/// function itself. When the class's `__call__` is a plain Python
/// function, it is kept with the type's version tag, and a reading calls
/// the function with the clock as its one argument while the clock's type
/// still has that tag. CPython gives a type a new tag whenever the type or
/// a class in its MRO is modified (assigning `__call__`, a monkeypatch),
/// and a tag is never reused, so a matching tag means the lookup would
/// find the same function (the interpreter's own attribute caches rest on
/// the same rule). Any other clock, or a tag that no longer matches, is
/// called as usual.
///
/// Why reading the tag is sound: `tp_version_tag` is a plain field of the
/// full (non-limited) API's type object, read under the interpreter's lock
/// from the live type of a live object.
#[derive(Debug)]
pub(crate) struct PyClock {
    object: Py<PyAny>,
    /// The class's version tag and its `__call__` function.
    direct: Option<(std::os::raw::c_uint, Py<PyAny>)>,
}

impl PyClock {
    /// The clock `object`.
    pub(crate) fn new(py: Python<'_>, object: Py<PyAny>) -> PyClock {
        let direct = Self::method(object.bind(py)).ok().flatten();
        PyClock { object, direct }
    }

    /// The class's `__call__` if it is a plain function, with the tag.
    fn method(object: &Bound<'_, PyAny>) -> PyResult<Option<(std::os::raw::c_uint, Py<PyAny>)>> {
        let py = object.py();
        let ty = object.get_type();
        // SAFETY: a live type object, read under the interpreter's lock.
        let heap =
            unsafe { ffi::PyType_GetFlags(ty.as_type_ptr()) } & ffi::Py_TPFLAGS_HEAPTYPE != 0;
        if !heap {
            return Ok(None);
        }
        // The special-method lookup: the first class in the MRO whose own
        // dict has `__call__` (no metaclass, no descriptor binding).
        let mut found = None;
        for class in ty.getattr(pyo3::intern!(py, "__mro__"))?.try_iter()? {
            let dict = class?.getattr(pyo3::intern!(py, "__dict__"))?;
            if let Ok(entry) = dict.get_item(pyo3::intern!(py, "__call__")) {
                found = Some(entry);
                break;
            }
        }
        let Some(function) = found else {
            return Ok(None);
        };
        // SAFETY: a live object's type pointer compared with a static type.
        if unsafe { ffi::PyFunction_Check(function.as_ptr()) } == 0 {
            return Ok(None);
        }
        // A lookup through the type gives it a version tag if it has none.
        ty.getattr(pyo3::intern!(py, "__call__"))?;
        // SAFETY: as in the type's docs above.
        let tag = unsafe { (*ty.as_type_ptr()).tp_version_tag };
        Ok((tag != 0).then(|| (tag, function.unbind())))
    }

    /// Calls the clock: its reading.
    #[inline]
    pub(crate) fn call<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let object = self.object.bind(py);
        if let Some((tag, function)) = &self.direct {
            // SAFETY: as in the type's docs above.
            let now = unsafe { (*object.get_type().as_type_ptr()).tp_version_tag };
            if now == *tag {
                return function.bind(py).call1((object,));
            }
        }
        object.call0()
    }
}
