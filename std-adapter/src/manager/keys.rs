//! [`SessionKey`]: a host that keeps its own handle per session (the
//! Python package's session objects) reaches the session through its slot
//! instead of its id's hash, and keeps its own per-session data beside the
//! manager's slots.

use duplex_core::profile::{IdOf, Profile};
use duplex_core::{AnySession, Clock, Error as CoreError, Fence, Instant, OpenOptions, StateKind};

use super::SessionManager;
use crate::Error;

/// Where a session sits in its manager: a handle a host keeps for the
/// session's whole stay, so that its calls skip the id's hash and lookup
/// ([`SessionManager::update_at`] and its siblings). Once the session has
/// left the manager its key no longer matches (each slot counts the
/// sessions that left it), so a key never reaches another session: calls
/// through it answer `None`.
///
/// ```
/// # use duplex_core::*;
/// # use duplex_std::*;
/// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// m.open(f.clone(), OpenOptions::default())?;
/// let key = m.key(&f.session).unwrap();
/// let seq = m.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly)).unwrap()?.seq;
/// assert_eq!(seq, 1);
/// let _ = m.close(&f, CloseReason::ClientClose)?;
/// assert!(m.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly)).is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub(super) slot: u32,
    pub(super) stamp: u32,
}

impl SessionKey {
    /// The session's slot: a small index, below the number of sessions the
    /// manager has held at once, reused by a later session once this one
    /// has left. A host keeps its own per-session data in a `Vec` by slot
    /// (checking the key it stored there).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// m.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// assert_eq!(m.key(&Id::new("a")?).unwrap().slot(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn slot(self) -> usize {
        self.slot as usize
    }
}

impl<C, P: Profile> SessionManager<C, P> {
    /// The key of the session named `session` (see [`SessionKey`]).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// assert_eq!(m.key(&f.session), None);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// assert!(m.key(&f.session).is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(&self, session: &IdOf<P>) -> Option<SessionKey> {
        let slot = self.table.find(session)?;
        Some(SessionKey {
            slot,
            stamp: self.table.stamp(slot)?,
        })
    }

    /// The key of the session in `slot`.
    pub(super) fn key_of(&self, slot: u32) -> SessionKey {
        SessionKey {
            slot,
            stamp: self.table.stamp(slot).unwrap_or_default(),
        }
    }

    /// The slot of `key` while its session is there.
    #[inline]
    fn slot_of(&self, key: SessionKey) -> Option<u32> {
        (self.table.stamp(key.slot) == Some(key.stamp)).then_some(key.slot)
    }

    /// The session of `key`, read-only; `None` once it has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let key = m.key(&f.session).unwrap();
    /// assert_eq!(m.get_at(key).map(AnySession::kind), Some(StateKind::Open));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn get_at(&self, key: SessionKey) -> Option<&AnySession<P>> {
        self.table.get(self.slot_of(key)?)
    }

    /// [`Sessions::update`](crate::Sessions::update) through a key: an
    /// operation that takes no time, with the manager's books kept (state
    /// changes, refusals). `None` once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let key = m.key(&f.session).unwrap();
    /// m.update_at(key, |s| s.bind(&f, 0, &Id::new("tts")?)).unwrap()?;
    /// let stale = f.clone().with_epoch(0).with_turn(0);
    /// let later = f.clone().with_epoch(1);
    /// m.update_at(key, |s| s.accept_fence(&later)).unwrap()?;
    /// // A refusal passes through and changes nothing.
    /// let refused = m.update_at(key, |s| s.bind(&stale, 1, &Id::new("llm")?)).unwrap();
    /// assert_eq!(refused.unwrap_err().kind(), ErrorKind::FenceMismatch);
    /// assert_eq!(m.inspect(&f.session).unwrap().bindings.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn update_at<T>(
        &mut self,
        key: SessionKey,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        self.run_at(key, false, op).map(|(r, _)| r)
    }

    /// Runs `op` on the session of `key` with the books kept; the result
    /// and a deadline that came earlier (`timed`: `op` has a time).
    #[inline]
    pub(crate) fn run_at<T>(
        &mut self,
        key: SessionKey,
        timed: bool,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Option<(Result<T, CoreError>, Option<Instant>)> {
        let slot = self.slot_of(key)?;
        self.run_slot(slot, timed, op)
    }

    /// Runs `op` on the session of `key`, read-only (what a manager behind a
    /// lock offers instead of [`get_at`](Self::get_at)'s reference); `None`
    /// once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let key = m.open_keyed(Fence::new(Id::new("s")?, 0), OpenOptions::default())?;
    /// assert_eq!(m.read_at(key, AnySession::kind), Some(StateKind::Open));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn read_at<T>(&self, key: SessionKey, op: impl FnOnce(&AnySession<P>) -> T) -> Option<T> {
        self.get_at(key).map(op)
    }

    /// Removes the session of `key` once it is closed where it sits (a
    /// host that finalizes or closes through [`update_at`](Self::update_at)
    /// and keeps the session listed until it says so, as vllm-omni's
    /// manager does). `None` once the key's session has left.
    ///
    /// # Errors
    ///
    /// `wrong_state` unless the session is closed (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let key = m.key(&f.session).unwrap();
    /// assert_eq!(m.remove_closed_at(key).unwrap().unwrap_err().kind(), ErrorKind::WrongState);
    /// m.update_at(key, |s| s.begin_close(&f, CloseReason::ClientClose)).unwrap()?;
    /// let released = m.update_at(key, |s| s.finalize()).unwrap()?;
    /// assert!(released.is_empty());
    /// assert_eq!(m.len(), 1, "closed, still listed");
    /// m.remove_closed_at(key).unwrap()?;
    /// assert!(m.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_closed_at(&mut self, key: SessionKey) -> Option<Result<(), CoreError>> {
        let slot = self.slot_of(key)?;
        let s = self.table.get(slot)?;
        if s.kind() != StateKind::Closed {
            return Some(Err(CoreError::WrongState {
                operation: "remove_closed",
                state: s.kind(),
            }));
        }
        let hash = self.table.hash(s.id());
        tracing::debug!(session = %s.id(), "removed");
        self.vacate(slot, hash, StateKind::Closed);
        Some(Ok(()))
    }
}

/// The keyed forms that read the manager's clock (see
/// [`SessionManager::at`]).
impl<C: Clock, P: Profile> SessionManager<C, P> {
    /// [`open`](Self::open), returning the new session's key (one lookup
    /// fewer than `open` then [`key`](Self::key)).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.open_keyed(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.key(&f.session), Some(key));
    /// assert!(m.open_keyed(f, OpenOptions::default()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_keyed(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<SessionKey, Error<IdOf<P>>> {
        self.now().open_keyed(fence, options)
    }

    /// [`Sessions::apply`](crate::Sessions::apply) through a key: `op` gets
    /// the clock's `now`, and a deadline that came earlier (detach, the
    /// last lease operation ended) reaches the expiry index. `None` once
    /// the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let clock = ManualClock::default();
    /// let mut m = SessionManager::new(&clock, ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.open(f.clone(), OpenOptions::default())?;
    /// let key = m.key(&f.session).unwrap();
    /// m.apply_at(key, |s, now| s.detach(&f, now)).unwrap()?;
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(30_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn apply_at<T>(
        &mut self,
        key: SessionKey,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        self.now().apply_at(key, op)
    }
}
