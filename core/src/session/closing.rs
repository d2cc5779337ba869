//! `Closing` (irreversible, resources kept for cleanup retry) and `Closed`
//! (finalized: only the final facts remain).

use super::state::{Closed, Closing};
use super::Session;
use crate::error::Error;
use crate::fence::Fence;
use crate::lease::CloseReason;
use crate::requests::RequestIds;

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<Closing, SC, RC, R, B, D, A, L, K>
{
    /// `begin_close` on a closing session: the fence is still accepted (a
    /// newer one is taken, with the epoch-change resets), and the first
    /// reason is kept.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`]; nothing changes.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let mut c = s.begin_close(&f, CloseReason::ClientClose).unwrap();
    /// c.begin_close(&f.clone().with_epoch(2), CloseReason::ExplicitClose)?;
    /// assert_eq!(c.state().reason(), CloseReason::ClientClose);
    /// assert_eq!(c.fence().epoch, 2);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn begin_close(&mut self, fence: &Fence<L>, reason: CloseReason) -> Result<(), Error> {
        let _ = reason;
        self.fence.admits(fence)?;
        self.accept_validated(fence);
        Ok(())
    }

    /// Finalizes the close: returns the closed session and every request id
    /// it still held (unique, reservation order), now released.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.reserve(0, &Id::new("r")?, &f)?;
    /// let (closed, ids) = s.begin_close(&f, CloseReason::ExplicitClose).unwrap().finalize();
    /// assert_eq!(ids.len(), 1);
    /// assert_eq!(closed.kind(), StateKind::Closed);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn finalize(mut self) -> (Session<Closed, SC, RC, R, B, D, A, L, K>, RequestIds<L, R>) {
        let ids = self.requests.drain();
        self.completed.clear();
        let reason = self.state.reason();
        (self.into_state(Closed::new(reason)), ids)
    }
}

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<Closed, SC, RC, R, B, D, A, L, K>
{
    /// Why the session was closed.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let (closed, _) = s.begin_close(&f, CloseReason::IdleTtlExpired).unwrap().finalize();
    /// assert_eq!(closed.close_reason(), CloseReason::IdleTtlExpired);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn close_reason(&self) -> CloseReason {
        self.state.reason()
    }
}
