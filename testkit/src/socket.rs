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
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let ws: Ws = connect("ws://127.0.0.1:8787").await;
/// # drop(ws);
/// # }
/// ```
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A gateway on an ephemeral loopback port, stopped by the sender: the
/// gateway, its `ws://` URL, the stop and the served task.
///
/// # Panics
///
/// On an invalid config, or without a loopback port.
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let (_gateway, url, stop, served) = start(audit_config()).await;
/// assert!(url.starts_with("ws://127.0.0.1:"));
/// let _ = stop.send(());
/// let counters = served.await.unwrap();
/// # drop(counters);
/// # }
/// ```
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
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// assert_eq!(audit_config().admin_token.as_deref(), Some(ADMIN));
/// # }
/// ```
pub const ADMIN: &str = "test-admin-token";

/// A test gateway's config: audit on under [`ADMIN`], 1 s grace, the
/// stand-in engine answering each turn with two deltas 2 ms apart.
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let config = audit_config();
/// assert!(config.audit);
/// # }
/// ```
#[must_use]
pub fn audit_config() -> Config {
    Config {
        audit: true,
        admin_token: Some(ADMIN.into()),
        grace: Duration::from_secs(1),
        engine: std::sync::Arc::new(duplex_gateway::engine::StandIn {
            deltas: 2,
            interval: Duration::from_millis(2),
        }),
        ..Config::default()
    }
}

/// Sends `value` as a text message.
///
/// # Panics
///
/// When the socket is closed.
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let mut ws = connect("ws://127.0.0.1:8787").await;
/// send(&mut ws, serde_json::json!({"type": "session.open"})).await;
/// # }
/// ```
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
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let mut ws = connect("ws://127.0.0.1:8787").await;
/// send(&mut ws, serde_json::json!({"type": "session.open"})).await;
/// let opened = next(&mut ws).await;
/// # drop(opened);
/// # }
/// ```
pub async fn next(ws: &mut Ws) -> ServerEvent {
    serde_json::from_value(next_json(ws, Duration::from_secs(10)).await)
        .expect("valid server event")
}

/// The next text message, as JSON (either dialect), within `within`: one
/// deadline for the event, not one per frame (the server pings every few
/// seconds, and a wait re-armed by each ping would never end).
///
/// # Panics
///
/// When nothing comes in time, the connection ends, or the message is
/// not JSON.
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let mut ws = connect("ws://127.0.0.1:8787/v1/realtime").await;
/// let created = next_json(&mut ws, std::time::Duration::from_secs(10)).await;
/// assert_eq!(created["type"], "session.created");
/// # }
/// ```
pub async fn next_json(ws: &mut Ws, within: Duration) -> serde_json::Value {
    let event = async {
        loop {
            let m = ws
                .next()
                .await
                .expect("connection open")
                .expect("no transport error");
            if let Message::Text(t) = m {
                return serde_json::from_str(t.as_str()).expect("a JSON event");
            }
        }
    };
    tokio::time::timeout(within, event)
        .await
        .expect("an event in time")
}

/// The next reply that is not part of a response stream.
///
/// # Panics
///
/// As [`next`].
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let mut ws = connect("ws://127.0.0.1:8787").await;
/// send(&mut ws, chunk("e1", 0, 0)).await;
/// assert_eq!(kind(&reply(&mut ws).await), "no_session");
/// # }
/// ```
pub async fn reply(ws: &mut Ws) -> ServerEvent {
    loop {
        match next(ws).await {
            ServerEvent::Delta { .. } | ServerEvent::Done { .. } => {}
            other => return other,
        }
    }
}

/// An error's kind, or `"not an error"`.
///
/// ```
/// use duplex_gateway::protocol::ServerEvent;
/// let e = ServerEvent::Appended { event_id: "e1".into(), seq: 1, turn_seq: 1, duplicate: false };
/// assert_eq!(duplex_testkit::socket::kind(&e), "not an error");
/// ```
pub fn kind(e: &ServerEvent) -> &str {
    match e {
        ServerEvent::Error { kind, .. } => kind,
        _ => "not an error",
    }
}

/// A native `input.append` of 20 ms of audio.
///
/// ```
/// let c = duplex_testkit::socket::chunk("e1", 0, 1);
/// assert_eq!((c["type"].as_str(), c["turn"].as_u64()), (Some("input.append"), Some(1)));
/// ```
pub fn chunk(event_id: &str, epoch: u64, turn: u64) -> serde_json::Value {
    json!({"type": "input.append", "event_id": event_id, "epoch": epoch, "turn": turn, "audio": encode_audio(&[1; 640])})
}

/// A client connected to `url`.
///
/// # Panics
///
/// When the connection fails.
///
/// ```no_run
/// # async fn run() {
/// use duplex_testkit::socket::*;
/// let mut ws = connect("ws://127.0.0.1:8787").await;
/// send(&mut ws, serde_json::json!({"type": "session.open"})).await;
/// # }
/// ```
pub async fn connect(url: &str) -> Ws {
    tokio_tungstenite::connect_async(url)
        .await
        .expect("connect")
        .0
}
