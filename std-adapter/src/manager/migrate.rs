//! Migration between managers (between hosts, or across a restart): a
//! session leaves one manager with everything it owns and enters another
//! under a new incarnation, so messages still addressed to the old owner
//! are refused there (the fence is the fencing token).

// A refused import hands the session back by value inside `NotImported`:
// the caller keeps it (to retry, or to put it back where it came from), so
// boxing it would only allocate.
#![allow(clippy::result_large_err)]

use duplex_core::id::IdText;
use duplex_core::profile::{Conformance, IdOf, Profile};
use std::convert::Infallible;

use duplex_core::{AnySession, Clock, Fence, Instant};

use super::SessionManager;
use crate::error::Error;
use crate::metrics;

/// A session [`import`](SessionManager::import) refused, handed back
/// unchanged: it still owns its requests, so it must be imported elsewhere
/// or closed, never dropped.
///
/// # Examples
///
/// See [`SessionManager::import`].
#[derive(Debug, thiserror::Error)]
#[error("session not imported: {error}")]
#[must_use = "the refused session still owns its requests: import it elsewhere or close it"]
pub struct NotImported<P: Profile = Conformance> {
    /// Why the import was refused.
    #[source]
    pub error: Error<IdOf<P>>,
    /// The session, exactly as it was offered.
    pub session: AnySession<P>,
}

impl<C, P: Profile> SessionManager<C, P> {
    /// Takes a session out of this manager, in whatever state it is, for
    /// another manager to [`import`](Self::import): nothing is released,
    /// its requests travel with it. To move it between processes, write it
    /// with `AnySession::snapshot` (core feature `serde`, which this
    /// crate's feature `serde` enables) and read it back with
    /// `AnySession::restore`.
    ///
    /// # Errors
    ///
    /// `invalid_id`, `unknown_session` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// m.bind(&f, 0, "tts")?;
    /// let session = m.export("s")?;
    /// assert!(m.is_empty());
    /// assert!(session.resource_request_ids(None, None)?.contains("tts")); // not released
    /// assert_eq!(m.export("s").unwrap_err().kind(), ErrorKind::UnknownSession);
    /// # drop(session);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the exported session owns its requests: import it into another manager or close it, or they leak"]
    pub fn export(&mut self, session: impl AsRef<str>) -> Result<AnySession<P>, Error<IdOf<P>>> {
        let session = IdOf::<P>::new(session.as_ref())?;
        let hash = self.table.hash(&session);
        let unknown = || Error::UnknownSession {
            session: session.clone(),
        };
        let slot = self.table.find_hashed(hash, &session).ok_or_else(unknown)?;
        let out = self
            .table
            .entry(slot)
            .and_then(Option::take)
            .ok_or_else(unknown)?;
        tracing::debug!(%session, state = %out.kind(), "export");
        metrics::left(out.kind());
        self.table.remove(slot, hash);
        self.deadlines.remove(slot);
        Ok(out)
    }

    /// Imports `session` at `now` (see [`import`](Self::import)).
    pub(super) fn import_now(
        &mut self,
        mut session: AnySession<P>,
        incarnation: u64,
        now: Instant,
    ) -> Result<Fence<IdOf<P>>, NotImported<P>> {
        let hash = self.table.hash(session.id());
        if self.table.find_hashed(hash, session.id()).is_some() {
            let error = Error::SessionExists {
                session: session.id().clone(),
            };
            return Err(NotImported { error, session });
        }
        if let Some(limit) = self.max_sessions {
            if self.table.len() >= limit {
                metrics::admission_refused();
                let error = Error::CapacityExhausted { limit };
                return Err(NotImported { error, session });
            }
        }
        let fence = match session.migrate(incarnation, now) {
            Ok(fence) => fence.clone(),
            Err(e) => {
                return Err(NotImported {
                    error: e.into(),
                    session,
                })
            }
        };
        tracing::debug!(session = %fence.session, incarnation, "import");
        let kind = session.kind();
        let Ok((slot, grew)) = self.table.insert(hash, |entry| {
            *entry = Some(session);
            Ok::<(), Infallible>(())
        });
        if grew {
            self.deadlines.grow_to(self.table.slot_bound());
        }
        metrics::entered(kind);
        self.reschedule(slot);
        Ok(fence)
    }
}

/// The import that reads the manager's clock (see [`SessionManager::at`]).
impl<C: Clock, P: Profile> SessionManager<C, P> {
    /// Admits a session exported by another manager (or restored from an
    /// image) under `incarnation`, which must exceed the session's: from
    /// now on only the returned fence is accepted, and messages carrying
    /// the old incarnation are refused as `fence_mismatch`. The lease
    /// restarts at this manager's time (see [`AnySession::migrate`]);
    /// epoch, append sequence, completed appends, owned requests and
    /// lease generation are kept.
    ///
    /// # Errors
    ///
    /// The unchanged session with `session_exists`, `capacity_exhausted`,
    /// `fence_mismatch` (an incarnation that does not move forward) or
    /// `wrong_state` (a closed session has nothing to own). Nothing
    /// changes in either manager.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut old_host = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let mut new_host = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("call-7")?, 1);
    /// old_host.open(f.clone(), OpenOptions::default())?;
    /// old_host.bind(&f, 0, "tts-1")?;
    ///
    /// let session = old_host.export("call-7")?;
    /// let moved = new_host.import(session, 2)?;
    /// assert_eq!(moved.incarnation, 2);
    /// assert!(old_host.is_empty());
    /// // A late message for the old owner is refused; the request moved along.
    /// assert_eq!(new_host.append(&f, InputMode::TurnCommitOnly).unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// assert_eq!(new_host.append(&moved, InputMode::TurnCommitOnly)?.seq, 1);
    /// assert_eq!(new_host.inspect(&moved.session).unwrap().bindings, [(0, Id::new("tts-1")?)]);
    ///
    /// // Importing it again is refused, and the session comes back.
    /// let twin = new_host.export("call-7")?;
    /// new_host.open(moved.clone(), OpenOptions::default())?;
    /// let refused = new_host.import(twin, 3).unwrap_err();
    /// assert_eq!(refused.error.kind(), ErrorKind::SessionExists);
    /// assert_eq!(refused.session.fence(), &moved);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn import(
        &mut self,
        session: AnySession<P>,
        incarnation: u64,
    ) -> Result<Fence<IdOf<P>>, NotImported<P>> {
        self.now().import(session, incarnation)
    }
}
