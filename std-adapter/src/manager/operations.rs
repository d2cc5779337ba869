//! [`Sessions`] for `&mut SessionManager`: the clock forms, each reading
//! the manager's clock once (an operation that needs it) and running the
//! operation of [`At`](super::At); and the one read every manager form
//! shares. Every per-session operation follows from these (see
//! [`Sessions`]).

use duplex_core::profile::{IdOf, Profile};
use duplex_core::{AnySession, Clock, Error as CoreError, Instant};

use super::SessionManager;
use crate::error::Error;
use crate::metrics;
use crate::sessions::Sessions;

impl<C, P: Profile> SessionManager<C, P> {
    /// Runs `op` on the session named `session`, read-only; a refusal is
    /// counted by kind.
    pub(crate) fn read_session<T>(
        &self,
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

impl<C: Clock, P: Profile> Sessions<P> for &mut SessionManager<C, P> {
    #[inline]
    fn apply<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.now().apply(session, op)
    }

    #[inline]
    fn update<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.run(session, false, op).0
    }

    fn read<T>(
        self,
        session: &IdOf<P>,
        op: impl FnOnce(&AnySession<P>) -> Result<T, CoreError>,
    ) -> Result<T, Error<IdOf<P>>> {
        self.read_session(session, op)
    }
}
