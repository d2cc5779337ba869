//! The host under every Python object: a `duplex_std::SessionManager` of
//! one of the two compiled profiles (admission, the expiry index, request
//! cleanup and slot reuse are its), and beside its slots the Python side
//! of each session (the objects the host gave, records, the fence object).
//!
//! A manager owns one host; a session made by its own constructor owns a
//! private one. The manager has no clock: the host reads Python's before
//! the lock (it may run Python code or raise) and passes the reading in
//! (`manager.at(now)`), taken as given, as the seed takes it (a host's
//! clock may step back; the core compares). Python code never runs inside
//! a manager call: arguments are read before the lock, and the objects an
//! operation returns are built after it where the operation allows.
//!
//! Hosts get the server profile: ids up to 128 bytes (vllm-omni's UUID
//! session ids are 74 bytes), the seed's window of 256 completed appends,
//! 16 request resources, 8 stage bindings, 8 active lease operations. The
//! conformance profile is the one the traces are written for (32-byte ids,
//! 8 resources, 4 bindings, 8 completed appends, 4 operations, 4 results).

use std::sync::{Mutex, MutexGuard, PoisonError};

use duplex_core::profile::{conformance as c, server as s};
use duplex_core::storage::Heap;
use duplex_core::{AnySession, Fence, Id, Reservation};
use duplex_std::{ManagerConfig, SessionKey, SessionManager};
use pyo3::sync::MutexExt;
use pyo3::Python;

/// The server profile with [`Heap`] storage: a session costs what it
/// holds, up to the profile's capacities. Each completed append keeps one
/// result: the handle of its record on the Python side.
pub(crate) type ServerProfile = duplex_core::profile::Server<(), (), Heap>;
/// The conformance profile with [`Heap`] storage.
pub(crate) type ConformanceProfile = duplex_core::profile::Conformance<(), (), Heap>;
/// A session of the server profile (its size is what `_native_bytes` reports).
pub(crate) type ServerAny = AnySession<ServerProfile>;
/// A session of the conformance profile.
pub(crate) type ConformanceAny = AnySession<ConformanceProfile>;
/// The manager of server-profile sessions.
pub(crate) type ServerManager = SessionManager<(), ServerProfile>;
/// The manager of conformance-profile sessions.
pub(crate) type ConformanceManager = SessionManager<(), ConformanceProfile>;

/// Which profile a host's sessions have.
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

    /// Bytes one session of the profile occupies in its manager's slot
    /// (what its tables hold on the heap comes on top).
    pub(crate) fn session_bytes(self) -> usize {
        match self {
            Profile::Server => std::mem::size_of::<ServerAny>(),
            Profile::Conformance => std::mem::size_of::<ConformanceAny>(),
        }
    }
}

/// The manager of a host, of either profile.
#[derive(Debug)]
pub(crate) enum Managers {
    Server(ServerManager),
    Conformance(ConformanceManager),
}

/// Runs `$body` with `$m` bound to the host's manager of whichever
/// profile (`&mut` or `&` as `$managers` is): the one dispatch over the
/// two profiles. Written `each!(managers, |m| body)`, so the body is
/// ordinary Rust that rustfmt formats; it is compiled once per profile,
/// with that profile's types (its ids and fences).
macro_rules! each {
    ($managers:expr, |$m:ident| $body:expr) => {
        match $managers {
            $crate::host::Managers::Server($m) => $body,
            $crate::host::Managers::Conformance($m) => $body,
        }
    };
}
pub(crate) use each;

/// One session's place in its host: the manager and the key.
#[derive(Debug)]
pub(crate) struct Core<'a> {
    pub(crate) managers: &'a mut Managers,
    pub(crate) key: SessionKey,
}

impl<'a> Core<'a> {
    /// The manager and the key, for an [`each!`] over the manager.
    pub(crate) fn into_parts(self) -> (&'a mut Managers, SessionKey) {
        (self.managers, self.key)
    }
}

/// A fence in the core's type of either profile: the last fence argument
/// of a session, converted once per fence object (a host passes one
/// `DuplexFence` for every call of a turn).
#[derive(Debug)]
pub(crate) enum CoreFence {
    Server(Fence<Id<{ s::ID_LEN }>>),
    Conformance(Fence<Id<{ c::ID_LEN }>>),
}

/// The profile whose ids are `L` bytes long, for code written once for
/// both (the profile is inferred from the session the fence goes to).
pub(crate) trait ProfileFence<const L: usize> {
    /// The fence, if it is of this profile.
    fn get(&self) -> Option<&Fence<Id<L>>>;
    /// Wraps a fence of this profile.
    fn wrap(fence: Fence<Id<L>>) -> Self;
}

impl ProfileFence<{ s::ID_LEN }> for CoreFence {
    fn get(&self) -> Option<&Fence<Id<{ s::ID_LEN }>>> {
        match self {
            CoreFence::Server(f) => Some(f),
            CoreFence::Conformance(_) => None,
        }
    }

    fn wrap(fence: Fence<Id<{ s::ID_LEN }>>) -> Self {
        CoreFence::Server(fence)
    }
}

impl ProfileFence<{ c::ID_LEN }> for CoreFence {
    fn get(&self) -> Option<&Fence<Id<{ c::ID_LEN }>>> {
        match self {
            CoreFence::Conformance(f) => Some(f),
            CoreFence::Server(_) => None,
        }
    }

    fn wrap(fence: Fence<Id<{ c::ID_LEN }>>) -> Self {
        CoreFence::Conformance(fence)
    }
}

/// A reservation in the core's type of either profile: the last one a
/// session made, kept so that committing it reads nothing back.
#[derive(Debug)]
pub(crate) enum CoreReservation {
    Server(Reservation<Id<{ s::ID_LEN }>>),
    Conformance(Reservation<Id<{ c::ID_LEN }>>),
}

/// [`ProfileFence`] for reservations.
pub(crate) trait ProfileReservation<const L: usize> {
    /// Wraps a reservation of this profile.
    fn wrap(reservation: Reservation<Id<L>>) -> Self;
}

impl ProfileReservation<{ s::ID_LEN }> for CoreReservation {
    fn wrap(reservation: Reservation<Id<{ s::ID_LEN }>>) -> Self {
        CoreReservation::Server(reservation)
    }
}

impl ProfileReservation<{ c::ID_LEN }> for CoreReservation {
    fn wrap(reservation: Reservation<Id<{ c::ID_LEN }>>) -> Self {
        CoreReservation::Conformance(reservation)
    }
}

/// A manager and the host's own data `S` of each of its sessions (the
/// Python side).
#[derive(Debug)]
pub(crate) struct Host<S> {
    pub(crate) managers: Managers,
    /// The data of each session, by the session's slot in the manager,
    /// with the session's key (a slot reused by a later session is that
    /// session's).
    pub(crate) side: Vec<Option<(SessionKey, S)>>,
    /// The number the next session opened gets (the seed lists sessions in
    /// the order they were opened).
    pub(crate) next_order: u64,
}

impl<S> Host<S> {
    /// The data of the session of `key`, while it is here.
    #[inline]
    pub(crate) fn side(&mut self, key: SessionKey) -> Option<&mut S> {
        match self.side.get_mut(key.slot()) {
            Some(Some((k, data))) if *k == key => Some(data),
            _ => None,
        }
    }

    /// The manager and the data of the session of `key`, while it is here.
    #[inline]
    pub(crate) fn parts(&mut self, key: SessionKey) -> Option<(Core<'_>, &mut S)> {
        let Host { managers, side, .. } = self;
        match side.get_mut(key.slot()) {
            Some(Some((k, data))) if *k == key => Some((Core { managers, key }, data)),
            _ => None,
        }
    }

    /// Places the data of a session just opened.
    pub(crate) fn place(&mut self, key: SessionKey, data: S) {
        let slot = key.slot();
        if self.side.len() <= slot {
            self.side.resize_with(slot + 1, || None);
        }
        if let Some(entry) = self.side.get_mut(slot) {
            *entry = Some((key, data));
        }
    }

    /// Takes the data of a session that has left the manager.
    pub(crate) fn take(&mut self, key: SessionKey) -> Option<S> {
        let entry = self.side.get_mut(key.slot())?;
        if entry.as_ref().is_some_and(|(k, _)| *k == key) {
            entry.take().map(|(_, data)| data)
        } else {
            None
        }
    }
}

/// A host behind its lock, taken with the interpreter released while it
/// waits (so a thread holding it can always finish).
#[derive(Debug)]
pub(crate) struct HostCell<S>(Mutex<Host<S>>);

impl<S> HostCell<S> {
    /// A host of `profile`; the manager's refusal of the limits as its
    /// message.
    pub(crate) fn new(
        profile: Profile,
        max_sessions: Option<usize>,
        completed_limit: usize,
    ) -> Result<Self, String> {
        let config = ManagerConfig {
            max_sessions,
            completed_append_limit: Some(completed_limit),
        };
        let managers = match profile {
            Profile::Server => Managers::Server(
                SessionManager::with_capacities((), config).map_err(|e| e.to_string())?,
            ),
            Profile::Conformance => Managers::Conformance(
                SessionManager::with_capacities((), config).map_err(|e| e.to_string())?,
            ),
        };
        Ok(HostCell(Mutex::new(Host {
            managers,
            side: Vec::new(),
            next_order: 0,
        })))
    }

    /// Locks the host.
    pub(crate) fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Host<S>> {
        self.0
            .lock_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner)
    }
}
