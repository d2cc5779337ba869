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

pub use crate::base::{conformance, device, server};

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
