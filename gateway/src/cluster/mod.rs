//! Several gateway nodes sharing sessions through Redis.
//!
//! - [`directory`]: the session directory (owner, incarnation and image of
//!   every session), written through atomic scripts so that the incarnation
//!   is a fencing token.
//! - [`RedisServer`], [`RedisCluster`]: a throwaway `redis-server` from
//!   `PATH`, or three of them as a Redis Cluster (in memory, nothing on
//!   disk), for tests and the local cluster command.

pub mod directory;
mod node;
mod server;
mod shadow;
pub(crate) use shadow::Batch;

pub use directory::{
    Directory, DirectoryError, Record, RedisTarget, ReleaseTally, Save, WriteBack,
};
pub use node::ClusterConfig;
pub(crate) use node::Node;
pub use server::{LocalRedis, RedisCluster, RedisServer, RedisServerError};
