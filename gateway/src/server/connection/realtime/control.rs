//! The realtime dialect's controls: cancelling what is active (a
//! response, the output, the pending input) and acknowledging playback and
//! truncation, as the contract's serving layer does.

use serde_json::{json, Map, Value};

use super::super::Connection;
use crate::protocol::realtime::RealtimeError;
use crate::protocol::ServerEvent;

impl Connection {
    /// `playback.ack` and `conversation.item.truncate`: acknowledged; a
    /// truncate names an item of the session, else `item_not_found`.
    pub(super) async fn rt_acknowledge(
        &mut self,
        event_id: Option<String>,
        kind: &str,
        body: &Map<String, Value>,
    ) {
        let Some(rt) = self.rt.as_ref() else {
            self.rt_send(vec![Self::no_session(event_id)]).await;
            return;
        };
        let item = body.get("item_id").and_then(Value::as_str).unwrap_or("");
        if kind == "conversation.item.truncate" && !rt.stream.knows_item(item).await {
            // A long id is not echoed (an answer stays short).
            let named = if item.len() <= 128 {
                format!("{item:?}")
            } else {
                format!("an id of {} bytes", item.len())
            };
            let kept = crate::server::stream::KEPT_ITEMS;
            let e = RealtimeError::invalid(
                "item_not_found",
                format!("conversation item not found: {named} is none of this session's last {kept} items"),
                event_id,
            );
            self.rt_send(vec![e.to_value()]).await;
            return;
        }
        let answer = if kind == "playback.ack" {
            json!({"type": "playback.acknowledged", "event": {
                "type": "playback.acknowledged",
                "played_ms": body.get("played_ms").cloned().unwrap_or(Value::Null),
                "committed_ms": body.get("committed_ms").cloned().unwrap_or(Value::Null),
                "history_committed": false,
            }})
        } else {
            json!({"type": "conversation.item.truncated",
                "item_id": body.get("item_id").cloned().unwrap_or(Value::Null),
                "content_index": body.get("content_index").cloned().unwrap_or(Value::from(0)),
                "audio_end_ms": body.get("audio_end_ms").cloned().unwrap_or(Value::Null)})
        };
        self.rt_send(vec![answer]).await;
    }

    /// `input_audio_buffer.clear` (and `input.cancel` with nothing
    /// speaking): the pending turn is dropped, the epoch stays.
    pub(super) async fn rt_clear_input(&mut self, event_id: Option<String>) {
        let Some(rt) = self.rt.as_mut() else {
            self.rt_send(vec![Self::no_session(event_id)]).await;
            return;
        };
        rt.conv.drop_pending();
        rt.keep();
        // The audio held for the engine goes with it (as the release's
        // `release_all_input_bytes`).
        self.release_input();
        self.rt_send(vec![json!({"type": "input_audio_buffer.cleared"})])
            .await;
    }

    /// The session's audio held for its engine is given back: the input
    /// was committed (the engine has the turn) or cleared.
    pub(super) fn release_input(&self) {
        if let Some(held) = self.bound.as_ref() {
            self.shared
                .manager
                .with_open(&held.session, |s, _| s.release_all_input());
        }
    }

    /// `response.cancel`, `output_audio_buffer.clear`, `input.cancel`,
    /// `barge_in`.
    /// Active work is cancelled by a barge-in: the epoch moves on, the
    /// engine's requests of the old one are released once, and each
    /// response in progress ends `cancelled` (nothing of it is sent
    /// afterwards). With no response in progress, a clear of the output
    /// only says so and a cancel of the input drops the pending turn; the
    /// epoch stays (the contract cancels only what is active).
    pub(super) async fn rt_cancel(&mut self, event_id: Option<String>, kind: &'static str) {
        let Some(rt) = self.rt.as_mut() else {
            self.rt_send(vec![Self::no_session(event_id)]).await;
            return;
        };
        let responding = rt.stream.responding().await;
        match kind {
            "response.cancel" if !responding => {
                let e = RealtimeError::invalid(
                    "response_cancel_not_active",
                    "there is no response in progress to cancel",
                    event_id,
                );
                self.rt_send(vec![e.to_value()]).await;
                return;
            }
            "output_audio_buffer.clear" => {
                // Said before the response's end, as the contract does.
                let response = rt.stream.current_response().await;
                let cleared =
                    json!({"type": "output_audio_buffer.cleared", "response_id": response});
                self.rt_send(vec![cleared]).await;
                if !responding {
                    return;
                }
            }
            "input.cancel" | "barge_in" if !responding => {
                self.rt_clear_input(event_id).await;
                return;
            }
            _ => {}
        }
        let reason = match kind {
            "response.cancel" => "client_cancelled",
            "output_audio_buffer.clear" => "output_audio_buffer_clear",
            _ => "barge_in",
        };
        self.rt_barge_in(event_id, reason).await;
    }

    /// A barge-in: the epoch moves on, the engine's requests of the old
    /// one are released once, the pending turn is dropped, and each
    /// response in progress ends `cancelled` for `reason`.
    pub(super) async fn rt_barge_in(&mut self, event_id: Option<String>, reason: &'static str) {
        let Some(rt) = self.rt.as_ref() else { return };
        let (epoch, turn) = (rt.conv.epoch, rt.conv.core_turn);
        let answer = self.cancel(epoch, turn).await;
        let ServerEvent::Cancelled { epoch, turn, .. } = answer else {
            if let Some(e) = Self::rt_error(&answer, event_id.as_deref()) {
                self.rt_send(vec![e]).await;
            }
            return;
        };
        let Some(rt) = self.rt.as_mut() else { return };
        rt.conv.epoch = epoch;
        rt.conv.turn = rt.conv.turn.max(turn);
        rt.conv.core_turn = turn;
        rt.conv.pending = false;
        rt.conv.take_transcript();
        rt.keep();
        rt.stream.cancel_all(reason).await;
    }
}
