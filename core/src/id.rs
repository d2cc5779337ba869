//! Bounded identifiers: session, request and operation ids.
//!
//! An [`Id`] holds 1 to `L` bytes of UTF-8 inline, with no allocation. The only
//! way to make one is [`Id::new`] (or `TryFrom<&str>`), which checks the
//! length, so every `Id` in the program is valid by construction.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{Hash, Hasher};

use crate::error::Error;
use crate::profile::conformance::ID_LEN;

/// A validated identifier of 1 to `L` bytes (`L` ≤ 255), stored inline.
///
/// Equality, ordering and hashing are those of the string, so an `Id` can be
/// looked up by `&str` in maps (`Borrow<str>`).
///
/// # Examples
///
/// ```
/// use duplex_core::{Error, Id};
///
/// let id: Id = Id::new("session-7")?;
/// assert_eq!(id.as_str(), "session-7");
///
/// // Empty and over-long ids are rejected with the limit in the error.
/// assert_eq!(Id::<4>::new("toolong"), Err(Error::InvalidId { len: 7, max: 4 }));
/// assert!(Id::<4>::new("").is_err());
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Id<const L: usize = { ID_LEN }> {
    text: heapless::String<L, u8>,
}

impl<const L: usize> Id<L> {
    const VALID_LEN: () = assert!(L > 0 && L <= 255, "id length must be 1..=255 bytes");

    /// The filler of unused slots in fixed tables. Never handed out: tables
    /// only expose their first `len` entries, which are real ids.
    pub(crate) const UNUSED: Self = Id {
        text: heapless::String::new(),
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
    pub fn new(text: &str) -> Result<Self, Error> {
        let () = Self::VALID_LEN;
        let invalid = Error::InvalidId {
            len: text.len(),
            max: L,
        };
        if text.is_empty() {
            return Err(invalid);
        }
        heapless::String::try_from(text)
            .map(|text| Id { text })
            .map_err(|_| invalid)
    }

    /// The id as a string slice.
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert_eq!(Id::<8>::new("abc").unwrap().as_str(), "abc");
    /// ```
    pub fn as_str(&self) -> &str {
        self.text.as_str()
    }

    /// The maximum length in bytes, `L`.
    ///
    /// ```
    /// # use duplex_core::Id;
    /// assert_eq!(Id::<16>::MAX_LEN, 16);
    /// ```
    pub const MAX_LEN: usize = L;
}

impl<const L: usize> TryFrom<&str> for Id<L> {
    type Error = Error;
    fn try_from(text: &str) -> Result<Self, Error> {
        Id::new(text)
    }
}

impl<const L: usize> Hash for Id<L> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must agree with `str`'s hash for `Borrow<str>` lookups.
        self.as_str().hash(state);
    }
}

impl<const L: usize> Borrow<str> for Id<L> {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl<const L: usize> AsRef<str> for Id<L> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl<const L: usize> PartialEq<str> for Id<L> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl<const L: usize> PartialEq<&str> for Id<L> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
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
