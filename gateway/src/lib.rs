//! A reference WebSocket voice gateway over [`duplex_std::SharedManager`],
//! and a loopback load generator that proves, over real sockets, that no
//! acknowledged chunk is lost or applied twice.
//!
//! - [`Gateway`] serves the protocol of `PROTOCOL.md` (beside this crate):
//!   one JSON text message per event, audio as base64.
//! - [`loadgen`] runs N clients that stream chunks, drop and resume,
//!   retransmit, barge in and send garbage, then reconcile their ledgers
//!   with the server's audit log.
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use duplex_gateway::{Config, Gateway};
//!
//! let gw = Gateway::new(Config::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//! let counters = gw.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await;
//! println!("{}", counters.line());
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod auth;
pub mod cluster;
mod connection;
mod durable;
mod engine;
#[cfg(test)]
mod frames;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod limits;
pub mod loadgen;
mod ownership;
pub mod protocol;
mod server;
mod state;
pub mod stats;
mod transport;

pub use limits::Limits;
pub use ownership::{Owner, RandomError, RESUME_KEY_MIN};
pub use server::Gateway;
pub use state::{Config, Manager, StartError};
