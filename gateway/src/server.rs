//! The gateway: a tokio WebSocket server over one [`SharedManager`], with
//! the expiry reaper running as a task, and graceful shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration as StdDuration;

use duplex_core::{CloseReason, Duration, LeaseConfig};
use duplex_std::{ManagerConfig, SharedManager, TokioClock};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::connection::Connection;
use crate::protocol::{MAX_FRAME, READ_BUFFER};
use crate::stats::{add, bump, Counters, Stats};

/// The manager the gateway runs: default capacities (32-byte ids, 8
/// request resources, 8 completed appends per session), no configs.
pub type Manager = SharedManager<TokioClock>;

/// How the gateway runs.
///
/// ```
/// let c = duplex_gateway::Config::default();
/// assert_eq!(c.max_sessions, 10_000);
/// assert!(!c.audit);
/// ```
#[derive(Debug, Clone)]
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
    /// `response.delta` events per response.
    pub deltas: u32,
    /// The stand-in engine's time per delta.
    pub delta_interval: StdDuration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_sessions: 10_000,
            idle_ttl: Some(StdDuration::from_secs(300)),
            grace: StdDuration::from_secs(30),
            audit: false,
            deltas: 3,
            delta_interval: StdDuration::from_millis(5),
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A lease duration the core refuses (zero grace, zero TTL).
    #[error("invalid lease: {0}")]
    Lease(duplex_core::Error),
    /// The manager refused the configuration (zero sessions).
    #[error("invalid manager configuration: {0}")]
    Manager(duplex_std::Error),
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
        self.shard(session)
            .entry(session.to_owned())
            .or_default()
            .push(applied);
    }

    pub(crate) fn read(&self, session: &str) -> Vec<Applied> {
        self.shard(session)
            .get(session)
            .cloned()
            .unwrap_or_default()
    }
}

/// The gateway's shared state: the manager, the counters, the audit log.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) m: Arc<Manager>,
    pub(crate) config: Config,
    pub(crate) lease: LeaseConfig,
    pub(crate) stats: Stats,
    pub(crate) audit: Option<Audit>,
    pub(crate) next_session: AtomicU64,
    pub(crate) next_request: AtomicU64,
}

impl Gateway {
    /// A gateway with its manager. Call inside a tokio runtime (the clock is
    /// tokio's).
    ///
    /// # Errors
    ///
    /// [`StartError`] for a zero grace, TTL or session limit.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gw = duplex_gateway::Gateway::new(duplex_gateway::Config::default()).unwrap();
    /// assert_eq!(gw.counters().opened, 0);
    /// # }
    /// ```
    pub fn new(config: Config) -> Result<Arc<Self>, StartError> {
        let ms = |d: StdDuration| {
            Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        };
        let lease = LeaseConfig::new(config.idle_ttl.map(ms), ms(config.grace))
            .map_err(StartError::Lease)?;
        let manager_config = ManagerConfig {
            max_sessions: Some(config.max_sessions),
            completed_append_limit: None,
        };
        let m =
            SharedManager::new(TokioClock::new(), manager_config).map_err(StartError::Manager)?;
        Ok(Arc::new(Gateway {
            m: Arc::new(m),
            audit: config.audit.then(Audit::new),
            config,
            lease,
            stats: Stats::default(),
            next_session: AtomicU64::new(0),
            next_request: AtomicU64::new(0),
        }))
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        self.stats.read()
    }

    /// Sessions in the manager now.
    pub fn sessions(&self) -> usize {
        self.m.len()
    }

    /// Serves `listener` until `shutdown` resolves, then stops accepting,
    /// ends every connection (a close frame, no detach), closes every
    /// session (releasing its engine requests) and returns the counters.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let gw = duplex_gateway::Gateway::new(duplex_gateway::Config::default())?;
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let counters = gw.serve(listener, async {}).await;
    /// assert_eq!(counters.connections, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Counters {
        let (stop, stopped) = watch::channel(false);
        let reaper = {
            let gw = Arc::clone(&self);
            let mut stopped = stopped.clone();
            tokio::spawn(Arc::clone(&self.m).reap(
                move |expiry| {
                    bump(&gw.stats.expired);
                    add(
                        &gw.stats.requests_expired,
                        expiry.submitted.len() + expiry.reserved.len(),
                    );
                    tracing::debug!(session = %expiry.session, reason = %expiry.reason, "expired");
                },
                async move {
                    let _ = stopped.wait_for(|s| *s).await;
                },
            ))
        };
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        bump(&self.stats.connections);
                        let gw = Arc::clone(&self);
                        let stopped = stopped.clone();
                        connections.spawn(async move {
                            if let Err(e) = serve_connection(gw, stream, stopped).await {
                                tracing::debug!(%peer, "connection: {e}");
                            }
                        });
                    }
                    Err(e) => tracing::warn!("accept: {e}"),
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        let _ = stop.send(true);
        while connections.join_next().await.is_some() {}
        let _ = reaper.await;
        self.close_all();
        self.counters()
    }

    /// Closes every session left (shutdown): their engine requests are
    /// released.
    fn close_all(&self) {
        for id in self.m.session_ids() {
            let Some(fence) = self.m.with_session(&id, |s| s.fence().clone()) else {
                continue;
            };
            if let Ok(Some(ids)) = self.m.close(&fence, CloseReason::ExplicitClose) {
                bump(&self.stats.shutdown_closed);
                add(&self.stats.requests_closed, ids.len());
            }
        }
    }
}

/// Accepts the WebSocket handshake and runs the connection.
async fn serve_connection(
    gw: Arc<Gateway>,
    stream: TcpStream,
    stopped: watch::Receiver<bool>,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    let _ = stream.set_nodelay(true);
    // A small read buffer: tungstenite zero-fills the unused part of it on
    // every read, and a voice event is about 1 KiB. At the default 128 KiB
    // that memset was a fifth of the gateway's CPU under load.
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
    let ws = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await?;
    Connection::run(gw, ws, stopped).await;
    Ok(())
}
