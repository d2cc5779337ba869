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
    /// The manager's input limits and overlap rule.
    pub(crate) limits: SessionLimits,
    /// The host's value classes.
    pub(crate) classes: Py<crate::classes::HostClasses>,
}

/// What a manager gives each of its sessions beyond the seed's: vllm-omni
/// 0.30's input limits and overlap rule, from the manager's keywords.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SessionLimits {
    pub(crate) input: duplex_core::InputLimits,
    pub(crate) overlap: duplex_core::overlap::OverlapConfig,
}

/// The manager's keyword arguments that make [`SessionLimits`], each
/// `None` for its default.
pub(crate) struct LimitArgs<'a, 'py> {
    pub(crate) max_pending_input_bytes_per_session: Option<&'a Bound<'py, PyAny>>,
    pub(crate) max_pending_turns_per_session: Option<&'a Bound<'py, PyAny>>,
    pub(crate) overlap_policy: Option<&'a Bound<'py, PyAny>>,
    pub(crate) overlap_short_ack_ms: Option<&'a Bound<'py, PyAny>>,
    pub(crate) overlap_barge_in_ms: Option<&'a Bound<'py, PyAny>>,
}

impl LimitArgs<'_, '_> {
    /// The limits, or the refusal of the first argument that is not one
    /// (`.kind == "invalid_config"`).
    pub(crate) fn read(&self) -> PyResult<SessionLimits> {
        use crate::args::given;
        use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
        fn int<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(
            value: Option<&Bound<'py, PyAny>>,
            name: &str,
            range: &str,
            default: T,
        ) -> PyResult<T> {
            given(value).map_or(Ok(default), |v| {
                crate::args::integer::<T>(v, name, range)
                    .map_err(|e| with_kind(e, "invalid_config"))
            })
        }
        let config = |e| with_kind(e, "invalid_config");
        let input = duplex_core::InputLimits::DEFAULT;
        let bytes = int(
            self.max_pending_input_bytes_per_session,
            "max_pending_input_bytes_per_session",
            "0..2**32",
            input.bytes(),
        )?;
        let turns = int(
            self.max_pending_turns_per_session,
            "max_pending_turns_per_session",
            "0..2**16",
            input.turns(),
        )?;
        let overlap = OverlapConfig::DEFAULT;
        let policy = match given(self.overlap_policy) {
            None => overlap.policy,
            Some(v) => {
                let name = crate::args::text(v, "overlap_policy").map_err(config)?;
                OverlapPolicy::parse(name).ok_or_else(|| {
                    config(crate::args::value_error(format!(
                        "overlap_policy must be \"listen_only\", \"barge_in_on_speech\" or \"thresholds\", got {name:?}"
                    )))
                })?
            }
        };
        Ok(SessionLimits {
            input: duplex_core::InputLimits::new(bytes, turns),
            overlap: OverlapConfig::new(
                policy,
                int(
                    self.overlap_short_ack_ms,
                    "overlap_short_ack_ms",
                    "0..65536",
                    overlap.short_ack_ms,
                )?,
                int(
                    self.overlap_barge_in_ms,
                    "overlap_barge_in_ms",
                    "0..65536",
                    overlap.barge_in_ms,
                )?,
            ),
        })
    }
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
