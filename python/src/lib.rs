//! `duplex_session._native`: the session and the manager of the Python
//! package `duplex_session`, on duplex-std's `SessionManager` (see
//! `host`). The seed's plain value types,
//! enums and exceptions are Python (`_types.py`); the state is here.
//!
//! Every operation reads its Python arguments (and the clock) before it
//! takes a lock, so neither a raising clock nor Python code in an argument's
//! attributes can run while a session is locked; a raising clock changes
//! nothing.

// PyO3's macros generate `unsafe` blocks for the CPython ABI; the crate's
// own is in one module, `shapes` (which says why), and `deny` catches any
// other.
#![deny(unsafe_code)]

mod args;
mod classes;
mod convert;
mod errors;
mod host;
mod lease;
mod manager;
mod opening;
mod ops;
mod patch;
mod records;
mod session;
mod shapes;
mod views;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
#[allow(unsafe_code)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<session::PySession>()?;
    m.add_class::<manager::PyManager>()?;
    m.add_class::<classes::HostClasses>()?;
    shapes::wrap_native(&m.py().get_type::<session::PySession>())?;
    shapes::wrap_native(&m.py().get_type::<manager::PyManager>())?;
    m.add_function(wrap_pyfunction!(shapes::wrap_init, m)?)?;
    m.add("SERVER_ID_LEN", duplex_core::profile::server::ID_LEN)?;
    m.add("SERVER_COMPLETED", duplex_core::profile::server::COMPLETED)?;
    Ok(())
}
