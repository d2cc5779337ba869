//! [`Sessions`] for `&mut SessionManager`: find the session, run the
//! operation, keep the deadline index, the log line of a state change and
//! the refusal metrics. Every per-session operation follows from these two
//! methods (see [`Sessions`]).

use duplex_core::{AnySession, Clock, Error as CoreError, Id, Instant};

use super::SessionManager;
use crate::error::Error;
use crate::metrics;
use crate::sessions::Sessions;

impl<
        C: Clock,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > SessionManager<C, SC, RC, R, B, D, A, L, K>
{
    /// Runs `op` on the session named `session` at the clock's `now`;
    /// returns its result and the session's deadline afterwards (for a
    /// reaper that may have to wake earlier).
    pub(crate) fn run<T>(
        &mut self,
        session: &Id<L>,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K>, Instant) -> Result<T, CoreError>,
    ) -> (Result<T, Error<L>>, Option<Instant>) {
        let now = self.clock.now();
        let Some((slot, s)) = self.table.find(session).and_then(|slot| {
            let s = self.table.entry(slot)?.as_mut()?;
            Some((slot, s))
        }) else {
            metrics::refused(duplex_core::ErrorKind::UnknownSession);
            let unknown = Error::UnknownSession {
                session: session.clone(),
            };
            return (Err(unknown), None);
        };
        let from = s.kind();
        let result = op(s, now);
        let to = s.kind();
        if from != to {
            tracing::debug!(%session, "state={from}=>{to}");
            metrics::moved(from, to);
        }
        if let Err(e) = &result {
            metrics::refused(e.kind());
        }
        let deadline = self.reschedule(slot);
        (result.map_err(Error::from), deadline)
    }
}

impl<
        C: Clock,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Sessions<SC, RC, R, B, D, A, L, K> for &mut SessionManager<C, SC, RC, R, B, D, A, L, K>
{
    fn apply<T>(
        self,
        session: &Id<L>,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<L>> {
        self.run(session, op).0
    }

    fn read<T>(
        self,
        session: &Id<L>,
        op: impl FnOnce(&AnySession<SC, RC, R, B, D, A, L, K>) -> Result<T, CoreError>,
    ) -> Result<T, Error<L>> {
        let result = match self.get(session) {
            Some(s) => op(s).map_err(Error::from),
            None => Err(Error::UnknownSession {
                session: session.clone(),
            }),
        };
        if let Err(e) = &result {
            metrics::refused(e.kind());
        }
        result
    }
}
