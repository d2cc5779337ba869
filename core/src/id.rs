//! Bounded identifiers: session, request and operation ids.
//!
//! An [`Id`] holds 1 to `L` bytes of UTF-8 inline, with no allocation. The only
//! way to make one is [`Id::new`] (or `TryFrom<&str>`), which checks the
//! length, so every `Id` in the program is valid by construction.

use core::fmt;
use core::hash::{Hash, Hasher};

use crate::base::conformance::ID_LEN;
use crate::error::Error;

/// A validated identifier of 1 to `L` bytes (`L` ≤ 255), stored inline in
/// exactly `L` bytes.
///
/// Ordering and hashing are those of the string. The bytes are stored
/// zero-padded to `L`, so comparing two ids is a fixed-size comparison the
/// compiler inlines (no call per comparison on the hot paths that check
/// fences and look up requests).
///
/// The length takes no byte of its own. Valid UTF-8 never contains the
/// bytes `0xFE` and `0xFF`, so an id shorter than `L` marks its last byte
/// with one of them: `0xFE` for length `L - 1`, or `0xFF` with the length in
/// the byte before it (the trick `compact_str` plays with its last byte). An
/// id of exactly `L` bytes ends in text. One byte less per id is 21 bytes
/// less per session with the default profile, which holds 21 ids.
///
/// # Examples
///
/// ```
/// use duplex_core::{Error, Id};
///
/// let id: Id = Id::new("session-7")?;
/// assert_eq!(id.as_str(), "session-7");
/// assert_eq!(id, "session-7");
/// assert_eq!(core::mem::size_of::<Id<32>>(), 32);
///
/// // Empty and over-long ids are rejected with the limit in the error.
/// assert_eq!(Id::<4>::new("toolong"), Err(Error::InvalidId { len: 7, max: 4 }));
/// assert!(Id::<4>::new("").is_err());
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Id<const L: usize = { ID_LEN }> {
    /// The text's UTF-8 bytes, then zeros, then the length marker (see the
    /// type's docs): the encoding is canonical, so equal ids have equal
    /// arrays.
    bytes: [u8; L],
}

/// Last byte of an id of `L - 1` bytes.
const SHORT_BY_ONE: u8 = 0xFE;
/// Last byte of an id of at most `L - 2` bytes; the byte before holds the
/// length.
const SHORTER: u8 = 0xFF;

impl<const L: usize> Id<L> {
    const VALID_LEN: () = assert!(L > 0 && L <= 255, "id length must be 1..=255 bytes");

    /// The filler of unused slots in fixed tables: the encoding of length 0,
    /// which no valid id has. Never handed out: tables only expose their
    /// live entries, which are real ids.
    pub(crate) const UNUSED: Self = Id {
        bytes: Self::marked([0; L], 0),
    };

    /// `bytes` (a text of `len <= L` bytes, then zeros) with the length
    /// marker set: the canonical array.
    #[inline]
    const fn marked(mut bytes: [u8; L], len: usize) -> [u8; L] {
        if len + 1 == L {
            bytes[L - 1] = SHORT_BY_ONE;
        } else if len + 2 <= L {
            bytes[L - 1] = SHORTER;
            // `len <= L - 2 < 255`.
            #[allow(clippy::cast_possible_truncation)]
            {
                bytes[L - 2] = len as u8;
            }
        }
        bytes
    }

    /// The text's length, decoded from the last byte.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self.bytes.last() {
            Some(&SHORT_BY_ONE) => L - 1,
            Some(&SHORTER) => L
                .checked_sub(2)
                .and_then(|i| self.bytes.get(i))
                .map_or(0, |&len| usize::from(len)),
            _ => L,
        }
    }

    /// Validates `text` (1 to `L` bytes) and copies it into an `Id`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] with the actual length and the limit.
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert!(Id::<32>::new("req-0").is_ok());
    /// assert!(Id::<32>::new(&"x".repeat(33)).is_err());
    /// ```
    #[inline]
    pub fn new(text: &str) -> Result<Self, Error> {
        let () = Self::VALID_LEN;
        if text.is_empty() || text.len() > L {
            return Err(Error::InvalidId {
                len: text.len(),
                max: L,
            });
        }
        let mut bytes = [0; L];
        if let Some(dst) = bytes.get_mut(..text.len()) {
            dst.copy_from_slice(text.as_bytes());
        }
        Ok(Id {
            bytes: Self::marked(bytes, text.len()),
        })
    }

    /// The id's bytes (its UTF-8 text).
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert_eq!(Id::<8>::new("abc").unwrap().as_bytes(), b"abc");
    /// ```
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len()).unwrap_or_default()
    }

    /// A total order for indexes, cheaper than [`Ord`]: the encoded arrays
    /// in byte order, eight bytes at a time (as big-endian words, so the
    /// first differing byte decides). Equal ids compare equal, and only they
    /// do. Only the words that hold either id's text are read, then the
    /// remainder and the lengths: past both texts the arrays hold only
    /// zeros and the length markers, so where they differ the first
    /// difference is the length.
    #[inline]
    pub(crate) fn index_cmp(&self, other: &Self) -> core::cmp::Ordering {
        let (len_a, len_b) = (self.len(), other.len());
        let used = len_a.max(len_b).div_ceil(8);
        let (a, b) = (self.bytes.chunks_exact(8), other.bytes.chunks_exact(8));
        let (rest_a, rest_b) = (a.remainder(), b.remainder());
        for (a, b) in a.zip(b).take(used) {
            let (a, b) = (word(a), word(b));
            if a != b {
                return a.cmp(&b);
            }
        }
        len_a.cmp(&len_b).then(word(rest_a).cmp(&word(rest_b)))
    }

    /// The id as a string slice.
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert_eq!(Id::<8>::new("abc").unwrap().as_str(), "abc");
    /// ```
    pub fn as_str(&self) -> &str {
        // The bytes were copied from a `&str` by `new`, so they are UTF-8;
        // checking again (a fast scan for these short ids) keeps the crate
        // free of `unsafe`, and the empty fallback is never taken.
        core::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// The maximum length in bytes, `L`.
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert_eq!(Id::<16>::MAX_LEN, 16);
    /// ```
    pub const MAX_LEN: usize = L;
}

/// Up to eight bytes as a big-endian word, zero-padded on the right.
#[inline]
fn word(bytes: &[u8]) -> u64 {
    if let Ok(w) = <[u8; 8]>::try_from(bytes) {
        return u64::from_be_bytes(w);
    }
    let mut w = [0_u8; 8];
    if let Some(dst) = w.get_mut(..bytes.len()) {
        dst.copy_from_slice(bytes);
    }
    u64::from_be_bytes(w)
}

impl<const L: usize> TryFrom<&str> for Id<L> {
    type Error = Error;
    fn try_from(text: &str) -> Result<Self, Error> {
        Id::new(text)
    }
}

impl<const L: usize> PartialOrd for Id<L> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<const L: usize> Ord for Id<L> {
    /// The order of the strings (byte order, as UTF-8 orders code points).
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl<const L: usize> Hash for Id<L> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
    }
}

impl<const L: usize> AsRef<str> for Id<L> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl<const L: usize> PartialEq<str> for Id<L> {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> PartialEq<&str> for Id<L> {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const L: usize> fmt::Debug for Id<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const L: usize> fmt::Display for Id<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(feature = "defmt")]
#[cfg_attr(docsrs, doc(cfg(feature = "defmt")))]
impl<const L: usize> defmt::Format for Id<L> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.as_str());
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An id type of a profile (`Id<L>`): what code generic over a profile does
/// with ids. Sealed.
///
/// ```
/// use duplex_core::id::IdText;
/// use duplex_core::Id;
///
/// fn echo<I: IdText>(text: &str) -> Result<I, duplex_core::Error> {
///     let id = I::new(text)?;
///     assert_eq!(id.as_str(), text);
///     Ok(id)
/// }
/// assert_eq!(echo::<Id<8>>("op-1")?, Id::<8>::new("op-1")?);
/// assert!(echo::<Id<2>>("op-1").is_err());
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub trait IdText:
    sealed::Sealed
    + Clone
    + fmt::Debug
    + Eq
    + Ord
    + Hash
    + fmt::Display
    + AsRef<str>
    + Send
    + Sync
    + 'static
{
    /// The most bytes an id holds.
    const MAX_LEN: usize;
    /// An id of `text` ([`Id::new`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] if `text` is empty or
    /// longer than [`MAX_LEN`](Self::MAX_LEN).
    fn new(text: &str) -> Result<Self, Error>;
    /// The text.
    fn as_str(&self) -> &str;
    /// The text's bytes (no UTF-8 check: they are valid by construction).
    fn as_bytes(&self) -> &[u8];
    /// The order of the completed-append index.
    #[doc(hidden)]
    fn index_order(&self, other: &Self) -> core::cmp::Ordering;
    /// The filler of unused rows.
    #[doc(hidden)]
    fn unused() -> Self;
}

impl<const L: usize> sealed::Sealed for Id<L> {}

impl<const L: usize> IdText for Id<L> {
    const MAX_LEN: usize = L;
    #[inline]
    fn new(text: &str) -> Result<Self, Error> {
        Id::new(text)
    }
    #[inline]
    fn as_str(&self) -> &str {
        Id::as_str(self)
    }
    #[inline]
    fn as_bytes(&self) -> &[u8] {
        Id::as_bytes(self)
    }
    #[inline]
    fn index_order(&self, other: &Self) -> core::cmp::Ordering {
        self.index_cmp(other)
    }
    #[inline]
    fn unused() -> Self {
        Id::UNUSED
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use core::cmp::Ordering;
    use std::string::String;
    use std::vec::Vec;

    use super::Id;

    /// Texts of every length `0..=L` (0 for the unused filler), built from
    /// pieces that stress the length marker: NUL bytes (valid UTF-8, equal
    /// to the padding), multi-byte characters, and plain ASCII.
    fn texts(max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for len in 1..=max {
            for fill in ["a", "\0", "é", "\u{7f}"] {
                let mut t = String::new();
                while t.len() + fill.len() <= len {
                    t.push_str(fill);
                }
                while t.len() < len {
                    t.push('z');
                }
                out.push(t);
            }
        }
        out
    }

    fn round_trips<const L: usize>() {
        assert_eq!(core::mem::size_of::<Id<L>>(), L);
        assert_eq!(Id::<L>::UNUSED.len(), 0);
        let all = texts(L);
        let ids: Vec<Id<L>> = all.iter().map(|t| Id::new(t).unwrap()).collect();
        for (t, id) in all.iter().zip(&ids) {
            assert_eq!(id.as_str(), t, "L = {L}");
            assert_eq!(id.len(), t.len(), "L = {L}");
            assert_ne!(*id, Id::UNUSED);
        }
        // Equality is the text's; the index order is total and agrees
        // with equality.
        for (a, ta) in ids.iter().zip(&all) {
            for (b, tb) in ids.iter().zip(&all) {
                assert_eq!(a == b, ta == tb);
                assert_eq!(a.cmp(b), ta.cmp(tb));
                let ab = a.index_cmp(b);
                assert_eq!(ab == Ordering::Equal, ta == tb, "{ta:?} {tb:?}");
                assert_eq!(ab.reverse(), b.index_cmp(a), "{ta:?} {tb:?}");
                for c in &ids {
                    if ab != Ordering::Greater && b.index_cmp(c) != Ordering::Greater {
                        assert_ne!(a.index_cmp(c), Ordering::Greater, "transitivity");
                    }
                }
            }
        }
    }

    #[test]
    fn every_length_round_trips_and_orders_consistently() {
        round_trips::<1>();
        round_trips::<2>();
        round_trips::<3>();
        round_trips::<8>();
        round_trips::<9>();
        round_trips::<10>();
        round_trips::<17>();
    }

    #[test]
    fn the_longest_profiles_round_trip() {
        for len in [1, 42, 43, 46, 74, 126, 127, 128] {
            let t = "u".repeat(len);
            assert_eq!(Id::<128>::new(&t).unwrap().as_str(), t);
        }
        for len in [1, 253, 254, 255] {
            let t = "\0".repeat(len);
            assert_eq!(Id::<255>::new(&t).unwrap().as_str(), t);
        }
        assert!(Id::<255>::new(&"x".repeat(256)).is_err());
    }
}
