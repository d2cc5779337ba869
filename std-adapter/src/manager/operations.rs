//! [`Sessions`] for `&mut SessionManager`: find the session, run the
//! operation, keep the deadline index, the log line of a state change and
//! the refusal metrics. Every per-session operation follows from these two
//! methods (see [`Sessions`]).

use duplex_core::profile::{IdOf, Profile};
use duplex_core::{AnySession, Clock, Error as CoreError, Instant};

use super::SessionManager;
use crate::error::Error;
use crate::metrics;
use crate::sessions::Sessions;

impl<C: Clock, P: Profile> Sessions<P> for &mut SessionManager<C, P> {
    fn apply<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.run(session, true, |s, clock| op(s, clock.now())).0
    }

    fn update<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.run(session, false, |s, _| op(s)).0
    }

    fn read<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
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
