//! The check that the property test and the fuzz target share: any
//! sequence of client messages, run through a connection, is answered
//! with well-formed server events, at most a bounded number per message,
//! and never touches another client's session.
//!
//! Public only with the `fuzzing` feature (for `tests/fuzz`); not part of
//! the gateway's API.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::engine::StandIn;
use crate::protocol::ServerEvent;
use crate::server::connection::Connection;
use crate::server::outbox::Outbox;
use crate::{Config, Gateway};

/// The server events queued in `rx`, or why one is not a server event.
fn drain(rx: &mut mpsc::Receiver<Message>) -> Result<Vec<ServerEvent>, String> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        let Message::Text(text) = m else {
            return Err(format!("the gateway sends only text, got {m:?}"));
        };
        let event = serde_json::from_str(text.as_str())
            .map_err(|e| format!("not a server event: {text}: {e}"))?;
        out.push(event);
    }
    Ok(out)
}

fn append(event_id: &str) -> String {
    serde_json::json!({"type": "input.append", "event_id": event_id, "epoch": 0, "turn": 0, "audio": ""})
        .to_string()
}

/// Runs `frames` through one connection of a fresh gateway beside a
/// victim's session; `Err` says which rule broke. Panics only if the
/// gateway does (which is what a fuzzer looks for).
///
/// # Errors
///
/// A reply that is not a server event, too many replies to one message,
/// or the victim's session changed.
pub fn frames_keep_to_their_session(frames: &[String]) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async {
        let config = Config {
            audit: true,
            admin_token: Some("fuzzing-admin-token".into()),
            engine: Arc::new(StandIn {
                interval: Duration::from_millis(1),
                ..StandIn::default()
            }),
            ..Config::default()
        };
        let gw = Gateway::new(config).map_err(|e| e.to_string())?;
        let (vtx, mut vrx) = Outbox::new(1 << 20);
        let mut victim = Connection::new(Arc::clone(&gw.shared), vtx, None);
        victim
            .on_text(r#"{"type":"session.open","session_id":"victim-1"}"#)
            .await;
        victim.on_text(&append("v1")).await;
        let opened = drain(&mut vrx)?;
        if !matches!(
            opened[..],
            [
                ServerEvent::Opened { .. },
                ServerEvent::Appended { seq: 1, .. }
            ]
        ) {
            return Err(format!("the victim could not start: {opened:?}"));
        }

        let (tx, mut rx) = Outbox::new(1 << 20);
        let mut client = Connection::new(Arc::clone(&gw.shared), tx, None);
        let most = 1 + 2 * StandIn::default().deltas as usize;
        for f in frames {
            client.on_text(f).await;
            let replies = drain(&mut rx)?;
            // One answer per message, except a commit, answered by its
            // response (or an error).
            if replies.len() > most {
                return Err(format!("{} replies to {f:?}: {replies:?}", replies.len()));
            }
        }
        victim.on_text(&append("v2")).await;
        let after = drain(&mut vrx)?;
        if !matches!(
            after.last(),
            Some(ServerEvent::Appended {
                seq: 2,
                duplicate: false,
                ..
            })
        ) {
            return Err(format!("the victim's session changed: {after:?}"));
        }
        Ok(())
    })
}
