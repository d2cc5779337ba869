//! [`Sessions`] for `&mut SessionManager`: find the session, run the
//! operation, keep the deadline index, the log line of a state change and
//! the refusal metrics. Every per-session operation follows from these two
//! methods (see [`Sessions`]).

use duplex_core::storage::Storage;
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
        M: Storage,
    > Sessions<SC, RC, R, B, D, A, L, K, M>
    for &mut SessionManager<C, SC, RC, R, B, D, A, L, K, M>
{
    fn apply<T>(
        self,
        session: &Id<L>,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<L>> {
        self.run(session, true, |s, clock| op(s, clock.now())).0
    }

    fn update<T>(
        self,
        session: &Id<L>,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>) -> Result<T, CoreError>,
    ) -> Result<T, Error<L>> {
        self.run(session, false, |s, _| op(s)).0
    }

    fn read<T>(
        self,
        session: &Id<L>,
        op: impl FnOnce(&AnySession<SC, RC, R, B, D, A, L, K, M>) -> Result<T, CoreError>,
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
