//! `finalize` (`S: Finalizable`: Closing) and the final facts of `Closed`.

use super::state::{Closed, Finalizable, State};
use super::Session;
use crate::lease::CloseReason;
use crate::profile::Profile;
use crate::requests::RequestIds;

impl<S: State, P: Profile> Session<S, P> {
    /// Finalizes the close: returns the closed session and every request id
    /// it still held (unique, reservation order), now released.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(&f, 0, &Id::new("r")?)?;
    /// let (closed, ids) = s.begin_close(&f, CloseReason::ExplicitClose)?.finalize();
    /// assert_eq!(ids.len(), 1);
    /// assert_eq!(closed.kind(), StateKind::Closed);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn finalize(mut self) -> (Session<Closed, P>, RequestIds<P::Tables>)
    where
        S: Finalizable,
    {
        let (ids, reason) = self.finalize_in_place();
        (self.into_state(Closed::new(reason)), ids)
    }

    /// What finalizing does to the session, where it sits: releases every
    /// request and forgets the completed appends; returns the released ids
    /// and the reason the session is closing. The caller then moves it to
    /// `Closed` ([`finalize`](Self::finalize)) or marks it closed
    /// (`AnySession::finalize`).
    pub(crate) fn finalize_in_place(&mut self) -> (RequestIds<P::Tables>, CloseReason)
    where
        S: Finalizable,
    {
        let ids = self.requests.drain();
        self.completed.clear();
        let reason = self
            .state
            .close_reason()
            .unwrap_or(CloseReason::ExplicitClose);
        (ids, reason)
    }
}

impl<P: Profile> Session<Closed, P> {
    /// Why the session was closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let (closed, _) = s.begin_close(&f, CloseReason::IdleTtlExpired)?.finalize();
    /// assert_eq!(closed.close_reason(), CloseReason::IdleTtlExpired);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn close_reason(&self) -> CloseReason {
        self.state.reason()
    }
}
