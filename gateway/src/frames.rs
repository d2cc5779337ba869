//! Property: no message a client can send panics the gateway, every reply
//! is a well-formed server event, and nothing a connection sends touches a
//! session it does not hold.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::connection::Connection;
use crate::protocol::{encode_audio, ServerEvent};
use crate::transport::Outbox;
use crate::{Config, Gateway};

/// Frames shaped like the protocol, with hostile field values.
fn shaped() -> impl Strategy<Value = String> {
    const KINDS: [&str; 7] = [
        "session.open",
        "input.append",
        "input.commit",
        "response.cancel",
        "session.close",
        "session.audit",
        "admin.stats",
    ];
    let kind = prop_oneof![
        prop::sample::select(&KINDS[..]).prop_map(str::to_owned),
        "[a-z.]{0,16}",
    ];
    let id = prop_oneof![
        "[a-z0-9]{0,40}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
        any::<i64>().prop_map(serde_json::Value::from),
    ];
    let number = prop_oneof![
        (0_u64..4).prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        "[a-z]{0,3}".prop_map(serde_json::Value::from),
    ];
    let audio = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| encode_audio(&b)),
        ".{0,16}",
    ];
    (
        kind,
        id.clone(),
        id,
        number.clone(),
        number.clone(),
        number,
        audio,
    )
        .prop_map(|(kind, session_id, event_id, epoch, turn, token, audio)| {
            let mut m = serde_json::json!({
                "type": kind, "session_id": session_id, "event_id": event_id,
                "epoch": epoch, "turn": turn, "audio": audio,
            });
            // A string: a resume with a guessed token; otherwise a
            // plain open.
            if token.is_string() {
                m["resume_token"] = token;
            }
            m.to_string()
        })
}

fn frame() -> impl Strategy<Value = String> {
    prop_oneof![
        shaped(),
        prop::collection::vec(any::<u8>(), 0..256)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        ".{0,64}",
    ]
}

fn drain(rx: &mut mpsc::Receiver<Message>) -> Vec<ServerEvent> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        let Message::Text(text) = m else {
            panic!("the gateway sends only text, got {m:?}");
        };
        match serde_json::from_str(text.as_str()) {
            Ok(event) => out.push(event),
            Err(e) => panic!("not a server event: {text}: {e}"),
        }
    }
    out
}

fn append(event_id: &str) -> String {
    serde_json::json!({"type": "input.append", "event_id": event_id, "epoch": 0, "turn": 0, "audio": ""})
        .to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_client_frame_panics_or_touches_another_session(frames in prop::collection::vec(frame(), 1..24)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        rt.block_on(async {
            let config = Config { audit: true, delta_interval: Duration::from_millis(1), ..Config::default() };
            let gw = Gateway::new(config).expect("config");
            // Another client's session, which nothing below may touch (its
            // id has a character the generated ids never use).
            let (vtx, mut vrx) = Outbox::new(1 << 20);
            let mut victim = Connection::new(Arc::clone(&gw.shared), vtx, None);
            victim.on_text(r#"{"type":"session.open","session_id":"victim-1"}"#).await;
            victim.on_text(&append("v1")).await;
            let opened = drain(&mut vrx);
            let ok = matches!(opened[..], [ServerEvent::Opened { .. }, ServerEvent::Appended { seq: 1, .. }]);
            prop_assert!(ok, "{:?}", opened);

            let (tx, mut rx) = Outbox::new(1 << 20);
            let mut client = Connection::new(Arc::clone(&gw.shared), tx, None);
            for f in &frames {
                client.on_text(f).await;
                let replies = drain(&mut rx);
                // One answer per frame, except a commit, answered by its
                // response (or an error).
                prop_assert!(replies.len() <= 1 + 2 * gw.shared.config.deltas as usize, "{:?}", replies);
            }
            victim.on_text(&append("v2")).await;
            let after = drain(&mut vrx);
            let untouched = matches!(after.last(), Some(ServerEvent::Appended { seq: 2, duplicate: false, .. }));
            prop_assert!(untouched, "{:?}", after);
            Ok(())
        })?;
    }
}
