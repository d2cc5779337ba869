//! Several gateway nodes sharing sessions through Redis.
//!
//! - [`directory`]: the session directory (owner, incarnation and image of
//!   every session), written through atomic scripts so that the incarnation
//!   is a fencing token.
//! - [`RedisServer`]: a throwaway `redis-server` from `PATH` (in memory,
//!   nothing on disk) for tests and the local cluster command.

pub mod directory;
mod node;
mod server;

pub use directory::{Directory, DirectoryError, Record, ReleaseTally, Save};
pub use node::ClusterConfig;
pub(crate) use node::Node;
pub use server::{RedisServer, RedisServerError};
