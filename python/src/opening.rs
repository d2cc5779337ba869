//! What a session is opened with: the seed's arguments converted (the
//! lease configuration, copies of the configs).

use duplex_core::Instant;
use pyo3::prelude::*;
use pyo3::type_object::PyTypeInfo;
use pyo3::types::{PyDict, PyFloat, PyInt, PyString};

use crate::convert::{self, FenceArg};
use crate::errors::{core_error, with_kind, Context};

/// Everything a session is opened with.
pub(crate) struct Opening<'py> {
    pub(crate) fence: FenceArg<'py>,
    pub(crate) now: Instant,
    pub(crate) capabilities: Bound<'py, PyAny>,
    pub(crate) session_config: Option<Bound<'py, PyAny>>,
    pub(crate) runtime_config: Option<Bound<'py, PyAny>>,
    pub(crate) lease_config: Bound<'py, PyAny>,
    /// `lease_config` converted.
    pub(crate) lease: duplex_core::LeaseConfig,
    /// The manager's input limits.
    pub(crate) input_limits: duplex_core::InputLimits,
    /// The host's value classes.
    pub(crate) classes: Py<crate::classes::HostClasses>,
}

pub(crate) fn lease_of(config: &Bound<'_, PyAny>) -> PyResult<duplex_core::LeaseConfig> {
    let py = config.py();
    let read = |name: &Bound<'_, PyString>| -> PyResult<Option<f64>> {
        config
            .getattr(name)
            .and_then(|v| {
                if let Ok(f) = v.cast_exact::<PyFloat>() {
                    return Ok(Some(f.value()));
                }
                if v.is_exact_instance_of::<PyInt>() {
                    // A whole number of seconds, read without a float made.
                    if let Ok(i) = v.extract::<i64>() {
                        return Ok(Some(i as f64));
                    }
                }
                v.extract()
            })
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
