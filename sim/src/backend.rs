//! What the simulated clients and host talk to: the single-threaded
//! manager (one thread), or one shared manager driven from several threads.
//! Both answer the same operations with the same meaning: the per-session
//! ones come from [`Sessions`], which `&mut Backend` implements by handing
//! each call to the manager it holds.

use std::sync::atomic::{AtomicU64, Ordering};

use duplex_core::{
    AnySession, Clock, CloseReason, Duration, Error as CoreError, Fence, Id, Instant, OpenOptions,
    RequestIds,
};
use duplex_std::{Error, Expiry, ManagerConfig, Released, SessionManager, Sessions, SharedManager};

/// The simulation's virtual time: milliseconds advanced by hand, readable
/// from every thread.
#[derive(Debug, Default)]
pub struct SimClock {
    ms: AtomicU64,
}

impl SimClock {
    /// Moves time forward by `d`.
    pub(crate) fn advance(&self, d: Duration) {
        self.ms.fetch_add(d.as_millis(), Ordering::AcqRel);
    }
}

impl Clock for SimClock {
    fn now(&self) -> Instant {
        Instant::from_millis(self.ms.load(Ordering::Acquire))
    }
}

/// One manager, or one manager shared by the worker threads. (One value
/// per world for a whole run: its size does not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend<'c> {
    Single(SessionManager<&'c SimClock>),
    Shared(&'c SharedManager<&'c SimClock>),
}

/// Runs the same call on whichever manager it is.
macro_rules! both {
    ($self:expr, $m:ident => $call:expr) => {
        match $self {
            Backend::Single($m) => $call,
            Backend::Shared($m) => $call,
        }
    };
}

impl<'c> Backend<'c> {
    pub(crate) fn single(clock: &'c SimClock, config: ManagerConfig) -> Self {
        Backend::Single(
            SessionManager::new(clock, config).expect("simulation manager config is valid"),
        )
    }

    pub(crate) fn len(&self) -> usize {
        both!(self, m => m.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        both!(self, m => m.is_empty())
    }

    pub(crate) fn session_ids(&self, n: usize) -> Vec<String> {
        match self {
            Backend::Single(m) => m.session_ids().take(n).map(ToString::to_string).collect(),
            Backend::Shared(m) => m
                .session_ids()
                .iter()
                .take(n)
                .map(ToString::to_string)
                .collect(),
        }
    }

    pub(crate) fn open(&mut self, fence: Fence, options: OpenOptions) -> Result<(), Error> {
        both!(self, m => m.open(fence, options))
    }

    pub(crate) fn close(
        &mut self,
        fence: &Fence,
        reason: CloseReason,
    ) -> Result<Option<RequestIds>, Error> {
        both!(self, m => m.close(fence, reason))
    }

    pub(crate) fn finalize(&mut self, session: &Id) -> Result<RequestIds, Error> {
        both!(self, m => m.finalize(session))
    }

    pub(crate) fn close_for_requests(&mut self, ids: &[&str]) -> Vec<Released> {
        both!(self, m => m.close_for_requests(ids))
    }

    pub(crate) fn collect_expired(&mut self) -> Vec<Expiry> {
        both!(self, m => m.collect_expired([]))
    }

    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        both!(self, m => m.next_deadline())
    }
}

impl Sessions for &mut Backend<'_> {
    fn apply<T>(
        self,
        session: &Id,
        op: impl FnOnce(&mut AnySession, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error> {
        both!(self, m => m.apply(session, op))
    }

    fn update<T>(
        self,
        session: &Id,
        op: impl FnOnce(&mut AnySession) -> Result<T, CoreError>,
    ) -> Result<T, Error> {
        both!(self, m => m.update(session, op))
    }

    fn read<T>(
        self,
        session: &Id,
        op: impl FnOnce(&AnySession) -> Result<T, CoreError>,
    ) -> Result<T, Error> {
        both!(self, m => m.read(session, op))
    }
}
