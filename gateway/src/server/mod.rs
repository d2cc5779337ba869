//! The gateway: a tokio WebSocket server over one [`SharedManager`](duplex_std::SharedManager),
//! with the expiry reaper running as a task, and graceful shutdown.
//!
//! Its parts, each depending only on those listed before it (and on the
//! crate's [`stats`](crate::stats)): [`limits`], [`ownership`] and [`auth`], `state` (what connections
//! share), `outbox` (what a connection sends), `durable` (the cluster's
//! persistence of sessions), `engine` (the seam to the model: streamed
//! responses and their requests), `connection` (the protocol on one
//! socket), `transport` (the socket), and the accept loop here.

pub mod auth;
pub(crate) mod connection;
pub(crate) mod durable;
mod engine;
pub mod limits;
pub(crate) mod outbox;
pub mod ownership;
pub(crate) mod state;
pub(crate) mod stream;
mod transport;

use std::future::Future;
use std::sync::Arc;

use duplex_core::CloseReason;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::cluster::{ClusterConfig, Node};
use crate::protocol::{MAX_FRAME, READ_BUFFER};
use crate::server::connection::Dialect;
use crate::server::durable::Stored;
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
        let tending = self.shared.node.as_ref().map(|node| {
            // A node announces itself, and adopts the sessions of nodes
            // that stopped announcing themselves.
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
                    if let Some(node) = &shared.node {
                        if let Err(e) = node.directory.heartbeat(node.liveness_ttl).await {
                            tracing::warn!("liveness not announced: {e}");
                        }
                    }
                    round += 1;
                    if round.is_multiple_of(2) {
                        shared.adopt_dead().await;
                    }
                }
            })
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
                            if let Err(e) = serve_connection(shared, stream, stopped).await {
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
        if let Some(tending) = tending {
            // It holds nothing that must finish: a round blocked on a
            // store that went away is not waited for.
            tending.abort();
            let _ = tending.await;
        }
        if self.shared.node.is_none() {
            self.close_all();
        }
        self.counters()
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

/// The first wait after a failed accept, and the longest.
const ACCEPT_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Why a connection ended before it was served.
#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    #[error("WebSocket handshake failed: {0}")]
    Failed(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("WebSocket handshake not finished within {0:?}")]
    TimedOut(std::time::Duration),
}

/// Accepts the WebSocket handshake (within the handshake timeout) and
/// runs the connection.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    stopped: watch::Receiver<bool>,
) -> Result<(), HandshakeError> {
    let _ = stream.set_nodelay(true);
    // A small read buffer: tungstenite zero-fills the unused part of it on
    // every read, and a voice event is about 1 KiB. At the default 128 KiB
    // that memset was a fifth of the gateway's CPU under load.
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
    let limit = shared.config.limits.handshake_timeout;
    // With `--auth-secret`, the handshake is where a connection says who
    // it is; without a valid token it gets HTTP 401 and nothing else.
    let mut principal = None;
    let mut dialect = Dialect::Native;
    // The error type is tungstenite's (an HTTP response): not ours to box.
    #[allow(clippy::result_large_err)]
    let check = |request: &Request, mut response: Response| {
        dialect = dialect_of(request);
        // A browser's realtime client offers `realtime` (and its key as a
        // subprotocol): the answer must name one it offered.
        if offers_realtime(request) {
            response.headers_mut().insert(
                "sec-websocket-protocol",
                tokio_tungstenite::tungstenite::http::HeaderValue::from_static("realtime"),
            );
        }
        match &shared.verifier {
            None => Ok(response),
            Some(verifier) => match verifier.principal(request) {
                Ok(p) => {
                    principal = Some(p);
                    Ok(response)
                }
                Err(e) => {
                    bump(&shared.stats.auth_refused);
                    tracing::debug!("handshake refused: {e}");
                    let mut refusal = ErrorResponse::new(Some(e.to_string()));
                    *refusal.status_mut() = StatusCode::UNAUTHORIZED;
                    Err(refusal)
                }
            },
        }
    };
    let ws = tokio::time::timeout(
        limit,
        tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config)),
    )
    .await
    .map_err(|_| {
        bump(&shared.stats.handshakes_timed_out);
        HandshakeError::TimedOut(limit)
    })??;
    transport::run(shared, ws, principal, dialect, stopped).await;
    Ok(())
}

/// The dialect a handshake's path asks for: the realtime dialect on
/// `/v1/realtime` and `/v1/duplex` (with `autostart` and `session_id` from
/// the query), the native one elsewhere.
fn dialect_of(request: &Request) -> Dialect {
    let uri = request.uri();
    let path = uri.path().trim_end_matches('/');
    if path != "/v1/realtime" && path != "/v1/duplex" {
        return Dialect::Native;
    }
    let mut autostart = true;
    let mut session_id = None;
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("autostart", v)) => autostart = !matches!(v, "0" | "false" | "off"),
            Some(("session_id", v)) if !v.is_empty() => session_id = Some(v.to_owned()),
            _ => {}
        }
    }
    Dialect::Realtime {
        autostart,
        session_id,
    }
}

/// Whether the handshake offers the `realtime` subprotocol.
fn offers_realtime(request: &Request) -> bool {
    auth::subprotocols(request).any(|p| p == "realtime")
}
