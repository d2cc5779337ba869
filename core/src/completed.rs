//! The completed-append cache: idempotency records of appends that
//! finished, so a retried delivery with the same operation id returns the
//! recorded results instead of applying twice. Oldest first; recording at the
//! limit evicts the oldest, never fails.

use crate::append::Finality;
use crate::columns::rotate_out;
use crate::error::{Error, Table};
use crate::fence::{Fence, Position};
use crate::id::Id;
use crate::mode::InputMode;

/// `meta` bit: the record's finality is `Final`.
const FINAL: u8 = 1 << 3;
/// `meta` bit: the recorded fence named this session and its incarnation.
/// Recording does not validate the fence, and a session's identity never
/// changes, so this one bit stands for the recorded id and incarnation: a
/// lookup (which validates its fence) matches only records that have it.
const OWN_IDENTITY: u8 = 1 << 4;

/// The metadata byte: mode index (bits 0..3), finality, identity.
fn meta(mode: InputMode, finality: Finality, own_identity: bool) -> u8 {
    let mut m = mode.index();
    if finality.is_final() {
        m |= FINAL;
    }
    if own_identity {
        m |= OWN_IDENTITY;
    }
    m
}

/// The records, stored column by column (no per-record padding; 91 bytes
/// a record with the default profile). Rows `0..len` are live, oldest
/// first.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Completed<const D: usize, const L: usize, const K: usize> {
    ops: [Id<L>; D],
    positions: [Position; D],
    results: [[i64; K]; D],
    /// How many of each row's `results` are set (`<= K <= 255`).
    counts: [u8; D],
    metas: [u8; D],
    len: u8,
    /// Runtime limit in `1..=D`.
    limit: u8,
}

impl<const D: usize, const L: usize, const K: usize> Completed<D, L, K> {
    pub(crate) const fn new(limit: u8) -> Self {
        Completed {
            ops: [const { Id::UNUSED }; D],
            positions: [Position {
                epoch: 0,
                turn: 0,
                response: 0,
            }; D],
            results: [[0; K]; D],
            counts: [0; D],
            metas: [0; D],
            len: 0,
            limit,
        }
    }

    pub(crate) fn limit(&self) -> usize {
        usize::from(self.limit)
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Empties the cache and sets a new limit (already checked).
    pub(crate) fn reset(&mut self, limit: u8) {
        self.len = 0;
        self.limit = limit;
    }

    pub(crate) fn ops(&self) -> impl Iterator<Item = &Id<L>> {
        self.ops.iter().take(usize::from(self.len))
    }

    #[inline]
    fn find(&self, op: &Id<L>) -> Option<usize> {
        self.ops().position(|o| o == op)
    }

    /// The records `(op, position, results, meta byte)`, oldest first, for
    /// snapshots.
    #[cfg(feature = "serde")]
    pub(crate) fn records(&self) -> impl Iterator<Item = (&Id<L>, Position, &[i64], u8)> {
        (0..usize::from(self.len)).filter_map(|i| {
            let count = usize::from(*self.counts.get(i)?);
            Some((
                self.ops.get(i)?,
                *self.positions.get(i)?,
                self.results.get(i)?.get(..count)?,
                *self.metas.get(i)?,
            ))
        })
    }

    /// A cache from a snapshot's limit and records, if they form one: a
    /// limit in `1..=D`, at most `limit` records, each op id once, each
    /// meta byte a mode and known flags, at most `K` results each.
    #[cfg(feature = "serde")]
    pub(crate) fn from_records<'a>(
        limit: u8,
        records: impl Iterator<Item = (Id<L>, Position, &'a [i64], u8)>,
    ) -> Result<Self, &'static str> {
        if limit == 0 || usize::from(limit) > D {
            return Err("a completed-append limit outside 1..=D");
        }
        let mut c = Completed::new(limit);
        for (op, position, results, meta) in records {
            if c.len >= limit {
                return Err("more completed appends than the limit");
            }
            if c.find(&op).is_some() {
                return Err("a completed append appears twice");
            }
            let mode = InputMode::ALL.get(usize::from(meta & 0b111)).copied();
            let Some(mode) = mode.filter(|_| meta & !(0b111 | FINAL | OWN_IDENTITY) == 0) else {
                return Err("a completed append with an unknown mode or flag");
            };
            let finality = Finality::from(meta & FINAL != 0);
            let fence = crate::fence::Fence {
                session: op.clone(),
                incarnation: 0,
                epoch: position.epoch,
                turn: position.turn,
                response: position.response,
            };
            c.record(
                meta & OWN_IDENTITY != 0,
                &fence,
                &op,
                mode,
                finality,
                results,
            )
            .map_err(|_| "a completed append with more results than the capacity")?;
        }
        Ok(c)
    }

    /// `completed`, after the fence was validated.
    #[inline]
    pub(crate) fn lookup(
        &self,
        fence: &Fence<L>,
        op: &Id<L>,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<&[i64]>, Error> {
        let Some(i) = self.find(op) else {
            return Ok(None);
        };
        let matches = self.metas.get(i) == Some(&meta(mode, finality, true))
            && self.positions.get(i) == Some(&fence.position());
        if !matches {
            return Err(Error::OperationReused);
        }
        let count = self.counts.get(i).map_or(0, |c| usize::from(*c));
        Ok(Some(
            self.results
                .get(i)
                .and_then(|r| r.get(..count))
                .unwrap_or_default(),
        ))
    }

    /// Moves rows `from+1..len` one place towards the front, dropping row
    /// `from`.
    fn remove(&mut self, from: usize) {
        let len = usize::from(self.len);
        if from >= len {
            return;
        }
        rotate_out(&mut self.ops, from, len);
        rotate_out(&mut self.positions, from, len);
        rotate_out(&mut self.results, from, len);
        rotate_out(&mut self.counts, from, len);
        rotate_out(&mut self.metas, from, len);
        self.len = self.len.saturating_sub(1);
    }

    /// `record_completed`: insert or replace as newest, evict the oldest
    /// beyond the limit. `own_identity` says whether `fence` names the
    /// session and its incarnation.
    pub(crate) fn record(
        &mut self,
        own_identity: bool,
        fence: &Fence<L>,
        op: &Id<L>,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error> {
        let (Some(_), Ok(count)) = ([0_i64; K].get(..results.len()), u8::try_from(results.len()))
        else {
            return Err(Error::Full {
                table: Table::StageResults,
                capacity: K,
            });
        };
        if let Some(i) = self.find(op) {
            self.remove(i);
        } else if self.len >= self.limit {
            self.remove(0);
        }
        // Room was made above: len < limit <= D.
        let i = usize::from(self.len);
        if let (Some(o), Some(p), Some(r), Some(c), Some(m)) = (
            self.ops.get_mut(i),
            self.positions.get_mut(i),
            self.results.get_mut(i),
            self.counts.get_mut(i),
            self.metas.get_mut(i),
        ) {
            o.clone_from(op);
            *p = fence.position();
            if let Some(dst) = r.get_mut(..results.len()) {
                dst.copy_from_slice(results);
            }
            *c = count;
            *m = meta(mode, finality, own_identity);
            self.len += 1;
        }
        Ok(())
    }
}
