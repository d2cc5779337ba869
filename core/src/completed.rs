//! The completed-append cache (SPEC §4): idempotency records of appends that
//! finished, so a retried delivery with the same operation id returns the
//! recorded results instead of applying twice. Oldest first; recording at the
//! limit evicts the oldest, never fails.

use crate::error::{Error, Table};
use crate::fence::{Fence, Position};
use crate::id::Id;
use crate::mode::InputMode;

#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Record<const L: usize, const K: usize> {
    pub(crate) op: Id<L>,
    /// Whether the recorded fence named this session (recording does not
    /// validate the fence; a lookup, which does, then reports reuse).
    same_session: bool,
    incarnation: u64,
    position: Position,
    mode: InputMode,
    final_: bool,
    results: heapless::Vec<i64, K, u8>,
}

impl<const L: usize, const K: usize> Record<L, K> {
    fn matches(&self, fence: &Fence<L>, mode: InputMode, final_: bool) -> bool {
        self.same_session
            && self.incarnation == fence.incarnation
            && self.position == fence.position()
            && self.mode == mode
            && self.final_ == final_
    }
}

#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Completed<const D: usize, const L: usize, const K: usize> {
    /// Oldest first.
    records: heapless::Vec<Record<L, K>, D, u8>,
    /// Runtime limit in `1..=D`.
    limit: u8,
}

impl<const D: usize, const L: usize, const K: usize> Completed<D, L, K> {
    pub(crate) const fn new(limit: u8) -> Self {
        Completed {
            records: heapless::Vec::new(),
            limit,
        }
    }

    pub(crate) fn limit(&self) -> usize {
        usize::from(self.limit)
    }

    pub(crate) fn clear(&mut self) {
        self.records.clear();
    }

    pub(crate) fn ops(&self) -> impl Iterator<Item = &Id<L>> {
        self.records.iter().map(|r| &r.op)
    }

    /// SPEC `completed`, after the fence was validated.
    pub(crate) fn lookup(
        &self,
        op: &Id<L>,
        fence: &Fence<L>,
        mode: InputMode,
        final_: bool,
    ) -> Result<Option<&[i64]>, Error> {
        match self.records.iter().find(|r| &r.op == op) {
            None => Ok(None),
            Some(r) if r.matches(fence, mode, final_) => Ok(Some(&r.results)),
            Some(_) => Err(Error::OperationReused),
        }
    }

    /// SPEC `record_completed`: insert or replace as newest, evict the oldest
    /// beyond the limit.
    pub(crate) fn record(
        &mut self,
        session: &Id<L>,
        op: &Id<L>,
        fence: &Fence<L>,
        mode: InputMode,
        final_: bool,
        results: &[i64],
    ) -> Result<(), Error> {
        let results = heapless::Vec::from_slice(results).map_err(|_| Error::Full {
            table: Table::StageResults,
            capacity: K,
        })?;
        if let Some(i) = self.records.iter().position(|r| &r.op == op) {
            self.records.remove(i);
        } else if self.records.len() >= self.limit() {
            self.records.remove(0);
        }
        let record = Record {
            op: op.clone(),
            same_session: fence.session == *session,
            incarnation: fence.incarnation,
            position: fence.position(),
            mode,
            final_,
            results,
        };
        // Room was made above: len < limit <= D.
        let _ = self.records.push(record);
        Ok(())
    }
}
