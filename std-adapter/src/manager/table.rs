//! Storage bookkeeping: where each session lives.
//!
//! Sessions live in a slab of fixed-size chunks: a slot number never moves
//! its session, and growing the slab adds a chunk without copying the
//! sessions already there. A freed slot is reused by the next open, so
//! churn does not allocate. The id index is a hash table of slot numbers
//! only (4 bytes an entry): the id itself is stored once, in the session's
//! fence, and the index hashes and compares through the slab.

use duplex_core::{AnySession, Id};
use hashbrown::HashTable;

/// Sessions per chunk.
const CHUNK: usize = 16;

type Chunk<
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
> = Box<[Option<AnySession<SC, RC, R, B, D, A, L, K>>]>;

#[derive(Debug)]
pub(crate) struct Table<
    SC,
    RC,
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
> {
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    chunks: Vec<Chunk<SC, RC, R, B, D, A, L, K>>,
    /// Free slots below `chunks.len() * CHUNK`, reused last-freed first.
    free: Vec<u32>,
}

fn split(slot: u32) -> (usize, usize) {
    let slot = slot as usize;
    (slot / CHUNK, slot % CHUNK)
}

fn hash_of(hasher: &foldhash::fast::RandomState, id: &str) -> u64 {
    use std::hash::BuildHasher;
    hasher.hash_one(id)
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
    > Table<SC, RC, R, B, D, A, L, K>
{
    pub(crate) fn new() -> Self {
        Table {
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            chunks: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Number of sessions.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// One past the highest slot number ever used.
    pub(crate) fn slot_bound(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    pub(crate) fn get(&self, slot: u32) -> Option<&AnySession<SC, RC, R, B, D, A, L, K>> {
        let (c, i) = split(slot);
        self.chunks.get(c)?.get(i)?.as_ref()
    }

    /// The slot's storage: the session, or `None` while the slot is free or
    /// its session is mid-transition.
    pub(crate) fn entry(
        &mut self,
        slot: u32,
    ) -> Option<&mut Option<AnySession<SC, RC, R, B, D, A, L, K>>> {
        let (c, i) = split(slot);
        self.chunks.get_mut(c)?.get_mut(i)
    }

    /// The slot of the session with this id.
    pub(crate) fn find(&self, id: &str) -> Option<u32> {
        let chunks = &self.chunks;
        let same = |&slot: &u32| {
            let (c, i) = split(slot);
            chunks
                .get(c)
                .and_then(|chunk| chunk.get(i))
                .and_then(Option::as_ref)
                .is_some_and(|s| s.id().as_str() == id)
        };
        self.index.find(hash_of(&self.hasher, id), same).copied()
    }

    /// The session ids, in no particular order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &Id<L>> {
        self.index
            .iter()
            .filter_map(|&slot| self.get(slot).map(AnySession::id))
    }

    /// The occupied slots, in slot order.
    pub(crate) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.slot_bound() as u32).filter(|&slot| self.get(slot).is_some())
    }

    /// Stores a new session (whose id is not in the table) and returns its
    /// slot, and whether the slab grew (so per-slot side tables can grow
    /// with it).
    pub(crate) fn insert(&mut self, session: AnySession<SC, RC, R, B, D, A, L, K>) -> (u32, bool) {
        let (slot, grew) = if let Some(slot) = self.free.pop() {
            (slot, false)
        } else {
            let base = self.slot_bound() as u32;
            let chunk: Chunk<SC, RC, R, B, D, A, L, K> = (0..CHUNK).map(|_| None).collect();
            self.chunks.push(chunk);
            // The rest of the chunk is free, lowest slot used first.
            self.free.extend((base + 1..base + CHUNK as u32).rev());
            (base, true)
        };
        let hash = hash_of(&self.hasher, session.id().as_str());
        if let Some(entry) = self.entry(slot) {
            *entry = Some(session);
        }
        let Table {
            index,
            hasher,
            chunks,
            ..
        } = self;
        let rehash = |&slot: &u32| {
            let (c, i) = split(slot);
            chunks
                .get(c)
                .and_then(|chunk| chunk.get(i))
                .and_then(Option::as_ref)
                .map_or(0, |s| hash_of(hasher, s.id().as_str()))
        };
        index.insert_unique(hash, slot, rehash);
        (slot, grew)
    }

    /// Drops the session in `slot` where it is, and frees the slot.
    pub(crate) fn remove(&mut self, slot: u32) {
        let Some(id_hash) = self
            .get(slot)
            .map(|s| hash_of(&self.hasher, s.id().as_str()))
        else {
            return;
        };
        if let Ok(entry) = self.index.find_entry(id_hash, |&s| s == slot) {
            entry.remove();
        }
        if let Some(entry) = self.entry(slot) {
            *entry = None;
        }
        self.free.push(slot);
    }
}
