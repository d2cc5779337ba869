//! A completed append's Python record: what the package keeps beside the
//! core's record of it.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::opening::copy_dict;

/// The two shapes of a completed append's Python record, told apart by the
/// low bit of its handle.
///
/// - Compact (bit set): the record's one stage result as a flat tuple of its
///   items, `(key, value, key, value, ...)`. For a record whose fence names
///   the session and its incarnation, whose mode is a `DuplexInputMode`
///   member and whose `final` is a bool (the common case): the fence's
///   position, the mode and the finality are the core's, so the record
///   needs nothing else. A result of one item costs a 2-tuple, not a dict.
/// - Full: `(fence, mode, final, *stage_results)` as given (the results
///   copied as dicts), for anything else.
///
/// Reads hand out new dicts either way (as the seed's copies would be).
pub(crate) struct Record;

impl Record {
    /// The handle bit of a compact record.
    pub(crate) const COMPACT: i64 = 1;

    /// The handle of the record numbered `counter`, compact or full.
    pub(crate) fn handle(counter: i64, compact: bool) -> i64 {
        counter * 2 + i64::from(compact)
    }

    /// A compact record's items, for one result (already copied as a dict).
    pub(crate) fn compact<'py>(result: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let dict = result.cast::<PyDict>()?;
        let mut items = Vec::with_capacity(2 * dict.len());
        for (k, v) in dict.iter() {
            items.push(k);
            items.push(v);
        }
        PyTuple::new(result.py(), items)
    }

    /// The stage results of a record, as new dicts.
    pub(crate) fn results<'py>(
        py: Python<'py>,
        handle: i64,
        record: &Bound<'py, PyTuple>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if handle & Self::COMPACT != 0 {
            let dict = PyDict::new(py);
            let mut items = record.iter();
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                dict.set_item(k, v)?;
            }
            Ok(vec![dict.into_any()])
        } else {
            record.iter().skip(3).map(|r| copy_dict(py, &r)).collect()
        }
    }
}
