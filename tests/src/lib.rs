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
