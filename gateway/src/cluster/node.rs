//! A gateway node's part of the cluster: its directory connection, its
//! name, and the order of the images it writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Directory, DirectoryError, RedisTarget};

/// How a node joins a cluster.
///
/// ```
/// use duplex_gateway::cluster::{ClusterConfig, RedisTarget};
/// let c = ClusterConfig::new("redis://127.0.0.1:6379/", "node-a");
/// assert_eq!(c.liveness_ttl, std::time::Duration::from_secs(2));
/// assert_eq!(c.redis, RedisTarget::Server("redis://127.0.0.1:6379/".into()));
/// ```
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Where the directory lives: one Redis server or a Redis Cluster.
    pub redis: RedisTarget,
    /// The node's name; the node registers as `<name>-<boot>`, with a
    /// random boot id, so a restarted node is a new node and the sessions
    /// of the one that died are adopted.
    pub name: String,
    /// How long the node counts as live after each announcement (it
    /// announces every quarter of it). A node silent for longer is
    /// presumed dead and its sessions are adopted by a live one.
    pub liveness_ttl: Duration,
}

impl ClusterConfig {
    /// A node of the cluster whose directory is the Redis server at
    /// `redis_url`, with a 2 s liveness TTL.
    pub fn new(redis_url: impl Into<String>, name: impl Into<String>) -> Self {
        ClusterConfig {
            redis: RedisTarget::Server(redis_url.into()),
            name: name.into(),
            liveness_ttl: Duration::from_secs(2),
        }
    }
}

/// The node's cluster state, shared by its connections.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) directory: Directory,
    pub(crate) liveness_ttl: Duration,
    /// Orders this node's images (one counter for all sessions: the image
    /// taken later under a session's lock has the larger number).
    version: AtomicU64,
}

impl Node {
    /// Connects, registers the node and announces it live.
    pub(crate) async fn join(config: &ClusterConfig, boot: &str) -> Result<Self, DirectoryError> {
        let directory =
            Directory::connect_to(&config.redis, format!("{}-{boot}", config.name)).await?;
        directory.register().await?;
        directory.heartbeat(config.liveness_ttl).await?;
        Ok(Node {
            directory,
            liveness_ttl: config.liveness_ttl,
            version: AtomicU64::new(1),
        })
    }

    /// The next image's version.
    pub(crate) fn next_version(&self) -> u64 {
        self.version.fetch_add(1, Ordering::Relaxed)
    }
}
