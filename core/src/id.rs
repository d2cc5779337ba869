//! Bounded identifiers: session, request and operation ids.
//!
//! An [`Id`] holds 1 to `L` bytes of UTF-8 inline, with no allocation. The only
//! way to make one is [`Id::new`] (or `TryFrom<&str>`), which checks the
//! length, so every `Id` in the program is valid by construction.

use core::fmt;
use core::hash::{Hash, Hasher};

use crate::error::Error;
use crate::profile::conformance::ID_LEN;

/// A validated identifier of 1 to `L` bytes (`L` ≤ 255), stored inline.
///
/// Ordering and hashing are those of the string. The bytes are stored
/// zero-padded to `L`, so comparing two ids is a fixed-size comparison the
/// compiler inlines (no call per comparison on the hot paths that check
/// fences and look up requests).
///
/// # Examples
///
/// ```
/// use duplex_core::{Error, Id};
///
/// let id: Id = Id::new("session-7")?;
/// assert_eq!(id.as_str(), "session-7");
/// assert_eq!(id, "session-7");
///
/// // Empty and over-long ids are rejected with the limit in the error.
/// assert_eq!(Id::<4>::new("toolong"), Err(Error::InvalidId { len: 7, max: 4 }));
/// assert!(Id::<4>::new("").is_err());
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Id<const L: usize = { ID_LEN }> {
    /// The text's length, `1..=L` (0 only in [`Id::UNUSED`]).
    len: u8,
    /// The text's UTF-8 bytes, then zeros: equal ids have equal arrays.
    bytes: [u8; L],
}

impl<const L: usize> Id<L> {
    const VALID_LEN: () = assert!(L > 0 && L <= 255, "id length must be 1..=255 bytes");

    /// The filler of unused slots in fixed tables. Never handed out: tables
    /// only expose their first `len` entries, which are real ids.
    pub(crate) const UNUSED: Self = Id {
        len: 0,
        bytes: [0; L],
    };

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
        let mut bytes = [0; L];
        match (bytes.get_mut(..text.len()), u8::try_from(text.len())) {
            (Some(dst), Ok(len)) if len > 0 => {
                dst.copy_from_slice(text.as_bytes());
                Ok(Id { len, bytes })
            }
            _ => Err(Error::InvalidId {
                len: text.len(),
                max: L,
            }),
        }
    }

    /// The id's bytes (its UTF-8 text).
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert_eq!(Id::<8>::new("abc").unwrap().as_bytes(), b"abc");
    /// ```
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// A total order for indexes, cheaper than [`Ord`]: the zero-padded
    /// bytes eight at a time (as big-endian words, so the first differing
    /// byte decides), then the length. Equal ids compare equal, and only
    /// they do. Only the words that hold either id's text are read.
    #[inline]
    pub(crate) fn index_cmp(&self, other: &Self) -> core::cmp::Ordering {
        let used = usize::from(self.len.max(other.len)).div_ceil(8);
        let (a, b) = (self.bytes.chunks_exact(8), other.bytes.chunks_exact(8));
        let (rest_a, rest_b) = (a.remainder(), b.remainder());
        for (a, b) in a.zip(b).take(used) {
            let (a, b) = (word(a), word(b));
            if a != b {
                return a.cmp(&b);
            }
        }
        word(rest_a)
            .cmp(&word(rest_b))
            .then(self.len.cmp(&other.len))
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
impl<const L: usize> defmt::Format for Id<L> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.as_str());
    }
}
