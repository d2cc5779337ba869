//! What the simulated clients and host talk to: the single-threaded
//! manager (one thread), or one shared manager driven from several threads.
//! Both answer the same operations with the same meaning.

use std::sync::atomic::{AtomicU64, Ordering};

use duplex_core::{
    Activity, Appended, Clock, CloseReason, Duration, Fence, Finality, Id, InputMode, Instant,
    OpenOptions, RequestIds, RequestState,
};
use duplex_std::{Error, Expiry, ManagerConfig, Released, SessionManager, SharedManager};

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

    pub(crate) fn touch(&mut self, fence: &Fence, activity: Activity) -> Result<(), Error> {
        both!(self, m => m.touch(fence, activity))
    }

    pub(crate) fn detach(&mut self, fence: &Fence) -> Result<(), Error> {
        both!(self, m => m.detach(fence))
    }

    pub(crate) fn resume(&mut self, fence: &Fence, generation: u64) -> Result<u64, Error> {
        both!(self, m => m.resume(fence, generation))
    }

    pub(crate) fn begin_operation(&mut self, fence: &Fence, op: &str) -> Result<(), Error> {
        both!(self, m => m.begin_operation(fence, op))
    }

    pub(crate) fn end_operation(&mut self, fence: &Fence, op: &str) -> Result<(), Error> {
        both!(self, m => m.end_operation(fence, op))
    }

    pub(crate) fn append(&mut self, fence: &Fence, mode: InputMode) -> Result<Appended, Error> {
        both!(self, m => m.append(fence, mode))
    }

    /// The recorded results, owned (they are only there on a retry).
    pub(crate) fn completed(
        &mut self,
        fence: &Fence,
        op: &str,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<Vec<i64>>, Error> {
        match self {
            Backend::Single(m) => m
                .completed(fence, op, mode, finality)
                .map(|r| r.map(<[i64]>::to_vec)),
            Backend::Shared(m) => m.completed(fence, op, mode, finality),
        }
    }

    pub(crate) fn record_completed(
        &mut self,
        fence: &Fence,
        op: &str,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error> {
        both!(self, m => m.record_completed(fence, op, mode, finality, results))
    }

    pub(crate) fn reserve(
        &mut self,
        fence: &Fence,
        stage: u32,
        request: &str,
    ) -> Result<(), Error> {
        both!(self, m => m.reserve(fence, stage, request))
    }

    pub(crate) fn bind(&mut self, fence: &Fence, stage: u32, request: &str) -> Result<(), Error> {
        both!(self, m => m.bind(fence, stage, request))
    }

    pub(crate) fn resource_request_ids(
        &mut self,
        session: &Id,
        fence: Option<&Fence>,
        state: Option<RequestState>,
    ) -> Result<RequestIds, Error> {
        both!(self, m => m.resource_request_ids(session, fence, state))
    }

    pub(crate) fn release<I: AsRef<str>>(&mut self, session: &Id, ids: &[I]) -> Result<(), Error> {
        both!(self, m => m.release(session, ids))
    }

    pub(crate) fn cancel(&mut self, cancelled: &Fence, next: &Fence) -> Result<RequestIds, Error> {
        both!(self, m => m.cancel(cancelled, next))
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
