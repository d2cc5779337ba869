//! The typed events against the JSON trees they replaced (written
//! with `json!` from the contract's examples): the same events, member
//! for member.

use super::ResponseIds;
use serde_json::{json, Value};

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

fn response_opened(ids: &ResponseIds, epoch: u64, turn: u64) -> Vec<Value> {
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

fn text_delta(ids: &ResponseIds, delta: &str) -> Value {
    json!({
        "type": "response.output_text.delta", "response_id": ids.response, "item_id": ids.item,
        "output_index": 0, "content_index": 0, "delta": delta,
    })
}

fn response_ended(ids: &ResponseIds, text: &str, status: &str, reason: Option<&str>) -> Vec<Value> {
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

fn committed(item: &str, previous: Option<&str>, turn: u64, epoch: u64) -> Vec<Value> {
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

fn commit<'a>(
    item: &'a str,
    previous: Option<&'a str>,
    turn: u64,
    epoch: u64,
) -> super::Commit<'a> {
    super::Commit {
        item,
        previous,
        turn,
        epoch,
        transcript: None,
    }
}

fn parsed(events: &[String]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::from_str(e).expect("rendered events are JSON"))
        .collect()
}

#[test]
fn typed_events_are_the_trees() {
    let ids = ResponseIds::of("r\"7");
    assert_eq!(
        parsed(&super::response_opened(&ids, 2, 9)),
        response_opened(&ids, 2, 9)
    );
    assert_eq!(
        serde_json::from_str::<Value>(&super::text_delta(&ids, "a\nb")).unwrap(),
        text_delta(&ids, "a\nb")
    );
    for (status, reason) in [
        ("completed", None),
        ("cancelled", Some("barge_in")),
        ("failed", Some("node_lost")),
    ] {
        assert_eq!(
            parsed(&super::response_ended(&ids, "so \"far\"", status, reason)),
            response_ended(&ids, "so \"far\"", status, reason)
        );
    }
    assert_eq!(
        parsed(&commit("item_1", None, 0, 0).events()),
        committed("item_1", None, 0, 0)
    );
    assert_eq!(
        parsed(&commit("item_2", Some("item_1"), 4, 1).events()),
        committed("item_2", Some("item_1"), 4, 1)
    );
}
