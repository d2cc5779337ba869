//! What the gateway's socket tests share: a gateway on an ephemeral
//! loopback port, and a client's send and receive (each waits at most
//! 10 s and panics with what it expected otherwise: these are tests).

use std::sync::Arc;
use std::time::Duration;

use duplex_gateway::protocol::{encode_audio, ServerEvent};
use duplex_gateway::{Config, Gateway};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A client's WebSocket.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A gateway on an ephemeral loopback port, stopped by the sender: the
/// gateway, its `ws://` URL, the stop and the served task.
///
/// # Panics
///
/// On an invalid config, or without a loopback port.
pub async fn start(
    config: Config,
) -> (
    Arc<Gateway>,
    String,
    oneshot::Sender<()>,
    JoinHandle<duplex_gateway::stats::Counters>,
) {
    let gw = Gateway::new(config).expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(Arc::clone(&gw).serve(listener, async {
        let _ = stopped.await;
    }));
    (gw, url, stop, server)
}

/// The admin token of the test gateways.
pub const ADMIN: &str = "test-admin-token";

/// A test gateway's config: audit on under [`ADMIN`], 1 s grace, the
/// stand-in engine answering each turn with two deltas 2 ms apart.
#[must_use]
pub fn audit_config() -> Config {
    Config {
        audit: true,
        admin_token: Some(ADMIN.into()),
        grace: Duration::from_secs(1),
        deltas: 2,
        delta_interval: Duration::from_millis(2),
        ..Config::default()
    }
}

/// Sends `value` as a text message.
///
/// # Panics
///
/// When the socket is closed.
pub async fn send(ws: &mut Ws, value: serde_json::Value) {
    ws.send(Message::text(value.to_string()))
        .await
        .expect("send");
}

/// The next server event (control frames skipped).
///
/// # Panics
///
/// Without a text message within 10 s, or on one that is no server event.
pub async fn next(ws: &mut Ws) -> ServerEvent {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a reply within 10 s")
            .expect("connection open")
            .expect("no transport error");
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).expect("valid server event");
        }
    }
}

/// The next reply that is not part of a response stream.
///
/// # Panics
///
/// As [`next`].
pub async fn reply(ws: &mut Ws) -> ServerEvent {
    loop {
        match next(ws).await {
            ServerEvent::Delta { .. } | ServerEvent::Done { .. } => {}
            other => return other,
        }
    }
}

/// An error's kind, or `"not an error"`.
pub fn kind(e: &ServerEvent) -> &str {
    match e {
        ServerEvent::Error { kind, .. } => kind,
        _ => "not an error",
    }
}

/// A native `input.append` of 20 ms of audio.
pub fn chunk(event_id: &str, epoch: u64, turn: u64) -> serde_json::Value {
    json!({"type": "input.append", "event_id": event_id, "epoch": epoch, "turn": turn, "audio": encode_audio(&[1; 640])})
}

/// A client connected to `url`.
///
/// # Panics
///
/// When the connection fails.
pub async fn connect(url: &str) -> Ws {
    tokio_tungstenite::connect_async(url)
        .await
        .expect("connect")
        .0
}
