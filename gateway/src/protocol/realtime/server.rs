//! The realtime dialect's server events, as the contract orders them
//! (their `server_event_seq` is added by the session's journal).

use serde_json::{json, Map, Value};

/// The session's capabilities, as `session.created` reports them.
///
/// ```
/// let c = duplex_gateway::protocol::realtime::capabilities();
/// assert_eq!(c["supports_session_resume"], true);
/// assert_eq!(c["supports_barge_in"], false);
/// ```
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
///
/// ```
/// use duplex_gateway::protocol::realtime::session_object;
///
/// let s = session_object("call-1", 2, 5, &serde_json::Map::new());
/// assert_eq!((s["id"].as_str(), s["epoch"].as_u64(), s["turn_id"].as_u64()), (Some("call-1"), Some(2), Some(5)));
/// assert!(s["turn_detection"].is_null());
/// ```
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
    ///
    /// ```
    /// let ids = duplex_gateway::protocol::realtime::ResponseIds::of("r7");
    /// assert_eq!((ids.response.as_str(), ids.item.as_str()), ("resp_r7", "item_resp_r7"));
    /// ```
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
///
/// ```
/// use duplex_gateway::protocol::realtime::{response_opened, ResponseIds};
///
/// let events = response_opened(&ResponseIds::of("r1"), 0, 3);
/// assert_eq!(events[0]["type"], "response.created");
/// assert_eq!(events[4]["type"], "response.content_part.added");
/// ```
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
///
/// ```
/// use duplex_gateway::protocol::realtime::{text_delta, ResponseIds};
///
/// let d = text_delta(&ResponseIds::of("r1"), "Hi");
/// assert_eq!((d["type"].as_str(), d["delta"].as_str()), (Some("response.output_text.delta"), Some("Hi")));
/// ```
pub fn text_delta(ids: &ResponseIds, delta: &str) -> Value {
    json!({
        "type": "response.output_text.delta", "response_id": ids.response, "item_id": ids.item,
        "output_index": 0, "content_index": 0, "delta": delta,
    })
}

/// The events that end a response: for `completed`, the `.done` events of
/// the text, the part and the item; then `response.done` with `status`
/// (`completed` or `cancelled`, with `reason`) and `rate_limits.updated`.
///
/// ```
/// use duplex_gateway::protocol::realtime::{response_ended, ResponseIds};
///
/// let ids = ResponseIds::of("r1");
/// assert_eq!(response_ended(&ids, "Hi", "completed", None).len(), 6);
/// let cancelled = response_ended(&ids, "H", "cancelled", Some("barge_in"));
/// assert_eq!(cancelled[0]["response"]["status_details"]["reason"], "barge_in");
/// ```
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
///
/// ```
/// let events = duplex_gateway::protocol::realtime::committed("item_1", None, 0, 0);
/// assert_eq!(events[2]["type"], "input_audio_buffer.committed");
/// assert_eq!(events[2]["item_id"], "item_1");
/// ```
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
