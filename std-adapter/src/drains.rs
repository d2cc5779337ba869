//! [`Drains`]: the draining requests of every [`Sessions`] host, as an
//! extension trait (as [`Overlaps`](crate::Overlaps) is): each finds the
//! session and runs the [`AnySession`](duplex_core::AnySession) operation
//! of the same name.

use duplex_core::drain::OutputRoute;
use duplex_core::profile::{Conformance, IdOf, Profile};
use duplex_core::{AnySession, Fence, RequestIds};

use crate::error::Error;
use crate::sessions::Sessions;

/// Draining requests on any [`Sessions`] host (`&mut SessionManager`,
/// [`At`](crate::At), `&SharedManager`): a barge-in that lets a stage's
/// request finish, whose output each request's output is, and the release
/// of what no longer belongs to the current response
/// ([`duplex_core::drain`] has the rule). None of them reads the clock.
///
/// # Examples
///
/// ```
/// use duplex_core::*;
/// use duplex_core::drain::Owner;
/// use duplex_std::{Drains, ManagerConfig, SessionManager, Sessions};
///
/// let mut m = SessionManager::new(ManualClock::default(), ManagerConfig::default())?;
/// let f = Fence::new(Id::new("s")?, 0);
/// m.open(f.clone(), OpenOptions::default())?;
/// m.bind(&f, 1, "llm")?;
/// m.bind(&f, 2, "tts")?;
/// // Barge-in: the text stage is cancelled, the speaker flushes.
/// let cancelled = m.drain(&f, &f.clone().with_epoch(1), |stage| stage == 2)?;
/// assert_eq!(cancelled.as_slice(), [Id::new("llm")?]);
/// // Its late output is stale: dropped, never the new turn's.
/// assert_eq!(m.route_output(&f.session, "tts")?.map(|r| r.owner), Some(Owner::Stale));
/// // It finished: released, once.
/// assert_eq!(m.release_drained(&f.session)?.as_slice(), [Id::new("tts")?]);
/// assert!(m.draining(&f.session)?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Drains<P: Profile = Conformance>: Sessions<P> {
    /// Barge-in that keeps the stages `keep` names bound, draining (Open,
    /// Detached); returns the requests released now.
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`, `fence_mismatch`; nothing
    /// changes.
    ///
    /// See the trait's example.
    fn drain(
        self,
        cancelled: &Fence<IdOf<P>>,
        next: &Fence<IdOf<P>>,
        keep: impl Fn(u32) -> bool + Copy,
    ) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.update(&cancelled.session, |s| s.drain(cancelled, next, keep))
    }

    /// Where `request`'s output goes, or `None` if the session does not
    /// own it (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// See the trait's example.
    fn route_output(
        self,
        session: &IdOf<P>,
        request: &str,
    ) -> Result<Option<OutputRoute>, Error<IdOf<P>>> {
        self.read(session, |s| s.route_output(request))
    }

    /// The draining and stale request ids (Open, Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// See the trait's example.
    fn draining(self, session: &IdOf<P>) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.read(session, AnySession::draining)
    }

    /// Returns and drops the draining and stale requests, each once (Open,
    /// Detached, Closing).
    ///
    /// # Errors
    ///
    /// `unknown_session`, `wrong_state`.
    ///
    /// See the trait's example.
    fn release_drained(self, session: &IdOf<P>) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
        self.update(session, AnySession::release_drained)
    }
}

impl<P: Profile, T: Sessions<P>> Drains<P> for T {}
