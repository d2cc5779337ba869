//! [`At`]: a [`SessionManager`] at one instant. Every manager operation
//! that needs the time is here, with the time given; the manager's clock
//! forms read their clock once and call these.

// A refused import hands the session back by value inside `NotImported`
// (see `migrate.rs`).
#![allow(clippy::result_large_err)]

use duplex_core::profile::{Conformance, IdOf, Profile};
use duplex_core::{
    AnySession, Detached, Error as CoreError, Expiry, Fence, Instant, Open, OpenOptions, Session,
};

use super::{NotImported, SessionKey, SessionManager};
use crate::error::Error;
use crate::sessions::Sessions;

/// A [`SessionManager`] at one instant (from [`SessionManager::at`]): the
/// operations that take the time, with that time. It implements
/// [`Sessions`], so every per-session operation is there too.
///
/// An `At` is used for one operation (its methods take it by value);
/// `manager.at(now)` again for the next, with the time of that one.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{ManagerConfig, SessionManager, Sessions};
///
/// let mut m = SessionManager::new((), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// m.at(Instant::ZERO).open(f.clone(), OpenOptions::default())?;
/// m.at(Instant::from_millis(1)).detach(&f)?;
/// let late = Instant::from_millis(30_001);
/// let expired = m.at(late).collect_expired([]);
/// assert_eq!(expired[0].reason, CloseReason::DisconnectGraceExpired);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "an `At` does nothing until one of its operations is called"]
pub struct At<'a, C, P: Profile = Conformance> {
    manager: &'a mut SessionManager<C, P>,
    now: Instant,
}

impl<'a, C, P: Profile> At<'a, C, P> {
    pub(super) fn new(manager: &'a mut SessionManager<C, P>, now: Instant) -> Self {
        At { manager, now }
    }

    /// The instant.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// assert_eq!(m.at(Instant::from_millis(3)).time(), Instant::from_millis(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn time(&self) -> Instant {
        self.now
    }

    /// Opens a session. The manager's completed-append limit applies.
    ///
    /// # Errors
    ///
    /// `session_exists`, then `capacity_exhausted` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let config = ManagerConfig { max_sessions: Some(1), ..ManagerConfig::default() };
    /// let mut m = SessionManager::new((), config)?;
    /// m.at(Instant::ZERO).open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// let full = m.at(Instant::ZERO).open(Fence::new(Id::new("b")?, 0), OpenOptions::default());
    /// assert_eq!(full.unwrap_err().kind(), ErrorKind::CapacityExhausted);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<(), Error<IdOf<P>>> {
        self.manager.open_slot(fence, options, self.now).map(|_| ())
    }

    /// [`open`](Self::open), returning the new session's key.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.at(Instant::ZERO).open_keyed(f.clone(), OpenOptions::default())?;
    /// assert_eq!(m.key(&f.session), Some(key));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_keyed(
        self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<SessionKey, Error<IdOf<P>>> {
        let slot = self.manager.open_slot(fence, options, self.now)?;
        Ok(self.manager.key_of(slot))
    }

    /// [`Sessions::apply`] through a key: `op` gets the time, and a
    /// deadline that came earlier reaches the expiry index. `None` once the
    /// key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let key = m.at(Instant::ZERO).open_keyed(f.clone(), OpenOptions::default())?;
    /// m.at(Instant::from_millis(5)).apply_at(key, |s, now| s.detach(&f, now)).unwrap()?;
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(30_005)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn apply_at<T>(
        self,
        key: SessionKey,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        let now = self.now;
        self.manager
            .run_at(key, true, |s| op(s, now))
            .map(|(r, _)| r)
    }

    /// Typed access to an open session: runs `f` with the session and the
    /// time. `None` if the session is absent or not open.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.at(Instant::ZERO).open(f.clone(), OpenOptions::default())?;
    /// let at = Instant::from_millis(2);
    /// m.at(at).with_open(&f.session, |s, now| s.touch(&f, Activity::Heartbeat, now)).unwrap()?;
    /// assert_eq!(m.next_deadline(), Some(Instant::from_millis(300_002)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_open<T>(
        self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Open, P>, Instant) -> T,
    ) -> Option<T> {
        let now = self.now;
        self.manager
            .typed(session, AnySession::as_open_mut, |s| f(s, now))
    }

    /// Typed access to a detached session (see [`with_open`](Self::with_open)).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.at(Instant::ZERO).open(f.clone(), OpenOptions::default())?;
    /// m.at(Instant::ZERO).detach(&f)?;
    /// let seen = m.at(Instant::from_millis(4)).with_detached(&f.session, |_, now| now);
    /// assert_eq!(seen, Some(Instant::from_millis(4)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_detached<T>(
        self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Detached, P>, Instant) -> T,
    ) -> Option<T> {
        let now = self.now;
        self.manager
            .typed(session, AnySession::as_detached_mut, |s| f(s, now))
    }

    /// The reaper at this time: see
    /// [`SessionManager::collect_expired`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut m = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// m.at(Instant::ZERO).open(f.clone(), OpenOptions::default())?;
    /// assert!(m.at(Instant::from_millis(299_999)).collect_expired([]).is_empty());
    /// let expired = m.at(Instant::from_millis(300_000)).collect_expired([]);
    /// assert_eq!(expired[0].reason, CloseReason::IdleTtlExpired);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "each expired session's requests must be cancelled in the engine, then the session finalized"]
    pub fn collect_expired<'e>(
        self,
        excluded: impl IntoIterator<Item = &'e IdOf<P>>,
    ) -> Vec<Expiry<P::Tables>> {
        self.manager.expire_due(excluded, self.now)
    }

    /// Imports a session at this time: see [`SessionManager::import`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::import`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// let mut old_host = SessionManager::new((), ManagerConfig::default())?;
    /// let mut new_host = SessionManager::new((), ManagerConfig::default())?;
    /// let f = Fence::new(Id::new("s")?, 1);
    /// old_host.at(Instant::ZERO).open(f, OpenOptions::default())?;
    /// let moved = new_host.at(Instant::from_millis(8)).import(old_host.export("s")?, 2)?;
    /// assert_eq!(moved.incarnation, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn import(
        self,
        session: AnySession<P>,
        incarnation: u64,
    ) -> Result<Fence<IdOf<P>>, NotImported<P>> {
        self.manager.import_now(session, incarnation, self.now)
    }
}

/// The per-session operations at this time.
impl<C, P: Profile> Sessions<P> for At<'_, C, P> {
    #[inline]
    fn apply<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        let now = self.now;
        self.manager.run(session, true, |s| op(s, now)).0
    }

    #[inline]
    fn update<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.manager.run(session, false, op).0
    }

    #[inline]
    fn read<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.manager.read_session(session, op)
    }
}
