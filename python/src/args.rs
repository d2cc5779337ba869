//! Argument values the package reads itself, so that a value of the wrong
//! type or out of range is refused like every other refusal: with the
//! exception a Python user expects and `.kind = "invalid_argument"`. (A
//! parameter PyO3 converted, such as a `u32`, would be refused before the
//! package's code runs, by PyO3's binding; `shapes` gives those refusals
//! their kind, but a message of the package's own names the rule.)

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

use crate::errors::with_kind;

/// The kind of a call the package refuses for its arguments' shape or type.
pub(crate) const INVALID_ARGUMENT: &str = "invalid_argument";

/// `TypeError` with `.kind = "invalid_argument"`.
pub(crate) fn type_error(message: String) -> PyErr {
    with_kind(PyTypeError::new_err(message), INVALID_ARGUMENT)
}

/// `ValueError` with `.kind = "invalid_argument"`.
pub(crate) fn value_error(message: String) -> PyErr {
    with_kind(PyValueError::new_err(message), INVALID_ARGUMENT)
}

/// A `str` argument, as the Python string.
pub(crate) fn string<'a, 'py>(
    value: &'a Bound<'py, PyAny>,
    name: &str,
) -> PyResult<&'a Bound<'py, PyString>> {
    value
        .cast::<PyString>()
        .map_err(|_| type_error(format!("{name} must be a str, got {}", type_name(value))))
}

/// A `str` argument, as a string slice.
pub(crate) fn text<'a>(value: &'a Bound<'_, PyAny>, name: &str) -> PyResult<&'a str> {
    string(value, name)?.to_str()
}

/// An integer argument in the range of `T` (a `TypeError` for a
/// non-integer, a `ValueError` naming the range for one out of it).
pub(crate) fn integer<'py, T>(value: &Bound<'py, PyAny>, name: &str, range: &str) -> PyResult<T>
where
    T: pyo3::conversion::FromPyObjectOwned<'py>,
{
    if !value.is_instance_of::<PyInt>() {
        return Err(type_error(format!(
            "{name} must be an int, got {}",
            type_name(value)
        )));
    }
    value
        .extract::<T>()
        .map_err(|_| value_error(format!("{name} must be an integer in {range}, got {value}")))
}

/// An optional argument that was passed, and not as `None`.
pub(crate) fn given<'a, 'py>(
    value: Option<&'a Bound<'py, PyAny>>,
) -> Option<&'a Bound<'py, PyAny>> {
    value.filter(|v| !v.is_none())
}

/// A stage id: an `int` in `0..2**32` (the core's `u32`).
pub(crate) fn stage_id(value: &Bound<'_, PyAny>) -> PyResult<u32> {
    integer(value, "stage_id", "0..2**32")
}

/// A `bool` argument (an `int` 0 or 1 too, as Python compares them equal).
pub(crate) fn flag(value: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(b.is_true());
    }
    match value.extract::<i64>() {
        Ok(0) if value.is_instance_of::<PyInt>() => Ok(false),
        Ok(1) if value.is_instance_of::<PyInt>() => Ok(true),
        _ => Err(type_error(format!(
            "{name} must be a bool, got {}",
            type_name(value)
        ))),
    }
}

/// The name of a value's type, for messages.
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "object".to_owned(), |n| n.to_string())
}

/// The `str` items of an iterable of ids, in order. Items of another type
/// name no session or request, so they are skipped, as the seed's set and
/// dict lookups skip them; a value that is not iterable is refused.
pub(crate) fn str_items<'py>(
    value: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Vec<Bound<'py, PyString>>> {
    let items = value.try_iter().map_err(|_| {
        type_error(format!(
            "{name} must be an iterable of str, got {}",
            type_name(value)
        ))
    })?;
    let mut out = Vec::new();
    for item in items {
        let item = item.map_err(|e| with_kind(e, INVALID_ARGUMENT))?;
        if let Ok(s) = item.cast_into::<PyString>() {
            out.push(s);
        }
    }
    Ok(out)
}

/// The text of each of `items` (borrowed from the Python strings, which
/// keep their UTF-8 form).
pub(crate) fn texts<'a>(items: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    items.iter().map(|s| s.to_str()).collect()
}
