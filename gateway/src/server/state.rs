//! What every connection of a gateway shares: the manager, the settings,
//! the counters and the audit log. The accept loop (`server`) and each
//! connection (`connection`) both hold it; neither knows the other's
//! insides.

use crate::GatewayProfile;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration as StdDuration;

use duplex_core::{Duration, LeaseConfig};
use duplex_std::{ManagerConfig, SharedManager, TokioClock};

use crate::cluster::Node;
use crate::engine::{Engine, StandIn, Turn};
use crate::server::auth::Verifier;
use crate::server::limits::{Limits, Slots};
use crate::server::ownership::{Keys, RandomError};
use crate::server::responses::Active;
use crate::stats::{Counters, Stats};

/// The manager the gateway runs, over [`GatewayProfile`] (128-byte ids, 8
/// request resources, 8 completed appends per session); each session's
/// configuration is its [`Owner`](crate::Owner) (what its resume tokens
/// are made from).
pub type Manager = SharedManager<TokioClock, GatewayProfile>;

/// How the gateway runs.
///
/// ```
/// let c = duplex_gateway::Config::default();
/// assert_eq!(c.max_sessions, 10_000);
/// assert!(!c.audit && c.admin_token.is_none() && c.auth_secret.is_none());
/// // Secrets stay out of logs.
/// let c = duplex_gateway::Config { admin_token: Some("s3cret".into()), ..c };
/// assert!(!format!("{c:?}").contains("s3cret"));
/// ```
#[derive(Clone)]
pub struct Config {
    /// Admission limit.
    pub max_sessions: usize,
    /// Idle TTL of every session's lease (`None`: sessions never idle out).
    pub idle_ttl: Option<StdDuration>,
    /// Disconnect grace: how long a dropped session waits for a resume.
    pub grace: StdDuration,
    /// Keep each session's applied input (event ids in order) for
    /// `session.audit`, also after the session is gone. For load tests: the
    /// log grows with every chunk.
    pub audit: bool,
    /// The model that answers the sessions' turns (by default the
    /// [`StandIn`](crate::engine::StandIn)).
    pub engine: Arc<dyn Engine>,
    /// The token `admin.stats` and `session.audit` must carry (`None`:
    /// both are refused). Client access never grants admin access.
    pub admin_token: Option<String>,
    /// The HS256 key connections' bearer tokens are verified with (`None`:
    /// connections are anonymous). See [`auth`](crate::server::auth).
    pub auth_secret: Option<String>,
    /// The key resume tokens are made with (at least
    /// [`RESUME_KEY_MIN`](crate::RESUME_KEY_MIN) bytes). Nodes of one
    /// cluster share it, so a client can resume on any of them. `None`: a
    /// key drawn from the OS random source at start (tokens then die with
    /// the process).
    pub resume_key: Option<Vec<u8>>,
    /// Serve TLS (`wss://`, `https://`) with this certificate and key
    /// (`None`: plain TCP). See [`tls`](crate::server::tls).
    pub tls: Option<crate::server::tls::TlsFiles>,
    /// What one client may cost.
    pub limits: Limits,
}

impl core::fmt::Debug for Config {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let secret = |s: &Option<String>| s.as_ref().map(|_| "..");
        f.debug_struct("Config")
            .field("max_sessions", &self.max_sessions)
            .field("idle_ttl", &self.idle_ttl)
            .field("grace", &self.grace)
            .field("audit", &self.audit)
            .field("engine", &"..")
            .field("admin_token", &secret(&self.admin_token))
            .field("auth_secret", &secret(&self.auth_secret))
            .field("resume_key", &self.resume_key.as_ref().map(|_| ".."))
            .field("tls", &self.tls)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_sessions: 10_000,
            idle_ttl: Some(StdDuration::from_secs(300)),
            grace: StdDuration::from_secs(30),
            audit: false,
            engine: Arc::new(StandIn::default()),
            admin_token: None,
            auth_secret: None,
            resume_key: None,
            tls: None,
            limits: Limits::default(),
        }
    }
}

/// Why the gateway could not start.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use duplex_gateway::{Config, Gateway, Limits, StartError};
///
/// let silent = Limits { idle_timeout: std::time::Duration::ZERO, ..Limits::default() };
/// let refused = Gateway::new(Config { limits: silent, ..Config::default() });
/// assert!(matches!(refused, Err(StartError::Limit(_))));
/// let refused = Gateway::new(Config { admin_token: Some(String::new()), ..Config::default() });
/// assert!(matches!(refused, Err(StartError::EmptyAdminToken)));
/// let refused = Gateway::new(Config { resume_key: Some(b"short".to_vec()), ..Config::default() });
/// assert!(matches!(refused, Err(StartError::ShortResumeKey { len: 5, min: 32 })));
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A lease duration the core refuses (zero grace, zero TTL).
    #[error("invalid lease: {0}")]
    Lease(duplex_core::Error),
    /// The manager refused the configuration (zero sessions). Boxed: the
    /// error can name a session id, and a start error stays small.
    #[error("invalid manager configuration: {0}")]
    Manager(Box<crate::profile::ManagerError>),
    /// No key for resume tokens could be made.
    #[error("cannot make the resume-token key: {0}")]
    Secret(RandomError),
    /// The TLS certificate or key could not be used.
    #[error(transparent)]
    Tls(#[from] crate::server::tls::TlsError),
    /// An empty admin token (it would match an empty guess).
    #[error("the admin token must not be empty")]
    EmptyAdminToken,
    /// A resume key shorter than [`RESUME_KEY_MIN`](crate::RESUME_KEY_MIN)
    /// bytes.
    #[error("the resume key must be at least {min} bytes, got {len}")]
    ShortResumeKey {
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// An empty authentication secret (anyone could sign tokens).
    #[error("the auth secret must not be empty")]
    EmptyAuthSecret,
    /// The token library refused the authentication secret.
    #[error("the auth secret was refused: {0}")]
    AuthSecret(String),
    /// A node of a cluster without [`Config::resume_key`]: its tokens would
    /// resume nowhere else, and nowhere after a restart.
    #[error("a cluster node needs a resume key shared by every node (--resume-key or DUPLEX_RESUME_KEY)")]
    NoResumeKey,
    /// The cluster's directory could not be reached or refused the node.
    #[error("cannot join the cluster: {0}")]
    Cluster(crate::cluster::DirectoryError),
    /// A limit that would stop every client (a zero timeout or cap), or an
    /// outbound bound too small for one reply.
    #[error("invalid limit: {0}")]
    Limit(&'static str),
}

/// One applied chunk in the audit log: `(epoch, seq, event_id)`.
pub(crate) type Applied = (u64, u64, String);

/// The audit log: applied input per session id, kept after the session
/// is gone, sharded so sessions on different shards never contend.
#[derive(Debug)]
pub(crate) struct Audit {
    shards: Vec<Mutex<HashMap<String, Vec<Applied>>>>,
}

impl Audit {
    fn new() -> Self {
        Audit {
            shards: (0..64).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, session: &str) -> MutexGuard<'_, HashMap<String, Vec<Applied>>> {
        let h = session.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let shard = &self.shards[(h % self.shards.len() as u64) as usize];
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn push(&self, session: &str, applied: Applied) {
        let mut shard = self.shard(session);
        // The session's own log, found by a borrowed key: only a session's
        // first chunk copies its id.
        if let Some(log) = shard.get_mut(session) {
            log.push(applied);
        } else {
            shard.insert(session.to_owned(), vec![applied]);
        }
    }

    /// At most `max` entries of `session` from `from`, and where the next
    /// page starts (`None`: none left).
    pub(crate) fn page(&self, session: &str, from: u64, max: usize) -> (Vec<Applied>, Option<u64>) {
        let shard = self.shard(session);
        let all = shard.get(session).map_or(&[][..], Vec::as_slice);
        let start = usize::try_from(from).unwrap_or(usize::MAX).min(all.len());
        let end = start.saturating_add(max).min(all.len());
        let page = all.get(start..end).unwrap_or_default().to_vec();
        let next = (end < all.len()).then_some(end as u64);
        (page, next)
    }
}

/// The state every connection of one gateway shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) manager: Arc<Manager>,
    pub(crate) config: Config,
    pub(crate) lease: LeaseConfig,
    pub(crate) stats: Stats,
    pub(crate) audit: Option<Audit>,
    pub(crate) keys: Keys,
    pub(crate) verifier: Option<Verifier>,
    pub(crate) slots: Arc<Slots>,
    pub(crate) next_request: AtomicU64,
    /// Engine request ids are `r<prefix><n>`: unique across the nodes of a
    /// cluster (the prefix is the node's boot id), `r<n>` alone.
    pub(crate) request_prefix: String,
    /// The cluster this gateway is a node of (`None`: a lone gateway).
    pub(crate) node: Option<Node>,
    /// Set when a node of a cluster starts handing its sessions off: from
    /// then on a client's session events are answered `session.moved`.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// The realtime sessions' event streams and journals.
    pub(crate) journals: Arc<crate::server::stream::Journals>,
    /// The read budget of messages over 64 KiB (`session.update`s with
    /// reference media), all connections together: each is read and
    /// echoed whole, and a few clients sending them as fast as their own
    /// budgets allow would take the gateway's CPU from every other
    /// client. Over it, a connection waits before reading on.
    pub(crate) large_messages: governor::DefaultDirectRateLimiter,
    /// Set when the gateway starts shutting down: `/readyz` answers 503.
    pub(crate) stopping: std::sync::atomic::AtomicBool,
    /// TLS on the port (`None`: plain TCP).
    pub(crate) tls: Option<crate::server::tls::Tls>,
    /// What `/metrics` shows besides the counters.
    pub(crate) metrics: crate::server::metrics::Metrics,
    /// The responses in flight, by session.
    pub(crate) responses: crate::server::responses::Responses,
}

impl Shared {
    /// The shared state of a new gateway. Call inside a tokio runtime (the
    /// clock is tokio's).
    pub(crate) fn new(config: Config, node: Option<(Node, String)>) -> Result<Self, StartError> {
        let ms = |d: StdDuration| {
            Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        };
        let lease = LeaseConfig::new(config.idle_ttl.map(ms), ms(config.grace))
            .map_err(StartError::Lease)?;
        let manager_config = ManagerConfig {
            max_sessions: Some(config.max_sessions),
            completed_append_limit: None,
        };
        let manager = SharedManager::with_capacities(
            TokioClock::new(),
            manager_config,
            duplex_std::default_shards(),
        )
        .map_err(|e| StartError::Manager(Box::new(e)))?;
        if config.admin_token.as_deref() == Some("") {
            return Err(StartError::EmptyAdminToken);
        }
        if config.auth_secret.as_deref() == Some("") {
            return Err(StartError::EmptyAuthSecret);
        }
        config.limits.check().map_err(StartError::Limit)?;
        let verifier = config
            .auth_secret
            .as_deref()
            .map(|s| Verifier::new(s.as_bytes()))
            .transpose()
            .map_err(|e| StartError::AuthSecret(e.to_string()))?;
        if let Some(key) = &config.resume_key {
            if key.len() < crate::RESUME_KEY_MIN {
                return Err(StartError::ShortResumeKey {
                    len: key.len(),
                    min: crate::RESUME_KEY_MIN,
                });
            }
        }
        let keys = Keys::new(config.admin_token.as_deref(), config.resume_key.as_deref())
            .map_err(StartError::Secret)?;
        let tls = config
            .tls
            .clone()
            .map(crate::server::tls::Tls::load)
            .transpose()?;
        Ok(Shared {
            manager: Arc::new(manager),
            audit: config.audit.then(Audit::new),
            config,
            lease,
            stats: Stats::default(),
            keys,
            verifier,
            slots: Arc::default(),
            next_request: AtomicU64::new(0),
            request_prefix: node
                .as_ref()
                .map(|(_, boot)| format!("{boot}-"))
                .unwrap_or_default(),
            node: node.map(|(node, _)| node),
            draining: std::sync::atomic::AtomicBool::new(false),
            journals: Arc::default(),
            large_messages: governor::RateLimiter::direct(crate::server::limits::large_messages()),
            stopping: std::sync::atomic::AtomicBool::new(false),
            tls,
            metrics: crate::server::metrics::Metrics::new(),
            responses: crate::server::responses::Responses::default(),
        })
    }

    /// Why the gateway should get no new sessions now (`None`: ready):
    /// it is shutting down or draining, it is at its connection cap (the
    /// request asking took the last slot), or, for a node of a cluster,
    /// its store does not answer within a second or no longer lists the
    /// node as live.
    pub(crate) async fn unready(&self) -> Option<&'static str> {
        use std::sync::atomic::Ordering;
        if self.stopping.load(Ordering::Relaxed) || self.draining.load(Ordering::Relaxed) {
            return Some("draining");
        }
        if self.slots.open() >= self.config.limits.max_connections {
            return Some("at the connection cap");
        }
        if let Some(node) = &self.node {
            let directory = &node.directory;
            let live = tokio::time::timeout(
                StdDuration::from_secs(1),
                directory.is_live(directory.node()),
            )
            .await;
            match live {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return Some("the store does not list this node as live"),
                Ok(Err(_)) | Err(_) => return Some("the store does not answer"),
            }
        }
        None
    }

    /// The counters now.
    pub(crate) fn counters(&self) -> Counters {
        self.stats.read()
    }

    /// Stops generating `session`'s responses (a close, a shutdown, an
    /// expiry, the session gone from this node), and tells the engine of
    /// each. Their requests stay in the session until its end releases
    /// them.
    pub(crate) fn stop_responses(&self, session: &crate::Id) {
        let stopped = self.responses.of(session).stop();
        self.cancelled(session, &stopped);
    }

    /// Tells the engine of responses stopped before their end (called
    /// with no lock held: the engine's code runs here).
    pub(crate) fn cancelled(&self, session: &crate::Id, stopped: &[Active]) {
        for a in stopped {
            let turn = Turn::new(session.as_str(), a.request.as_str(), (a.epoch, a.turn));
            self.config.engine.cancelled(&turn);
        }
    }

    /// `session` ended on this gateway (closed, expired, moved away): its
    /// responses stop and the engine forgets it.
    pub(crate) fn ended(&self, session: &crate::Id) {
        self.stop_responses(session);
        self.config.engine.ended(session.as_str());
    }
}
