//! Operations only an attached client may perform (`Open`), and the way back
//! from `Detached`.

use super::state::{Detached, Open};
use super::Session;
use crate::append::{Appended, Reservation};
use crate::error::{Error, Rejected};
use crate::fence::Fence;
use crate::id::Id;
use crate::mode::InputMode;
use crate::time::Instant;

impl<
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<Open, SC, RC, R, B, D, A, L, K>
{
    /// The client went away (SPEC §3 `detach`): the session waits out the
    /// disconnect grace and refuses client input until resumed.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d: Session<Detached> = s.detach(&f, Instant::from_millis(100)).unwrap();
    /// assert_eq!(d.last_activity(), Instant::from_millis(100));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn detach(
        self,
        fence: &Fence<L>,
        now: Instant,
    ) -> Result<Session<Detached, SC, RC, R, B, D, A, L, K>, Rejected<Self>> {
        let mut session = self.guarded(|s| s.fence.admits(fence))?;
        session.lease.last_activity = now;
        Ok(session.into_state(Detached::new(now)))
    }

    /// Takeover by a new connection while attached (SPEC §3 `resume`):
    /// checks the generation, bumps it, and returns the new one.
    ///
    /// # Errors
    ///
    /// [`Error::FenceMismatch`] or [`Error::GenerationMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// assert_eq!(s.resume(&f, 0, Instant::ZERO)?, 1);
    /// // The old connection's token is now stale.
    /// assert_eq!(s.resume(&f, 0, Instant::ZERO), Err(Error::GenerationMismatch { expected: 1, actual: 0 }));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resume(
        &mut self,
        fence: &Fence<L>,
        expected_generation: u64,
        now: Instant,
    ) -> Result<u64, Error> {
        self.check_resume(fence, expected_generation)?;
        Ok(self.apply_resume(now))
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
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default().lease(lease), Instant::ZERO)?;
    /// s.begin_operation(&f, &Id::new("gen")?, Instant::ZERO)?;
    /// assert_eq!(s.due(Instant::from_millis(10_000)), None); // held off
    /// # Ok::<(), Error>(())
    /// ```
    pub fn begin_operation(
        &mut self,
        fence: &Fence<L>,
        op: &Id<L>,
        now: Instant,
    ) -> Result<(), Error> {
        self.fence.admits(fence)?;
        self.lease.check_begin(op)?;
        self.lease.begin(op.clone(), now);
        Ok(())
    }

    /// Phase one of an append (SPEC §4 `prepare_append`): computes the
    /// sequence numbers without changing anything.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedMode`] (checked first), then [`Error::FenceMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let r = s.prepare_append(InputMode::TurnCommitOnly, &f)?;
    /// assert_eq!(r.update(), Appended { seq: 1, turn_seq: 1, turn_id: 0 });
    /// assert_eq!(s.input_seq(), 0); // nothing changed yet
    /// assert_eq!(s.prepare_append(InputMode::AppendTokens, &f).unwrap_err().kind(), ErrorKind::UnsupportedMode);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn prepare_append(
        &self,
        mode: InputMode,
        fence: &Fence<L>,
    ) -> Result<Reservation<L>, Error> {
        let update = self.next_append(mode, fence)?;
        Ok(Reservation {
            fence: fence.clone(),
            mode,
            base_fence: self.fence.clone(),
            base: self.cursor,
            update,
        })
    }

    /// Prepare and commit in one step (SPEC §4 `append`).
    ///
    /// # Errors
    ///
    /// As [`prepare_append`](Self::prepare_append).
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0).with_turn(3);
    /// let mut s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.append(InputMode::TurnCommitOnly, &f)?;
    /// let a = s.append(InputMode::TurnCommitOnly, &f)?;
    /// assert_eq!(a, Appended { seq: 2, turn_seq: 2, turn_id: 3 });
    /// # Ok::<(), Error>(())
    /// ```
    pub fn append(&mut self, mode: InputMode, fence: &Fence<L>) -> Result<Appended, Error> {
        // Same effect as prepare + commit, without copying the reservation:
        // nothing can move the session between the two steps here.
        let update = self.next_append(mode, fence)?;
        self.accept_validated(fence);
        self.cursor.seq = update.seq;
        self.cursor.turn_seq = update.turn_seq;
        self.cursor.turn_key = Some(fence.position());
        Ok(update)
    }

    fn next_append(&self, mode: InputMode, fence: &Fence<L>) -> Result<Appended, Error> {
        if !self.modes.contains(mode) {
            return Err(Error::UnsupportedMode {
                mode,
                supported: self.modes,
            });
        }
        self.fence.admits(fence)?;
        Ok(self.cursor.next(self.fence.epoch, fence.position()))
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
    > Session<Detached, SC, RC, R, B, D, A, L, K>
{
    /// The client came back within grace (SPEC §3 `resume`): checks and bumps
    /// the generation and returns the session `Open` with the new generation.
    ///
    /// # Errors
    ///
    /// The unchanged session with [`Error::FenceMismatch`] or
    /// [`Error::GenerationMismatch`].
    ///
    /// ```
    /// # use duplex_core::*;
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let s: Session = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// let d = s.detach(&f, Instant::ZERO).unwrap();
    /// let d = d.resume(&f, 5, Instant::ZERO).unwrap_err().session; // stale token
    /// let (open, generation) = d.resume(&f, 0, Instant::from_millis(50)).unwrap();
    /// assert_eq!((generation, open.last_activity()), (1, Instant::from_millis(50)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn resume(
        self,
        fence: &Fence<L>,
        expected_generation: u64,
        now: Instant,
    ) -> Result<(Session<Open, SC, RC, R, B, D, A, L, K>, u64), Rejected<Self>> {
        let mut session = self.guarded(|s| s.check_resume(fence, expected_generation))?;
        let generation = session.apply_resume(now);
        Ok((session.into_state(Open), generation))
    }
}

impl<
        S: super::state::Live,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
    > Session<S, SC, RC, R, B, D, A, L, K>
{
    fn check_resume(&self, fence: &Fence<L>, expected_generation: u64) -> Result<(), Error> {
        self.fence.admits(fence)?;
        if expected_generation != self.lease.generation {
            return Err(Error::GenerationMismatch {
                expected: self.lease.generation,
                actual: expected_generation,
            });
        }
        Ok(())
    }

    /// Bumps the generation and records activity; `detached_at` is cleared by
    /// the state change (Detached → Open) or was already clear (Open).
    fn apply_resume(&mut self, now: Instant) -> u64 {
        self.lease.generation = self.lease.generation.saturating_add(1);
        self.lease.last_activity = now;
        self.lease.generation
    }
}
