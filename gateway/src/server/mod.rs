//! The gateway: a tokio WebSocket server over one [`SharedManager`](duplex_std::SharedManager),
//! with the expiry reaper running as a task, and graceful shutdown.
//!
//! Its parts, each depending only on those listed before it (and on the
//! crate's [`stats`](crate::stats)): [`limits`], [`ownership`] and [`auth`], `state` (what connections
//! share), `outbox` (what a connection sends), `durable` (the cluster's
//! persistence of sessions), `engine` (the seam to the model: streamed
//! responses and their requests), `connection` (the protocol on one
//! socket), `transport` (the socket), [`http`] (the port's HTTP side:
//! the upgrade, the probes, the metrics, the page), [`tls`], and the
//! accept loop here.

mod adoption;
pub mod auth;
pub(crate) mod connection;
pub(crate) mod durable;
pub(crate) mod emit;
mod engine;
pub mod http;
pub mod limits;
pub mod metrics;
pub(crate) mod outbox;
pub mod ownership;
mod policy;
mod recovery;
mod responses;
pub(crate) mod state;
pub(crate) mod stream;
pub mod tls;
mod transport;

use std::future::Future;
use std::sync::Arc;

use duplex_core::CloseReason;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cluster::{ClusterConfig, Node};
use crate::server::durable::Stored;
use crate::server::http::{HandshakeError, Port};
use crate::server::state::{Config, Shared, StartError};
use crate::stats::{add, bump, Counters};

/// A gateway: the state its connections share, and the accept loop.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) shared: Arc<Shared>,
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
        Ok(Arc::new(Gateway {
            shared: Arc::new(Shared::new(config, None)?),
        }))
    }

    /// A gateway that is a node of a cluster: sessions are recorded in the
    /// Redis directory, every change is acknowledged only once it is stored
    /// there, and a client can resume on any node (see
    /// [`cluster`](crate::cluster)). The nodes must share
    /// [`Config::resume_key`].
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new); [`StartError::NoResumeKey`] without
    /// [`Config::resume_key`]; [`StartError::Cluster`] if Redis cannot be
    /// reached.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use duplex_gateway::cluster::ClusterConfig;
    /// use duplex_gateway::{Config, Gateway};
    ///
    /// let config = Config { resume_key: Some(std::env::var("DUPLEX_RESUME_KEY")?.into_bytes()), ..Config::default() };
    /// let gw = Gateway::join(config, ClusterConfig::new("redis://127.0.0.1:6379/", "node-a")).await?;
    /// let listener = tokio::net::TcpListener::bind("0.0.0.0:8787").await?;
    /// let counters = gw.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await;
    /// println!("{}", counters.line());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn join(config: Config, cluster: ClusterConfig) -> Result<Arc<Self>, StartError> {
        if config.resume_key.is_none() {
            return Err(StartError::NoResumeKey);
        }
        let boot = crate::server::ownership::new_session_id()
            .map_err(StartError::Secret)?
            .chars()
            .take(8)
            .collect::<String>();
        let node = Node::join(&cluster, &boot)
            .await
            .map_err(StartError::Cluster)?;
        Ok(Arc::new(Gateway {
            shared: Arc::new(Shared::new(config, Some((node, boot)))?),
        }))
    }

    /// This node's name in its cluster (`None`: a lone gateway).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gw = duplex_gateway::Gateway::new(duplex_gateway::Config::default()).unwrap();
    /// assert_eq!(gw.node_name(), None);
    /// # }
    /// ```
    pub fn node_name(&self) -> Option<&str> {
        self.shared.node.as_ref().map(|n| n.directory.node())
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        self.shared.counters()
    }

    /// Sessions in the manager now.
    pub fn sessions(&self) -> usize {
        self.shared.manager.len()
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
            let shared = Arc::clone(&self.shared);
            let mut stopped = stopped.clone();
            tokio::spawn(Arc::clone(&self.shared.manager).reap(
                move |expiry| {
                    let released = expiry.submitted.len() + expiry.reserved.len();
                    tracing::debug!(session = %expiry.session, reason = %expiry.reason, "expired");
                    // Its responses stop and the engine forgets it (from a
                    // task: the handler may run under the manager's lock,
                    // which a barge-in takes inside the responses' lock).
                    let (sh, session) = (Arc::clone(&shared), expiry.session.clone());
                    tokio::spawn(async move { sh.ended(&session) });
                    // A realtime session's last event: `session.expired`,
                    // then its journal goes.
                    if let Some(stream) = shared.journals.get(&expiry.session) {
                        let (shared, session) = (Arc::clone(&shared), expiry.session.clone());
                        let event = serde_json::json!({
                            "type": "session.expired",
                            "session_id": session.as_str(),
                            "incarnation": expiry.fence.incarnation,
                            "reason": expiry.reason.as_str(),
                        });
                        tokio::spawn(async move {
                            stream.cancel_all("session_expired").await;
                            stream.emit(vec![event]).await;
                            shared.journals.remove(&session).await;
                        });
                    }
                    if shared.node.is_none() {
                        bump(&shared.stats.expired);
                        add(&shared.stats.requests_expired, released);
                        return;
                    }
                    // A cluster node: the record goes, with the requests
                    // the expiry released, counted. A copy whose session
                    // moved to another node meanwhile is refused: it
                    // expired nothing, and counts as moved away.
                    let ids: Vec<String> = expiry
                        .submitted
                        .iter()
                        .chain(expiry.reserved.iter())
                        .map(|id| id.as_str().to_owned())
                        .collect();
                    let (shared, session) = (Arc::clone(&shared), expiry.session.clone());
                    let incarnation = expiry.fence.incarnation;
                    tokio::spawn(async move {
                        match shared.store_close(session.as_str(), incarnation, ids).await {
                            Stored::Yes => {
                                bump(&shared.stats.expired);
                                add(&shared.stats.requests_expired, released);
                            }
                            Stored::Lost => bump(&shared.stats.moved_away),
                            Stored::Unavailable => {}
                        }
                    });
                },
                async move {
                    let _ = stopped.wait_for(|s| *s).await;
                },
            ))
        };
        let announcing = self.shared.node.as_ref().map(|node| {
            // A node announces itself on a task of its own, so that a long
            // write-back or adoption round never makes it look dead.
            let shared = Arc::clone(&self.shared);
            let mut stopped = stopped.clone();
            let period = node.liveness_ttl / 4;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                loop {
                    tokio::select! {
                        _ = stopped.wait_for(|s| *s) => break,
                        _ = tick.tick() => {}
                    }
                    if let Some(node) = &shared.node {
                        if let Err(e) = node.directory.heartbeat(node.liveness_ttl).await {
                            tracing::warn!("liveness not announced: {e}");
                        }
                    }
                }
            })
        });
        let tending = self.shared.node.as_ref().map(|node| {
            // A node adopts the sessions of nodes that stopped announcing
            // themselves.
            let shared = Arc::clone(&self.shared);
            let mut stopped = stopped.clone();
            let period = node.liveness_ttl / 4;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                let mut round = 0u64;
                loop {
                    tokio::select! {
                        _ = stopped.wait_for(|s| *s) => break,
                        _ = tick.tick() => {}
                    }
                    // A store that lost its data gets back what this node
                    // holds before anything is adopted from it.
                    let read = shared.check_store().await;
                    round += 1;
                    if read && round.is_multiple_of(2) {
                        shared.adopt_dead().await;
                    }
                }
            })
        });
        // A node drops its copies of sessions taken over elsewhere as the
        // takeovers happen.
        let following = self.shared.node.as_ref().map(|_| {
            let shared = Arc::clone(&self.shared);
            let stopped = stopped.clone();
            tokio::spawn(async move { shared.follow_moves(stopped).await })
        });
        // The histograms' samples are folded in now and then, scraped or
        // not, so that they do not pile up.
        let upkeep = tokio::spawn(async {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                metrics::Metrics::upkeep();
            }
        });
        let limits = self.shared.config.limits;
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        backoff = ACCEPT_BACKOFF_MIN;
                        let Some(slot) = self.shared.slots.take(peer.ip(), &limits) else {
                            // Over a cap: closed before any work is done.
                            bump(&self.shared.stats.connections_refused);
                            tracing::debug!(%peer, "connection refused: over a connection cap");
                            continue;
                        };
                        bump(&self.shared.stats.connections);
                        let shared = Arc::clone(&self.shared);
                        let stopped = stopped.clone();
                        connections.spawn(async move {
                            if let Err(e) = serve_connection(shared, stream, stopped, Port::Public).await {
                                tracing::debug!(%peer, "connection: {e}");
                            }
                            drop(slot);
                        });
                    }
                    Err(e) => {
                        // Out of file descriptors, most often: waiting lets
                        // connections end instead of spinning on the error.
                        tracing::warn!("accept failed, retrying in {backoff:?}: {e}");
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        self.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
        upkeep.abort();
        // A node of a cluster hands its sessions off first, so that the
        // clients it is about to let go can resume elsewhere at once.
        self.shared.drain(limits.shutdown_grace).await;
        let _ = stop.send(true);
        // Connections end by themselves (a close frame each); those that
        // do not within the grace (a client that never reads, a handshake
        // that never ends) are cut. Their sessions are closed below either
        // way.
        let ended = tokio::time::timeout(limits.shutdown_grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if ended.is_err() {
            tracing::warn!(
                "{} connections still open after the shutdown grace; cutting them",
                connections.len()
            );
            connections.abort_all();
            while connections.join_next().await.is_some() {}
        }
        let _ = reaper.await;
        if let Some(following) = following {
            following.abort();
            let _ = following.await;
        }
        for task in [tending, announcing].into_iter().flatten() {
            // They hold nothing that must finish: a round blocked on a
            // store that went away is not waited for.
            task.abort();
            let _ = task.await;
        }
        if self.shared.node.is_none() {
            self.close_all();
        }
        self.counters()
    }

    /// Serves the operator's endpoints alone (`/healthz`, `/readyz`,
    /// `/metrics` without the admin token: the address is the
    /// operator's, as with `duplex-gateway --metrics-listen`) on
    /// `listener`, until `shutdown` resolves. At most
    /// [`METRICS_CONNECTIONS`] requests are served at once; more are
    /// closed at accept.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let gw = duplex_gateway::Gateway::new(duplex_gateway::Config::default())?;
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// gw.serve_metrics(listener, async {}).await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve_metrics(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) {
        // Connections here never upgrade to a session socket, the one
        // user of the stop signal: it is never sent.
        let (_stop, stopped) = watch::channel(false);
        let mut requests = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        if requests.len() >= METRICS_CONNECTIONS {
                            tracing::debug!(%peer, "metrics request refused: too many at once");
                            continue;
                        }
                        let (shared, stopped) = (Arc::clone(&self.shared), stopped.clone());
                        requests.spawn(async move {
                            if let Err(e) = serve_connection(shared, stream, stopped, Port::Metrics).await {
                                tracing::debug!(%peer, "metrics request: {e}");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!("metrics accept failed: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF_MAX).await;
                    }
                },
                Some(_) = requests.join_next(), if !requests.is_empty() => {}
            }
        }
        requests.abort_all();
    }

    /// Reads the TLS certificate and key again (`duplex-gateway` does on
    /// SIGHUP): new connections get them, open ones keep theirs. Without
    /// TLS, nothing to do.
    ///
    /// # Errors
    ///
    /// [`TlsError`](tls::TlsError) if the files cannot be used; the ones
    /// in use stay.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gw = duplex_gateway::Gateway::new(duplex_gateway::Config::default()).unwrap();
    /// assert!(gw.reload_tls().is_ok());
    /// # }
    /// ```
    pub fn reload_tls(&self) -> Result<(), tls::TlsError> {
        match &self.shared.tls {
            Some(tls) => tls.reload(),
            None => Ok(()),
        }
    }

    /// Whether the gateway serves TLS.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let gw = duplex_gateway::Gateway::new(duplex_gateway::Config::default()).unwrap();
    /// assert!(!gw.tls());
    /// # }
    /// ```
    pub fn tls(&self) -> bool {
        self.shared.tls.is_some()
    }

    /// Closes every session left (shutdown): their engine requests are
    /// released.
    fn close_all(&self) {
        for id in self.shared.manager.session_ids() {
            let Some(fence) = self.shared.manager.with_session(&id, |s| s.fence().clone()) else {
                continue;
            };
            if let Ok(Some(ids)) = self
                .shared
                .manager
                .close(&fence, CloseReason::ExplicitClose)
            {
                bump(&self.shared.stats.shutdown_closed);
                add(&self.shared.stats.requests_closed, ids.len());
            }
        }
    }
}

/// Requests the metrics listener serves at once.
///
/// ```
/// assert_eq!(duplex_gateway::server::METRICS_CONNECTIONS, 64);
/// ```
pub const METRICS_CONNECTIONS: usize = 64;

/// The first wait after a failed accept, and the longest.
const ACCEPT_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves one accepted connection: the TLS handshake first if the port
/// has TLS, then its HTTP request, both within the handshake timeout.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    stopped: watch::Receiver<bool>,
    port: Port,
) -> Result<(), HandshakeError> {
    let _ = stream.set_nodelay(true);
    let deadline = tokio::time::Instant::now() + shared.config.limits.handshake_timeout;
    let Some(tls) = &shared.tls else {
        return http::serve(shared, stream, stopped, port, deadline).await;
    };
    let acceptor = tls.acceptor();
    match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => http::serve(shared, stream, stopped, port, deadline).await,
        Ok(Err(e)) => Err(HandshakeError::Tls(e)),
        Err(_) => {
            bump(&shared.stats.handshakes_timed_out);
            Err(HandshakeError::TimedOut(
                shared.config.limits.handshake_timeout,
            ))
        }
    }
}
