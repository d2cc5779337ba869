//! # duplex-core
//!
//! The engine-side session state of a full-duplex voice AI engine (the user
//! and the model talk at once), as a `#![no_std]`, allocation-free, `unsafe`-free
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
//! ```text
//!   ┌─ resume (takeover) ─┐
//!   ▼                     │
//!  Open ─────detach─────▶ Detached
//!   │  ◀─────resume────── │
//!   │                     │
//!   └─ begin_close, expiry ─┬─ begin_close, expiry
//!                           ▼
//!                        Closing ──finalize──▶ Closed
//! ```
//!
//! [`Session<Open>`], [`Session<Detached>`], [`Session<Closing>`] and
//! [`Session<Closed>`] expose exactly the operations SPEC §5 permits in that
//! state; anything else does not compile. Transitions consume the session;
//! a refused transition returns it unchanged inside [`Rejected`].
//!
//! | operation | Open | Detached | Closing |
//! |---|---|---|---|
//! | touch, resume | ✓ | ✓ (→ Open) | ✗ |
//! | detach, begin_operation, prepare_append, append | ✓ | ✗ | ✗ |
//! | end_operation, commit_append, completed, record_completed, reserve, bind, accept_fence, cancel, replace_configs | ✓ | ✓ | ✗ |
//! | stage/resource ids, release, release_fence | ✓ | ✓ | ✓ |
//! | begin_close | ✓ (→ Closing) | ✓ (→ Closing) | ✓ (no-op) |
//! | finalize (→ Closed) | ✗ | ✗ | ✓ |
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
//! Every table is fixed-capacity, chosen with const generics whose defaults
//! are the conformance profile: 8 request resources (`R`), 4 stage bindings
//! (`B`), 8 completed appends (`D`), 4 active operations (`A`), 32-byte ids
//! (`L`), 4 stage results per completed append (`K`). An operation that would
//! exceed a table fails with [`Error::Full`] and changes nothing.
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
//! let mut session: Session<Open> = Session::open(turn0.clone(), opts, clock.now())?;
//!
//! // The user speaks: 20 ms chunks, each appended in order.
//! for _ in 0..3 {
//!     session.append(InputMode::AppendAudioChunk, &turn0)?;
//!     clock.advance(Duration::from_millis(20));
//! }
//! // The model answers on stage 0.
//! session.bind(0, &Id::new("tts-1")?, &turn0)?;
//!
//! // Barge-in: the user interrupts; epoch 1 cancels the answer.
//! let turn1 = turn0.clone().with_epoch(1);
//! let cancelled = session.cancel(&turn0, &turn1)?;
//! assert_eq!(cancelled.as_slice(), [Id::new("tts-1")?]);
//! // A late chunk from the old epoch is refused; the new epoch restarts at 1.
//! assert!(session.append(InputMode::AppendAudioChunk, &turn0).is_err());
//! assert_eq!(session.append(InputMode::AppendAudioChunk, &turn1)?.seq, 1);
//!
//! // The client hangs up.
//! let closing = session.begin_close(&turn1, CloseReason::ClientClose).map_err(Rejected::into_error)?;
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

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
// Transitions hand the unchanged session back inside their error, by value:
// without a heap there is nothing to box it into, and nothing is lost.
#![allow(clippy::result_large_err)]

mod fmt;

pub mod append;
mod completed;
pub mod error;
pub mod fence;
pub mod id;
pub mod lease;
pub mod mode;
mod requests;
pub mod session;
pub mod time;

pub use append::{Appended, Reservation};
pub use error::{ConfigField, Error, ErrorKind, FenceRule, Rejected, Table};
pub use fence::{Fence, Position, Stamp};
pub use id::{Id, DEFAULT_ID_LEN};
pub use lease::{Activity, CloseReason, LeaseConfig};
pub use mode::{InputMode, Modes};
pub use requests::RequestIds;
pub use session::state::{Closed, Closing, Detached, Live, Open, State, StateKind, Unfinished};
pub use session::{OpenOptions, Session};
pub use time::{Clock, Duration, Instant, ManualClock};

mod guarantees {
    use super::{
        Activity, Appended, CloseReason, Closed, Closing, Detached, Error, ErrorKind, Fence, Id,
        InputMode, Instant, LeaseConfig, Modes, Open, Reservation, Session,
    };
    use static_assertions::{assert_impl_all, const_assert};

    // Value types move freely between threads and tasks.
    assert_impl_all!(Id: Send, Sync, Clone);
    assert_impl_all!(Fence: Send, Sync, Clone);
    assert_impl_all!(Reservation: Send, Sync, Clone);
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

    // Ids are stored inline with a one-byte length.
    const_assert!(core::mem::size_of::<Id>() == 33);
    // An open session with the default profile stays within 1,800 bytes
    // (1,768 on 64-bit targets: resources 8 x 64, completed appends 8 x 112,
    // the rest fence, lease, cursor and binding order).
    const_assert!(core::mem::size_of::<Session<Open>>() <= 1_800);
}
