//! Several gateway nodes sharing sessions through Redis.
//!
//! - [`directory`]: the session directory (owner, incarnation and image of
//!   every session), written through atomic scripts so that the incarnation
//!   is a fencing token.
//!
//! The throwaway stores the tests and the local cluster command start (one
//! `redis-server`, Sentinels, a Redis Cluster) are the dev-only crate
//! `duplex-testkit`'s: a user of the server compiles none of them.

pub mod directory;
mod node;
mod shadow;
pub(crate) use shadow::Batch;

pub use directory::topology::{parse_cluster_nodes, ClusterNode};
pub use directory::{
    Directory, DirectoryError, Durability, Record, RedisTarget, ReleaseTally, Save, Taken,
    WriteBack,
};
pub use node::ClusterConfig;
pub(crate) use node::Node;
