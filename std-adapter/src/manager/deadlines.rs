//! The deadline index: an indexed binary min-heap of `(deadline, slot)`,
//! at most one entry per session slot.
//!
//! Each entry is a *lower bound* on its session's real deadline. Operations
//! that can only move a deadline later (touch, append, resume, begin an
//! operation) leave the heap alone, so the hot path costs nothing here; the
//! ones that can move it earlier (open, detach, ending the last operation)
//! lower the key; closing removes the entry. When an entry comes due, the
//! manager recomputes the session's real deadline and either expires it or
//! raises the key. `collect_expired` therefore visits only due entries:
//! O(due · log n), and O(1) when nothing is due.
//!
//! An indexed heap (each slot knows its heap position) rather than a heap
//! with lazy deletion keeps exactly one entry per session, so churn (open,
//! close, open, ...) never accumulates stale entries.
//!
//! Memory: keys and slots are parallel arrays (12 bytes an entry instead of
//! a padded 16), and every array grows with the session slab by at least an
//! eighth of its size rather than doubling, so a table of a million
//! sessions carries at most 12.5% slack here.

use duplex_core::Instant;

const NONE: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    /// Heap order: `keys[i]` is the deadline of `slots[i]`.
    keys: Vec<Instant>,
    slots: Vec<u32>,
    /// Heap position of each slot's entry, or `NONE`.
    pos: Vec<u32>,
}

/// Grows `v`'s capacity to at least `want`, by at least an eighth (bounded
/// slack, amortized O(1) copying).
pub(super) fn reserve_towards<T>(v: &mut Vec<T>, want: usize) {
    if v.capacity() < want {
        let more = (want - v.len()).max(v.capacity() / 8);
        v.reserve_exact(more);
    }
}

impl Deadlines {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Makes room for slot ids below `slots`.
    pub(crate) fn grow_to(&mut self, slots: usize) {
        if self.pos.len() < slots {
            reserve_towards(&mut self.pos, slots);
            self.pos.resize(slots, NONE);
            // At most one entry per slot: the heap never needs more.
            reserve_towards(&mut self.keys, slots);
            reserve_towards(&mut self.slots, slots);
        }
    }

    pub(crate) fn peek(&self) -> Option<(Instant, u32)> {
        Some((*self.keys.first()?, *self.slots.first()?))
    }

    pub(crate) fn key(&self, slot: u32) -> Option<Instant> {
        match self.pos.get(slot as usize) {
            Some(&p) if p != NONE => self.keys.get(p as usize).copied(),
            _ => None,
        }
    }

    /// Ensures the slot's entry is no later than `t` (insert or lower).
    pub(crate) fn lower_to(&mut self, slot: u32, t: Instant) {
        match self.key(slot) {
            Some(k) if k <= t => {}
            Some(_) => self.set(slot, t),
            None => {
                let p = self.keys.len();
                self.keys.push(t);
                self.slots.push(slot);
                self.pos[slot as usize] = p as u32;
                self.sift_up(p);
            }
        }
    }

    /// Sets the key of an existing entry, in either direction.
    pub(crate) fn set(&mut self, slot: u32, t: Instant) {
        let p = self.pos[slot as usize] as usize;
        let old = self.keys[p];
        self.keys[p] = t;
        if t < old {
            self.sift_up(p);
        } else {
            self.sift_down(p);
        }
    }

    /// Removes the slot's entry, if any.
    pub(crate) fn remove(&mut self, slot: u32) {
        let Some(&p) = self.pos.get(slot as usize) else {
            return;
        };
        if p == NONE {
            return;
        }
        let p = p as usize;
        self.pos[slot as usize] = NONE;
        let last = self.keys.len() - 1;
        if p != last {
            self.keys.swap(p, last);
            self.slots.swap(p, last);
            self.pos[self.slots[p] as usize] = p as u32;
        }
        self.keys.pop();
        self.slots.pop();
        if p < self.keys.len() {
            self.sift_up(p);
            self.sift_down(p);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.keys.swap(a, b);
        self.slots.swap(a, b);
        self.pos[self.slots[a] as usize] = a as u32;
        self.pos[self.slots[b] as usize] = b as u32;
    }

    fn sift_up(&mut self, mut p: usize) {
        while p > 0 {
            let parent = (p - 1) / 2;
            if self.keys[p] >= self.keys[parent] {
                break;
            }
            self.swap(p, parent);
            p = parent;
        }
    }

    fn sift_down(&mut self, mut p: usize) {
        let n = self.keys.len();
        loop {
            let (l, r) = (2 * p + 1, 2 * p + 2);
            let mut min = p;
            if l < n && self.keys[l] < self.keys[min] {
                min = l;
            }
            if r < n && self.keys[r] < self.keys[min] {
                min = r;
            }
            if min == p {
                break;
            }
            self.swap(p, min);
            p = min;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[track_caller]
    fn check(timers: &Deadlines) {
        for (i, (&k, &slot)) in timers.keys.iter().zip(&timers.slots).enumerate() {
            assert_eq!(
                timers.pos[slot as usize] as usize, i,
                "position of slot {slot}"
            );
            if i > 0 {
                assert!(timers.keys[(i - 1) / 2] <= k, "heap order at {i}");
            }
        }
    }

    #[test]
    fn orders_lowers_raises_and_removes() {
        let mut timers = Deadlines::default();
        timers.grow_to(8);
        for (slot, ms) in [(0, 50), (1, 10), (2, 30), (3, 40), (4, 20)] {
            timers.lower_to(slot, t(ms));
            check(&timers);
        }
        assert_eq!(timers.peek(), Some((t(10), 1)));
        timers.lower_to(3, t(5));
        assert_eq!(timers.peek(), Some((t(5), 3)));
        timers.lower_to(3, t(99)); // never raises
        assert_eq!(timers.key(3), Some(t(5)));
        timers.set(3, t(99));
        check(&timers);
        assert_eq!(timers.peek(), Some((t(10), 1)));
        timers.remove(1);
        timers.remove(1);
        check(&timers);
        assert_eq!(timers.peek(), Some((t(20), 4)));
        assert_eq!(timers.len(), 4);
        let mut order = Vec::new();
        while let Some((_, slot)) = timers.peek() {
            order.push(slot);
            timers.remove(slot);
            check(&timers);
        }
        assert_eq!(order, [4, 2, 0, 3]);
    }
}
