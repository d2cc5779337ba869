//! The gateway's sessions: the core's conformance sizes, with ids of up to
//! 128 bytes. vllm-omni's own clients name sessions with 40 to 54 bytes (a
//! prefix and a uuid's hex), and the conformance profile's 32-byte ids
//! refused them; 128 bytes leave room for the ids an application derives
//! (a tenant, a user and a call). A session holds about 20 ids, so each
//! takes 3,664 bytes in the manager, against 2,256 with 64-byte ids and
//! 1,552 with 32-byte ones (BENCHMARKS.md).

use duplex_core::profile::{conformance, Capacities, Profile};

use crate::server::ownership::Owner;

/// The most bytes of a session, request or operation id.
///
/// ```
/// assert!(duplex_gateway::Id::new(&"x".repeat(duplex_gateway::profile::ID_LEN)).is_ok());
/// ```
pub const ID_LEN: usize = 128;

/// A session, request or operation id of the gateway.
///
/// ```
/// let id = duplex_gateway::Id::new(&format!("session-{}", "0123456789abcdef".repeat(3)))?;
/// assert_eq!(id.as_str().len(), 56);
/// assert!(duplex_gateway::Id::new(&"x".repeat(129)).is_err());
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub type Id = duplex_core::Id<ID_LEN>;

/// The profile of the gateway's sessions: each keeps its [`Owner`] (what
/// its resume tokens are made from), in tables of the conformance sizes.
///
/// ```
/// use duplex_core::profile::{Profile, Tables};
/// use duplex_gateway::GatewayProfile;
/// assert_eq!(<<GatewayProfile as Profile>::Tables as Tables>::ID_LEN, 128);
/// assert_eq!(<<GatewayProfile as Profile>::Tables as Tables>::RESOURCES, 8);
/// ```
#[derive(Debug)]
pub struct GatewayProfile;

impl Profile for GatewayProfile {
    type SessionConfig = Owner;
    type RuntimeConfig = ();
    type Tables = Capacities<
        { conformance::RESOURCES },
        { conformance::BINDINGS },
        { conformance::COMPLETED },
        { conformance::ACTIVE_OPS },
        ID_LEN,
        { conformance::STAGE_RESULTS },
    >;
}

/// A fence of a gateway session.
///
/// ```
/// let f = duplex_gateway::profile::Fence::new(duplex_gateway::Id::new("call-1")?, 0);
/// assert_eq!(f.session.as_str(), "call-1");
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub type Fence = duplex_core::Fence<Id>;

/// What the gateway's manager refuses.
///
/// ```
/// let e = duplex_gateway::profile::ManagerError::UnknownSession {
///     session: duplex_gateway::Id::new("call-1")?,
/// };
/// assert_eq!(e.kind().as_str(), "unknown_session");
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub type ManagerError = duplex_std::Error<Id>;
