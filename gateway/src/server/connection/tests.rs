//! A connection's events without a socket: what belongs to the session,
//! not to the socket that sent it.

use std::sync::Arc;
use std::time::Duration;

use crate::Id;
use tokio::sync::mpsc::Receiver;
use tokio_tungstenite::tungstenite::Message;

use super::Connection;
use crate::engine::StandIn;
use crate::protocol::ServerEvent;
use crate::server::outbox::Outbox;
use crate::{Config, Gateway};

fn events(rx: &mut Receiver<Message>) -> Vec<ServerEvent> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        let text = m.into_text().expect("a text message");
        out.push(serde_json::from_str(&text).expect("a server event"));
    }
    out
}

/// A gateway whose stand-in streams a long answer, a piece every 10 ms.
fn slow_gateway() -> Arc<Gateway> {
    let engine = StandIn {
        deltas: 1_000,
        interval: Duration::from_millis(10),
    };
    let config = Config {
        engine: Arc::new(engine),
        ..Config::default()
    };
    Gateway::new(config).unwrap()
}

fn deltas(events: &[ServerEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, ServerEvent::Delta { .. }))
        .count()
}

/// A response started on one socket is cancelled by a barge-in on the
/// socket that resumed the session: it stops generating at once, instead
/// of running to its end for nobody.
#[tokio::test(start_paused = true)]
async fn a_barge_in_after_a_resume_stops_the_old_sockets_response() {
    let gw = slow_gateway();
    let shared = Arc::clone(&gw.shared);
    let (a_out, mut a_rx) = Outbox::new(1 << 24);
    let mut a = Connection::new(Arc::clone(&shared), a_out, None);
    a.on_text(r#"{"type":"session.open","session_id":"call-1"}"#)
        .await;
    let Some(ServerEvent::Opened { resume_token, .. }) = events(&mut a_rx).pop() else {
        panic!("not opened");
    };
    a.on_text(r#"{"type":"input.commit","epoch":0,"turn":0}"#)
        .await;
    tokio::time::sleep(Duration::from_millis(55)).await;
    assert!(deltas(&events(&mut a_rx)) >= 4, "the response streams");
    a.dropped().await;

    let (b_out, mut b_rx) = Outbox::new(1 << 24);
    let mut b = Connection::new(Arc::clone(&shared), b_out, None);
    b.on_text(&format!(
        r#"{{"type":"session.open","session_id":"call-1","resume_token":"{resume_token}"}}"#
    ))
    .await;
    assert!(matches!(
        events(&mut b_rx).pop(),
        Some(ServerEvent::Opened { resumed: true, .. })
    ));
    b.on_text(r#"{"type":"response.cancel","epoch":0,"turn":0}"#)
        .await;
    let Some(ServerEvent::Cancelled { request_ids, .. }) = events(&mut b_rx).pop() else {
        panic!("not cancelled");
    };
    assert_eq!(request_ids.len(), 1, "the old socket's request is released");
    let session = Id::new("call-1").unwrap();
    assert_eq!(shared.responses.of(&session).iter().count(), 0);

    // Whatever was on its way is out; after that, nothing more comes.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let _ = events(&mut a_rx);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(deltas(&events(&mut a_rx)), 0, "the old response stopped");
    assert_eq!(deltas(&events(&mut b_rx)), 0);
}

/// A close stops the session's responses, whichever socket started them.
#[tokio::test(start_paused = true)]
async fn a_close_stops_every_response_of_the_session() {
    let gw = slow_gateway();
    let shared = Arc::clone(&gw.shared);
    let (out, mut rx) = Outbox::new(1 << 24);
    let mut c = Connection::new(Arc::clone(&shared), out, None);
    c.on_text(r#"{"type":"session.open","session_id":"call-2"}"#)
        .await;
    c.on_text(r#"{"type":"input.commit","epoch":0,"turn":0}"#)
        .await;
    c.on_text(r#"{"type":"input.commit","epoch":0,"turn":1}"#)
        .await;
    let session = Id::new("call-2").unwrap();
    assert_eq!(shared.responses.of(&session).iter().count(), 2);
    c.on_text(r#"{"type":"session.close"}"#).await;
    assert_eq!(shared.responses.of(&session).iter().count(), 0);
    let _ = events(&mut rx);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(deltas(&events(&mut rx)), 0);
}

/// The model's output is the session's activity: a session whose model is
/// still speaking does not expire idle, and expires once it stops.
#[tokio::test(start_paused = true)]
async fn a_session_whose_model_speaks_does_not_expire_idle() {
    let engine = StandIn {
        deltas: 300,
        interval: Duration::from_millis(10),
    };
    let config = Config {
        engine: Arc::new(engine),
        idle_ttl: Some(Duration::from_secs(1)),
        ..Config::default()
    };
    let gw = Gateway::new(config).unwrap();
    let shared = Arc::clone(&gw.shared);
    let (out, mut rx) = Outbox::new(1 << 24);
    let mut c = Connection::new(Arc::clone(&shared), out, None);
    c.on_text(r#"{"type":"session.open","session_id":"call-3"}"#)
        .await;
    c.on_text(r#"{"type":"input.commit","epoch":0,"turn":0}"#)
        .await;
    // 2.5 s after the client's last event, 0.5 s before the model ends.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(shared.manager.collect_expired([]).is_empty());
    assert!(deltas(&events(&mut rx)) >= 200, "the model is speaking");
    // Its last piece, then the idle TTL: the session goes.
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    assert!(matches!(
        events(&mut rx).last(),
        Some(ServerEvent::Done { .. })
    ));
    assert_eq!(shared.manager.collect_expired([]).len(), 1);
}
