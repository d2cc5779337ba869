//! The two compiled profiles and the dispatch between them.
//!
//! Hosts get the server profile: ids up to 128 bytes (vllm-omni's UUID
//! session ids are 74 bytes), the seed's window of 256 completed appends,
//! 16 request resources, 8 stage bindings, 8 active lease operations. The
//! conformance profile is the one the traces are written for (32-byte ids,
//! 8 resources, 4 bindings, 8 completed appends, 4 operations, 4 results).

use duplex_core::profile::{conformance as c, server as s};
use duplex_core::AnySession;

/// A session of the server profile. Each completed append keeps one
/// result: the handle of its record on the Python side.
pub(crate) type ServerAny = AnySession<
    (),
    (),
    { s::RESOURCES },
    { s::BINDINGS },
    { s::COMPLETED },
    { s::ACTIVE_OPS },
    { s::ID_LEN },
    { s::STAGE_RESULTS },
>;

/// A session of the conformance profile.
pub(crate) type ConformanceAny = AnySession<
    (),
    (),
    { c::RESOURCES },
    { c::BINDINGS },
    { c::COMPLETED },
    { c::ACTIVE_OPS },
    { c::ID_LEN },
    { c::STAGE_RESULTS },
>;

/// Which profile a manager's sessions have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// Real sizes (the default).
    Server,
    /// The traces' sizes.
    Conformance,
}

impl Profile {
    /// The completed-append capacity.
    pub(crate) fn completed(self) -> usize {
        match self {
            Profile::Server => s::COMPLETED,
            Profile::Conformance => c::COMPLETED,
        }
    }

    /// Stage results one completed append may carry (`None`: any number;
    /// the server profile keeps them in Python).
    pub(crate) fn stage_results(self) -> Option<usize> {
        match self {
            Profile::Server => None,
            Profile::Conformance => Some(c::STAGE_RESULTS),
        }
    }

    /// The profile's name, as the constructor takes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Profile::Server => "server",
            Profile::Conformance => "conformance",
        }
    }
}

/// A session of either profile (boxed: a server session is about 45 KiB).
#[derive(Debug)]
pub(crate) enum CoreAny {
    Server(Box<ServerAny>),
    Conformance(Box<ConformanceAny>),
}

/// Runs `$body` with `$s` bound to the session of whichever profile
/// (`&mut` or `&` as `$core` is).
macro_rules! on {
    ($core:expr, $s:ident => $body:expr) => {
        match $core {
            $crate::core::CoreAny::Server($s) => $body,
            $crate::core::CoreAny::Conformance($s) => $body,
        }
    };
}

pub(crate) use on;
