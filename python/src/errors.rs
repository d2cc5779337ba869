//! The core's refusals as the exceptions a seed user catches: the seed's
//! class and message text where the seed refuses, the family of PYTHON.md
//! where only a project rule does. Every exception carries `.kind`.

use duplex_core::Error as CoreError;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::classes::mismatch_class;

/// Sets `kind` on the exception's value.
pub(crate) fn with_kind(err: PyErr, kind: &str) -> PyErr {
    Python::attach(|py| {
        // Builtin exception instances take attributes; this cannot fail
        // for the classes raised here.
        let _ = err.value(py).setattr("kind", kind);
    });
    err
}

/// Sets `kind` unless the exception already has one (for errors raised
/// while reading a Python argument, such as a missing attribute).
pub(crate) fn ensure_kind(err: PyErr, kind: &str) -> PyErr {
    Python::attach(|py| {
        let value = err.value(py);
        if !value.hasattr("kind").unwrap_or(true) {
            let _ = value.setattr("kind", kind);
        }
    });
    err
}

/// What an operation was about, for the seed's messages.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Context<'a> {
    /// The session's id.
    pub(crate) session: &'a str,
    /// The operation id (lease operation, completed append).
    pub(crate) operation: Option<&'a str>,
    /// The request id.
    pub(crate) request: Option<&'a str>,
    /// The mode's value.
    pub(crate) mode: Option<&'a str>,
}

/// The exception for a core refusal. Fence mismatches need the fences as
/// Python objects: see [`fence_mismatch`].
pub(crate) fn core_error(e: CoreError, cx: Context<'_>) -> PyErr {
    let kind = e.kind().as_str();
    let err = match e {
        CoreError::UnsupportedMode { .. } => PyValueError::new_err(format!(
            "Duplex input mode {} is not supported by session {}",
            repr(cx.mode.unwrap_or_default()),
            cx.session
        )),
        CoreError::GenerationMismatch { expected, actual } => {
            return generation_mismatch(expected, &actual)
        }
        CoreError::OperationActive => PyValueError::new_err(format!(
            "duplex lease operation already active: {}",
            cx.operation.unwrap_or_default()
        )),
        CoreError::OperationNotActive => PyKeyError::new_err(format!(
            "duplex lease operation is not active: {}",
            cx.operation.unwrap_or_default()
        )),
        CoreError::StaleReservation { .. } => {
            PyRuntimeError::new_err("duplex append reservation is stale")
        }
        CoreError::ResourceConflict { .. } => PyValueError::new_err(format!(
            "Duplex request resource already reserved with different identity: {}",
            cx.request.unwrap_or_default()
        )),
        CoreError::OperationReused => PyValueError::new_err(format!(
            "duplex append operation {} was reused with different metadata",
            repr(cx.operation.unwrap_or_default())
        )),
        CoreError::InvalidId { .. } | CoreError::InvalidConfig { .. } => {
            PyValueError::new_err(format!("duplex session {}: {e}", cx.session))
        }
        // wrong_state, full, and a fence mismatch without its fences.
        _ => PyRuntimeError::new_err(format!("duplex session {}: {e}", cx.session)),
    };
    with_kind(err, kind)
}

/// The seed's `ValueError` for a resume with the wrong generation; `given`
/// is the caller's value as Python prints it (it may not be an integer).
pub(crate) fn generation_mismatch(current: u64, given: &dyn std::fmt::Display) -> PyErr {
    with_kind(
        PyValueError::new_err(format!(
            "duplex lease generation mismatch: expected {current}, got {given}"
        )),
        "generation_mismatch",
    )
}

/// `DuplexFenceMismatchError(expected, actual)`, as the seed raises it.
pub(crate) fn fence_mismatch(expected: &Bound<'_, PyAny>, actual: &Bound<'_, PyAny>) -> PyErr {
    let py = expected.py();
    match mismatch_class(py).and_then(|c| c.call1((expected, actual))) {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// Python's `repr` of a string (the seed formats ids with `!r`).
fn repr(text: &str) -> String {
    Python::attach(|py| {
        pyo3::types::PyString::new(py, text)
            .repr()
            .map_or_else(|_| format!("{text:?}"), |r| r.to_string())
    })
}

/// The refusal of an operation on a closed session.
pub(crate) fn gone() -> PyErr {
    with_kind(
        PyRuntimeError::new_err("duplex session is closed: only its final facts can be read"),
        "wrong_state",
    )
}

/// A manager's refusal of an open, as the seed words it.
pub(crate) fn std_error<I>(e: duplex_std::Error<I>, id: &str) -> PyErr {
    match e {
        duplex_std::Error::SessionExists { .. } => with_kind(
            pyo3::exceptions::PyValueError::new_err(format!("Duplex session already exists: {id}")),
            "session_exists",
        ),
        duplex_std::Error::CapacityExhausted { limit } => with_kind(
            PyRuntimeError::new_err(format!("duplex_session_capacity_exhausted: limit={limit}")),
            "capacity_exhausted",
        ),
        duplex_std::Error::Session(e) => core_error(
            e,
            Context {
                session: id,
                ..Context::default()
            },
        ),
        _ => gone(),
    }
}
