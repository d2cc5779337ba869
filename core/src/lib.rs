//! # duplex-core
//!
//! The engine-side session state of a full-duplex voice AI engine (the user
//! and the model talk at once), as a `#![no_std]`, `unsafe`-free,
//! allocation-free (unless a host chooses heap storage)
//! state machine whose lifecycle is encoded in types.
//!
//! Per client session it keeps:
//!
//! - an identity **fence** (`session, incarnation, epoch, turn, response`)
//!   that never moves backwards: barge-in advances the epoch and cancels the
//!   old turn's requests; late messages of a cancelled turn, a previous
//!   connection or a previous incarnation are refused ([`fence`]);
//! - a **lease**: idle TTL, disconnect grace, resume with a generation token,
//!   active operations that hold idle expiry off ([`lease`]);
//! - the **append sequence** with two-phase prepare/commit ([`append`]);
//! - an idempotency cache of **completed appends**;
//! - the **stage requests** the session owns, released exactly once.
//!
//! ## Lifecycle as types
//!
//! [`Session<Open>`], [`Session<Detached>`], [`Session<Closing>`] and
//! [`Session<Closed>`] expose exactly the operations their state permits;
//! anything else does not compile, and the compiler says which states the
//! operation needs. Transitions consume the session; a refused transition
//! returns it unchanged inside [`Rejected`], which converts into [`Error`]
//! for `?`. Sessions are linear (never `Clone`): a released request can not
//! be released twice through a copy. [`AnySession`] keeps a session of any
//! state in one variable, with typed access and the same operations checked
//! at run time (`wrong_state`).
//!
#![doc = include_str!("../LIFECYCLE.md")]
//!
//! ## Time
//!
//! The core never reads a clock. Operations that move the lease take
//! `now: Instant`; the owner reads its injected [`Clock`] (a hardware tick
//! counter, `std::time::Instant`, or a [`ManualClock`] in tests). Deadline
//! arithmetic saturates. [`Session::deadline`] says when to look again.
//!
//! ## Capacities
//!
//! Every table is fixed-capacity. A session's one [`profile::Profile`]
//! parameter names its capacities (the default is the conformance
//! profile); [`profile`] lists each profile's constants in one table. An operation that would exceed a table fails with
//! [`Error::Full`] and changes nothing. The tables are stored column by
//! column, so a default-profile session is at most 1,544 bytes (checked at
//! compile time).
//!
//! Where the rows live is the profile's last parameter, a [`storage`] kind:
//! inline arrays by default (no allocation, ever), or, with the `alloc`
//! feature, `storage::Heap`, whose tables and ids are as large as what the
//! session holds, up to the same capacities.
//!
//! ## Example
//!
//! ```
//! use duplex_core::*;
//!
//! # fn main() -> Result<(), Error> {
//! let clock = ManualClock::new(Instant::ZERO);
//! let turn0 = Fence::new(Id::new("kitchen-speaker")?, 0);
//! let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
//! let mut session = Session::open(turn0.clone(), opts, clock.now())?;
//!
//! // The user speaks: 20 ms chunks, each appended in order.
//! for _ in 0..3 {
//!     session.append(&turn0, InputMode::AppendAudioChunk)?;
//!     clock.advance(Duration::from_millis(20));
//! }
//! // The model answers on stage 0.
//! session.bind(&turn0, 0, &Id::new("tts-1")?)?;
//!
//! // Barge-in: the user interrupts; epoch 1 cancels the answer.
//! let turn1 = turn0.clone().with_epoch(1);
//! let cancelled = session.cancel(&turn0, &turn1)?;
//! assert_eq!(cancelled.as_slice(), [Id::new("tts-1")?]);
//! // A late chunk from the old epoch is refused; the new epoch restarts at 1.
//! assert!(session.append(&turn0, InputMode::AppendAudioChunk).is_err());
//! assert_eq!(session.append(&turn1, InputMode::AppendAudioChunk)?.seq, 1);
//!
//! // The client hangs up.
//! let closing = session.begin_close(&turn1, CloseReason::ClientClose)?;
//! let (closed, released) = closing.finalize();
//! assert!(released.is_empty());
//! assert_eq!(closed.close_reason(), CloseReason::ClientClose);
//! # Ok(())
//! # }
//! ```
//!
//! ## Features
//!
//! - `defmt`: derives `defmt::Format` on every public type and logs each state
//!   transition (`state=open=>detached`) through `defmt`.
//! - `serde`: `Session::snapshot` and `AnySession::restore`, a versioned
//!   postcard image of a session in a caller's buffer (no allocation), with
//!   a restore that validates everything before a session exists.
//! - `alloc`: `storage::Heap`, tables and ids on the heap.
//! - `embassy-time`: `EmbassyClock`, the [`Clock`] over
//!   `embassy_time::Instant` for firmware on embassy.

#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
// Transitions hand the unchanged session back inside their error, by value:
// without a heap there is nothing to box it into, and nothing is lost.
#![allow(clippy::result_large_err)]

mod fmt;

pub mod append;
mod base;
mod columns;
mod completed;
pub mod drain;
pub mod error;
pub mod fence;
pub mod id;
pub mod input;
pub mod lease;
pub mod mode;
pub mod overlap;
pub mod profile;
mod requests;
pub mod session;
pub mod storage;
pub mod time;

pub use append::{Appended, Finality, Reservation, StageResults};
pub use completed::CompletedAppend;
pub use error::{ConfigField, Error, ErrorKind, FenceRule, Rejected, Staleness, Table};
pub use fence::{Fence, Stamp};
pub use id::Id;
pub use input::{Budget, InputLimits, PendingInput};
pub use lease::{Activity, CloseReason, LeaseConfig};
pub use mode::{InputMode, Modes};
pub use requests::{RequestIds, RequestState};
pub use session::any::AnySession;
pub use session::expiry::Expiry;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use session::snapshot::{max_snapshot_len, SnapshotError, SNAPSHOT_VERSION};
pub use session::state::{
    Attached, Closed, Closing, Detached, Finalizable, Live, Open, State, StateKind, Unfinished,
};
pub use session::{OpenOptions, Resumption, Session};
#[cfg(feature = "embassy-time")]
#[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
pub use time::EmbassyClock;
pub use time::{Clock, Duration, Instant, ManualClock};

mod guarantees {
    use super::{
        Activity, AnySession, Appended, CloseReason, Closed, Closing, Detached, Error, ErrorKind,
        Fence, Id, InputMode, Instant, LeaseConfig, Modes, Open, RequestIds, Reservation, Session,
    };
    use static_assertions::{assert_impl_all, assert_not_impl_any, const_assert};

    // Value types move freely between threads and tasks.
    assert_impl_all!(Id: Send, Sync, Clone);
    assert_impl_all!(Fence: Send, Sync, Clone);
    assert_impl_all!(Reservation: Send, Sync, Clone);
    assert_impl_all!(RequestIds: Send, Sync, Clone);
    assert_impl_all!(Appended: Send, Sync, Copy);
    assert_impl_all!(Error: Send, Sync, Copy, core::error::Error);
    assert_impl_all!(ErrorKind: Send, Sync, Copy);
    assert_impl_all!(Instant: Send, Sync, Copy);
    assert_impl_all!(LeaseConfig: Send, Sync, Copy);
    assert_impl_all!(Modes: Send, Sync, Copy);
    assert_impl_all!(InputMode: Send, Sync, Copy);
    assert_impl_all!(Activity: Send, Sync, Copy);
    assert_impl_all!(CloseReason: Send, Sync, Copy);

    // A session can be handed to another thread or task in every state.
    assert_impl_all!(Session<Open>: Send);
    assert_impl_all!(Session<Detached>: Send);
    assert_impl_all!(Session<Closing>: Send);
    assert_impl_all!(Session<Closed>: Send);
    assert_impl_all!(AnySession: Send);

    // Sessions are linear: no state can be copied into a second live
    // session (the compile-fail suite shows the error a user reads).
    assert_not_impl_any!(Session<Open>: Clone, Copy);
    assert_not_impl_any!(Session<Detached>: Clone, Copy);
    assert_not_impl_any!(Session<Closing>: Clone, Copy);
    assert_not_impl_any!(Session<Closed>: Clone, Copy);
    assert_not_impl_any!(AnySession: Clone, Copy);

    // Ids are stored inline, their length marked in their own bytes.
    const_assert!(core::mem::size_of::<Id>() == 32);
    const_assert!(core::mem::size_of::<Id<128>>() == 128);
    // A default-profile session, packed column by column (on 64-bit
    // targets: resources 8 x 61 bytes and two counts, completed appends
    // 8 x 90 and the ring's counters and settings, fence 64, lease 192
    // (with the control id of the last resume, 32), cursor 32, input
    // budget 12, overlap 9, config generation 8: 1,544 with 4 bytes of
    // padding), and the enum that holds any state.
    const_assert!(core::mem::size_of::<Session<Open>>() <= 1_544);
    const_assert!(core::mem::size_of::<Session<Detached>>() <= 1_552);
    const_assert!(core::mem::size_of::<AnySession>() <= 1_560);
}

// The crate's README is what crates.io shows: its examples are tested.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
