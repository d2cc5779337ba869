//! Migration for [`SharedManager`]: export and import lock the session's
//! shard and keep the global admission count exact.

use duplex_core::id::IdText;
use duplex_core::profile::{IdOf, Profile};
use std::sync::atomic::Ordering;

use duplex_core::{AnySession, Clock, Fence};

use super::{lock, SharedManager};
use crate::error::Error;
use crate::manager::NotImported;

impl<C: Clock, P: Profile> SharedManager<C, P> {
    /// Takes a session out, with its requests, and frees its admission
    /// slot. See [`SessionManager::export`](crate::SessionManager::export).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::export`](crate::SessionManager::export).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("s")?, 0), OpenOptions::default())?;
    /// let session = m.export("s")?;
    /// assert_eq!((m.len(), m.reserved(), session.kind()), (0, 0, StateKind::Open));
    /// assert_eq!(m.export("s").unwrap_err().kind(), ErrorKind::UnknownSession);
    /// # drop(session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the exported session owns its requests: import it into another manager or close it, or they leak"]
    pub fn export(&self, session: impl AsRef<str>) -> Result<AnySession<P>, Error<IdOf<P>>> {
        let session = IdOf::<P>::new(session.as_ref())?;
        let out = lock(self.shard(&session)).export(&session)?;
        self.left(1);
        Ok(out)
    }

    /// Admits a migrated session under a new `incarnation`, taking an
    /// admission slot. See [`SessionManager::import`](crate::SessionManager::import).
    ///
    /// # Errors
    ///
    /// As [`SessionManager::import`](crate::SessionManager::import): the
    /// unchanged session comes back, and no slot is taken.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let (a, b) = (SharedManager::new(ManualClock::default(), config)?, SharedManager::new(ManualClock::default(), config)?);
    /// let f = Fence::new(Id::new("s")?, 0);
    /// a.open(f.clone(), OpenOptions::default())?;
    /// b.open(Fence::new(Id::new("other")?, 0), OpenOptions::default())?;
    ///
    /// let session = a.export("s")?;
    /// assert_eq!(a.reserved(), 0);
    /// // `b` is full: the session comes back untouched, and goes home.
    /// let refused = b.import(session, 1).unwrap_err();
    /// assert_eq!(refused.error.kind(), ErrorKind::CapacityExhausted);
    /// assert_eq!((b.len(), b.reserved(), refused.session.fence().incarnation), (1, 1, 0));
    /// let moved = a.import(refused.session, 1)?;
    /// assert_eq!((moved.incarnation, a.len(), a.reserved()), (1, 1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    // A refused session comes back by value, owning its requests; boxing
    // it would allocate on every refusal.
    #[allow(clippy::result_large_err)]
    pub fn import(
        &self,
        session: AnySession<P>,
        incarnation: u64,
    ) -> Result<Fence<IdOf<P>>, NotImported<P>> {
        let mut shard = lock(self.shard(session.id()));
        // `session_exists` before `capacity_exhausted`, as for `open`.
        if shard.get(session.id()).is_some() {
            let error = Error::SessionExists {
                session: session.id().clone(),
            };
            return Err(NotImported { error, session });
        }
        if let Err(error) = self.reserve_slot() {
            return Err(NotImported { error, session });
        }
        match shard.import(session, incarnation) {
            Ok(fence) => {
                self.sessions.fetch_add(1, Ordering::AcqRel);
                self.deadline_may_be_earlier(&shard, &fence.session);
                Ok(fence)
            }
            Err(refused) => {
                self.unreserve(1);
                Err(refused)
            }
        }
    }
}
