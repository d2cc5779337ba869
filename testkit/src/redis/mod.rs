//! Throwaway Redis stores, each a `redis-server` from `PATH` in memory
//! only (nothing on disk but a cluster node's `nodes.conf`), stopped when
//! dropped: [`RedisServer`] (one server), [`RedisSentinel`] (a primary
//! with two replicas under three Sentinels), [`RedisCluster`] (three
//! masters, with replicas if asked), and [`LocalRedis`], any of the three.

mod cluster;
mod sentinel;
mod server;

pub use cluster::RedisCluster;
pub use sentinel::{RedisSentinel, SENTINEL_MASTER};
pub use server::{LocalRedis, RedisServer, RedisServerError};
