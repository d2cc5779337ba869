//! The Redis stores the cluster tests run against: one `redis-server`, and
//! a three-master Redis Cluster when `redis-cli` can make one. Without
//! `redis-server` on PATH the tests say they are skipped, unless
//! `DUPLEX_REQUIRE_REDIS=1` (CI), which makes both stores required.

use duplex_gateway::cluster::{RedisCluster, RedisServer, RedisTarget};

/// A running store.
pub enum Store {
    Server(RedisServer),
    Cluster(RedisCluster),
}

impl Store {
    pub fn target(&self) -> RedisTarget {
        match self {
            Store::Server(s) => RedisTarget::Server(s.url()),
            Store::Cluster(c) => RedisTarget::Cluster(c.urls()),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Store::Server(_) => "one redis-server",
            Store::Cluster(_) => "a three-master Redis Cluster",
        }
    }
}

/// Says why a test did not run where `cargo test` shows it: straight to
/// the process's stderr (the test harness captures only the print macros).
fn say(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn required() -> bool {
    std::env::var_os("DUPLEX_REQUIRE_REDIS").is_some()
}

/// One `redis-server`, or `None` (skipped) without one on PATH.
pub fn server() -> Option<RedisServer> {
    if !RedisServer::available() {
        assert!(
            !required(),
            "DUPLEX_REQUIRE_REDIS is set but redis-server is not on PATH"
        );
        say("skipped: redis-server is not on PATH (apt-get install redis-server)");
        return None;
    }
    Some(RedisServer::start().expect("redis-server starts"))
}

/// Both stores (the cluster only where it can be started).
pub fn all() -> Vec<Store> {
    let Some(server) = server() else {
        return Vec::new();
    };
    let mut stores = vec![Store::Server(server)];
    match RedisCluster::start() {
        Ok(cluster) => stores.push(Store::Cluster(cluster)),
        Err(e) => {
            assert!(
                !required(),
                "DUPLEX_REQUIRE_REDIS is set but no Redis Cluster: {e}"
            );
            say(&format!("skipped on a Redis Cluster: {e}"));
        }
    }
    stores
}
