//! The draining requests of [`AnySession`], checked against the state at
//! run time: a draining barge-in needs a live session, the rest an
//! unfinished one.

use super::dynamic::wrong_state;
use super::{AnySession, Typed};
use crate::drain::OutputRoute;
use crate::error::Error;
use crate::fence::Fence;
use crate::profile::{IdOf, Profile};
use crate::requests::RequestIds;

impl<P: Profile> AnySession<P> {
    /// Barge-in that lets the stages `keep` names drain (Open, Detached;
    /// see [`Session::drain`](crate::Session::drain)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`], [`Error::FenceMismatch`]; nothing changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 2, &Id::new("tts")?)?;
    /// assert!(s.drain(&f, &f.clone().with_epoch(1), |_| true)?.is_empty());
    /// assert_eq!(s.draining()?.as_slice(), [Id::new("tts")?]);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn drain(
        &mut self,
        cancelled: &Fence<IdOf<P>>,
        next: &Fence<IdOf<P>>,
        keep: impl Fn(u32) -> bool + Copy,
    ) -> Result<RequestIds<P::Tables>, Error> {
        live!(self.unclosed_mut(), "drain", s => s.drain(cancelled, next, keep))
    }

    /// Where `request`'s output goes (Open, Detached, Closing; see
    /// [`Session::route_output`](crate::Session::route_output)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = AnySession::from(Session::open(f, OpenOptions::default(), Instant::ZERO)?);
    /// assert_eq!(s.route_output("tts")?, None);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn route_output(&self, request: &str) -> Result<Option<OutputRoute>, Error> {
        unfinished!(self.unclosed(), "route_output", s => Ok(s.route_output(request)))
    }

    /// The draining and stale request ids, unique, in reservation order
    /// (Open, Detached, Closing; see
    /// [`Session::draining`](crate::Session::draining)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// See [`drain`](AnySession::drain).
    pub fn draining(&self) -> Result<RequestIds<P::Tables>, Error> {
        unfinished!(self.unclosed(), "draining", s => Ok(s.requests.draining_ids(s.fence.position())))
    }

    /// Releases the draining and stale requests (Open, Detached, Closing;
    /// see [`Session::release_drained`](crate::Session::release_drained)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongState`] once closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = AnySession::from(Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?);
    /// s.bind(&f, 2, &Id::new("tts")?)?;
    /// s.drain(&f, &f.clone().with_epoch(1), |_| true)?;
    /// assert_eq!(s.release_drained()?.len(), 1);
    /// assert!(s.draining()?.is_empty());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn release_drained(&mut self) -> Result<RequestIds<P::Tables>, Error> {
        unfinished!(self.unclosed_mut(), "release_drained", s => Ok(s.release_drained()))
    }
}
