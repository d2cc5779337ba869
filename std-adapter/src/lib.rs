//! # duplex-std
//!
//! The std host side of [`duplex_core`]: a [`SessionManager`] that keeps the
//! sessions of a voice server by id, admits and reaps them, cleans up after
//! failed engine requests, and offers a dynamic API (lifecycle checked at run
//! time, `wrong_state`) beside typed access (checked at compile time).
//! Time is an argument, as in the core: [`SessionManager::at`] is the
//! manager at an instant; a manager's clock is a convenience its clock
//! forms read once ([`MonotonicClock`] is the clock over
//! `std::time::Instant`).
//!
//! ```
//! use duplex_core::*;
//! use duplex_std::{ManagerConfig, MonotonicClock, SessionManager, Sessions};
//!
//! let config = ManagerConfig { max_sessions: Some(10_000), ..ManagerConfig::default() };
//! let mut manager = SessionManager::new(MonotonicClock::new(), config)?;
//! let fence = Fence::new(Id::new("call-1")?, 0);
//! let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
//! manager.open(fence.clone(), opts)?;
//! manager.append(&fence, InputMode::AppendAudioChunk)?;
//! manager.bind(&fence, 0, "llm-1")?;
//! // Barge-in.
//! let next = fence.clone().with_epoch(1);
//! let cancelled = manager.cancel(&fence, &next)?;
//! assert_eq!(cancelled.as_slice(), [Id::new("llm-1")?]);
//! // Hang up.
//! let released = manager.close(&next, CloseReason::ClientClose)?;
//! assert_eq!(released.map(|ids| ids.len()), Some(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What vllm-omni 0.30's released session added comes as extension traits
//! on every [`Sessions`] host (a manager, [`At`], a `&SharedManager`):
//! [`InputBudgets`] (input held that the model has not consumed),
//! [`Overlaps`] (speech over the model's answer) and [`Drains`] (requests
//! that outlive their turn, and whose output theirs is).
//!
//! A session moves between managers (another host, a restart) with
//! [`SessionManager::export`] and [`SessionManager::import`], or their
//! [`SharedManager`] counterparts; the import takes a new incarnation, so
//! the old owner's messages are refused.
//!
//! For multi-threaded hosts, [`SharedManager`] shards the sessions over
//! many managers behind their own locks, with exact global admission,
//! cancellation-safe [`AdmissionPermit`]s and reaper drivers (a thread, or a
//! tokio task with the `tokio` feature).
//!
//! ## Features
//!
//! - `tokio`: `TokioClock` (the clock over tokio's time) and
//!   `SharedManager::reap`, the reaper as an async task.
//! - `metrics`: counters and gauges through the `metrics` facade (see
//!   [`metrics`] for the names).
//! - `serde`: the core's `AnySession::snapshot` and `restore`, to carry an
//!   exported session between processes as bytes.
//!
//! The load-and-fault simulator that drives this manager is its own crate,
//! `duplex-sim`, so hosts that depend on `duplex-std` compile none of its
//! dependencies.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod clock;
mod drains;
mod error;
mod host;
mod inputs;
mod manager;
pub mod metrics;
mod overlaps;
mod sessions;
mod shared;
mod view;

pub use clock::MonotonicClock;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use clock::TokioClock;
pub use drains::Drains;
pub use duplex_core::Expiry;
pub use error::Error;
pub use host::Host;
pub use inputs::InputBudgets;
pub use manager::{At, ManagerConfig, NotImported, Released, SessionKey, SessionManager};
pub use overlaps::Overlaps;
pub use sessions::Sessions;
pub use shared::{
    default_shards, AdmissionPermit, ReaperStats, ReaperThread, SharedClock, SharedKey,
    SharedManager,
};
pub use view::SessionView;

// The crate's README is what crates.io shows: its examples are tested.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
