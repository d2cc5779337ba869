//! Storage bookkeeping: where each session lives.
//!
//! Sessions live in a slab of fixed-size chunks: a slot number never moves
//! its session, and growing the slab adds a chunk without copying the
//! sessions already there. The id index is a hash table of slot numbers
//! only (4 bytes an entry): the id itself is stored once, in the session's
//! fence, and the index hashes and compares through the slab.
//!
//! The index says which slots are occupied. When the opaque configurations
//! own nothing (`SC` and `RC` need no drop, as with `()`), a freed slot keeps
//! the value of its last session (unreachable: no index entry, no deadline
//! entry) so the next open can re-initialize it in place instead of building
//! and moving a 1.5 KB value; churn then neither allocates nor copies
//! sessions. Otherwise the session is dropped when its slot is freed, so
//! whatever its configurations hold is released at close.

use duplex_core::id::IdText;
use duplex_core::profile::{IdOf, Profile};
use duplex_core::AnySession;
use hashbrown::HashTable;

/// Bytes a chunk holds at most, unless one session is larger: chunks stay
/// well under the allocator's default threshold for mapping memory of its
/// own (128 KiB in glibc), so the memory of a dropped manager is reused by
/// the next rather than handed back to the system and faulted in again.
const CHUNK_BYTES: usize = 64 * 1024;

/// Sessions per chunk for sessions of `size` bytes: a power of two, 1 to
/// 16 (16 of the default profile's 1.5 KB sessions; one server-profile
/// session of 45 KB).
const fn chunk_len(size: usize) -> usize {
    let mut n = 16;
    while n > 1 && n * size > CHUNK_BYTES {
        n /= 2;
    }
    n
}

type Chunk<P> = Box<[Option<AnySession<P>>]>;

#[derive(Debug)]
pub(crate) struct Table<P: Profile> {
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    chunks: Vec<Chunk<P>>,
    /// Free slots below `chunks.len() * Self::CHUNK`, reused last-freed first.
    free: Vec<u32>,
    /// Per slot, how many sessions have left it: a [`SessionKey`] names a
    /// slot and this count, so a key outlives its session only as a key
    /// that no longer matches.
    ///
    /// [`SessionKey`]: super::SessionKey
    stamps: Vec<u32>,
}

fn hash_of(hasher: &foldhash::fast::RandomState, id: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = hasher.build_hasher();
    h.write(id);
    h.finish()
}

impl<P: Profile> Table<P> {
    /// Sessions per chunk.
    const CHUNK: usize = chunk_len(std::mem::size_of::<Option<AnySession<P>>>());

    /// The chunk and the place in it of `slot`.
    #[inline]
    fn split(slot: u32) -> (usize, usize) {
        let slot = slot as usize;
        (slot / Self::CHUNK, slot % Self::CHUNK)
    }

    pub(crate) fn new() -> Self {
        Table {
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            chunks: Vec::new(),
            free: Vec::new(),
            stamps: Vec::new(),
        }
    }

    /// Number of sessions.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// One past the highest slot number ever used.
    pub(crate) fn slot_bound(&self) -> usize {
        self.chunks.len() * Self::CHUNK
    }

    /// The session in an occupied `slot` (one reached through the index or
    /// the deadline heap).
    pub(crate) fn get(&self, slot: u32) -> Option<&AnySession<P>> {
        let (c, i) = Self::split(slot);
        self.chunks.get(c)?.get(i)?.as_ref()
    }

    /// The storage of `slot`: its session (a freed slot keeps its last,
    /// closed one for `recycle`), or `None` if none was ever stored there.
    pub(crate) fn entry(&mut self, slot: u32) -> Option<&mut Option<AnySession<P>>> {
        let (c, i) = Self::split(slot);
        self.chunks.get_mut(c)?.get_mut(i)
    }

    /// The stamp of `slot`: changes whenever a session leaves it.
    pub(crate) fn stamp(&self, slot: u32) -> Option<u32> {
        self.stamps.get(slot as usize).copied()
    }

    /// The hash of a session id, for [`find_hashed`](Self::find_hashed) and
    /// [`insert`](Self::insert) (hash once per operation).
    pub(crate) fn hash(&self, id: &IdOf<P>) -> u64 {
        hash_of(&self.hasher, id.as_bytes())
    }

    /// The slot of the session with this id.
    pub(crate) fn find(&self, id: &IdOf<P>) -> Option<u32> {
        self.find_hashed(self.hash(id), id)
    }

    /// The slot of the session with this id and hash.
    pub(crate) fn find_hashed(&self, hash: u64, id: &IdOf<P>) -> Option<u32> {
        let chunks = &self.chunks;
        let same = |&slot: &u32| {
            let (c, i) = Self::split(slot);
            chunks
                .get(c)
                .and_then(|chunk| chunk.get(i))
                .and_then(Option::as_ref)
                .is_some_and(|s| s.id() == id)
        };
        self.index.find(hash, same).copied()
    }

    /// The session ids, in no particular order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &IdOf<P>> {
        self.index
            .iter()
            .filter_map(|&slot| self.get(slot).map(AnySession::id))
    }

    /// The occupied slots, in no particular order.
    pub(crate) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.index.iter().copied()
    }

    /// Stores a new session (whose id, of hash `hash`, is not in the table)
    /// and returns its slot, and whether the slab grew (so per-slot side
    /// tables can grow with it). `make` writes the session into the slot's
    /// storage, which holds the previous session of a reused slot (to
    /// re-initialize in place) or `None`; on error it must leave the slot
    /// as it was.
    pub(crate) fn insert<E>(
        &mut self,
        hash: u64,
        make: impl FnOnce(&mut Option<AnySession<P>>) -> Result<(), E>,
    ) -> Result<(u32, bool), E> {
        let (slot, grew) = if let Some(slot) = self.free.pop() {
            (slot, false)
        } else {
            let base = self.slot_bound() as u32;
            // Built on the heap directly (a `Box::new` of an array would
            // build 25 KB on the stack first).
            let chunk: Chunk<P> = (0..Self::CHUNK).map(|_| None).collect();
            // The chunk list and the stamps grow by an eighth, as the
            // deadline index does, not by doubling: less slack per slot.
            let chunks = self.chunks.len() + 1;
            super::deadlines::reserve_towards(&mut self.chunks, chunks);
            self.chunks.push(chunk);
            let bound = self.slot_bound();
            super::deadlines::reserve_towards(&mut self.stamps, bound);
            self.stamps.resize(bound, 0);
            // The rest of the chunk is free, lowest slot used first.
            self.free
                .extend((base + 1..base + Self::CHUNK as u32).rev());
            (base, true)
        };
        if let Some(entry) = self.entry(slot) {
            if let Err(e) = make(entry) {
                self.free.push(slot);
                return Err(e);
            }
        }
        let Table {
            index,
            hasher,
            chunks,
            ..
        } = self;
        let rehash = |&slot: &u32| {
            let (c, i) = Self::split(slot);
            chunks
                .get(c)
                .and_then(|chunk| chunk.get(i))
                .and_then(Option::as_ref)
                .map_or(0, |s| hash_of(hasher, s.id().as_bytes()))
        };
        index.insert_unique(hash, slot, rehash);
        Ok((slot, grew))
    }

    /// Forgets the session in `slot` (whose id has hash `hash`) and frees
    /// the slot; the value stays for the next open to re-initialize unless
    /// its configurations need dropping.
    pub(crate) fn remove(&mut self, slot: u32, hash: u64) {
        if let Ok(entry) = self.index.find_entry(hash, |&s| s == slot) {
            entry.remove();
            self.free.push(slot);
            if let Some(stamp) = self.stamps.get_mut(slot as usize) {
                *stamp = stamp.wrapping_add(1);
            }
            if std::mem::needs_drop::<P::SessionConfig>()
                || std::mem::needs_drop::<P::RuntimeConfig>()
            {
                if let Some(entry) = self.entry(slot) {
                    *entry = None;
                }
            }
        }
    }
}
