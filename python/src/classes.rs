//! The Python classes the package builds and checks.
//!
//! Two families, as in the seed:
//! - the seed module's own classes (`DuplexInputAppend`,
//!   `DuplexAppendReservation`, `DuplexCompletedAppend`,
//!   `DuplexStageBinding`, `DuplexRequestResource`,
//!   `DuplexFenceMismatchError`): always the package's (`duplex_session._types`),
//!   imported once;
//! - the companions the seed imports from its host's sibling modules
//!   (`messages.DuplexFence`, `contracts.DuplexInputMode` and
//!   `DuplexRuntimeCapabilities`, `lease.DuplexLeaseActivity`,
//!   `DuplexLeaseConfig`, `DuplexLeaseState` and `DuplexSessionExpiry`):
//!   a [`HostClasses`], the package's own by default, a host's once its
//!   `duplex_session.py` binds the package to them (`duplex_session._host`).
//!   Each manager and session holds the set it was made with.
//!
//! The conversions (`convert`) build values of them and the refusals
//! (`errors`) raise them; this module depends on neither.

use duplex_core::{Activity, InputMode};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

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
    input_append_class => "DuplexInputAppend",
    reservation_class => "DuplexAppendReservation",
    completed_class => "DuplexCompletedAppend",
    binding_class => "DuplexStageBinding",
    resource_class => "DuplexRequestResource",
    mismatch_class => "DuplexFenceMismatchError",
}

/// The value classes of one host: what its sessions take (a fence, a mode,
/// an activity, a lease configuration, capabilities) and give (fences,
/// modes, `session.lease`, expiries). Made by `duplex_session._host`, once
/// for the package's own classes and once for each host that binds the
/// package to its own modules.
#[pyclass(frozen, name = "HostClasses", module = "duplex_session._native")]
pub(crate) struct HostClasses {
    /// The package's own set (positional construction is safe: the field
    /// order is the package's).
    own: bool,
    fence: Py<PyType>,
    mode: Py<PyType>,
    activity: Py<PyType>,
    lease_config: Py<PyType>,
    lease_view: Py<PyType>,
    expiry: Py<PyType>,
    capabilities: Py<PyType>,
    /// The mode members with the core's modes (a host's enum may lack a
    /// member; the core's mode is then not one its sessions can name).
    modes: Vec<(Py<PyAny>, InputMode)>,
    activities: Vec<(Py<PyAny>, Activity)>,
}

/// The enum class's members for the core's values `all`, by value; a
/// value the class does not have is left out.
fn members<T: Copy>(
    class: &Bound<'_, PyType>,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Vec<(Py<PyAny>, T)> {
    all.iter()
        .filter_map(|&v| class.call1((name(v),)).ok().map(|m| (m.unbind(), v)))
        .collect()
}

#[pymethods]
impl HostClasses {
    /// The set; `lease_view` is the class of `session.lease` (a view of the
    /// session's lease that is an instance of the host's `DuplexLeaseState`).
    #[new]
    #[pyo3(signature = (*, fence, input_mode, activity, lease_config, lease_view, expiry, capabilities, own = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        fence: Bound<'_, PyType>,
        input_mode: Bound<'_, PyType>,
        activity: Bound<'_, PyType>,
        lease_config: Bound<'_, PyType>,
        lease_view: Bound<'_, PyType>,
        expiry: Bound<'_, PyType>,
        capabilities: Bound<'_, PyType>,
        own: bool,
    ) -> Self {
        HostClasses {
            own,
            modes: members(&input_mode, &InputMode::ALL, InputMode::as_str),
            activities: members(&activity, &Activity::ALL, Activity::as_str),
            fence: fence.unbind(),
            mode: input_mode.unbind(),
            activity: activity.unbind(),
            lease_config: lease_config.unbind(),
            lease_view: lease_view.unbind(),
            expiry: expiry.unbind(),
            capabilities: capabilities.unbind(),
        }
    }

    /// The fence class (for `repr` and tests).
    #[getter]
    fn fence_class(&self, py: Python<'_>) -> Py<PyType> {
        self.fence.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "HostClasses(fence={}, own={})",
            self.fence.bind(py).fully_qualified_name()?,
            self.own
        ))
    }
}

impl HostClasses {
    /// The package's own set (`duplex_session._host.OWN`), imported once.
    pub(crate) fn own(py: Python<'_>) -> PyResult<Py<HostClasses>> {
        static OWN: PyOnceLock<Py<HostClasses>> = PyOnceLock::new();
        OWN.get_or_try_init(py, || {
            py.import("duplex_session._host")?
                .getattr("OWN")?
                .cast_into::<HostClasses>()
                .map(Bound::unbind)
                .map_err(PyErr::from)
        })
        .map(|c| c.clone_ref(py))
    }

    /// The set a manager class was bound to (its `_duplex_classes`), or
    /// the package's own for the package's class.
    pub(crate) fn of_class(cls: &Bound<'_, PyType>) -> PyResult<Py<HostClasses>> {
        let py = cls.py();
        match cls.getattr(pyo3::intern!(py, "_duplex_classes")) {
            Ok(set) => Ok(set.cast_into::<HostClasses>()?.unbind()),
            Err(_) => Self::own(py),
        }
    }

    /// The set whose fence class is `type(fence)` (a session made by its
    /// own constructor), or the package's own.
    pub(crate) fn of_fence(fence: &Bound<'_, PyAny>) -> PyResult<Py<HostClasses>> {
        let py = fence.py();
        let by_fence = py.import("duplex_session._host")?.getattr("BY_FENCE")?;
        let by_fence = by_fence.cast::<PyDict>()?;
        match by_fence.get_item(fence.get_type())? {
            Some(set) => Ok(set.cast_into::<HostClasses>()?.unbind()),
            None => Self::own(py),
        }
    }

    /// Whether this is the package's own set.
    pub(crate) fn is_own(&self) -> bool {
        self.own
    }

    pub(crate) fn fence<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.fence.bind(py)
    }

    pub(crate) fn mode<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.mode.bind(py)
    }

    pub(crate) fn activity<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.activity.bind(py)
    }

    pub(crate) fn lease_config<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.lease_config.bind(py)
    }

    pub(crate) fn lease_view<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.lease_view.bind(py)
    }

    pub(crate) fn expiry<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.expiry.bind(py)
    }

    pub(crate) fn capabilities<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.capabilities.bind(py)
    }

    /// The mode members, by identity first.
    pub(crate) fn modes(&self) -> &[(Py<PyAny>, InputMode)] {
        &self.modes
    }

    /// The activity members, by identity first.
    pub(crate) fn activities(&self) -> &[(Py<PyAny>, Activity)] {
        &self.activities
    }
}
