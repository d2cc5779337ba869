//! The Redis stores the cluster tests run against: one `redis-server`, and
//! a three-master Redis Cluster when `redis-cli` can make one. Without
//! `redis-server` on PATH the tests say they are skipped, unless
//! `DUPLEX_REQUIRE_REDIS=1` (CI), which makes both stores required.

use duplex_gateway::cluster::{LocalRedis, RedisServer};

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
pub fn all() -> Vec<LocalRedis> {
    let Some(server) = server() else {
        return Vec::new();
    };
    let mut stores = vec![LocalRedis::Server(server)];
    match LocalRedis::start(true) {
        Ok(cluster) => stores.push(cluster),
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

/// Runs each named scenario (an `async fn(&RedisTarget)` of the test
/// file) on one redis-server and on a three-master Redis Cluster, as one
/// test each.
// Test files without Redis scenarios include `common` too.
#[allow(unused_macros)]
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod every_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    for store in crate::common::stores::all() {
                        eprintln!("on {}", store.name());
                        super::$name(&store.target()).await;
                    }
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_every_store;

/// A primary with two replicas under three Sentinels (each server
/// refusing writes with fewer than `min_replicas` replicas), or `None`
/// (skipped) without `redis-server` on PATH.
pub fn sentinel(min_replicas: u32) -> Option<duplex_gateway::cluster::RedisSentinel> {
    server()?;
    Some(
        duplex_gateway::cluster::RedisSentinel::start(min_replicas).expect("Sentinel setup starts"),
    )
}

/// A Redis Cluster of three masters with `replicas` replicas each, each
/// server refusing writes with fewer than `min_replicas` replicas in reach
/// (`None`: skipped where no `redis-server` is installed).
pub fn cluster(replicas: u32, min_replicas: u32) -> Option<duplex_gateway::cluster::RedisCluster> {
    server()?;
    Some(
        duplex_gateway::cluster::RedisCluster::start_with(replicas, min_replicas)
            .expect("Redis Cluster starts"),
    )
}
