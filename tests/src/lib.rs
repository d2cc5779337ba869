//! Test support for duplex-session: the conformance runner behind the
//! `duplex-conformance` binary and the conformance test, and the model
//! harness shared by the property tests and the fuzzer.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod conformance;
pub mod model;

/// The README's examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../../README.md")]
pub mod readme {}

/// The user guides' Rust examples (`docs/`), compiled and run as doctests.
pub mod guides {
    /// The device guide.
    #[doc = include_str!("../../docs/device.md")]
    pub mod device {}
    /// The server guide.
    #[doc = include_str!("../../docs/server.md")]
    pub mod server {}
    /// The core's reference: lifecycle, capacities, storage, features.
    #[doc = include_str!("../../docs/core.md")]
    pub mod core {}
}
