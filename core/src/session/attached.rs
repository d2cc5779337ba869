//! Operations only an attached client may perform (`S: Attached`: Open).

use super::state::{Attached, Detached, State};
use super::Session;
use crate::append::{Appended, Reservation};
use crate::error::{Error, Rejected};
use crate::fence::Fence;
use crate::mode::InputMode;
use crate::profile::{IdOf, Profile};
use crate::time::Instant;

impl<S: State, P: Profile> Session<S, P> {
    /// The client went away: the session waits out the disconnect grace and
    /// refuses client input until resumed.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d: Session<Detached> = s.detach(&f, Instant::from_millis(100))?;
    /// assert_eq!(d.last_activity(), Instant::from_millis(100));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn detach(
        self,
        fence: &Fence<IdOf<P>>,
        now: Instant,
    ) -> Result<Session<Detached, P>, Rejected<Self>>
    where
        S: Attached,
    {
        let session = self.guarded(|s| s.detach_in_place(fence, now))?;
        Ok(session.into_state(Detached::new(now)))
    }

    /// The rule of [`detach`](Self::detach), where the session sits: the
    /// fence is checked (a refusal changes nothing), then activity recorded.
    /// The state move (→ Detached) is the caller's.
    pub(super) fn detach_in_place(
        &mut self,
        fence: &Fence<IdOf<P>>,
        now: Instant,
    ) -> Result<(), Error>
    where
        S: Attached,
    {
        self.fence.admits(fence)?;
        self.lease.last_activity = now;
        Ok(())
    }

    /// Starts a lease operation that holds idle expiry off until ended.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`], [`Error::OperationActive`], or
    /// [`Error::Full`] when `A` operations are already active.
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let lease = LeaseConfig::new(Some(Duration::from_secs(1)), Duration::from_secs(1))?;
    /// let mut s = Session::open(f.clone(), OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// s.begin_operation(&f, &Id::new("gen")?, Instant::ZERO)?;
    /// assert_eq!(s.due(Instant::from_millis(10_000)), None); // held off
    /// # Ok::<(), Error>(())
    /// ```
    pub fn begin_operation(
        &mut self,
        fence: &Fence<IdOf<P>>,
        op: &IdOf<P>,
        now: Instant,
    ) -> Result<(), Error>
    where
        S: Attached,
    {
        self.fence.admits(fence)?;
        self.lease.check_begin(op)?;
        self.lease.begin(op.clone(), now);
        Ok(())
    }

    /// Phase one of an append: computes the sequence numbers without
    /// changing anything.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedMode`] (checked first), then [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let r = s.prepare_append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(r.on_commit(), Appended { seq: 1, turn_seq: 1, turn_id: 0 });
    /// assert_eq!(s.input_seq(), 0); // nothing changed yet
    /// assert_eq!(s.prepare_append(&f, InputMode::AppendTokens).unwrap_err().kind(), ErrorKind::UnsupportedMode);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn prepare_append(
        &self,
        fence: &Fence<IdOf<P>>,
        mode: InputMode,
    ) -> Result<Reservation<IdOf<P>>, Error>
    where
        S: Attached,
    {
        let on_commit = self.next_append(fence, mode)?;
        Ok(Reservation {
            fence: fence.clone(),
            mode,
            base_fence: self.fence.clone(),
            base: self.cursor,
            on_commit,
        })
    }

    /// Prepare and commit in one step.
    ///
    /// # Errors
    ///
    /// As [`prepare_append`](Self::prepare_append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0).with_turn(3);
    /// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(&f, InputMode::TurnCommitOnly)?;
    /// let a = s.append(&f, InputMode::TurnCommitOnly)?;
    /// assert_eq!(a, Appended { seq: 2, turn_seq: 2, turn_id: 3 });
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn append(&mut self, fence: &Fence<IdOf<P>>, mode: InputMode) -> Result<Appended, Error>
    where
        S: Attached,
    {
        // Same effect as prepare + commit, without copying the reservation:
        // nothing can move the session between the two steps here.
        let appended = self.next_append(fence, mode)?;
        self.accept_validated(fence);
        self.cursor.commit(appended, fence.position());
        Ok(appended)
    }

    #[inline]
    fn next_append(&self, fence: &Fence<IdOf<P>>, mode: InputMode) -> Result<Appended, Error> {
        if !self.completed.modes().contains(mode) {
            return Err(Error::UnsupportedMode {
                mode,
                supported: self.completed.modes(),
            });
        }
        self.fence.admits(fence)?;
        Ok(self.cursor.next(self.fence.epoch, fence.position()))
    }
}
