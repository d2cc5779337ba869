//! The manager's deadlines: a min-heap of `(deadline, session id)` hints.
//! A session pushes its deadline whenever it may have come earlier (open,
//! detach, ending an operation); a later deadline (activity) is found when
//! the hint comes due and the session says it is not. Collecting expired
//! sessions is O(due), not O(sessions).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Mutex, PoisonError};

use duplex_core::Instant;

/// The heap of hints.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: Mutex<BinaryHeap<Reverse<(u64, String)>>>,
}

impl Timers {
    /// A hint that `session` may be due at `at`.
    pub(crate) fn push(&self, at: Instant, session: &str) {
        let mut heap = self.heap.lock().unwrap_or_else(PoisonError::into_inner);
        heap.push(Reverse((at.as_millis(), session.to_owned())));
    }

    /// Removes and returns the hints due at `now`.
    pub(crate) fn due(&self, now: Instant) -> Vec<String> {
        let mut heap = self.heap.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        while heap
            .peek()
            .is_some_and(|Reverse((at, _))| *at <= now.as_millis())
        {
            if let Some(Reverse((_, id))) = heap.pop() {
                out.push(id);
            }
        }
        out
    }

    /// How many hints are queued.
    pub(crate) fn len(&self) -> usize {
        self.heap
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Replaces the hints (compaction, when stale ones pile up).
    pub(crate) fn replace(&self, hints: Vec<(Instant, String)>) {
        let heap: BinaryHeap<_> = hints
            .into_iter()
            .map(|(at, id)| Reverse((at.as_millis(), id)))
            .collect();
        *self.heap.lock().unwrap_or_else(PoisonError::into_inner) = heap;
    }
}
