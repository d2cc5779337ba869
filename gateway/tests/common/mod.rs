//! What the gateway's socket tests share: a gateway on an ephemeral
//! loopback port, and a client's send and receive.

#![allow(dead_code)] // each test file uses its own part

pub mod stores;

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

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A gateway on an ephemeral loopback port, stopped by the sender.
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

pub async fn send(ws: &mut Ws, value: serde_json::Value) {
    ws.send(Message::text(value.to_string()))
        .await
        .expect("send");
}

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
pub async fn reply(ws: &mut Ws) -> ServerEvent {
    loop {
        match next(ws).await {
            ServerEvent::Delta { .. } | ServerEvent::Done { .. } => {}
            other => return other,
        }
    }
}

pub fn kind(e: &ServerEvent) -> &str {
    match e {
        ServerEvent::Error { kind, .. } => kind,
        _ => "not an error",
    }
}

pub fn chunk(event_id: &str, epoch: u64, turn: u64) -> serde_json::Value {
    json!({"type": "input.append", "event_id": event_id, "epoch": epoch, "turn": turn, "audio": encode_audio(&[1; 640])})
}

/// A client connected to `url`.
pub async fn connect(url: &str) -> Ws {
    tokio_tungstenite::connect_async(url)
        .await
        .expect("connect")
        .0
}
