//! What the gateway's tests and the local cluster command (`duplex-cluster`)
//! share, kept out of `duplex-gateway`'s public API: a user of the server
//! compiles none of it.
//!
//! - [`redis`]: throwaway stores (one `redis-server`, a primary under
//!   Sentinels, a Redis Cluster) started from `PATH`.
//! - [`stores`]: those stores as the tests take them: a test that needs
//!   Redis is marked `#[ignore = "needs redis-server"]`, so a machine
//!   without one shows it ignored, never passed; run with `--ignored` it
//!   fails when the store cannot be started, and CI runs it so.
//! - [`socket`]: a gateway on a loopback port, and a client's send and
//!   receive.
//!
//! ```no_run
//! # async fn run() {
//! let redis = duplex_testkit::stores::server();
//! let (_gw, url, stop, served) = duplex_testkit::socket::start(duplex_testkit::socket::audit_config()).await;
//! let mut ws = duplex_testkit::socket::connect(&url).await;
//! # let _ = (redis, &mut ws, stop, served);
//! # }
//! ```

pub mod redis;
pub mod socket;
pub mod stores;
