//! Test support for duplex-session: the conformance runner behind the
//! `duplex-conformance` binary and the conformance test.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod conformance;

/// The README's examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../../README.md")]
pub mod readme {}
