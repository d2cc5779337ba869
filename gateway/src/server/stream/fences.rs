//! The fence `(epoch, turn)` each recent chunk of a realtime session was
//! first appended at, by its key: a retransmission keeps it, so a chunk
//! sent again after a barge-in (which clears the core's idempotency
//! cache) is refused as stale, never applied again under a newer fence.
//!
//! Every chunk looks its key up and, once applied, remembers it, so this
//! is on the append path of every realtime chunk, and across a thousand
//! sessions its memory is cold. It is laid out for that: a scan of one
//! array of short digests (four cache lines, compared without a branch)
//! finds the candidates, and only a candidate's slot, holding the key and
//! its fence, is read; remembering a key writes one digest and one slot
//! of a ring, with nothing to hash twice and nothing to unlink. A digest
//! is only a filter: a key is found only by comparing it whole, so two
//! keys with the same digest (by chance, or made so by a hostile client)
//! cost a comparison, never a wrong fence.

use std::hash::BuildHasher;

use crate::Id;

/// How many chunks' fences a session remembers (more than a client
/// retransmits after a reconnect). At most 64: the scan's hits are the
/// bits of one `u64`.
pub(super) const FENCES: usize = 64;

const _: () = assert!(FENCES <= u64::BITS as usize);

/// The fences of a session's most recent [`FENCES`] chunks, oldest
/// forgotten first.
#[derive(Debug)]
pub(super) struct Fences {
    /// The digest of the key in each slot (meaningless past `slots`).
    digests: [u32; FENCES],
    /// The keys and their fences, in ring order; allocated whole by the
    /// first key remembered, so a session that never appends costs none.
    slots: Vec<(Id, (u64, u64))>,
    /// The slot the next key takes: the oldest, once the ring is full.
    next: usize,
    /// Seeded per process, so a client cannot aim its keys at one digest.
    hasher: foldhash::fast::RandomState,
}

impl Default for Fences {
    fn default() -> Self {
        Fences {
            digests: [0; FENCES],
            slots: Vec::new(),
            next: 0,
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl Fences {
    fn digest(&self, key: &Id) -> u32 {
        // The high half: foldhash mixes its last multiply into it.
        (self.hasher.hash_one(key.as_bytes()) >> 32) as u32
    }

    /// The slots whose digest is `digest`, as the bits of a `u64`.
    fn candidates(&self, digest: u32) -> u64 {
        // No early exit: the compiler compares the whole array at once.
        self.digests
            .iter()
            .enumerate()
            .fold(0, |hits, (i, d)| hits | (u64::from(*d == digest) << i))
    }

    fn find(&self, key: &Id, digest: u32) -> Option<(u64, u64)> {
        let mut hits = self.candidates(digest);
        while hits != 0 {
            let at = hits.trailing_zeros() as usize;
            hits &= hits - 1;
            match self.slots.get(at) {
                Some((k, fence)) if k == key => return Some(*fence),
                _ => {}
            }
        }
        None
    }

    /// The fence `key` was first appended at, if it is recent.
    pub(super) fn get(&self, key: &Id) -> Option<(u64, u64)> {
        self.find(key, self.digest(key))
    }

    /// Remembers the fence `key` was appended at, forgetting the oldest
    /// key when full; a key already remembered keeps its first fence.
    pub(super) fn remember(&mut self, key: Id, fence: (u64, u64)) {
        let digest = self.digest(&key);
        self.remember_as(key, digest, fence);
    }

    fn remember_as(&mut self, key: Id, digest: u32, fence: (u64, u64)) {
        if self.find(&key, digest).is_some() {
            return;
        }
        if self.slots.capacity() == 0 {
            self.slots.reserve_exact(FENCES);
        }
        let at = self.next;
        if let Some(slot) = self.slots.get_mut(at) {
            *slot = (key, fence);
        } else {
            self.slots.push((key, fence));
        }
        if let Some(d) = self.digests.get_mut(at) {
            *d = digest;
        }
        self.next = (at + 1) % FENCES;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).expect("a short id")
    }

    #[test]
    fn a_key_keeps_its_first_fence() {
        let mut f = Fences::default();
        assert_eq!(f.get(&id("c1")), None);
        f.remember(id("c1"), (0, 1));
        f.remember(id("c1"), (3, 0));
        f.remember(id("c2"), (0, 2));
        assert_eq!(f.get(&id("c1")), Some((0, 1)));
        assert_eq!(f.get(&id("c2")), Some((0, 2)));
        assert_eq!(f.get(&id("c3")), None);
    }

    #[test]
    fn the_oldest_key_goes_first_when_full() {
        let mut f = Fences::default();
        for i in 0..FENCES + 3 {
            f.remember(id(&format!("chunk-{i}")), (0, i as u64));
        }
        for i in 0..3 {
            assert_eq!(f.get(&id(&format!("chunk-{i}"))), None, "chunk-{i}");
        }
        for i in 3..FENCES + 3 {
            assert_eq!(
                f.get(&id(&format!("chunk-{i}"))),
                Some((0, i as u64)),
                "chunk-{i}"
            );
        }
        assert_eq!(f.slots.len(), FENCES);
        assert_eq!(f.slots.capacity(), FENCES);
    }

    #[test]
    fn keys_with_one_digest_are_told_apart_by_the_key() {
        // Every key under the same digest, as a hostile client would
        // want: each is still found with its own fence, and a key never
        // remembered is not found.
        let mut f = Fences::default();
        for i in 0..10u64 {
            f.remember_as(id(&format!("k{i}")), 7, (i, i));
        }
        for i in 0..10u64 {
            assert_eq!(f.find(&id(&format!("k{i}")), 7), Some((i, i)));
        }
        assert_eq!(f.find(&id("k10"), 7), None);
        // A key remembered again under its digest keeps its first fence.
        f.remember_as(id("k3"), 7, (9, 9));
        assert_eq!(f.find(&id("k3"), 7), Some((3, 3)));
    }

    #[test]
    fn an_empty_ring_finds_nothing_whatever_the_digest() {
        let f = Fences::default();
        // Unused slots hold digest 0: they are no candidates' keys.
        assert_eq!(f.find(&id("k"), 0), None);
        assert!(f.slots.is_empty());
        assert_eq!(f.slots.capacity(), 0);
    }
}
