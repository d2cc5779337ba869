//! [`AdmissionPermit`]: an admission slot held across an await.

use duplex_core::profile::{IdOf, Profile};
use std::fmt;
use std::sync::Arc;

use duplex_core::{Clock, Fence, OpenOptions};

use super::SharedManager;
use crate::error::Error;

/// One reserved admission slot of a [`SharedManager`]: it becomes a session
/// with [`open`](Self::open), or the slot is given back when the permit is
/// dropped, whatever dropped it (the task was cancelled at an await, the
/// handshake failed, a panic unwound). A host admits a client first, awaits
/// its engine warm-up or handshake while holding the permit, then opens.
///
/// # Examples
///
/// ```
/// # use std::sync::Arc;
/// # use duplex_core::*;
/// # use duplex_std::*;
/// let config = ManagerConfig { max_sessions: Some(2), ..ManagerConfig::default() };
/// let m = Arc::new(SharedManager::new(ManualClock::default(), config)?);
/// let permit = m.admit()?;
/// assert_eq!((m.reserved(), m.len()), (1, 0));
/// // ... handshake ...
/// permit.open(Fence::new(Id::new("call-1")?, 0), OpenOptions::default())?;
/// assert_eq!((m.reserved(), m.len()), (1, 1));
///
/// // A permit whose open fails gives its slot back too.
/// let err = m.admit()?.open(Fence::new(Id::new("call-1")?, 1), OpenOptions::default());
/// assert_eq!(err.unwrap_err().kind(), ErrorKind::SessionExists);
/// assert_eq!(m.reserved(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a permit holds an admission slot: open a session with it, or drop it to give the slot back"]
pub struct AdmissionPermit<C: Clock, P: Profile> {
    manager: Arc<SharedManager<C, P>>,
    /// Whether the permit still holds its slot (it hands it to the session
    /// on a successful open).
    holds_slot: bool,
}

impl<C: Clock, P: Profile> AdmissionPermit<C, P> {
    pub(super) fn new(manager: Arc<SharedManager<C, P>>) -> Self {
        AdmissionPermit {
            manager,
            holds_slot: true,
        }
    }

    /// Opens the session in the permit's slot. On success the slot belongs
    /// to the session (freed when it leaves the manager); on error the
    /// permit is dropped and the slot given back.
    ///
    /// # Errors
    ///
    /// `session_exists` (nothing changes).
    ///
    /// See the type-level example.
    pub fn open(
        mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.manager.open_reserved(fence, options)?;
        self.holds_slot = false;
        Ok(())
    }
}

impl<C: Clock, P: Profile> Drop for AdmissionPermit<C, P> {
    fn drop(&mut self) {
        if self.holds_slot {
            self.manager.unreserve(1);
        }
    }
}

impl<C: Clock, P: Profile> fmt::Debug for AdmissionPermit<C, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionPermit")
            .field("holds_slot", &self.holds_slot)
            .finish_non_exhaustive()
    }
}
