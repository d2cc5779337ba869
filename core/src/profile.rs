//! Profiles: what a session holds, named by one type.
//!
//! A [`Session`](crate::Session) and an [`AnySession`](crate::AnySession)
//! are generic over one [`Profile`]: the two opaque configurations a host
//! attaches to a session, and the [`Tables`] (capacities and storage) of
//! its fixed-size tables. Three profiles come with the crate; each is one
//! line, and a host that needs other sizes writes one `impl`.
//!
//! | constant | [`Conformance`] (default) | [`Device`] | [`Server`] | table |
//! |---|---:|---:|---:|---|
//! | `RESOURCES` (`R`) | 8 | 4 | 16 | request resources a session owns |
//! | `BINDINGS` (`B`) | 4 | 2 | 8 | stage bindings (one per stage) |
//! | `COMPLETED` (`D`) | 8 | 4 | 256 | completed-append records (runtime limit `1..=D`) |
//! | `ACTIVE_OPS` (`A`) | 4 | 2 | 8 | active lease operations |
//! | `ID_LEN` (`L`) | 32 | 16 | 128 | bytes of a session, request or operation id |
//! | `STAGE_RESULTS` (`K`) | 4 | 2 | 1 | stage results of one completed append |
//!
//! Tables hold at most 255 entries (256 completed appends), ids at most 255
//! bytes and a completed append at most 7 results: one-byte lengths (and
//! ids that mark their length in their own last bytes) keep a session
//! small. A [`Capacities`] outside those bounds fails to compile.
//!
//! # Examples
//!
//! ```
//! use duplex_core::profile::{device, Device};
//! use duplex_core::{Fence, Id, Instant, Open, OpenOptions, Session};
//!
//! let fence = Fence::new(Id::<{ device::ID_LEN }>::new("mic-0")?, 0);
//! let s: Session<Open, Device> = Session::open_with_capacities(fence, OpenOptions::default(), Instant::ZERO)?;
//! assert_eq!(s.completed_limit(), device::COMPLETED);
//! # Ok::<(), duplex_core::Error>(())
//! ```
//!
//! A profile of one's own: other sizes, and the configuration types the
//! host keeps on each session.
//!
//! ```
//! use duplex_core::profile::{Capacities, Profile};
//! use duplex_core::{AnySession, Fence, Id, Instant, Open, OpenOptions, Session, StateKind};
//!
//! #[derive(Debug)]
//! struct Voice;
//! impl Profile for Voice {
//!     type SessionConfig = &'static str; // the voice
//!     type RuntimeConfig = u32; // the sample rate
//!     type Tables = Capacities<4, 2, 16, 2, 48, 1>;
//! }
//!
//! let f = Fence::new(Id::new("call-1")?, 0);
//! let s = Session::<Open, Voice>::open_with_capacities(f, OpenOptions::new("alto", 24_000), Instant::ZERO)?;
//! assert_eq!((s.session_config(), s.completed_limit()), (&"alto", 16));
//! let s = AnySession::from(s);
//! assert_eq!(s.kind(), StateKind::Open);
//! # Ok::<(), duplex_core::Error>(())
//! ```

use core::fmt;
use core::hash::Hash;
use core::marker::PhantomData;
use core::ops::Deref;

use crate::id::Id;
pub use crate::id::IdText;
use crate::storage::{Column, Inline, MaybeFormat, Results, Row, Storage, StoredId};

pub use crate::base::{conformance, device, server};

mod sealed {
    pub trait Sealed {}
}

/// What a session holds: the configurations a host keeps on it, and the
/// capacities and storage of its tables. A profile is `Debug` (derive it on
/// the marker type), and so are its configurations, so that every session
/// and manager of it is.
///
/// ```
/// use duplex_core::profile::{Capacities, Profile, Server};
///
/// /// The server's sizes, but one stage result per completed append.
/// #[derive(Debug)]
/// struct Lean;
/// impl Profile for Lean {
///     type SessionConfig = ();
///     type RuntimeConfig = ();
///     type Tables = Capacities<16, 8, 256, 8, 128, 1>;
/// }
/// # let _ = core::marker::PhantomData::<(Lean, Server)>;
/// ```
///
/// With the `alloc` feature, the tables' storage is the last parameter:
/// `Capacities<16, 8, 256, 8, 128, 1, Heap>` keeps their rows on the heap
/// ([`storage`](crate::storage)).
pub trait Profile: fmt::Debug + 'static {
    /// The opaque session configuration (the seed's `session_config`).
    type SessionConfig: fmt::Debug;
    /// The opaque runtime configuration (the seed's `runtime_config`).
    type RuntimeConfig: fmt::Debug;
    /// The tables' capacities and storage: a [`Capacities`].
    type Tables: Tables;
}

/// The id type of profile `P`: `Id<L>` for its `ID_LEN`.
///
/// ```
/// use duplex_core::profile::{Device, IdOf};
/// use duplex_core::id::IdText;
/// assert_eq!(IdOf::<Device>::new("mic")?.as_str(), "mic");
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub type IdOf<P> = <<P as Profile>::Tables as Tables>::Id;

/// The tables of profile `P`.
///
/// ```
/// use duplex_core::profile::{Capacities, Device, TablesOf};
/// let _: TablesOf<Device> = Capacities::<4, 2, 4, 2, 16, 2>::default();
/// ```
pub type TablesOf<P> = <P as Profile>::Tables;

/// The capacities and storage of a session's tables. Sealed: implemented by
/// [`Capacities`] alone, whose constants are checked at compile time.
///
/// ```
/// use duplex_core::profile::{Capacities, Tables};
///
/// type Tiny = Capacities<2, 1, 2, 1, 8, 1>;
/// assert_eq!((Tiny::RESOURCES, Tiny::ID_LEN), (2, 8));
/// ```
pub trait Tables:
    sealed::Sealed + fmt::Debug + MaybeFormat + Sized + Send + Sync + 'static
{
    /// Request resources a session owns (`R`, `1..=255`).
    const RESOURCES: usize;
    /// Stage bindings (`B`, `1..=255`).
    const BINDINGS: usize;
    /// Completed-append records (`D`, `1..=256`).
    const COMPLETED: usize;
    /// Active lease operations (`A`, `1..=255`).
    const ACTIVE_OPS: usize;
    /// Bytes of an id (`L`, `1..=255`).
    const ID_LEN: usize;
    /// Stage results of one completed append (`K`, `0..=7`).
    const STAGE_RESULTS: usize;
    /// Evaluates the compile-time checks of the capacities: a session
    /// opened with capacities outside their bounds fails to compile.
    #[doc(hidden)]
    const CHECKED: ();
    /// Where the rows live.
    type Storage: Storage;
    /// A session, request or operation id: `Id<L>`.
    type Id: IdText + StoredId<Self::Id>;
    /// An id as a table row stores it.
    type StoredId: StoredId<Self::Id>;
    /// The request-resource column.
    type Resources<T: Row>: Column<T>;
    /// The stage-binding column.
    type Bindings<T: Row>: Column<T>;
    /// The completed-append column.
    type Completed<T: Row>: Column<T>;
    /// The active-operation column.
    type Ops<T: Row>: Column<T>;
    /// The stage results of one completed append, as a row.
    type Results: ResultsRow;
    /// Up to `RESOURCES` ids, by value.
    type IdList: IdList<Self::Id>;
}

/// The capacities of a session's tables and where their rows live (the
/// implementation of [`Tables`]): `R` request resources, `B` stage
/// bindings, `D` completed appends, `A` active operations, `L` id bytes,
/// `K` stage results per completed append, storage `M` ([`Inline`] by
/// default, or `Heap` with the `alloc` feature).
///
/// ```
/// use duplex_core::profile::{Capacities, Tables};
/// type Small = Capacities<4, 2, 4, 2, 16, 2>;
/// assert_eq!(Small::COMPLETED, 4);
/// ```
pub struct Capacities<
    const R: usize,
    const B: usize,
    const D: usize,
    const A: usize,
    const L: usize,
    const K: usize,
    M = Inline,
>(PhantomData<fn() -> M>);

/// Implements each trait for every [`Capacities`]: a zero-sized marker has
/// them whatever its storage `M` is (a derive would ask `M` for each).
macro_rules! for_capacities {
    ($($(#[$attr:meta])* $trait:path { $($body:tt)* })*) => {$(
        $(#[$attr])*
        impl<
                const R: usize,
                const B: usize,
                const D: usize,
                const A: usize,
                const L: usize,
                const K: usize,
                M,
            > $trait for Capacities<R, B, D, A, L, K, M>
        {
            $($body)*
        }
    )*};
}

for_capacities! {
    fmt::Debug {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Capacities<{R}, {B}, {D}, {A}, {L}, {K}>")
        }
    }
    #[cfg(feature = "defmt")]
    defmt::Format {
        fn format(&self, f: defmt::Formatter<'_>) {
            defmt::write!(f, "Capacities<{}, {}, {}, {}, {}, {}>", R, B, D, A, L, K);
        }
    }
    Clone {
        fn clone(&self) -> Self {
            *self
        }
    }
    Copy {}
    PartialEq {
        fn eq(&self, _: &Self) -> bool {
            true
        }
    }
    Eq {}
    Hash {
        fn hash<H: core::hash::Hasher>(&self, _: &mut H) {}
    }
    Default {
        fn default() -> Self {
            Capacities(PhantomData)
        }
    }
    sealed::Sealed {}
}

impl<
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
        M,
    > Capacities<R, B, D, A, L, K, M>
{
    /// Compile-time checks (tables use `u8` lengths; the completed-append
    /// ring uses `u8` slots and packs each record's results count into
    /// three bits).
    const OK: () = {
        assert!(R >= 1 && R <= 255, "R (request resources) must be 1..=255");
        assert!(B >= 1 && B <= 255, "B (stage bindings) must be 1..=255");
        assert!(D >= 1 && D <= 256, "D (completed appends) must be 1..=256");
        assert!(A >= 1 && A <= 255, "A (active operations) must be 1..=255");
        assert!(K <= 7, "K (stage results) must be at most 7");
        assert!(L >= 1 && L <= 255, "L (id bytes) must be 1..=255");
    };
}

impl<
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
        M: Storage,
    > Tables for Capacities<R, B, D, A, L, K, M>
{
    const RESOURCES: usize = R;
    const BINDINGS: usize = B;
    const COMPLETED: usize = D;
    const ACTIVE_OPS: usize = A;
    const ID_LEN: usize = L;
    const STAGE_RESULTS: usize = K;
    const CHECKED: () = Self::OK;
    type Storage = M;
    type Id = Id<L>;
    type StoredId = M::Id<L>;
    type Resources<T: Row> = M::Column<T, R>;
    type Bindings<T: Row> = M::Column<T, B>;
    type Completed<T: Row> = M::Column<T, D>;
    type Ops<T: Row> = M::Column<T, A>;
    type Results = Results<K>;
    type IdList = heapless::Vec<Id<L>, R, u8>;
}

/// The stage results of one completed append as a table row. Sealed.
///
/// ```
/// use duplex_core::profile::ResultsRow;
/// use duplex_core::storage::Results;
/// assert_eq!(<Results<2> as ResultsRow>::CAPACITY, 2);
/// ```
pub trait ResultsRow: sealed::Sealed + Row + Copy + Eq + Send + Sync + 'static {
    /// Results it holds at most (`K`).
    const CAPACITY: usize;
    /// Every slot.
    fn slots(&self) -> &[i64];
    /// Every slot, to write.
    fn slots_mut(&mut self) -> &mut [i64];
}

impl<const K: usize> sealed::Sealed for Results<K> {}

impl<const K: usize> ResultsRow for Results<K> {
    const CAPACITY: usize = K;
    #[inline]
    fn slots(&self) -> &[i64] {
        &self.0
    }
    #[inline]
    fn slots_mut(&mut self) -> &mut [i64] {
        &mut self.0
    }
}

/// Up to a profile's `RESOURCES` ids, by value (the storage of
/// [`RequestIds`](crate::RequestIds)). Sealed.
///
/// ```
/// use duplex_core::profile::IdList;
/// use duplex_core::Id;
///
/// let mut ids = heapless::Vec::<Id<8>, 1, u8>::new();
/// assert!(IdList::push_id(&mut ids, Id::new("a")?).is_ok());
/// assert!(IdList::push_id(&mut ids, Id::new("b")?).is_err());
/// # Ok::<(), duplex_core::Error>(())
/// ```
pub trait IdList<I>:
    sealed::Sealed
    + Deref<Target = [I]>
    + IntoIterator<Item = I>
    + Clone
    + Default
    + Eq
    + Hash
    + MaybeFormat
    + Send
    + Sync
    + 'static
{
    /// Adds `id`, or hands it back when full.
    ///
    /// # Errors
    ///
    /// `id` itself, when the list is full.
    fn push_id(&mut self, id: I) -> Result<(), I>;
    /// Empties the list.
    fn clear_ids(&mut self);
}

impl<const L: usize, const R: usize> sealed::Sealed for heapless::Vec<Id<L>, R, u8> {}

impl<const L: usize, const R: usize> IdList<Id<L>> for heapless::Vec<Id<L>, R, u8> {
    #[inline]
    fn push_id(&mut self, id: Id<L>) -> Result<(), Id<L>> {
        self.push(id)
    }
    #[inline]
    fn clear_ids(&mut self) {
        self.clear();
    }
}

macro_rules! profiles {
    ($($(#[$doc:meta])* $name:ident = $sizes:ident;)*) => {$(
        $(#[$doc])*
        pub struct $name<SC = (), RC = (), M = Inline>(PhantomData<fn() -> (SC, RC, M)>);

        impl<SC, RC, M> fmt::Debug for $name<SC, RC, M> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(stringify!($name))
            }
        }

        #[cfg(feature = "defmt")]
        impl<SC, RC, M> defmt::Format for $name<SC, RC, M> {
            fn format(&self, f: defmt::Formatter<'_>) {
                defmt::write!(f, "{=str}", stringify!($name));
            }
        }

        impl<SC: fmt::Debug + 'static, RC: fmt::Debug + 'static, M: Storage> Profile for $name<SC, RC, M> {
            type SessionConfig = SC;
            type RuntimeConfig = RC;
            type Tables = Capacities<
                { $sizes::RESOURCES },
                { $sizes::BINDINGS },
                { $sizes::COMPLETED },
                { $sizes::ACTIVE_OPS },
                { $sizes::ID_LEN },
                { $sizes::STAGE_RESULTS },
                M,
            >;
        }
    )*};
}

profiles! {
    /// The [`conformance`] sizes, the default profile of every generic
    /// type: the sizes the conformance traces are written for. `SC` and
    /// `RC` are the configurations a host keeps on each session, `M` where
    /// the tables keep their rows (as for every profile here).
    ///
    /// ```
    /// use duplex_core::profile::{Conformance, Tables, Profile};
    /// assert_eq!(<<Conformance as Profile>::Tables as Tables>::ID_LEN, 32);
    /// ```
    Conformance = conformance;
    /// The [`device`] sizes: a microphone-and-speaker node.
    ///
    /// ```
    /// use duplex_core::profile::{Device, Tables, Profile};
    /// assert_eq!(<<Device as Profile>::Tables as Tables>::ID_LEN, 16);
    /// ```
    Device = device;
    /// The [`server`] sizes: vllm-omni's control plane's ids and the seed's
    /// window of 256 completed appends.
    ///
    /// ```
    /// use duplex_core::profile::{Server, Tables, Profile};
    /// assert_eq!(<<Server as Profile>::Tables as Tables>::COMPLETED, 256);
    /// ```
    Server = server;
}
