//! The Redis stores the cluster tests run against, as the tests take them.
//!
//! A test that needs one is marked `#[ignore = "needs redis-server"]`:
//! `cargo test` shows it ignored on any machine, never passed, and
//! `cargo test -- --ignored` runs it, failing when its store cannot be
//! started (no `redis-server` or `redis-cli` on `PATH`). CI runs them all
//! so (`.ci/run`), and fails if one is still ignored.
//!
//! ```no_run
//! #[tokio::test]
//! #[ignore = "needs redis-server"]
//! async fn a_store_answers() {
//!     let server = duplex_testkit::stores::server();
//!     assert!(server.url().starts_with("redis://"));
//! }
//! ```

use crate::redis::{LocalRedis, RedisCluster, RedisSentinel, RedisServer};

/// The reason a test that needs Redis gives for its `#[ignore]`.
///
/// ```
/// assert_eq!(duplex_testkit::stores::NEEDS_REDIS, "needs redis-server");
/// ```
pub const NEEDS_REDIS: &str = "needs redis-server";

/// One `redis-server`.
///
/// # Panics
///
/// When it cannot be started, saying why (not on `PATH`, no free port).
///
/// ```no_run
/// let server = duplex_testkit::stores::server();
/// assert!(server.url().starts_with("redis://127.0.0.1:"));
/// ```
#[must_use]
pub fn server() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| panic!("{NEEDS_REDIS}: {e}"))
}

/// Both stores a scenario runs on: one `redis-server` and a three-master
/// Redis Cluster.
///
/// # Panics
///
/// When either cannot be started.
///
/// ```no_run
/// let names: Vec<_> = duplex_testkit::stores::all().iter().map(|s| s.name()).collect();
/// assert_eq!(names.len(), 2);
/// ```
#[must_use]
pub fn all() -> Vec<LocalRedis> {
    let cluster = LocalRedis::start(true)
        .unwrap_or_else(|e| panic!("{NEEDS_REDIS} and redis-cli (a Redis Cluster): {e}"));
    vec![LocalRedis::Server(server()), cluster]
}

/// A primary with two replicas under three Sentinels, each server
/// refusing writes with fewer than `min_replicas` replicas.
///
/// # Panics
///
/// When it cannot be started.
///
/// ```no_run
/// let redis = duplex_testkit::stores::sentinel(1);
/// assert!(redis.primary_port().is_ok());
/// ```
#[must_use]
pub fn sentinel(min_replicas: u32) -> RedisSentinel {
    RedisSentinel::start(min_replicas).unwrap_or_else(|e| panic!("{NEEDS_REDIS} (Sentinels): {e}"))
}

/// A Redis Cluster of three masters with `replicas` replicas each, each
/// server refusing writes with fewer than `min_replicas` replicas in reach.
///
/// # Panics
///
/// When it cannot be started.
///
/// ```no_run
/// let cluster = duplex_testkit::stores::cluster(1, 0);
/// assert_eq!(cluster.urls().len(), 6);
/// ```
#[must_use]
pub fn cluster(replicas: u32, min_replicas: u32) -> RedisCluster {
    RedisCluster::start_with(replicas, min_replicas)
        .unwrap_or_else(|e| panic!("{NEEDS_REDIS} and redis-cli (a Redis Cluster): {e}"))
}

/// Runs each named scenario (an `async fn(&RedisTarget)` of the test file)
/// on one `redis-server` and on a three-master Redis Cluster, as one test
/// each, ignored unless asked for (`--ignored`).
///
/// ```text
/// async fn a_scenario(target: &duplex_gateway::cluster::RedisTarget) { /* … */ }
/// duplex_testkit::on_every_store!(a_scenario);
/// ```
#[macro_export]
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod every_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs redis-server"]
                async fn $name() {
                    for store in $crate::stores::all() {
                        eprintln!("on {}", store.name());
                        super::$name(&store.target()).await;
                    }
                }
            )*
        }
    };
}
