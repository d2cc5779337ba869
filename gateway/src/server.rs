//! The gateway: a tokio WebSocket server over one [`SharedManager`](duplex_std::SharedManager),
//! with the expiry reaper running as a task, and graceful shutdown.

use std::future::Future;
use std::sync::Arc;

use duplex_core::CloseReason;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::connection::Connection;
use crate::protocol::{MAX_FRAME, READ_BUFFER};
use crate::state::{Config, Shared, StartError};
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
            shared: Arc::new(Shared::new(config)?),
        }))
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
                    bump(&shared.stats.expired);
                    add(
                        &shared.stats.requests_expired,
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
                        bump(&self.shared.stats.connections);
                        let shared = Arc::clone(&self.shared);
                        let stopped = stopped.clone();
                        connections.spawn(async move {
                            if let Err(e) = serve_connection(shared, stream, stopped).await {
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

/// Accepts the WebSocket handshake and runs the connection.
async fn serve_connection(
    shared: Arc<Shared>,
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
    Connection::run(shared, ws, stopped).await;
    Ok(())
}
