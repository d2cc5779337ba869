//! Capacity profiles: the compile-time sizes of a session's tables, named in
//! one place.
//!
//! A session's tables are fixed-capacity; their sizes are the const generic
//! parameters of [`Session`] and friends. Each profile below
//! is a set of named constants for those parameters; the defaults of every
//! generic type in this workspace are the [`conformance`] profile.
//!
//! | parameter | constant | [`conformance`] (default) | [`device`] | table |
//! |---|---|---:|---:|---|
//! | `R` | `RESOURCES` | 8 | 4 | request resources a session owns |
//! | `B` | `BINDINGS` | 4 | 2 | stage bindings (one per stage) |
//! | `D` | `COMPLETED` | 8 | 4 | completed-append records (runtime limit `1..=D`) |
//! | `A` | `ACTIVE_OPS` | 4 | 2 | active lease operations |
//! | `L` | `ID_LEN` | 32 | 16 | bytes of a session, request or operation id |
//! | `K` | `STAGE_RESULTS` | 4 | 2 | stage results of one completed append |
//!
//! Every table holds at most 255 entries and ids at most 255 bytes (one-byte
//! lengths keep a session small); a profile outside those bounds fails to
//! compile.
//!
//! # Examples
//!
//! ```
//! use duplex_core::profile::{device, DeviceSession};
//! use duplex_core::{Fence, Id, Instant, OpenOptions};
//!
//! let fence = Fence::new(Id::<{ device::ID_LEN }>::new("mic-0")?, 0);
//! let s = DeviceSession::open_with_capacities(fence, OpenOptions::default(), Instant::ZERO)?;
//! assert_eq!(s.completed_limit(), device::COMPLETED);
//! # Ok::<(), duplex_core::Error>(())
//! ```

use crate::session::state::Open;
use crate::Session;

/// The conformance profile, and the default of every generic type: the
/// sizes the conformance traces are written for.
pub mod conformance {
    /// Request resources a session owns (`R`).
    pub const RESOURCES: usize = 8;
    /// Stage bindings (`B`).
    pub const BINDINGS: usize = 4;
    /// Completed-append records (`D`).
    pub const COMPLETED: usize = 8;
    /// Active lease operations (`A`).
    pub const ACTIVE_OPS: usize = 4;
    /// Bytes of an id (`L`).
    pub const ID_LEN: usize = 32;
    /// Stage results of one completed append (`K`).
    pub const STAGE_RESULTS: usize = 4;
}

/// A small device: a microphone-and-speaker node with one or two engine
/// stages (the profile `tests/no-std-check` builds).
pub mod device {
    /// Request resources a session owns (`R`).
    pub const RESOURCES: usize = 4;
    /// Stage bindings (`B`).
    pub const BINDINGS: usize = 2;
    /// Completed-append records (`D`).
    pub const COMPLETED: usize = 4;
    /// Active lease operations (`A`).
    pub const ACTIVE_OPS: usize = 2;
    /// Bytes of an id (`L`).
    pub const ID_LEN: usize = 16;
    /// Stage results of one completed append (`K`).
    pub const STAGE_RESULTS: usize = 2;
}

/// A session with the [`device`] profile (and no opaque configurations by
/// default).
pub type DeviceSession<S = Open, SC = (), RC = ()> = Session<
    S,
    SC,
    RC,
    { device::RESOURCES },
    { device::BINDINGS },
    { device::COMPLETED },
    { device::ACTIVE_OPS },
    { device::ID_LEN },
    { device::STAGE_RESULTS },
>;
