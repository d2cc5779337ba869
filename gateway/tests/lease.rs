//! The lease over real sockets: a session idle past its TTL is reaped,
//! unless its model is still speaking (vllm-omni 0.30's `MODEL_OUTPUT`
//! activity): the engine's output keeps it alive, as a client's input does.

use std::sync::Arc;
use std::time::Duration;

use duplex_gateway::engine::StandIn;
use duplex_gateway::protocol::ServerEvent;
use duplex_gateway::Config;
use duplex_testkit::socket::{chunk, connect, kind, next, reply, send, start, Ws};
use serde_json::json;

/// A 600 ms idle TTL and a model that speaks for 2 s (20 pieces, 100 ms
/// apart).
fn slow_speaker() -> Config {
    Config {
        idle_ttl: Some(Duration::from_millis(600)),
        grace: Duration::from_secs(1),
        engine: Arc::new(StandIn {
            deltas: 20,
            interval: Duration::from_millis(100),
        }),
        ..Config::default()
    }
}

async fn opened(url: &str, id: &str) -> Ws {
    let mut ws = connect(url).await;
    send(&mut ws, json!({"type": "session.open", "session_id": id})).await;
    assert!(matches!(reply(&mut ws).await, ServerEvent::Opened { .. }));
    send(&mut ws, chunk("c0", 0, 0)).await;
    assert!(matches!(
        reply(&mut ws).await,
        ServerEvent::Appended { seq: 1, .. }
    ));
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_model_speaks_does_not_expire_idle() {
    let (_gw, url, stop, server) = start(slow_speaker()).await;
    let mut ws = opened(&url, "listening").await;
    send(
        &mut ws,
        json!({"type": "input.commit", "epoch": 0, "turn": 0}),
    )
    .await;
    // The client says nothing for the whole answer, three idle TTLs long.
    let mut pieces = 0;
    loop {
        match next(&mut ws).await {
            ServerEvent::Delta { .. } => pieces += 1,
            ServerEvent::Done { .. } => break,
            other => panic!("the answer was cut: {other:?}"),
        }
    }
    assert_eq!(pieces, 20);
    // The session outlived the answer: the next turn is applied.
    send(&mut ws, chunk("c1", 0, 1)).await;
    let r = reply(&mut ws).await;
    assert!(matches!(r, ServerEvent::Appended { seq: 2, .. }), "{r:?}");
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.appended, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_nobody_speaks_in_expires_idle() {
    let (_gw, url, stop, server) = start(slow_speaker()).await;
    let mut ws = opened(&url, "silent").await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    send(&mut ws, chunk("c1", 0, 0)).await;
    let r = reply(&mut ws).await;
    assert_eq!(kind(&r), "unknown_session", "{r:?}");
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.appended, 1);
}
