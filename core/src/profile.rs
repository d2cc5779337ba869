//! Capacity profiles: the compile-time sizes of a session's tables, named in
//! one place.
//!
//! A session's tables are fixed-capacity; their sizes are the const generic
//! parameters of [`Session`] and friends. Each profile below
//! is a set of named constants for those parameters; the defaults of every
//! generic type in this workspace are the [`conformance`] profile.
//!
//! | parameter | constant | [`conformance`] (default) | [`device`] | [`server`] | table |
//! |---|---|---:|---:|---:|---|
//! | `R` | `RESOURCES` | 8 | 4 | 16 | request resources a session owns |
//! | `B` | `BINDINGS` | 4 | 2 | 8 | stage bindings (one per stage) |
//! | `D` | `COMPLETED` | 8 | 4 | 256 | completed-append records (runtime limit `1..=D`) |
//! | `A` | `ACTIVE_OPS` | 4 | 2 | 8 | active lease operations |
//! | `L` | `ID_LEN` | 32 | 16 | 128 | bytes of a session, request or operation id |
//! | `K` | `STAGE_RESULTS` | 4 | 2 | 1 | stage results of one completed append |
//!
//! Tables hold at most 255 entries (256 completed appends), ids at most 255
//! bytes and a completed append at most 7 results: one-byte lengths (and
//! ids that mark their length in their own last bytes) keep a session
//! small. A profile outside those bounds fails to compile.
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
use crate::{AnySession, Session};

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

/// Real sizes on a server: vllm-omni's control plane names sessions,
/// requests and operations with UUID-based ids (74, 46 and 43 bytes) and
/// keeps the seed's window of 256 completed appends per session. Each
/// completed append keeps one result: a handle to the stage results, which
/// such a host keeps in its own objects (the Python package does). A lookup
/// in a full window of 256 is a binary search over the op-id index.
pub mod server {
    /// Request resources a session owns (`R`): twice the seed's own
    /// workloads' most (4 stages bound, 2 requests each).
    pub const RESOURCES: usize = 16;
    /// Stage bindings (`B`).
    pub const BINDINGS: usize = 8;
    /// Completed-append records (`D`): the seed's default limit.
    pub const COMPLETED: usize = 256;
    /// Active lease operations (`A`).
    pub const ACTIVE_OPS: usize = 8;
    /// Bytes of an id (`L`).
    pub const ID_LEN: usize = 128;
    /// Stage results of one completed append (`K`): a handle.
    pub const STAGE_RESULTS: usize = 1;
}

/// A session with the [`server`] profile.
///
/// ```
/// use duplex_core::profile::{server, ServerSession};
/// use duplex_core::{Fence, Id, Instant, OpenOptions};
///
/// let id = "session-6f1c2a9e-6a3b-4f0e-9a57-2d8c1e4b7f30-control-plane-duplex-00";
/// let fence = Fence::new(Id::<{ server::ID_LEN }>::new(id)?, 0);
/// let s = ServerSession::open_with_capacities(fence, OpenOptions::default(), Instant::ZERO)?;
/// assert_eq!(s.completed_limit(), 256);
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub type ServerSession<S = Open, SC = (), RC = ()> = Session<
    S,
    SC,
    RC,
    { server::RESOURCES },
    { server::BINDINGS },
    { server::COMPLETED },
    { server::ACTIVE_OPS },
    { server::ID_LEN },
    { server::STAGE_RESULTS },
>;

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

/// A [`DeviceSession`] in any state, held in one variable (firmware that
/// keeps a table of sessions, or restores one from a snapshot).
///
/// ```
/// use duplex_core::profile::{DeviceAnySession, DeviceSession};
/// use duplex_core::*;
///
/// let f = Fence::new(Id::new("mic")?, 0);
/// let mut s = DeviceAnySession::from(DeviceSession::open_with_capacities(f.clone(), OpenOptions::default(), Instant::ZERO)?);
/// s.detach(&f, Instant::from_millis(20))?;
/// assert_eq!(s.kind(), StateKind::Detached);
/// # Ok::<(), Error>(())
/// ```
pub type DeviceAnySession<SC = (), RC = ()> = AnySession<
    SC,
    RC,
    { device::RESOURCES },
    { device::BINDINGS },
    { device::COMPLETED },
    { device::ACTIVE_OPS },
    { device::ID_LEN },
    { device::STAGE_RESULTS },
>;
