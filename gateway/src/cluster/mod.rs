//! Several gateway nodes sharing sessions through Redis.
//!
//! - [`directory`]: the session directory (owner, incarnation and image of
//!   every session), written through atomic scripts so that the incarnation
//!   is a fencing token.
//! - [`RedisServer`], [`RedisSentinel`], [`RedisCluster`]: a throwaway
//!   `redis-server` from `PATH`, a primary with two replicas under three
//!   Sentinels, or three masters (with replicas if asked) as a Redis
//!   Cluster (in memory, nothing on disk), for tests and the local
//!   cluster command.

pub mod directory;
mod node;
mod redis_cluster;
mod sentinel;
mod server;
mod shadow;
pub(crate) use shadow::Batch;

pub use directory::{
    Directory, DirectoryError, Durability, Record, RedisTarget, ReleaseTally, Save, Taken,
    WriteBack,
};
pub use node::ClusterConfig;
pub(crate) use node::Node;
pub use redis_cluster::RedisCluster;
pub use sentinel::{RedisSentinel, SENTINEL_MASTER};
pub use server::{LocalRedis, RedisServer, RedisServerError};
