//! Draining: whose output a request's output is, once a newer turn or
//! response has taken over.
//!
//! A session owns its stage requests under the fence they were bound (or
//! reserved) with, which names the turn and response they work for. When
//! the next turn starts while the previous answer still plays (vllm-omni
//! 0.30's concurrent turn requests), the previous turn's requests that keep
//! running are *draining*: their output belongs to the response they were
//! bound for, never to the new one. After a barge-in, the requests the host
//! keeps (a speaker stage still flushing, an engine that cannot abort at
//! once) stay bound under the cancelled epoch: their late output is
//! *stale* and is dropped. Either way they stay the session's until
//! released, exactly once. [`Session::drain`](crate::Session::drain) moves
//! the session on (a new turn, or a barge-in's new epoch), releasing the
//! previous position's requests except on the stages the host keeps.
//!
//! A request that works for every turn (a resident stage) is bound again
//! at each turn's fence, which moves it to the current position.
//!
//! The route is derived from what the session already stores (each
//! request's fence): draining costs no byte of session state.
//!
//! # Examples
//!
//! ```
//! use duplex_core::*;
//! use duplex_core::drain::Owner;
//!
//! let f = Fence::new(Id::new("s")?, 0);
//! let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
//! s.bind(&f, 1, &Id::new("llm-0")?)?;
//! s.bind(&f, 2, &Id::new("tts-0")?)?;
//! // The next turn starts while tts-0 still speaks: the speaker drains.
//! let t1 = f.clone().with_turn(1);
//! assert_eq!(s.drain(&f, &t1, |stage| stage == 2)?.as_slice(), [Id::new("llm-0")?]);
//! s.bind(&t1, 2, &Id::new("tts-1")?)?;
//! assert_eq!(s.route_output("tts-0").map(|r| r.owner), Some(Owner::Draining));
//! assert_eq!(s.route_output("tts-1").map(|r| r.owner), Some(Owner::Current));
//! // A barge-in keeps the speaker's request bound, stale.
//! assert!(s.drain(&t1, &t1.clone().with_epoch(1), |stage| stage == 2)?.is_empty());
//! assert_eq!(s.route_output("tts-1").map(|r| r.owner), Some(Owner::Stale));
//! assert_eq!(s.release_drained().len(), 2);
//! assert_eq!(s.route_output("tts-0"), None);
//! # Ok::<(), Error>(())
//! ```

use core::fmt;

use crate::base::Stamp;
use crate::fence::Position;
use crate::profile::Tables;
use crate::requests::{RequestIds, Requests, Row};
use crate::storage::StoredId;

/// Whose output a request's output is.
///
/// ```
/// use duplex_core::drain::Owner;
/// assert!(Owner::Draining.keeps_output());
/// assert!(!Owner::Stale.keeps_output());
/// assert_eq!(Owner::Stale.as_str(), "stale");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Owner {
    /// Bound under a cancelled epoch (a barge-in): late output, dropped.
    Stale,
    /// Bound under an earlier turn or response of the current epoch: its
    /// output belongs to the response it was bound for.
    Draining,
    /// Bound (or reserved) under the session's current fence, or one it
    /// has not reached yet: the current response's output.
    Current,
}

impl Owner {
    /// The owner's name: `current`, `draining` or `stale`.
    ///
    /// ```
    /// # use duplex_core::drain::Owner;
    /// assert_eq!(Owner::Current.as_str(), "current");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Owner::Current => "current",
            Owner::Draining => "draining",
            Owner::Stale => "stale",
        }
    }

    /// Whether it is the current response's.
    ///
    /// ```
    /// # use duplex_core::drain::Owner;
    /// assert!(Owner::Current.is_current() && !Owner::Draining.is_current());
    /// ```
    pub const fn is_current(self) -> bool {
        matches!(self, Owner::Current)
    }

    /// Whether the output is used: the current response's, or a draining
    /// one's (attributed to the response its request was bound for).
    ///
    /// ```
    /// # use duplex_core::drain::Owner;
    /// assert!(Owner::Current.keeps_output());
    /// ```
    pub const fn keeps_output(self) -> bool {
        !matches!(self, Owner::Stale)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request's output goes: its stage, the fence it was bound (or
/// reserved) under, which names its response, and its [`Owner`].
///
/// ```
/// use duplex_core::*;
/// use duplex_core::drain::Owner;
/// let f = Fence::new(Id::new("s")?, 0).with_turn(3);
/// let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
/// s.bind(&f, 1, &Id::new("llm")?)?;
/// let route = s.route_output("llm").expect("owned");
/// assert_eq!((route.stage, route.bound_at.turn, route.owner), (1, 3, Owner::Current));
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OutputRoute {
    /// The stage the request runs on.
    pub stage: u32,
    /// The fence numbers it was bound under (its response's).
    pub bound_at: Stamp,
    /// Whose output it is.
    pub owner: Owner,
}

/// The owner of one resource row when the session stands at `current`.
fn owner_of<I>(row: &Row<'_, I>, current: Position) -> Owner {
    if row.position.epoch < current.epoch {
        Owner::Stale
    } else if row.position.is_behind(current) {
        Owner::Draining
    } else {
        Owner::Current
    }
}

impl<T: Tables> Requests<T> {
    /// The route of `request`'s output, or `None` if the session does not
    /// own it. A request held on two stages takes its most current route.
    pub(crate) fn route(
        &self,
        request: &str,
        current: Position,
        incarnation: u64,
    ) -> Option<OutputRoute> {
        self.rows()
            .filter(|r| r.request.text() == request)
            .map(|r| route(&r, current, incarnation))
            .max_by_key(|r| r.owner)
    }

    /// Returns the unique ids at exactly `at` on the stages `keep` does not
    /// keep, then drops those rows; the kept ones stay, behind the fence.
    pub(crate) fn release_position_except(
        &mut self,
        at: Position,
        keep: impl Fn(u32) -> bool + Copy,
    ) -> RequestIds<T> {
        let gone = move |r: &Row<'_, T::StoredId>| r.position == at && !keep(r.stage);
        let ids = RequestIds::collect(self.ids_where(gone));
        self.remove_rows(|r| gone(&r));
        ids
    }

    /// Whether row `r` drains: it is not current, and its id is current on
    /// no other stage (a request that is still some stage's live request
    /// is the current response's, whatever else it was bound for).
    fn drains(&self, r: &Row<'_, T::StoredId>, current: Position) -> bool {
        owner_of(r, current) != Owner::Current
            && !self
                .rows()
                .any(|e| e.request.same(r.request) && owner_of(&e, current) == Owner::Current)
    }

    /// Returns the unique ids of the draining rows, then drops those rows.
    pub(crate) fn release_drained(&mut self, current: Position) -> RequestIds<T> {
        let ids = self.draining_ids(current);
        self.remove_rows(|r| ids.contains(r.request.text()));
        ids
    }

    /// The unique ids of the draining rows.
    pub(crate) fn draining_ids(&self, current: Position) -> RequestIds<T> {
        RequestIds::collect(self.ids_where(|r| self.drains(r, current)))
    }

    /// The draining rows, with their routes.
    pub(crate) fn draining(
        &self,
        current: Position,
        incarnation: u64,
    ) -> impl Iterator<Item = (&T::StoredId, OutputRoute)> {
        self.rows()
            .filter(move |r| self.drains(r, current))
            .map(move |r| (r.request, route(&r, current, incarnation)))
    }
}

fn route<I>(row: &Row<'_, I>, current: Position, incarnation: u64) -> OutputRoute {
    OutputRoute {
        stage: row.stage,
        bound_at: Stamp {
            incarnation,
            epoch: row.position.epoch,
            turn: row.position.turn,
            response: row.position.response,
        },
        owner: owner_of(row, current),
    }
}

#[cfg(test)]
mod tests {
    use super::Owner;
    use crate::{Error, ErrorKind, Fence, Id, Instant, Open, OpenOptions, Session};

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn open() -> (Session<Open>, Fence) {
        let f = Fence::new(id("s"), 0);
        let s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap();
        (s, f)
    }

    fn owner(s: &Session<Open>, r: &str) -> Option<Owner> {
        s.route_output(r).map(|r| r.owner)
    }

    #[test]
    fn an_earlier_turns_request_drains_and_names_its_response() -> Result<(), Error> {
        let (mut s, f) = open();
        let t1 = f.clone().with_turn(1).with_response(2);
        s.bind(&f, 0, &id("resident"))?;
        s.bind(&f, 2, &id("tts-0"))?;
        s.reserve(&f, 3, &id("never-bound"))?;
        s.bind(&t1, 2, &id("tts-1"))?;
        s.reserve(&t1, 3, &id("next"))?;
        // The resident stage is bound again at each turn's fence.
        s.bind(&t1, 0, &id("resident"))?;
        for current in ["resident", "tts-1", "next"] {
            assert_eq!(owner(&s, current), Some(Owner::Current), "{current}");
        }
        assert_eq!(owner(&s, "never-bound"), Some(Owner::Draining));
        let route = s.route_output("tts-0").unwrap();
        assert_eq!((route.owner, route.stage), (Owner::Draining, 2));
        assert_eq!((route.bound_at.turn, route.bound_at.response), (0, 0));
        assert_eq!(owner(&s, "nobody"), None);
        Ok(())
    }

    #[test]
    fn a_new_turn_keeps_the_draining_stages_and_releases_the_rest() -> Result<(), Error> {
        let (mut s, f) = open();
        s.bind(&f, 1, &id("llm"))?;
        s.bind(&f, 2, &id("tts"))?;
        let t1 = f.clone().with_turn(1);
        assert_eq!(
            s.drain(&f, &t1, |stage| stage == 2)?.as_slice(),
            [id("llm")]
        );
        assert_eq!((s.fence(), owner(&s, "tts")), (&t1, Some(Owner::Draining)));
        // Not ahead: refused, nothing changes.
        let e = s.drain(&t1, &t1, |_| true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FenceMismatch);
        assert_eq!(owner(&s, "tts"), Some(Owner::Draining));
        Ok(())
    }

    #[test]
    fn a_draining_barge_in_keeps_only_what_it_is_told_to() -> Result<(), Error> {
        let (mut s, f) = open();
        s.bind(&f, 1, &id("llm"))?;
        s.bind(&f, 2, &id("tts"))?;
        let older = f.clone().with_turn(0);
        let released = s.drain(&older, &f.clone().with_epoch(1), |stage| stage == 2)?;
        assert_eq!(released.as_slice(), [id("llm")]);
        assert_eq!(owner(&s, "llm"), None);
        assert_eq!(owner(&s, "tts"), Some(Owner::Stale));
        // The new epoch's request on the same stage is current; the old
        // one stays stale, not draining.
        let e1 = f.clone().with_epoch(1);
        s.bind(&e1, 2, &id("tts-new"))?;
        assert_eq!(owner(&s, "tts"), Some(Owner::Stale));
        assert_eq!(owner(&s, "tts-new"), Some(Owner::Current));
        assert_eq!(s.draining().count(), 1);
        Ok(())
    }

    #[test]
    fn a_refused_drain_changes_nothing() -> Result<(), Error> {
        let (mut s, f) = open();
        s.bind(&f, 2, &id("tts"))?;
        let e2 = f.clone().with_epoch(2);
        s.accept_fence(&e2)?;
        // `next` not ahead of `cancelled`; `cancelled` ahead of the session.
        let not_advancing = s.drain(&f, &f, |_| true).unwrap_err();
        let ahead = s.drain(&f.clone().with_epoch(3), &f.clone().with_epoch(4), |_| {
            false
        });
        assert_eq!(not_advancing.kind(), ErrorKind::FenceMismatch);
        assert_eq!(ahead.unwrap_err().kind(), ErrorKind::FenceMismatch);
        assert_eq!((s.fence(), owner(&s, "tts")), (&e2, Some(Owner::Stale)));
        // A late drain never moves the session backwards.
        assert!(s.drain(&f, &f.clone().with_epoch(1), |_| true)?.is_empty());
        assert_eq!(s.fence(), &e2);
        Ok(())
    }

    #[test]
    fn drained_requests_are_released_once() -> Result<(), Error> {
        let (mut s, f) = open();
        let t1 = f.clone().with_turn(1);
        s.bind(&f, 0, &id("resident"))?;
        s.bind(&f, 2, &id("tts-0"))?;
        s.bind(&t1, 2, &id("tts-1"))?;
        s.bind(&t1, 3, &id("tts-0"))?;
        // tts-0 is draining on stage 2 but current on stage 3: it is the
        // current response's, on every stage.
        assert_eq!(owner(&s, "tts-0"), Some(Owner::Current));
        assert!(s.draining().map(|(r, _)| r.as_str()).eq(["resident"]));
        assert_eq!(s.release_drained().as_slice(), [id("resident")]);
        assert!(s.release_drained().is_empty());
        assert_eq!(s.resources().count(), 3);
        let e1 = f.clone().with_epoch(1);
        assert!(s.drain(&t1, &e1, |_| true)?.is_empty());
        // Everything is behind the new epoch now.
        assert_eq!(owner(&s, "tts-1"), Some(Owner::Stale));
        let released = s.release_drained();
        assert_eq!(released.as_slice(), [id("tts-0"), id("tts-1")]);
        assert!(s.release_drained().is_empty());
        assert_eq!(s.resources().count(), 0);
        Ok(())
    }

    #[test]
    fn cancel_is_a_drain_that_keeps_nothing() -> Result<(), Error> {
        let (mut a, f) = open();
        let (mut b, _) = open();
        for s in [&mut a, &mut b] {
            s.bind(&f, 1, &id("llm"))?;
            s.bind(&f, 2, &id("tts"))?;
            s.bind(&f.clone().with_turn(1), 3, &id("late"))?;
        }
        let next = f.clone().with_epoch(1);
        assert_eq!(a.cancel(&f, &next)?, b.drain(&f, &next, |_| false)?);
        assert!(a.resources().eq(b.resources()));
        assert_eq!(a.fence(), b.fence());
        Ok(())
    }
}
