//! The completed-append cache: idempotency records of appends that
//! finished, so a retried delivery with the same operation id returns the
//! recorded results instead of applying twice. Oldest first; recording at the
//! limit evicts the oldest, never fails.

use crate::append::Finality;
use crate::columns::{rotate_in, rotate_out, swap_down};
use crate::error::{Error, Table};
use crate::fence::{Fence, Position};
use crate::mode::{InputMode, Modes};
use crate::profile::{ResultsRow, Tables};
use crate::storage::{Column, Storage, StoredId};

/// A completed append as its session keeps it: what
/// [`Session::completed_appends`](crate::Session::completed_appends) lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedAppend<'a, I> {
    /// The operation id (an [`Id`](crate::Id) with inline storage).
    pub operation: &'a I,
    /// The recorded fence's epoch.
    pub epoch: u64,
    /// The recorded fence's turn.
    pub turn: u64,
    /// The recorded fence's response.
    pub response: u64,
    /// Whether the recorded fence named this session and its incarnation
    /// (only such records answer [`Session::completed`](crate::Session::completed)).
    pub own_identity: bool,
    /// The recorded input mode.
    pub mode: InputMode,
    /// The recorded finality.
    pub finality: Finality,
    /// The recorded stage results.
    pub results: &'a [i64],
}

/// `meta` bit: the record's finality is `Final`.
const FINAL: u8 = 1 << 3;
/// `meta` bit: the recorded fence named this session and its incarnation.
/// Recording does not validate the fence, and a session's identity never
/// changes, so this one bit stands for the recorded id and incarnation: a
/// lookup (which validates its fence) matches only records that have it.
const OWN_IDENTITY: u8 = 1 << 4;

/// Capacities up to this are scanned, not searched: for a handful of ids
/// a scan of equal-length arrays beats a binary search's comparisons.
const LINEAR_MAX: usize = 16;

/// `meta` bits 0..5: the mode, [`FINAL`] and [`OWN_IDENTITY`].
const FLAGS: u8 = 0b1_1111;
/// `meta` bits 5..8: how many of the row's results are set (`K <= 7`).
const COUNT_SHIFT: u8 = 5;

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

/// The records, stored column by column in a ring of `D` slots (no
/// per-record padding; 90 bytes a record with the default profile, and one
/// more for the index). Record `i`, oldest first, is in slot `(head + i) %
/// D`, so evicting the oldest moves nothing. `sorted` lists the live
/// records' slots in op-id order, so a lookup is a binary search: 8 id
/// comparisons in a full window of 256, 3 in one of 8.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Completed<T: Tables> {
    ops: T::Completed<T::StoredId>,
    positions: T::Completed<Position>,
    results: T::Completed<T::Results>,
    /// Mode, flags and results count of each slot.
    metas: T::Completed<u8>,
    /// The live records' slots in op-id order: `sorted[..len]`.
    sorted: T::Completed<u8>,
    /// The oldest record's slot.
    head: u8,
    /// The runtime limit (in `1..=D`) less one, so that 256 fits a byte.
    limit_less_one: u8,
    len: u16,
    /// The input modes the session accepts. Not a record: the append
    /// settings (this, and the limit above) are kept together here, in
    /// what would otherwise be the table's padding, so that the session
    /// has no byte-sized field of its own and is a word smaller.
    modes: Modes,
}

impl<T: Tables> Completed<T> {
    /// An empty cache; `limit` must be in `1..=D` (checked by the caller).
    pub(crate) fn new(limit: u16, modes: Modes) -> Self {
        Completed {
            ops: Column::empty(),
            positions: Column::empty(),
            results: Column::empty(),
            metas: Column::empty(),
            sorted: Column::empty(),
            head: 0,
            limit_less_one: limit.saturating_sub(1) as u8,
            len: 0,
            modes,
        }
    }

    /// The input modes the session accepts.
    #[inline]
    pub(crate) fn modes(&self) -> Modes {
        self.modes
    }

    pub(crate) fn limit(&self) -> usize {
        usize::from(self.limit_less_one) + 1
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.head = 0;
        self.ops.trim_to(0);
        self.positions.trim_to(0);
        self.results.trim_to(0);
        self.metas.trim_to(0);
        self.sorted.trim_to(0);
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.ops.heap_bytes()
            + self.positions.heap_bytes()
            + self.results.heap_bytes()
            + self.metas.heap_bytes()
            + self.sorted.heap_bytes()
    }

    /// Slots in the ring: `D` inline (a constant, so `%` is a mask for a
    /// power of two), the limit on the heap (so that the columns never
    /// hold more rows than the limit).
    #[inline]
    fn ring(&self) -> usize {
        if <T::Storage as Storage>::GROWS {
            self.limit()
        } else {
            T::COMPLETED
        }
    }

    /// Empties the cache and sets a new limit (already checked) and modes.
    pub(crate) fn reset(&mut self, limit: u16, modes: Modes) {
        self.clear();
        self.limit_less_one = limit.saturating_sub(1) as u8;
        self.modes = modes;
    }

    /// The slot of record `i` (0 = oldest).
    #[inline]
    fn slot(&self, i: usize) -> usize {
        (usize::from(self.head) + i) % self.ring()
    }

    /// The record index (0 = oldest) of `slot`.
    #[inline]
    fn age(&self, slot: usize) -> usize {
        let ring = self.ring();
        (slot + ring - usize::from(self.head)) % ring
    }

    /// Where `op` is in `sorted`: `Ok(position)` if recorded, else
    /// `Err(position)` where it would go. A lower-bound search whose steps
    /// choose by a conditional move, not a branch: the direction of each
    /// step is a coin flip that a branch predictor would mostly miss.
    #[inline]
    fn search(&self, op: &T::Id) -> Result<usize, usize> {
        self.search_by(|o| o.index_cmp(op))
    }

    /// [`search`](Self::search) for the id in `slot`.
    #[inline]
    fn search_slot(&self, slot: usize) -> Result<usize, usize> {
        match self.ops.get(slot) {
            Some(op) => self.search_by(|o| o.order(op)),
            None => Err(0),
        }
    }

    /// The search, with `cmp` ordering a recorded op id against the one
    /// sought.
    #[inline]
    fn search_by(&self, cmp: impl Fn(&T::StoredId) -> core::cmp::Ordering) -> Result<usize, usize> {
        let live = self.sorted.get(..self.len()).unwrap_or_default();
        let before = |position: usize| {
            live.get(position)
                .and_then(|&slot| self.ops.get(usize::from(slot)))
                .map(&cmp)
        };
        let (mut base, mut size) = (0, live.len());
        while size > 1 {
            let half = size / 2;
            let mid = base + half;
            let less = before(mid) == Some(core::cmp::Ordering::Less);
            base = if less { mid } else { base };
            size -= half;
        }
        // `base` is the last entry below `op`, or 0: the first entry not
        // below it is here or next.
        let first = base + usize::from(before(base) == Some(core::cmp::Ordering::Less));
        if before(first) == Some(core::cmp::Ordering::Equal) {
            Ok(first)
        } else {
            Err(first)
        }
    }

    /// The slot of `op`, if recorded: a scan of a small window, a binary
    /// search of the index in a large one.
    #[inline]
    fn find(&self, op: &T::Id) -> Option<usize> {
        if T::COMPLETED <= LINEAR_MAX {
            return (0..self.len())
                .map(|i| self.slot(i))
                .find(|&slot| self.ops.get(slot).is_some_and(|o| o.is(op)));
        }
        let at = self.search(op).ok()?;
        self.sorted.get(at).map(|&slot| usize::from(slot))
    }

    /// The recorded op ids, oldest first.
    pub(crate) fn ops(&self) -> impl Iterator<Item = &T::StoredId> {
        (0..self.len()).filter_map(|i| self.ops.get(self.slot(i)))
    }

    /// The records `(op, results)`, oldest first.
    pub(crate) fn results(&self) -> impl Iterator<Item = (&T::StoredId, &[i64])> {
        (0..self.len()).filter_map(|i| {
            let slot = self.slot(i);
            let count = usize::from(*self.metas.get(slot)? >> COUNT_SHIFT);
            Some((
                self.ops.get(slot)?,
                self.results.get(slot)?.slots().get(..count)?,
            ))
        })
    }

    /// The records, oldest first, decoded.
    pub(crate) fn entries(&self) -> impl Iterator<Item = CompletedAppend<'_, T::StoredId>> {
        (0..self.len()).filter_map(|i| {
            let slot = self.slot(i);
            let meta = *self.metas.get(slot)?;
            let position = *self.positions.get(slot)?;
            Some(CompletedAppend {
                operation: self.ops.get(slot)?,
                epoch: position.epoch,
                turn: position.turn,
                response: position.response,
                own_identity: meta & OWN_IDENTITY != 0,
                mode: *InputMode::ALL.get(usize::from(meta & 0b111))?,
                finality: Finality::from(meta & FINAL != 0),
                results: self
                    .results
                    .get(slot)?
                    .slots()
                    .get(..usize::from(meta >> COUNT_SHIFT))?,
            })
        })
    }

    /// The records `(op, position, results, meta byte)`, oldest first, for
    /// snapshots (the meta byte without the results count).
    #[cfg(feature = "serde")]
    pub(crate) fn records(&self) -> impl Iterator<Item = (&T::StoredId, Position, &[i64], u8)> {
        (0..self.len()).filter_map(|i| {
            let slot = self.slot(i);
            let meta = *self.metas.get(slot)?;
            Some((
                self.ops.get(slot)?,
                *self.positions.get(slot)?,
                self.results
                    .get(slot)?
                    .slots()
                    .get(..usize::from(meta >> COUNT_SHIFT))?,
                meta & FLAGS,
            ))
        })
    }

    /// A cache from a snapshot's limit and records, if they form one: a
    /// limit in `1..=D`, at most `limit` records, each op id once, each
    /// meta byte a mode and known flags, at most `K` results each.
    #[cfg(feature = "serde")]
    pub(crate) fn from_records(
        limit: u16,
        modes: Modes,
        records: impl Iterator<Item = (T::Id, Position, crate::append::StageResults<T>, u8)>,
    ) -> Result<Self, &'static str> {
        if limit == 0 || usize::from(limit) > T::COMPLETED {
            return Err("a completed-append limit outside 1..=D");
        }
        let mut c = Completed::new(limit, modes);
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
                &results,
            )
            .map_err(|_| "a completed append with more results than the capacity")?;
        }
        Ok(c)
    }

    /// `completed`, after the fence was validated.
    #[inline]
    pub(crate) fn lookup(
        &self,
        fence: &Fence<T::Id>,
        op: &T::Id,
        mode: InputMode,
        finality: Finality,
    ) -> Result<Option<&[i64]>, Error> {
        let Some(slot) = self.find(op) else {
            return Ok(None);
        };
        let m = self.metas.get(slot).copied().unwrap_or_default();
        let matches = m & FLAGS == meta(mode, finality, true)
            && self.positions.get(slot) == Some(&fence.position());
        if !matches {
            return Err(Error::OperationReused);
        }
        let count = usize::from(m >> COUNT_SHIFT);
        Ok(Some(
            self.results
                .get(slot)
                .and_then(|r| r.slots().get(..count))
                .unwrap_or_default(),
        ))
    }

    /// Drops the oldest record: its slot leaves the ring's front.
    fn evict_oldest(&mut self) {
        if self.len == 0 {
            return;
        }
        let (slot, len) = (usize::from(self.head), self.len());
        if let Ok(at) = self.search_slot(slot) {
            rotate_out(&mut self.sorted, at, len);
        }
        self.head = (self.slot(1)) as u8;
        self.len -= 1;
    }

    /// Drops the record in `slot`, keeping the order of the others: the
    /// younger records each move one slot towards the front (the rare path
    /// of re-recording an op id).
    fn remove(&mut self, slot: usize) {
        let len = self.len();
        let age = self.age(slot);
        if age >= len {
            return;
        }
        if let Ok(at) = self.search_slot(slot) {
            rotate_out(&mut self.sorted, at, len);
        }
        for i in age..len - 1 {
            let (to, from) = (self.slot(i), self.slot(i + 1));
            swap_slots(&mut self.ops, to, from);
            swap_slots(&mut self.positions, to, from);
            swap_slots(&mut self.results, to, from);
            swap_slots(&mut self.metas, to, from);
        }
        self.len -= 1;
        // The younger records' slots moved one towards the front.
        let (head, live, ring) = (usize::from(self.head), self.len(), self.ring());
        for s in self.sorted.iter_mut().take(live) {
            let moved = (usize::from(*s) + ring - head) % ring > age;
            if moved {
                *s = ((usize::from(*s) + ring - 1) % ring) as u8;
            }
        }
    }

    /// `record_completed`: insert or replace as newest, evict the oldest
    /// beyond the limit. `own_identity` says whether `fence` names the
    /// session and its incarnation.
    pub(crate) fn record(
        &mut self,
        own_identity: bool,
        fence: &Fence<T::Id>,
        op: &T::Id,
        mode: InputMode,
        finality: Finality,
        results: &[i64],
    ) -> Result<(), Error> {
        let (true, Ok(count)) = (
            results.len() <= T::STAGE_RESULTS,
            u8::try_from(results.len()),
        ) else {
            return Err(Error::Full {
                table: Table::StageResults,
                capacity: T::STAGE_RESULTS,
            });
        };
        if let Some(slot) = self.find(op) {
            self.remove(slot);
        } else if self.len() >= self.limit() {
            self.evict_oldest();
        }
        // Room was made above: len < limit <= D.
        let len = self.len();
        let slot = self.slot(len);
        let Err(at) = self.search(op) else {
            return Ok(());
        };
        self.ops.grow_to(slot + 1);
        self.positions.grow_to(slot + 1);
        self.results.grow_to(slot + 1);
        self.metas.grow_to(slot + 1);
        self.sorted.grow_to(len + 1);
        if let (Some(o), Some(p), Some(r), Some(m)) = (
            self.ops.get_mut(slot),
            self.positions.get_mut(slot),
            self.results.get_mut(slot),
            self.metas.get_mut(slot),
        ) {
            o.set(op);
            *p = fence.position();
            if let Some(dst) = r.slots_mut().get_mut(..results.len()) {
                dst.copy_from_slice(results);
            }
            *m = meta(mode, finality, own_identity) | (count << COUNT_SHIFT);
            rotate_in(&mut self.sorted, at, len, slot as u8);
            self.len += 1;
        }
        Ok(())
    }
}

/// Swaps slots `a` and `b` of a column; nothing if either is not a slot.
fn swap_slots<T>(column: &mut [T], a: usize, b: usize) {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    swap_down(column, lo, hi);
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::vec::Vec;

    use super::Completed;
    use crate::append::Finality;
    use crate::fence::Fence;
    use crate::id::Id;
    use crate::mode::{InputMode, Modes};
    use crate::profile::Capacities;

    const AUDIO: InputMode = InputMode::AppendAudioChunk;

    /// The cache against a plain list (oldest first) under random records,
    /// re-records, lookups and clears: the ring wraps, the index follows.
    fn matches_a_list<const D: usize>(limit: u16, steps: usize, seed: u64) {
        let mut x = seed;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let fence = Fence::<Id<16>>::new(Id::new("s").unwrap(), 0);
        let mut cache = Completed::<Capacities<1, 1, D, 1, 16, 1>>::new(limit, Modes::default());
        let mut model: Vec<(Id<16>, i64)> = Vec::new();
        for step in 0..steps {
            let op = Id::<16>::new(&std::format!("op-{}", next(3 * u64::from(limit)))).unwrap();
            match next(10) {
                0 => {
                    cache.clear();
                    model.clear();
                }
                1..=5 => {
                    let value = i64::try_from(step).unwrap();
                    cache
                        .record(true, &fence, &op, AUDIO, Finality::Partial, &[value])
                        .unwrap();
                    model.retain(|(o, _)| *o != op);
                    if model.len() >= usize::from(limit) {
                        model.remove(0);
                    }
                    model.push((op.clone(), value));
                }
                _ => {}
            }
            let expected = model
                .iter()
                .find(|(o, _)| *o == op)
                .map(|(_, v)| std::vec![*v]);
            let got = cache
                .lookup(&fence, &op, AUDIO, Finality::Partial)
                .unwrap()
                .map(<[i64]>::to_vec);
            assert_eq!(got, expected, "step {step}, op {op}");
            let ops: Vec<&Id<16>> = cache.ops().collect();
            let want: Vec<&Id<16>> = model.iter().map(|(o, _)| o).collect();
            assert_eq!(ops, want, "step {step}: order");
        }
    }

    #[test]
    fn a_full_window_of_256_behaves_as_a_list() {
        matches_a_list::<256>(256, 20_000, 0x2545_f491_4f6c_dd1d);
    }

    #[test]
    fn a_runtime_limit_below_the_capacity_behaves_as_a_list() {
        matches_a_list::<256>(100, 10_000, 7);
        matches_a_list::<8>(8, 5_000, 11);
        matches_a_list::<8>(3, 5_000, 13);
        matches_a_list::<1>(1, 1_000, 17);
    }
}
