//! A reference WebSocket voice gateway over [`duplex_std::SharedManager`].
//!
//! Its rooms:
//! - [`protocol`]: the wire events and their codecs, shared by the server
//!   and every client (the load generator, `duplex-loadgen`, is one);
//! - [`engine`]: the seam a model implements ([`engine::Engine`]) to answer
//!   the gateway's sessions, and the stand-in that answers by default;
//! - [`server`]: the accept loop ([`Gateway`]), each socket's transport and
//!   outbox, the connection that speaks the protocol, the engine's driver,
//!   the limits, ownership and auth;
//! - [`cluster`]: several nodes sharing sessions through a Redis directory;
//! - [`stats`]: the counters, which the server keeps and the protocol's
//!   `admin.stats` carries.
//!
//! [`Gateway`] serves the protocol of `PROTOCOL.md` (beside this crate):
//! one JSON text message per event, audio as base64. The load generator and
//! the local cluster tool are their own crate, `duplex-loadgen`, so a user
//! of the server compiles neither.
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

pub mod cluster;
pub mod engine;
#[cfg(test)]
mod frames;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod profile;
pub mod protocol;
pub mod server;
pub mod stats;

pub use profile::{GatewayProfile, Id};
pub use server::limits::Limits;
pub use server::ownership::{Owner, RandomError, RESUME_KEY_MIN};
pub use server::state::{Config, Manager, StartError};
pub use server::tls::{TlsError, TlsFiles};
pub use server::{auth, Gateway};
