//! [`Host`]: everything a host does with a manager, as one trait, so that
//! code generic over the manager (single-threaded or shared) can do it all:
//! admission, keyed access, closing, expiry, migration, typed access and
//! inspection here, and every per-session operation through
//! [`sessions`](Host::sessions) ([`Sessions`]).
//!
//! Implemented for [`SessionManager`](crate::SessionManager) and for `&SharedManager` (a shared
//! manager is used through a shared reference, also across threads).

use duplex_core::profile::{Conformance, IdOf, Profile};
use std::fmt::Debug;
use std::hash::Hash;

use duplex_core::{
    AnySession, CloseReason, Detached, Error as CoreError, Expiry, Fence, Instant, Open,
    OpenOptions, RequestIds, Session,
};

use crate::error::Error;
use crate::manager::{NotImported, Released};

mod impls;
use crate::sessions::Sessions;
use crate::view::SessionView;

/// Everything a host does with a manager: implemented for
/// [`SessionManager`](crate::SessionManager) and `&SharedManager`, so one host serves either.
///
/// Each method is the manager's inherent method of the same name (see
/// there for the details); the per-session operations are
/// [`sessions`](Self::sessions)' ([`Sessions`]).
/// A method that needs the time reads the manager's clock once (the clock
/// forms); a host with its own readings calls
/// [`SessionManager::at`](crate::SessionManager::at) instead.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_std::{Host, ManagerConfig, MonotonicClock, SessionManager, Sessions, SharedManager};
///
/// /// A whole call: open, a turn, a barge-in, close.
/// fn call(h: &mut impl Host, id: &str) -> Result<usize, Box<dyn std::error::Error>> {
///     let f = Fence::new(Id::new(id)?, 0);
///     let key = h.open_keyed(f.clone(), OpenOptions::default())?;
///     h.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly)).unwrap()?;
///     h.sessions().bind(&f, 0, "tts-1")?;
///     let released = h.sessions().cancel(&f, &f.clone().with_epoch(1))?;
///     h.close(&f.clone().with_epoch(1), CloseReason::ClientClose)?;
///     Ok(released.len())
/// }
///
/// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
/// assert_eq!(call(&mut single, "a")?, 1);
/// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
/// assert_eq!(call(&mut &shared, "a")?, 1);
/// assert!(single.is_empty() && shared.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Host<P: Profile = Conformance> {
    /// A session's key: a handle that skips the id's hash
    /// ([`SessionKey`](crate::SessionKey), [`SharedKey`](crate::SharedKey)).
    type Key: Copy + Eq + Hash + Debug;

    /// What [`sessions`](Self::sessions) lends: `&mut SessionManager` or
    /// `&SharedManager`.
    type Ops<'a>: Sessions<P>
    where
        Self: 'a;

    /// The per-session operations ([`Sessions`]): append, bind, cancel,
    /// detach, resume, …
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     h.sessions().detach(f)?;
    ///     assert!(h.sessions().resume(f, 0)? == 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn sessions(&mut self) -> Self::Ops<'_>;

    /// Opens a session.
    ///
    /// # Errors
    ///
    /// `session_exists`, then `capacity_exhausted` (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     h.open(Fence::new(Id::new("b")?, 0), OpenOptions::default())?;
    ///     assert_eq!(h.len(), 2);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn open(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<(), Error<IdOf<P>>>;

    /// Opens a session and returns its key.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let key = h.open_keyed(Fence::new(Id::new("b")?, 0), OpenOptions::default())?;
    ///     assert_eq!(h.key(&Id::new("b")?), Some(key));
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn open_keyed(
        &mut self,
        fence: Fence<IdOf<P>>,
        options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
    ) -> Result<Self::Key, Error<IdOf<P>>>;

    /// The key of the session named `session`: a handle that skips the id's
    /// hash, and never reaches another session once this one has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     assert!(h.key(&f.session).is_some());
    ///     assert!(h.key(&Id::new("none")?).is_none());
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn key(&self, session: &IdOf<P>) -> Option<Self::Key>;

    /// Runs `op` on the session of `key`, read-only; `None` once it has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let key = h.key(&f.session).unwrap();
    ///     assert_eq!(h.read_at(key, AnySession::kind), Some(StateKind::Open));
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn read_at<T>(&self, key: Self::Key, op: impl FnOnce(&AnySession<P>) -> T) -> Option<T>;

    /// [`Sessions::update`] through a key (no clock read, the books kept);
    /// `None` once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let key = h.key(&f.session).unwrap();
    ///     let a = h.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly)).unwrap()?;
    ///     assert_eq!(a.seq, 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn update_at<T>(
        &mut self,
        key: Self::Key,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>>;

    /// [`Sessions::apply`] through a key (`op` gets the clock's `now`);
    /// `None` once the key's session has left.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let key = h.key(&f.session).unwrap();
    ///     h.apply_at(key, |s, now| s.detach(&f, now)).unwrap()?;
    ///     assert!(h.next_deadline().is_some());
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn apply_at<T>(
        &mut self,
        key: Self::Key,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>>;

    /// Removes the session of `key` once it is closed where it sits; `None`
    /// once it has left.
    ///
    /// # Errors
    ///
    /// `wrong_state` unless the session is closed (nothing changes).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let key = h.key(&f.session).unwrap();
    ///     h.update_at(key, |s| s.begin_close(&f, CloseReason::ClientClose)).unwrap()?;
    ///     h.update_at(key, |s| s.finalize()).unwrap()?;
    ///     h.remove_closed_at(key).unwrap()?;
    ///     assert_eq!(h.len(), 0);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn remove_closed_at(&mut self, key: Self::Key) -> Option<Result<(), CoreError>>;

    /// Closes a session in one step and removes it: the request ids it
    /// released (`None` if it was already closed).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `fence_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let released = h.close(&f, CloseReason::ClientClose)?;
    ///     assert_eq!(released.map(|ids| ids.len()), Some(0));
    ///     assert_eq!(h.len(), 0);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn close(
        &mut self,
        fence: &Fence<IdOf<P>>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>>;

    /// [`close`](Self::close), only at lease generation `generation` (a
    /// caller that lost the session to a resume closes nothing).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `fence_mismatch`, `generation_mismatch`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let stale = h.close_generation(&f, 7, CloseReason::ClientClose).unwrap_err();
    ///     assert_eq!(stale.kind(), ErrorKind::GenerationMismatch);
    ///     h.close_generation(&f, 0, CloseReason::ClientClose)?;
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn close_generation(
        &mut self,
        fence: &Fence<IdOf<P>>,
        generation: u64,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>>;

    /// Finalizes a closing session and removes it: the request ids it still
    /// held.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state` (not closing).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     h.sessions().begin_close(&f, CloseReason::RequestCleanup)?;
    ///     assert!(h.finalize(&f.session)?.is_empty());
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn finalize(&mut self, session: &IdOf<P>) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>>;

    /// Finalizes those of `sessions` that are closing; the others stay.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     h.sessions().begin_close(&f, CloseReason::RequestCleanup)?;
    ///     assert_eq!(h.finalize_closed([&f.session]).len(), 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn finalize_closed<'a>(
        &mut self,
        sessions: impl IntoIterator<Item = &'a IdOf<P>>,
    ) -> Vec<Released<P::Tables>>;

    /// Closes every session that holds one of `request_ids` (the engine lost
    /// them), releasing what each held.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     h.sessions().bind(&f, 0, "tts-1")?;
    ///     let closed = h.close_for_requests(&["tts-1"]);
    ///     assert_eq!(closed[0].ids.len(), 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn close_for_requests<I: AsRef<str>>(&mut self, request_ids: &[I]) -> Vec<Released<P::Tables>>;

    /// Closes and removes every session whose deadline has passed (but those
    /// `excluded`): what each released.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     assert!(h.collect_expired([]).is_empty());
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn collect_expired<'a>(
        &mut self,
        excluded: impl IntoIterator<Item = &'a IdOf<P>>,
    ) -> Vec<Expiry<P::Tables>>;

    /// The earliest deadline of any session (when the reaper should look).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     h.sessions().detach(&f)?;
    ///     assert!(h.next_deadline().is_some());
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn next_deadline(&mut self) -> Option<Instant>;

    /// Takes a session out, whole (its requests go with it).
    ///
    /// # Errors
    ///
    /// `unknown_session`.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let s = h.export("a")?;
    ///     assert_eq!((s.kind(), h.len()), (StateKind::Open, 0));
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn export(&mut self, session: impl AsRef<str>) -> Result<AnySession<P>, Error<IdOf<P>>>;

    /// Puts an exported session in at `incarnation` (above its own); its
    /// fence there.
    ///
    /// # Errors
    ///
    /// The session back, with `session_exists`, `capacity_exhausted` or a
    /// fence refusal.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let s = h.export("a")?;
    ///     assert_eq!(h.import(s, 1)?.incarnation, 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    // A refused session comes back by value, owning its requests (as from
    // the managers' own `import`); boxing it would allocate per refusal.
    #[allow(clippy::result_large_err)]
    fn import(
        &mut self,
        session: AnySession<P>,
        incarnation: u64,
    ) -> Result<Fence<IdOf<P>>, NotImported<P>>;

    /// Typed access to an open session (`None` if there is none, or it is not
    /// open).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     let a = h.with_open(&f.session, |s, _| s.append(&f, InputMode::TurnCommitOnly));
    ///     assert_eq!(a.unwrap()?.seq, 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn with_open<T>(
        &mut self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Open, P>, Instant) -> T,
    ) -> Option<T>;

    /// Typed access to a detached session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     assert!(h.with_detached(&f.session, |_, _| ()).is_none(), "open, not detached");
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn with_detached<T>(
        &mut self,
        session: &IdOf<P>,
        f: impl FnOnce(&mut Session<Detached, P>, Instant) -> T,
    ) -> Option<T>;

    /// An owned view of a session.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     assert_eq!(h.inspect(&f.session).unwrap().lease_generation, 0);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn inspect(&self, session: &IdOf<P>) -> Option<SessionView<IdOf<P>>>;

    /// Sessions held (closing ones included).
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     assert_eq!(h.len(), 1);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn len(&self) -> usize;

    /// Whether no session is held.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host) -> bool {
    ///     h.is_empty()
    /// }
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// assert!(demo(&mut single));
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// shared.open(Fence::new(Id::new("a")?, 0), OpenOptions::default())?;
    /// assert!(!demo(&mut &shared));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids of the sessions held.
    ///
    /// ```
    /// # use duplex_core::*;
    /// # use duplex_std::*;
    /// fn demo(h: &mut impl Host, f: &Fence) -> Result<(), Box<dyn std::error::Error>> {
    ///     assert_eq!(h.session_ids(), [f.session.clone()]);
    ///     Ok(())
    /// }
    /// # let f = Fence::new(Id::new("a")?, 0);
    /// let mut single = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
    /// # single.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut single, &f)?;
    /// let shared = SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?;
    /// # shared.open(f.clone(), OpenOptions::default())?;
    /// demo(&mut &shared, &f)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn session_ids(&self) -> Vec<IdOf<P>>;
}
