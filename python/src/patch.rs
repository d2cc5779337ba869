//! Shadowed methods (a test's monkeypatch), as on the seed's dataclass.
//!
//! Assigning a method's name on a session or manager object stores the
//! value in the object's `__dict__` (`views`), where attribute lookup finds
//! it first, and sets the object's `patched` flag. The seed's methods that
//! call other methods on `self` (or, in the manager, on the session) then
//! reach the shadow: when the flag is set and one of the methods a
//! composite calls is shadowed, the composite runs as the seed writes it,
//! through the object's attributes. Without a shadow nothing here runs but
//! the flag's load.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Whether one of `names` is shadowed on `object` (its `__dict__` has it).
pub(crate) fn shadowed(object: &Bound<'_, PyAny>, names: &[&str]) -> bool {
    let Ok(dict) = object.getattr(intern!(object.py(), "__dict__")) else {
        return false;
    };
    names
        .iter()
        .any(|name| dict.contains(*name).unwrap_or(false))
}

/// Keyword arguments for a call through the object.
pub(crate) fn kwargs<'py>(
    py: Python<'py>,
    items: &[(&str, &Bound<'py, PyAny>)],
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, value) in items {
        out.set_item(*name, value)?;
    }
    Ok(out)
}
