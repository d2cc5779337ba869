//! The seed's classes (`duplex_session._types`), each imported once. The
//! conversions (`convert`) build values of them and the refusals
//! (`errors`) raise them; this module depends on neither.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// A class of `duplex_session._types`, imported once.
pub(crate) fn class<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyType>> {
    cell.import(py, "duplex_session._types", name)
}

macro_rules! classes {
    ($($fn:ident => $name:literal),* $(,)?) => {
        $(
            pub(crate) fn $fn(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
                static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
                class(py, &CELL, $name)
            }
        )*
    };
}

classes! {
    fence_class => "DuplexFence",
    input_append_class => "DuplexInputAppend",
    reservation_class => "DuplexAppendReservation",
    completed_class => "DuplexCompletedAppend",
    binding_class => "DuplexStageBinding",
    resource_class => "DuplexRequestResource",
    expiry_class => "DuplexSessionExpiry",
    mismatch_class => "DuplexFenceMismatchError",
    mode_class => "DuplexInputMode",
    activity_class => "DuplexLeaseActivity",
    lease_config_class => "DuplexLeaseConfig",
    capabilities_class => "DuplexRuntimeCapabilities",
}
