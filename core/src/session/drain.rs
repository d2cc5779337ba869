//! A session's draining requests ([`drain`](crate::drain) has the rule): a
//! barge-in that keeps some of the cancelled response's requests bound, the
//! route of a request's output, and the release of what no longer belongs
//! to the current response.

use super::state::{Live, State, Unfinished};
use super::Session;
use crate::drain::OutputRoute;
use crate::error::Error;
use crate::fence::Fence;
use crate::fmt::debug;
use crate::id::IdText as _;
use crate::profile::{IdOf, Profile, Tables};
use crate::requests::RequestIds;

impl<S: State, P: Profile> Session<S, P> {
    /// Moves the session on from `cancelled` to `next` (the next turn or
    /// response, or a barge-in's new epoch) and returns and releases the
    /// requests held at exactly `cancelled`, except on the stages `keep`
    /// names: those stay bound until released, their output routed as
    /// [`Owner::Draining`](crate::drain::Owner::Draining) (a new turn of
    /// the same epoch) or [`Owner::Stale`](crate::drain::Owner::Stale) (a
    /// new epoch). Keeping nothing across an epoch is
    /// [`cancel`](Session::cancel). A late drain never moves the session
    /// backwards.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`] if either fence names another identity, if
    /// `next` is not ahead of `cancelled`, if `cancelled` is ahead of the
    /// session, or if accepting `next` fails. Nothing changes on error.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f0 = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f0.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f0, 1, &Id::new("llm")?)?;
    /// s.bind(&f0, 2, &Id::new("tts")?)?;
    /// let released = s.drain(&f0, &f0.clone().with_epoch(1), |stage| stage == 2)?;
    /// assert_eq!(released.as_slice(), [Id::new("llm")?]);
    /// assert_eq!(s.draining().count(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn drain(
        &mut self,
        cancelled: &Fence<IdOf<P>>,
        next: &Fence<IdOf<P>>,
        keep: impl Fn(u32) -> bool + Copy,
    ) -> Result<RequestIds<P::Tables>, Error>
    where
        S: Live,
    {
        let ahead = cancelled.position().is_behind(next.position());
        move_past!(self, cancelled, next, ahead);
        Ok(self
            .requests
            .release_position_except(cancelled.position(), keep))
    }

    /// Where `request`'s output goes, or `None` if the session does not
    /// own it (drop it: it is no request of this session's).
    ///
    /// ```
    /// # use duplex_core::*;
    /// use duplex_core::drain::Owner;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(&f, 2, &Id::new("tts")?)?;
    /// assert_eq!(s.route_output("tts").map(|r| r.owner), Some(Owner::Current));
    /// assert_eq!(s.route_output("other"), None);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn route_output(&self, request: &str) -> Option<OutputRoute>
    where
        S: Unfinished,
    {
        self.requests
            .route(request, self.fence.position(), self.fence.incarnation)
    }

    /// The requests that are not the current response's (draining or
    /// stale; an id still current on some stage is not), in reservation
    /// order, with their routes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 2, &Id::new("tts-1")?)?;
    /// assert_eq!(s.draining().count(), 0);
    /// s.bind(&f.clone().with_turn(1), 2, &Id::new("tts-2")?)?;
    /// let (id, route) = s.draining().next().expect("tts-1 drains");
    /// assert_eq!((id.as_str(), route.bound_at.turn), ("tts-1", 0));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn draining(&self) -> impl Iterator<Item = (&<P::Tables as Tables>::StoredId, OutputRoute)>
    where
        S: Unfinished,
    {
        self.requests
            .draining(self.fence.position(), self.fence.incarnation)
    }

    /// Returns the draining and stale requests (unique, reservation
    /// order), then drops them: each comes back once. A request id that is
    /// still current on some stage is the current response's: it does not
    /// drain, on any stage.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 2, &Id::new("tts")?)?;
    /// s.drain(&f, &f.clone().with_epoch(1), |_| true)?;
    /// assert_eq!(s.release_drained().as_slice(), [Id::new("tts")?]);
    /// assert!(s.release_drained().is_empty());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_drained(&mut self) -> RequestIds<P::Tables>
    where
        S: Unfinished,
    {
        let released = self.requests.release_drained(self.fence.position());
        if !released.is_empty() {
            debug!(
                "duplex session {=str}: released {=usize} drained requests",
                self.fence.session.as_str(),
                released.len()
            );
        }
        released
    }
}
