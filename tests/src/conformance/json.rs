//! Reading trace fields and writing results: the JSON side of the runner.

use duplex_core::{Appended, CloseReason, Fence, Id, InputMode, Instant};
use duplex_std::SessionView;
use serde_json::{json, Map, Value};

use super::ParseError;

pub(super) fn bad(msg: impl Into<String>) -> ParseError {
    ParseError(msg.into())
}

/// The outcome of one operation, in the trace's JSON shape.
pub(super) fn field<'a>(op: &'a Map<String, Value>, name: &str) -> Result<&'a Value, ParseError> {
    op.get(name)
        .ok_or_else(|| bad(format!("missing field `{name}`")))
}

pub(super) fn u64_of(v: &Value, name: &str) -> Result<u64, ParseError> {
    v.as_u64()
        .ok_or_else(|| bad(format!("`{name}` must be a non-negative integer, got {v}")))
}

pub(super) fn str_of<'a>(v: &'a Value, name: &str) -> Result<&'a str, ParseError> {
    v.as_str()
        .ok_or_else(|| bad(format!("`{name}` must be a string, got {v}")))
}

pub(super) fn bool_of(v: &Value, name: &str) -> Result<bool, ParseError> {
    v.as_bool()
        .ok_or_else(|| bad(format!("`{name}` must be a boolean, got {v}")))
}

pub(super) fn strings<'a>(v: &'a Value, name: &str) -> Result<Vec<&'a str>, ParseError> {
    v.as_array()
        .ok_or_else(|| bad(format!("`{name}` must be an array of strings")))?
        .iter()
        .map(|s| str_of(s, name))
        .collect()
}

pub(super) fn mode_of(v: &Value) -> Result<InputMode, ParseError> {
    let name = str_of(v, "mode")?;
    InputMode::parse(name).ok_or_else(|| bad(format!("unknown input mode {name:?}")))
}

pub(super) fn reason_of(op: &Map<String, Value>) -> Result<CloseReason, ParseError> {
    match op.get("reason") {
        None => Ok(CloseReason::ExplicitClose),
        Some(v) => {
            let name = str_of(v, "reason")?;
            CloseReason::parse(name).ok_or_else(|| bad(format!("unknown close reason {name:?}")))
        }
    }
}

/// A fence from the trace. Its session id may be invalid (empty or too
/// long): such an id names no session, which the caller turns into the
/// outcome of an absent session.
pub(super) fn fence_of(v: &Value) -> Result<Option<Fence>, ParseError> {
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format!("a fence must be an object, got {v}")))?;
    let num = |name: &str| obj.get(name).map_or(Ok(0), |n| u64_of(n, name));
    let session = str_of(field(obj, "session")?, "session")?;
    let Ok(id) = Id::new(session) else {
        return Ok(None);
    };
    Ok(Some(Fence {
        session: id,
        incarnation: num("incarnation")?,
        epoch: num("epoch")?,
        turn: num("turn")?,
        response: num("response")?,
    }))
}

/// A session id from the trace; `None` if it cannot name a session.
pub(super) fn session_of(v: &Value) -> Result<Option<Id>, ParseError> {
    Ok(Id::new(str_of(v, "session")?).ok())
}

pub(super) fn ids_json<'a>(ids: impl IntoIterator<Item = &'a Id>) -> Value {
    Value::Array(ids.into_iter().map(|i| Value::from(i.as_str())).collect())
}

pub(super) fn appended_json(a: Appended) -> Value {
    json!({"seq": a.seq, "turn_seq": a.turn_seq, "turn_id": a.turn_id})
}

pub(super) fn fence_json(f: &Fence) -> Value {
    json!({
        "session": f.session.as_str(),
        "incarnation": f.incarnation,
        "epoch": f.epoch,
        "turn": f.turn,
        "response": f.response,
    })
}

pub(super) fn snapshot_json(s: &SessionView) -> Value {
    json!({
        "state": s.state.as_str(),
        "fence": fence_json(&s.fence),
        "input_seq": s.input_seq,
        "input_turn_seq": s.input_turn_seq,
        "lease_generation": s.lease_generation,
        "config_generation": s.config_generation,
        "last_activity_ms": s.last_activity.as_millis(),
        "detached_at_ms": s.detached_at.map(Instant::as_millis),
        "active_operations": ids_json(&s.active_operations),
        "bindings": s.bindings.iter().map(|(st, r)| json!([st, r.as_str()])).collect::<Vec<_>>(),
        "resources": s.resources.iter().map(|(st, r, sub)| json!([st, r.as_str(), sub.is_submitted()])).collect::<Vec<_>>(),
        "completed": ids_json(&s.completed),
        "close_reason": s.close_reason.map(CloseReason::as_str),
    })
}
