//! A gateway node's part of the cluster: its directory connection, its
//! name, and the order of the images it writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::shadow::Shadows;
use super::{Directory, DirectoryError, Durability, RedisTarget};

/// How a node joins a cluster.
///
/// ```
/// use duplex_gateway::cluster::{ClusterConfig, RedisTarget};
/// let c = ClusterConfig::new("redis://127.0.0.1:6379/", "node-a");
/// assert_eq!(c.liveness_ttl, std::time::Duration::from_secs(2));
/// assert_eq!(c.closed_retention, std::time::Duration::from_secs(60));
/// assert_eq!(c.redis, RedisTarget::Server("redis://127.0.0.1:6379/".into()));
/// assert_eq!(c.durability, duplex_gateway::cluster::Durability::Ack);
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
    /// How long a node keeps the log of a session it closed: a store that
    /// loses its data within that time gets it back (written back closed).
    /// It costs about 60 bytes per applied chunk of every session closed
    /// within it.
    pub closed_retention: Duration,
    /// When a change counts as stored, and is acknowledged.
    pub durability: Durability,
}

impl ClusterConfig {
    /// A node of the cluster whose directory is the Redis server at
    /// `redis_url`, with a 2 s liveness TTL.
    pub fn new(redis_url: impl Into<String>, name: impl Into<String>) -> Self {
        ClusterConfig {
            redis: RedisTarget::Server(redis_url.into()),
            name: name.into(),
            liveness_ttl: Duration::from_secs(2),
            closed_retention: Duration::from_secs(60),
            durability: Durability::Ack,
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
    /// What the store holds, or must hold, of each session held here.
    pub(crate) shadows: Shadows,
    /// The store's generation as this node last saw it.
    generation: std::sync::Mutex<String>,
    /// The store lost its data and this node has not written back all it
    /// holds yet.
    pub(crate) sweep_due: std::sync::atomic::AtomicBool,
    /// This node saw the store lose data and has not yet written back all
    /// it holds, or not yet noted the loss for the others (`dx:loss`):
    /// it takes nothing over meanwhile.
    pub(crate) recovering: std::sync::atomic::AtomicBool,
    /// The loss this node saw is not noted in the store yet (the write
    /// was refused: a new primary without its replicas yet).
    pub(crate) loss_unnoted: std::sync::atomic::AtomicBool,
    /// Closes this node has not stored yet: while one is pending the node
    /// does not count as recovered after a loss (the store may still hold
    /// an older, open record of that session, which a takeover elsewhere
    /// would revive).
    closing: std::sync::atomic::AtomicUsize,
}

/// A close in flight on a node ([`Node::closing`]): counted while it lives.
#[derive(Debug)]
pub(crate) struct Closing<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Node {
    /// Connects, registers the node and announces it live.
    pub(crate) async fn join(config: &ClusterConfig, boot: &str) -> Result<Self, DirectoryError> {
        let name = format!("{}-{boot}", config.name);
        let directory = Directory::connect_with(&config.redis, name, config.durability).await?;
        directory.register().await?;
        directory.heartbeat(config.liveness_ttl).await?;
        let generation = directory.generation(&fresh_generation()).await?;
        // A node that joins holds nothing to write back.
        directory.mark_recovered(&generation).await?;
        Ok(Node {
            directory,
            liveness_ttl: config.liveness_ttl,
            version: AtomicU64::new(1),
            shadows: Shadows::new(config.closed_retention),
            generation: std::sync::Mutex::new(generation),
            sweep_due: std::sync::atomic::AtomicBool::new(false),
            recovering: std::sync::atomic::AtomicBool::new(false),
            loss_unnoted: std::sync::atomic::AtomicBool::new(false),
            closing: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Asks the store for its generation: `true` if it changed since this
    /// node last asked (the store lost its data meanwhile).
    pub(crate) async fn store_lost(&self) -> Result<bool, DirectoryError> {
        let now = self.directory.generation(&fresh_generation()).await?;
        let mut known = self
            .generation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *known == now {
            return Ok(false);
        }
        *known = now;
        Ok(true)
    }

    /// The store's generation as this node last saw it.
    pub(crate) fn generation(&self) -> String {
        self.generation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Counts a close in flight until the returned guard drops.
    pub(crate) fn closing(&self) -> Closing<'_> {
        self.closing.fetch_add(1, Ordering::SeqCst);
        Closing(&self.closing)
    }

    /// Whether a close of this node has not been stored yet.
    pub(crate) fn closes_pending(&self) -> bool {
        self.closing.load(Ordering::SeqCst) > 0
    }

    /// The next image's version.
    pub(crate) fn next_version(&self) -> u64 {
        self.version.fetch_add(1, Ordering::Relaxed)
    }
}

/// A new random store generation (128 bits, hex).
fn fresh_generation() -> String {
    let mut bytes = [0u8; 16];
    // A generation that cannot be drawn falls back to the time: it only
    // has to differ from the last one.
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = t.to_le_bytes();
    }
    bytes.iter().fold(String::with_capacity(32), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    })
}
