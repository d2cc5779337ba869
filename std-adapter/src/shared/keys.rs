//! [`SharedKey`]: the shared manager's session keys, as
//! [`SessionKey`](crate::SessionKey) is the single-threaded manager's: a
//! host that keeps its own handle per session reaches it through its shard
//! and slot instead of its id's hash.

use duplex_core::profile::{IdOf, Profile};
use std::sync::atomic::Ordering;

use duplex_core::{AnySession, Clock, Error as CoreError, Fence, Instant, OpenOptions};

use super::{lock, SharedManager};
use crate::error::Error;
use crate::manager::SessionKey;

/// Where a session sits in a [`SharedManager`]: its shard and its key
/// there. Like a [`SessionKey`], it never reaches another session: once its
/// session has left, calls through it answer `None`.
///
/// ```
/// # use duplex_core::*;
/// # use duplex_std::*;
/// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// let key = m.open_keyed(f.clone(), OpenOptions::default())?;
/// let seq = m.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly)).unwrap()?.seq;
/// assert_eq!((seq, key.shard() < m.shards()), (1, true));
/// let _ = m.close(&f, CloseReason::ClientClose)?;
/// assert!(m.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly)).is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedKey {
    shard: u32,
    key: SessionKey,
}

impl SharedKey {
    /// The session's shard (below [`SharedManager::shards`]).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// let id = Id::new("s")?;
    /// let key = m.open_keyed(Fence::new(id.clone(), 0), OpenOptions::default())?;
    /// assert_eq!(key.shard(), m.shard_of(&id));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn shard(self) -> usize {
        self.shard as usize
    }

    /// The session's key within its shard (its slot there:
    /// [`SessionKey::slot`]).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::with_shards(MonotonicClock::new(), ManagerConfig::default(), 1)?;
    /// let key = m.open_keyed(Fence::new(Id::new("s")?, 0), OpenOptions::default())?;
    /// assert_eq!(key.in_shard().slot(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn in_shard(self) -> SessionKey {
        self.key
    }
}

impl<C: Clock, P: Profile> SharedManager<C, P> {
    /// The key of the session named `session` (see [`SharedKey`]).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// assert_eq!(m.key(&f.session), None);
    /// let key = m.open_keyed(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.key(&f.session), Some(key));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(&self, session: &IdOf<P>) -> Option<SharedKey> {
        let shard = self.shard_index(session);
        let key = lock(&self.shards[shard]).key(session)?;
        Some(SharedKey {
            shard: shard as u32,
            key,
        })
    }

    /// [`open`](Self::open), returning the new session's key.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open): `session_exists`, then
    /// `capacity_exhausted` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let m = SharedManager::new(MonotonicClock::new(), config)?;
    /// m.open_keyed(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// let full = m.open_keyed(Fence::new(Id::new("b")?, 0), OpenOptions::default());
    /// assert_eq!(full.unwrap_err().kind(), ErrorKind::CapacityExhausted);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_keyed(
        &self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<SharedKey, Error<IdOf<P>>> {
        let shard = self.shard_index(&fence.session);
        let mut m = lock(&self.shards[shard]);
        // `session_exists` comes before `capacity_exhausted`; under the
        // shard lock no other open of this id can interleave.
        if m.get(&fence.session).is_some() {
            return Err(Error::SessionExists {
                session: fence.session,
            });
        }
        self.reserve_slot()?;
        let session = fence.session.clone();
        match m.open_keyed(fence, options) {
            Ok(key) => {
                self.sessions.fetch_add(1, Ordering::AcqRel);
                self.deadline_may_be_earlier(&m, &session);
                Ok(SharedKey {
                    shard: shard as u32,
                    key,
                })
            }
            Err(e) => {
                self.unreserve(1);
                Err(e)
            }
        }
    }

    /// Runs `op` on the session of `key`, read-only, under its shard's
    /// lock; `None` once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// let key = m.open_keyed(Fence::new(Id::new("s")?, 0), OpenOptions::default())?;
    /// assert_eq!(m.read_at(key, AnySession::kind), Some(StateKind::Open));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_at<T>(&self, key: SharedKey, op: impl FnOnce(&AnySession<P>) -> T) -> Option<T> {
        lock(self.shards.get(key.shard())?).read_at(key.key, op)
    }

    /// [`Sessions::update`](crate::Sessions::update) through a key (no
    /// clock read); `None` once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.open_keyed(f.clone(), OpenOptions::default())?;
    /// m.update_at(key, |s| s.bind(&f, 0, &Id::new("tts")?)).unwrap()?;
    /// assert_eq!(m.inspect(&f.session).unwrap().bindings.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update_at<T>(
        &self,
        key: SharedKey,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        self.run_at(key, false, op)
    }

    /// [`Sessions::apply`](crate::Sessions::apply) through a key: `op` gets
    /// the clock's `now`, and an earlier deadline wakes the reaper. `None`
    /// once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.open_keyed(f.clone(), OpenOptions::default())?;
    /// m.apply_at(key, |s, now| s.detach(&f, now)).unwrap()?;
    /// assert!(m.next_deadline().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply_at<T>(
        &self,
        key: SharedKey,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        // The clock is read under the shard's lock (see `Sessions::apply`).
        let (result, deadline) = {
            let mut m = lock(self.shards.get(key.shard())?);
            let now = m.clock().now();
            m.run_at(key.key, true, |s| op(s, now))
        }?;
        if let Some(deadline) = deadline {
            self.wake.earlier(deadline);
        }
        Some(result)
    }

    fn run_at<T>(
        &self,
        key: SharedKey,
        timed: bool,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        let (result, deadline) = lock(self.shards.get(key.shard())?).run_at(key.key, timed, op)?;
        if let Some(deadline) = deadline {
            self.wake.earlier(deadline);
        }
        Some(result)
    }

    /// Removes the session of `key` once it is closed where it sits (see
    /// [`SessionManager::remove_closed_at`](crate::SessionManager::remove_closed_at));
    /// its admission slot is free again. `None` once the key's session has
    /// left.
    ///
    /// # Errors
    ///
    /// `wrong_state` unless the session is closed (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let m = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.open_keyed(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.remove_closed_at(key).unwrap().unwrap_err().kind(), ErrorKind::WrongState);
    /// m.update_at(key, |s| s.begin_close(&f, CloseReason::ClientClose)).unwrap()?;
    /// m.update_at(key, |s| s.finalize()).unwrap()?;
    /// m.remove_closed_at(key).unwrap()?;
    /// assert!(m.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_closed_at(&self, key: SharedKey) -> Option<Result<(), CoreError>> {
        let removed = lock(self.shards.get(key.shard())?).remove_closed_at(key.key)?;
        if removed.is_ok() {
            self.left(1);
        }
        Some(removed)
    }
}
