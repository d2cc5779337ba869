//! [`Expiry`]: what a host must do about a session whose lease ran out.

use crate::fence::Fence;
use crate::lease::CloseReason;
use crate::profile::{Conformance, Tables, TablesOf};
use crate::requests::RequestIds;

/// A session whose lease expired, moved to `Closing` by
/// [`AnySession::expire`](crate::AnySession::expire): the engine must
/// cancel `submitted` and drop `reserved`, then the host finalizes it.
///
/// # Examples
///
/// ```
/// # use duplex_core::*;
/// let f = Fence::new(Id::new("s")?, 0);
/// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
/// s.detach(&f, Instant::ZERO)?;
/// let expiry = s.expire(Instant::from_millis(30_000)).unwrap();
/// assert_eq!(expiry.reason, CloseReason::DisconnectGraceExpired);
/// assert_eq!(expiry.session, f.session);
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "an expired session's requests must be cancelled in the engine, then the session finalized"]
pub struct Expiry<T: Tables = TablesOf<Conformance>> {
    /// The session.
    pub session: T::Id,
    /// Its fence.
    pub fence: Fence<T::Id>,
    /// Lease generation after the close bumped it.
    pub lease_generation: u64,
    /// `disconnect_grace_expired` or `idle_ttl_expired`.
    pub reason: CloseReason,
    /// Submitted request ids, to cancel in the engine.
    pub submitted: RequestIds<T>,
    /// Reserved, never submitted request ids, to drop.
    pub reserved: RequestIds<T>,
}
