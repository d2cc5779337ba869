//! The session's operations, with the seed's signatures: each reads its
//! Python arguments and the clock first, then locks the session, runs the
//! core's operation, and answers with the seed's values. One file per
//! part of the session (each its own `#[pymethods]` block).

mod append;
mod close;
mod input;
mod lease;
mod requests;
