//! Where a session's tables keep their rows: [`Inline`] (fixed arrays, no
//! allocation, the default) or, with the `alloc` feature, `Heap` (rows and
//! ids on the heap, as many as the session holds, up to the same limits).
//!
//! A session's storage is its last generic parameter `M`. Both kinds keep
//! the same limits (the const generic capacities and the runtime
//! completed-append limit), refuse the same operations with the same
//! errors, and behave the same in every other way: only where the bytes
//! live, and how many of them, differs.
//!
//! | | [`Inline`] | `Heap` (`alloc`) |
//! |---|---|---|
//! | a table | an array of its capacity | a boxed slice, grown by doubling to the rows it has held |
//! | an id in a table | `L` bytes inline | its own length, boxed (none for an unused row) |
//! | a session's size | its worst case, fixed at compile time | a few hundred bytes plus what it holds |
//! | allocations | none, ever | growing a table or storing an id; none for appends, touches and lookups |
//! | for | devices; servers that reuse sessions' storage | servers with many small sessions |
//!
//! The session's own id (in its [`Fence`](crate::Fence)) is inline in both:
//! it is part of the public fence type.
//!
//! # Examples
//!
//! ```
//! use duplex_core::profile::{Capacities, Conformance, Profile};
//! use duplex_core::storage::Inline;
//!
//! // `Inline` is the default: these two types are the same.
//! let _same: <Conformance as Profile>::Tables = Capacities::<8, 4, 8, 4, 32, 4, Inline>::default();
//! # Ok::<(), duplex_core::Error>(())
//! ```

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Deref, DerefMut};

use crate::id::Id;

mod sealed {
    pub trait Sealed {}
}

/// `defmt::Format` when the `defmt` feature is on; nothing otherwise (so
/// that the tables can derive it either way).
#[cfg(feature = "defmt")]
pub trait MaybeFormat: defmt::Format {}
#[cfg(feature = "defmt")]
impl<T: defmt::Format> MaybeFormat for T {}
/// `defmt::Format` when the `defmt` feature is on; nothing otherwise (so
/// that the tables can derive it either way).
#[cfg(not(feature = "defmt"))]
pub trait MaybeFormat {}
#[cfg(not(feature = "defmt"))]
impl<T> MaybeFormat for T {}

/// How a session stores its tables: [`Inline`] or `Heap` (with the `alloc` feature). Sealed: the
/// tables rely on the exact behaviour of these two.
///
/// ```
/// use duplex_core::storage::{Inline, Storage};
///
/// // Code written once for either storage names it as a parameter.
/// fn grows<M: Storage>() -> bool {
///     M::GROWS
/// }
/// assert!(!grows::<Inline>());
/// ```
pub trait Storage: sealed::Sealed + Sized + 'static {
    /// Whether the tables grow with their contents: the completed-append
    /// ring then wraps at the session's limit rather than at `D`, so it
    /// never holds more rows than the limit.
    const GROWS: bool;
    /// A table column of at most `N` rows.
    type Column<T: Row, const N: usize>: Column<T>;
    /// An id of at most `L` bytes, as a table stores it.
    type Id<const L: usize>: StoredId<Id<L>>;
}

/// A row value of a table column (sealed: the core's own column types).
///
/// ```
/// use duplex_core::storage::Row;
/// use duplex_core::Id;
///
/// // An inline id holds nothing on the heap.
/// assert_eq!(Row::heap_bytes(&Id::<8>::new("op-1")?), 0);
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub trait Row: sealed::Sealed + Default + fmt::Debug + MaybeFormat {
    /// Bytes the row holds on the heap besides itself (a heap id's text).
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// A table column: a slice of rows that can be made at least `rows` long.
/// Sealed.
///
/// ```
/// use duplex_core::storage::{Column, InlineColumn};
///
/// let mut c = InlineColumn::<u8, 4>::empty();
/// c.grow_to(2); // inline: the rows are there already
/// assert_eq!((c.len(), c.heap_bytes()), (4, 0));
/// ```
pub trait Column<T>:
    sealed::Sealed + Deref<Target = [T]> + DerefMut + fmt::Debug + MaybeFormat
{
    /// An empty column.
    fn empty() -> Self;
    /// Makes rows `..rows` exist (new rows hold `T::default()`); the caller
    /// keeps `rows` within the column's capacity. Inline: nothing to do.
    fn grow_to(&mut self, rows: usize);
    /// Lets rows `rows..` go (heap: dropped and their ids freed; inline:
    /// kept, unreachable).
    fn trim_to(&mut self, rows: usize);
    /// Bytes this column holds on the heap: its rows' capacity, and the
    /// bytes of the ids in it (inline: 0).
    fn heap_bytes(&self) -> usize;
}

/// An id as a table stores it. Sealed.
///
/// ```
/// use duplex_core::storage::StoredId;
/// use duplex_core::Id;
///
/// let mut row = Id::<8>::default(); // an unused row
/// assert!(row.is_unused());
/// row.set(&Id::new("op-1")?);
/// assert!(row.is(&Id::new("op-1")?) && row.text() == "op-1");
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub trait StoredId<I>: Row + Clone {
    /// Stores `id` here.
    fn set(&mut self, id: &I);
    /// The text.
    fn text(&self) -> &str;
    /// Whether this is `id`.
    fn is(&self, id: &I) -> bool;
    /// Whether this and `other` are the same id.
    fn same(&self, other: &Self) -> bool;
    /// Whether this row holds no id.
    fn is_unused(&self) -> bool;
    /// The order of the completed-append index (any total order, the same
    /// for equal texts).
    fn index_cmp(&self, id: &I) -> Ordering;
    /// The same order between two stored ids.
    fn order(&self, other: &Self) -> Ordering;
    /// The id, as a value.
    fn to_id(&self) -> I;
}

/// Fixed arrays of each table's capacity: no allocation, a session's size
/// known at compile time. The default storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Inline;

impl sealed::Sealed for Inline {}

impl Storage for Inline {
    const GROWS: bool = false;
    type Column<T: Row, const N: usize> = InlineColumn<T, N>;
    type Id<const L: usize> = Id<L>;
}

/// A column of exactly `N` rows, inline (see [`Column`]).
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct InlineColumn<T, const N: usize>([T; N]);

impl<T, const N: usize> sealed::Sealed for InlineColumn<T, N> {}

impl<T, const N: usize> Deref for InlineColumn<T, N> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T, const N: usize> DerefMut for InlineColumn<T, N> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Row, const N: usize> Column<T> for InlineColumn<T, N> {
    #[inline]
    fn empty() -> Self {
        InlineColumn(core::array::from_fn(|_| T::default()))
    }
    #[inline]
    fn grow_to(&mut self, _rows: usize) {}
    #[inline]
    fn trim_to(&mut self, _rows: usize) {}
    fn heap_bytes(&self) -> usize {
        0
    }
}

macro_rules! rows {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Row for $t {}
    )*};
}
rows!(u8, u32, crate::fence::Position);

/// The results of one completed append, as its table stores them (a row
/// type of [`Column`]; read them through
/// [`Session::completed_appends`](crate::Session::completed_appends)).
///
/// ```
/// use duplex_core::storage::Results;
///
/// assert_eq!(Results::<2>::default(), Results::<2>::default());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Results<const K: usize>(pub(crate) [i64; K]);

impl<const K: usize> Default for Results<K> {
    fn default() -> Self {
        Results([0; K])
    }
}
impl<const K: usize> sealed::Sealed for Results<K> {}
impl<const K: usize> Row for Results<K> {}
impl<const L: usize> sealed::Sealed for Id<L> {}
impl<const L: usize> Row for Id<L> {}

impl<const L: usize> Default for Id<L> {
    /// The unused id (length 0), which only fills table rows.
    fn default() -> Self {
        Id::UNUSED
    }
}

impl<const L: usize> StoredId<Id<L>> for Id<L> {
    #[inline]
    fn set(&mut self, id: &Id<L>) {
        self.clone_from(id);
    }
    #[inline]
    fn text(&self) -> &str {
        Id::as_str(self)
    }
    #[inline]
    fn is(&self, id: &Id<L>) -> bool {
        self == id
    }
    #[inline]
    fn same(&self, other: &Self) -> bool {
        self == other
    }
    #[inline]
    fn is_unused(&self) -> bool {
        *self == Id::UNUSED
    }
    #[inline]
    fn index_cmp(&self, id: &Id<L>) -> Ordering {
        Id::index_cmp(self, id)
    }
    #[inline]
    fn order(&self, other: &Self) -> Ordering {
        Id::index_cmp(self, other)
    }
    #[inline]
    fn to_id(&self) -> Id<L> {
        self.clone()
    }
}

#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub use heap::{Heap, HeapColumn, HeapId};

#[cfg(feature = "alloc")]
mod heap {
    extern crate alloc;

    use alloc::boxed::Box;
    use alloc::vec::Vec;
    use core::cmp::Ordering;
    use core::ops::{Deref, DerefMut};

    use super::{sealed, Column, Row, Storage, StoredId};
    use crate::id::Id;

    /// Rows and ids on the heap, as many as the session holds (up to the
    /// same capacities as [`Inline`](super::Inline)): a session costs about
    /// what it holds. Needs the `alloc` feature and a global allocator.
    ///
    /// ```
    /// use duplex_core::profile::{Capacities, Profile, Server};
    /// use duplex_core::storage::Heap;
    /// use duplex_core::{Fence, Id, Instant, Open, OpenOptions, Session};
    ///
    /// /// The server's sizes, on the heap.
    /// #[derive(Debug)]
    /// struct HeapServer;
    /// impl Profile for HeapServer {
    ///     type SessionConfig = ();
    ///     type RuntimeConfig = ();
    ///     type Tables = Capacities<16, 8, 256, 8, 128, 1, Heap>;
    /// }
    /// let f = Fence::new(Id::new("s")?, 0);
    /// let mut s = Session::<Open, HeapServer>::open_with_capacities(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    /// s.bind(&f, 0, &Id::new("req-1")?)?;
    /// assert!(core::mem::size_of_val(&s) < 600);
    /// assert!(core::mem::size_of::<Session<Open, Server>>() > 40_000);
    /// # Ok::<(), duplex_core::Error>(())
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Heap;

    impl sealed::Sealed for Heap {}

    impl Storage for Heap {
        const GROWS: bool = true;
        type Column<T: Row, const N: usize> = HeapColumn<T, N>;
        type Id<const L: usize> = HeapId;
    }

    /// A column of up to `N` rows on the heap: a boxed slice as long as
    /// the rows it has room for (two words; nothing allocated while empty).
    ///
    /// ```
    /// use duplex_core::storage::{Column, HeapColumn};
    ///
    /// let mut c = HeapColumn::<u32, 16>::empty();
    /// assert_eq!(c.len(), 0);
    /// c.grow_to(3); // room for 4: it grows by doubling, from 4
    /// assert_eq!((c.len(), c.heap_bytes()), (4, 16));
    /// c.grow_to(100); // never past the capacity
    /// assert_eq!(c.len(), 16);
    /// ```
    #[derive(Debug)]
    pub struct HeapColumn<T, const N: usize>(Box<[T]>);

    #[cfg(feature = "defmt")]
    impl<T: defmt::Format, const N: usize> defmt::Format for HeapColumn<T, N> {
        fn format(&self, f: defmt::Formatter<'_>) {
            defmt::write!(f, "{=[?]}", &self.0[..]);
        }
    }

    impl<T, const N: usize> sealed::Sealed for HeapColumn<T, N> {}

    impl<T, const N: usize> Deref for HeapColumn<T, N> {
        type Target = [T];
        #[inline]
        fn deref(&self) -> &[T] {
            &self.0
        }
    }

    impl<T, const N: usize> DerefMut for HeapColumn<T, N> {
        #[inline]
        fn deref_mut(&mut self) -> &mut [T] {
            &mut self.0
        }
    }

    impl<T: Row, const N: usize> Column<T> for HeapColumn<T, N> {
        #[inline]
        fn empty() -> Self {
            HeapColumn(Box::default())
        }

        /// Grows by doubling (from 4 rows), never past `N`.
        #[inline]
        fn grow_to(&mut self, rows: usize) {
            let len = self.0.len();
            if rows <= len {
                return;
            }
            let want = rows.max(len.saturating_mul(2)).max(4).min(N);
            let mut grown = Vec::with_capacity(want);
            grown.extend(core::mem::take(&mut self.0));
            grown.resize_with(want, T::default);
            self.0 = grown.into_boxed_slice();
        }

        /// Resets rows `rows..` (freeing their ids); the room stays.
        #[inline]
        fn trim_to(&mut self, rows: usize) {
            if let Some(rest) = self.0.get_mut(rows..) {
                for row in rest {
                    if row.heap_bytes() != 0 {
                        *row = T::default();
                    }
                }
            }
        }

        fn heap_bytes(&self) -> usize {
            self.0.len() * core::mem::size_of::<T>()
                + self.0.iter().map(Row::heap_bytes).sum::<usize>()
        }
    }

    /// An id in a [`Heap`] table: its bytes boxed, exactly as long as the
    /// id (an unused row holds nothing).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct HeapId(Option<Box<str>>);

    #[cfg(feature = "defmt")]
    impl defmt::Format for HeapId {
        fn format(&self, f: defmt::Formatter<'_>) {
            defmt::write!(f, "{=str}", self.text());
        }
    }

    impl HeapId {
        #[inline]
        fn text(&self) -> &str {
            self.0.as_deref().unwrap_or_default()
        }

        /// The text (empty for an unused row).
        ///
        /// ```
        /// use duplex_core::storage::{Heap, HeapId, StoredId};
        /// use duplex_core::Id;
        ///
        /// let mut row = HeapId::default();
        /// StoredId::<Id<8>>::set(&mut row, &Id::<8>::new("op-1")?);
        /// assert_eq!(row.as_str(), "op-1");
        /// # Ok::<(), duplex_core::Error>(())
        /// ```
        #[inline]
        pub fn as_str(&self) -> &str {
            self.text()
        }
    }

    impl AsRef<str> for HeapId {
        fn as_ref(&self) -> &str {
            self.text()
        }
    }

    impl sealed::Sealed for HeapId {}
    impl Row for HeapId {
        fn heap_bytes(&self) -> usize {
            self.0.as_ref().map_or(0, |b| b.len())
        }
    }

    impl<const L: usize> StoredId<Id<L>> for HeapId {
        #[inline]
        fn set(&mut self, id: &Id<L>) {
            if self.text() != id.as_str() {
                self.0 = Some(Box::from(id.as_str()));
            }
        }
        #[inline]
        fn text(&self) -> &str {
            HeapId::text(self)
        }
        #[inline]
        fn is(&self, id: &Id<L>) -> bool {
            self.text().as_bytes() == id.as_bytes()
        }
        #[inline]
        fn same(&self, other: &Self) -> bool {
            self == other
        }
        #[inline]
        fn is_unused(&self) -> bool {
            self.0.is_none()
        }
        #[inline]
        fn index_cmp(&self, id: &Id<L>) -> Ordering {
            self.text().as_bytes().cmp(id.as_bytes())
        }
        #[inline]
        fn order(&self, other: &Self) -> Ordering {
            self.text().as_bytes().cmp(other.text().as_bytes())
        }
        #[inline]
        fn to_id(&self) -> Id<L> {
            Id::new(self.text()).unwrap_or(Id::UNUSED)
        }
    }
}
