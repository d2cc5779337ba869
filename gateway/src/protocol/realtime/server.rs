//! The realtime dialect's server events, as the contract orders them
//! (their `server_event_seq` is added by the session's journal).

use serde_json::{json, Map, Value};

/// The session's capabilities, as `session.created` reports them.
pub fn capabilities() -> Value {
    json!({
        "implementation_level": "serving_session_adapter",
        "supports_input_append": true,
        "supports_barge_in": false,
        "supports_session_resume": true,
        "supports_session_lease": true,
        "supports_multi_session": true,
        "supports_audio_truncate": false,
        "chunk_period_ms": 20,
        "input_modes": ["append_audio_chunk"],
    })
}

/// The `session` object of `session.created` and `session.updated`.
pub fn session_object(id: &str, epoch: u64, turn: u64, config: &Map<String, Value>) -> Value {
    let pick = |name: &str, default: Value| config.get(name).cloned().unwrap_or(default);
    json!({
        "object": "realtime.session",
        "type": "realtime",
        "id": id,
        "model": pick("model", json!("duplex-stand-in")),
        "state": "open",
        "epoch": epoch,
        "turn_id": turn,
        "modalities": ["text"],
        "output_modalities": ["text"],
        "instructions": pick("instructions", Value::Null),
        "input_audio_format": "pcm16",
        "output_audio_format": "pcm16",
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}, "turn_detection": null}},
        "turn_detection": null,
        "tools": [],
        "extra_body": pick("extra_body", json!({})),
        "capabilities": capabilities(),
    })
}

/// The ids of one response: `resp_<request>` and its item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseIds {
    /// `response_id`.
    pub response: String,
    /// The assistant item's id.
    pub item: String,
}

impl ResponseIds {
    /// The ids for the engine request `request`.
    pub fn of(request: &str) -> Self {
        ResponseIds {
            response: format!("resp_{request}"),
            item: format!("item_resp_{request}"),
        }
    }
}

fn assistant_item(ids: &ResponseIds, status: &str, text: Option<&str>) -> Value {
    let content = match text {
        Some(t) => json!([{"type": "output_text", "text": t}]),
        None => json!([]),
    };
    json!({
        "id": ids.item,
        "object": "realtime.item",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    })
}

/// The events that open a response, in the contract's order:
/// `response.created`, `conversation.item.added` and `.created`,
/// `response.output_item.added`, `response.content_part.added`.
pub fn response_opened(ids: &ResponseIds, epoch: u64, turn: u64) -> Vec<Value> {
    let item = assistant_item(ids, "in_progress", None);
    vec![
        json!({
            "type": "response.created",
            "response_id": ids.response,
            "response": {
                "id": ids.response, "object": "realtime.response", "status": "in_progress",
                "status_details": null, "output": [], "modalities": ["text"], "output_modalities": ["text"],
                "metadata": {"duplex_event": {"type": "response.created", "response_id": ids.response, "epoch": epoch, "turn_id": turn}},
            },
        }),
        json!({"type": "conversation.item.added", "previous_item_id": null, "item": item}),
        json!({"type": "conversation.item.created", "previous_item_id": null, "item": item}),
        json!({"type": "response.output_item.added", "response_id": ids.response, "output_index": 0, "item": item}),
        json!({
            "type": "response.content_part.added", "response_id": ids.response, "item_id": ids.item,
            "output_index": 0, "content_index": 0, "part": {"type": "text", "text": ""},
        }),
    ]
}

/// One text delta of a response.
pub fn text_delta(ids: &ResponseIds, delta: &str) -> Value {
    json!({
        "type": "response.output_text.delta", "response_id": ids.response, "item_id": ids.item,
        "output_index": 0, "content_index": 0, "delta": delta,
    })
}

/// The events that end a response: for `completed`, the `.done` events of
/// the text, the part and the item; then `response.done` with `status`
/// (`completed` or `cancelled`, with `reason`) and `rate_limits.updated`.
pub fn response_ended(
    ids: &ResponseIds,
    text: &str,
    status: &str,
    reason: Option<&str>,
) -> Vec<Value> {
    let item_status = if status == "completed" {
        "completed"
    } else {
        "incomplete"
    };
    let item = assistant_item(ids, item_status, Some(text));
    let mut out = Vec::with_capacity(7);
    if status == "completed" {
        out.push(json!({
            "type": "response.output_text.done", "response_id": ids.response, "item_id": ids.item,
            "output_index": 0, "content_index": 0, "text": text,
        }));
        out.push(json!({
            "type": "response.content_part.done", "response_id": ids.response, "item_id": ids.item,
            "output_index": 0, "content_index": 0, "part": {"type": "text", "text": text},
        }));
        out.push(json!({"type": "response.output_item.done", "response_id": ids.response, "output_index": 0, "item": item}));
        out.push(json!({"type": "conversation.item.done", "previous_item_id": null, "item": item}));
    }
    let details = reason.map(|r| json!({"type": status, "reason": r}));
    out.push(json!({
        "type": "response.done",
        "response_id": ids.response,
        "response": {
            "id": ids.response, "object": "realtime.response", "status": status,
            "status_details": details, "output": [item], "modalities": ["text"], "output_modalities": ["text"],
        },
    }));
    out.push(json!({"type": "rate_limits.updated", "rate_limits": []}));
    out
}

/// The events of a commit: the user item, `input_audio_buffer.committed`
/// and `conversation.item.done`.
pub fn committed(item: &str, previous: Option<&str>, turn: u64, epoch: u64) -> Vec<Value> {
    let user = json!({
        "id": item, "object": "realtime.item", "type": "message", "role": "user",
        "status": "completed", "content": [{"type": "input_audio", "transcript": null}],
    });
    vec![
        json!({"type": "conversation.item.added", "previous_item_id": previous, "item": user}),
        json!({"type": "conversation.item.created", "previous_item_id": previous, "item": user}),
        json!({
            "type": "input_audio_buffer.committed", "previous_item_id": previous, "item_id": item,
            "event": {"type": "input.committed", "turn_id": turn, "epoch": epoch},
        }),
        json!({"type": "conversation.item.done", "previous_item_id": previous, "item": user}),
    ]
}
