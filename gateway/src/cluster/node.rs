//! A gateway node's part of the cluster: its directory connection, its
//! name, and the order of the images it writes.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
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
    generation: Mutex<String>,
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
    /// Closes this node has not stored yet, by session and incarnation:
    /// while one is pending the node does not count as recovered after a
    /// loss (the store may still hold an older, open record of that
    /// session, which a takeover elsewhere would revive), and a resume
    /// here does not revive the session from that record.
    closing: InFlight<(String, u64)>,
    /// Sessions this node is taking over or adopting: imported, their
    /// record not yet moved to this node. A write-back leaves them alone
    /// (the takeover's compare-and-set decides them).
    claiming: InFlight<String>,
}

/// Keys of work in flight (a close, a takeover), each noted while the
/// guard [`InFlight::enter`] returns lives.
#[derive(Debug)]
struct InFlight<K>(Mutex<HashSet<K>>);

impl<K: std::hash::Hash + Eq + Clone> InFlight<K> {
    fn new() -> Self {
        InFlight(Mutex::new(HashSet::new()))
    }

    fn enter(&self, key: K) -> Entered<'_, K> {
        lock(&self.0).insert(key.clone());
        Entered { set: self, key }
    }

    fn contains<Q>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        lock(&self.0).contains(key)
    }

    fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }
}

/// A key of an [`InFlight`] set, removed when this drops.
#[derive(Debug)]
pub(crate) struct Entered<'a, K: std::hash::Hash + Eq + Clone> {
    set: &'a InFlight<K>,
    key: K,
}

impl<K: std::hash::Hash + Eq + Clone> Drop for Entered<'_, K> {
    fn drop(&mut self) {
        lock(&self.set.0).remove(&self.key);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
            generation: Mutex::new(generation),
            sweep_due: std::sync::atomic::AtomicBool::new(false),
            recovering: std::sync::atomic::AtomicBool::new(false),
            loss_unnoted: std::sync::atomic::AtomicBool::new(false),
            closing: InFlight::new(),
            claiming: InFlight::new(),
        })
    }

    /// Asks the store for its generation: `true` if it changed since this
    /// node last asked (the store lost its data meanwhile). The node is
    /// then recovering, with its write-back due, before any other caller
    /// can see the new generation: a takeover that asks a moment later
    /// finds the node recovering, never a store it has not repaired.
    pub(crate) async fn store_lost(&self) -> Result<bool, DirectoryError> {
        let now = self.directory.generation(&fresh_generation()).await?;
        let mut known = lock(&self.generation);
        if *known == now {
            return Ok(false);
        }
        *known = now;
        self.recovering.store(true, Ordering::SeqCst);
        self.loss_unnoted.store(true, Ordering::SeqCst);
        self.sweep_due.store(true, Ordering::SeqCst);
        Ok(true)
    }

    /// The store's generation as this node last saw it.
    pub(crate) fn generation(&self) -> String {
        lock(&self.generation).clone()
    }

    /// Notes the close of `session` at `incarnation` in flight until the
    /// returned guard drops.
    pub(crate) fn closing(&self, session: &str, incarnation: u64) -> Entered<'_, (String, u64)> {
        self.closing.enter((session.to_owned(), incarnation))
    }

    /// Whether a close of this node has not been stored yet.
    pub(crate) fn closes_pending(&self) -> bool {
        !self.closing.is_empty()
    }

    /// Whether this node is storing the close of `session` at
    /// `incarnation` (it expired or was closed here; the store does not
    /// know yet).
    pub(crate) fn is_closing(&self, session: &str, incarnation: u64) -> bool {
        self.closing.contains(&(session.to_owned(), incarnation))
    }

    /// Notes a takeover or adoption of `session` in progress until the
    /// returned guard drops.
    pub(crate) fn claiming(&self, session: &str) -> Entered<'_, String> {
        self.claiming.enter(session.to_owned())
    }

    /// Whether a takeover or adoption of `session` is in progress here.
    pub(crate) fn is_claiming(&self, session: &str) -> bool {
        self.claiming.contains(session)
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
