//! The realtime dialect: the OpenAI Realtime API's events as vllm-omni's
//! Realtime Duplex API extends them (`PROTOCOL.md`, "The realtime
//! dialect"), served on `/v1/realtime` and `/v1/duplex`.
//!
//! One JSON object per text message, tagged by `type`, as in the native
//! dialect; client events carry no fence (the server keeps the session's
//! epoch and turn for the client) and may carry an `event_id`, which an
//! `input_audio_buffer.append` uses as its idempotency key. Every server
//! event of a session carries `server_event_seq` (added by the session's
//! journal, `server::stream`).
//!
//! Decoding never panics: any text becomes a [`RealtimeEvent`] or a
//! [`RealtimeError`] in OpenAI's error shape.

mod audio;
mod contract;
mod hot;
mod overlap;
mod server;

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::{json, Map, Value};

pub use audio::audio_delta;
pub use contract::{contract_code, contract_codes};
pub(crate) use hot::{decode_hot, HotEvent};
pub(crate) use overlap::pcm16_ms;
pub use overlap::{overlap_decision, overlap_rule, pcm16_is_speech, AppendHints};
pub use server::{
    capabilities, heartbeat_ack, response_ended, response_opened, session_object, speech_started,
    text_delta, Commit, ResponseIds,
};
pub(crate) use server::{numberable, numberable_copy};

use super::MAX_MESSAGE;

/// The largest decoded audio chunk of one `input_audio_buffer.append`: one
/// second of 24 kHz pcm16 (what fits one 64 KiB message as base64).
pub const MAX_REALTIME_AUDIO: usize = 48_000;

/// The longest client `event_id` accepted (the contract names no limit;
/// ids of up to this many bytes are idempotency keys as given).
pub const MAX_EVENT_ID: usize = 256;

/// A client event of the realtime dialect.
///
/// ```
/// use duplex_gateway::protocol::realtime::{decode, RealtimeEvent};
///
/// let e = decode(r#"{"type":"input_audio_buffer.append","event_id":"e1","audio":"AAA="}"#)?;
/// assert_eq!(e, RealtimeEvent::Append { event_id: Some("e1".into()), audio: "AAA=".into(), transcript: None, hints: Default::default() });
/// # Ok::<(), duplex_gateway::protocol::realtime::RealtimeError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum RealtimeEvent {
    /// `session.update`: opens the session (the first) or reconfigures it.
    SessionUpdate {
        /// The client's event id.
        event_id: Option<String>,
        /// The `session` object (its `session_id`, `extra_body`, ...).
        session: Map<String, Value>,
    },
    /// `session.heartbeat`: keeps the lease.
    Heartbeat,
    /// `session.event_ack`: the client has every server event up to `seq`.
    EventAck {
        /// The last `server_event_seq` received.
        seq: u64,
    },
    /// `session.close`.
    Close,
    /// `session.resume`: re-attach a live session on this socket.
    Resume {
        /// The session.
        session_id: String,
        /// The token of the last `session.created` or `session.resumed`.
        resume_token: String,
        /// The last `server_event_seq` the client received (0: none).
        last_seq: u64,
    },
    /// `input_audio_buffer.append`: one chunk of base64 pcm16.
    Append {
        /// The client's event id: the chunk's idempotency key.
        event_id: Option<String>,
        /// The audio, base64.
        audio: String,
        /// What the chunk says, if the client knows (the contract's
        /// `transcript` hint): the commit's item carries the turn's.
        transcript: Option<String>,
        /// What the client said of the chunk for the overlap decision.
        hints: AppendHints,
    },
    /// `input_audio_buffer.commit` (or `input.commit`): the turn ends.
    Commit {
        /// The client's event id.
        event_id: Option<String>,
        /// `response_create`: start a response for this commit.
        response_create: Option<bool>,
    },
    /// `input_audio_buffer.clear`.
    Clear {
        /// The client's event id.
        event_id: Option<String>,
    },
    /// `response.create`.
    ResponseCreate {
        /// The client's event id.
        event_id: Option<String>,
    },
    /// `response.cancel` (also `output_audio_buffer.clear`,
    /// `input.cancel` and `barge_in`): barge-in.
    ResponseCancel {
        /// The client's event id.
        event_id: Option<String>,
        /// The type the client sent (for the answer).
        kind: &'static str,
    },
    /// Events clients send routinely that need no state here:
    /// `playback.ack`, `conversation.item.truncate`. Answered with their
    /// acknowledgement.
    Acknowledge {
        /// The client's event id.
        event_id: Option<String>,
        /// The type the client sent.
        kind: &'static str,
        /// The event, for the echo.
        body: Map<String, Value>,
    },
    /// A contract event the stand-in engine cannot honour (server VAD,
    /// tools, text items, turn signals): refused with the contract's
    /// error, never accepted silently.
    Unsupported {
        /// The client's event id.
        event_id: Option<String>,
        /// The error code.
        code: &'static str,
        /// Why.
        message: String,
    },
}

/// A refusal, in OpenAI's error shape:
/// `{"type":"error","error":{"type","code","message","event_id"}}`.
///
/// ```
/// use duplex_gateway::protocol::realtime::decode;
///
/// let e = decode(r#"{"type":"no.such.event","event_id":"e9"}"#).unwrap_err();
/// assert_eq!((e.code, e.event_id.as_deref()), ("unknown_event_type", Some("e9")));
/// assert!(decode("{").unwrap_err().message.len() < 300);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealtimeError {
    /// The OpenAI error class: `invalid_request_error`, `server_error`,
    /// `rate_limit_error`.
    pub class: &'static str,
    /// The code: the contract's where it names one, else the gateway's
    /// error kind.
    pub code: &'static str,
    /// What was expected.
    pub message: String,
    /// The refused event's `event_id`.
    pub event_id: Option<String>,
}

impl RealtimeError {
    /// An `invalid_request_error`.
    ///
    /// ```
    /// use duplex_gateway::protocol::realtime::RealtimeError;
    ///
    /// let e = RealtimeError::invalid("no_session", "open one first", Some("e1".into()));
    /// assert_eq!((e.class, e.code), ("invalid_request_error", "no_session"));
    /// ```
    pub fn invalid(
        code: &'static str,
        message: impl Into<String>,
        event_id: Option<String>,
    ) -> Self {
        RealtimeError {
            class: "invalid_request_error",
            code,
            message: message.into(),
            event_id,
        }
    }

    /// The error event.
    ///
    /// ```
    /// use duplex_gateway::protocol::realtime::RealtimeError;
    ///
    /// let v = RealtimeError::invalid("no_session", "open one first", None).to_value();
    /// assert_eq!((v["type"].as_str(), v["error"]["code"].as_str()), (Some("error"), Some("no_session")));
    /// ```
    pub fn to_value(&self) -> Value {
        json!({
            "type": "error",
            "error": {
                "type": self.class,
                "code": self.code,
                "message": self.message,
                "event_id": self.event_id,
            }
        })
    }
}

/// The OpenAI error class of one of the gateway's error kinds, and the
/// contract's code for it where the contract names one.
///
/// ```
/// use duplex_gateway::protocol::realtime::error_for;
///
/// assert_eq!(error_for("capacity_exhausted"), ("rate_limit_error", "duplex_session_busy"));
/// assert_eq!(error_for("fence_mismatch"), ("invalid_request_error", "fence_mismatch"));
/// ```
pub fn error_for(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "capacity_exhausted" | "full" => ("rate_limit_error", "duplex_session_busy"),
        "rate_limited" => ("rate_limit_error", "rate_limited"),
        "input_backpressure" => ("rate_limit_error", "input_backpressure"),
        "resume_refused" => ("invalid_request_error", "session_resume_expired"),
        "internal" | "unavailable" => ("server_error", leak_kind(kind)),
        other => ("invalid_request_error", leak_kind(other)),
    }
}

/// The gateway's kinds as `'static` codes (every kind the server reports
/// is one of these; anything else is `invalid_request`).
fn leak_kind(kind: &str) -> &'static str {
    const KINDS: &[&str] = &[
        "malformed",
        "unknown_type",
        "too_large",
        "binary_unsupported",
        "invalid_audio",
        "invalid_id",
        "no_session",
        "already_open",
        "fence_mismatch",
        "resume_refused",
        "generation_mismatch",
        "forbidden",
        "rate_limited",
        "internal",
        "unavailable",
        "state_lost",
        "session_moved",
        "session_exists",
        "wrong_state",
        "unknown_session",
        "stale_reservation",
        "operation_reused",
        "full",
    ];
    KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .unwrap_or("invalid_request")
}

/// A field of the event: absent, or of the wrong type.
fn field<'a>(body: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    body.get(name).filter(|v| !v.is_null())
}

fn string_field(
    body: &Map<String, Value>,
    name: &str,
    event_id: Option<&String>,
) -> Result<Option<String>, RealtimeError> {
    match field(body, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RealtimeError::invalid(
            "invalid_value",
            format!("`{name}` must be a string"),
            event_id.cloned(),
        )),
    }
}

fn required_string(
    body: &Map<String, Value>,
    name: &str,
    event_id: Option<&String>,
) -> Result<String, RealtimeError> {
    string_field(body, name, event_id)?.ok_or_else(|| {
        RealtimeError::invalid(
            "missing_required_parameter",
            format!("`{name}` is required"),
            event_id.cloned(),
        )
    })
}

/// Decodes one text message of the realtime dialect.
///
/// # Errors
///
/// A [`RealtimeError`]: `too_large`, `invalid_json`, `unknown_event_type`,
/// `missing_required_parameter`, `invalid_value`.
pub fn decode(text: &str) -> Result<RealtimeEvent, RealtimeError> {
    if let Some(event) = decode_hot(text) {
        return Ok(event.into_owned());
    }
    decode_tree(text)
}

/// The largest `session.update` interpreted: the configuration may carry
/// a reference voice (`ref_audio`, a data URL: 5 s of speech is about
/// 230 KB) or a video frame (about 80 KB), so it may be as large as the
/// transport reads ([`MAX_FRAME`](super::MAX_FRAME), 1 MiB). Every other
/// event keeps [`MAX_MESSAGE`].
///
/// ```
/// use duplex_gateway::protocol::{realtime::MAX_SESSION_UPDATE, MAX_FRAME, MAX_MESSAGE};
/// assert!(MAX_SESSION_UPDATE > MAX_MESSAGE && MAX_SESSION_UPDATE <= MAX_FRAME);
/// ```
pub const MAX_SESSION_UPDATE: usize = super::MAX_FRAME;

/// Whether `text` is a `session.update` (read for its `type` alone).
fn is_session_update(text: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
    }
    serde_json::from_str::<Kind<'_>>(text).is_ok_and(|k| k.kind == "session.update")
}

/// The full decoder: the message as a JSON tree, every field checked.
pub(crate) fn decode_tree(text: &str) -> Result<RealtimeEvent, RealtimeError> {
    let configuration = text.len() <= MAX_SESSION_UPDATE && is_session_update(text);
    if text.len() > MAX_MESSAGE && !configuration {
        return Err(RealtimeError::invalid(
            "too_large",
            format!(
                "message of {} bytes; the limit is {MAX_MESSAGE}",
                text.len()
            ),
            None,
        ));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        RealtimeError::invalid(
            "invalid_json",
            crate::protocol::prefix(&format!("expected one JSON object per message: {e}")),
            None,
        )
    })?;
    let Value::Object(body) = value else {
        return Err(RealtimeError::invalid(
            "invalid_json",
            "expected a JSON object with a string `type`",
            None,
        ));
    };
    let event_id = match field(&body, "event_id") {
        None => None,
        Some(Value::String(s)) if s.len() <= MAX_EVENT_ID => Some(s.clone()),
        Some(Value::String(s)) => {
            return Err(RealtimeError::invalid(
                "invalid_value",
                format!(
                    "`event_id` of {} bytes; the limit is {MAX_EVENT_ID}",
                    s.len()
                ),
                None,
            ))
        }
        Some(_) => {
            return Err(RealtimeError::invalid(
                "invalid_value",
                "`event_id` must be a string",
                None,
            ))
        }
    };
    let Some(Value::String(kind)) = body.get("type") else {
        return Err(RealtimeError::invalid(
            "missing_required_parameter",
            "`type` is required and must be a string",
            event_id,
        ));
    };
    let kind = kind.clone();
    Ok(match kind.as_str() {
        "session.update" => {
            let session = match field(&body, "session") {
                None => Map::new(),
                Some(Value::Object(s)) => s.clone(),
                Some(_) => {
                    return Err(RealtimeError::invalid(
                        "invalid_value",
                        "`session` must be an object",
                        event_id,
                    ))
                }
            };
            if let Some(refusal) = unsupported_session(&session, event_id.as_ref()) {
                return Ok(refusal);
            }
            RealtimeEvent::SessionUpdate { event_id, session }
        }
        "session.heartbeat" => RealtimeEvent::Heartbeat,
        "session.event_ack" => {
            let seq = field(&body, "server_event_seq")
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    RealtimeError::invalid(
                        "missing_required_parameter",
                        "`server_event_seq` (a non-negative integer) is required",
                        event_id.clone(),
                    )
                })?;
            RealtimeEvent::EventAck { seq }
        }
        "session.close" | "close_session" | "close" | "session_close" => RealtimeEvent::Close,
        "session.resume" => RealtimeEvent::Resume {
            session_id: required_string(&body, "session_id", event_id.as_ref())?,
            resume_token: required_string(&body, "resume_token", event_id.as_ref())?,
            last_seq: match field(&body, "last_received_server_event_seq") {
                None => 0,
                Some(v) => v.as_u64().ok_or_else(|| {
                    RealtimeError::invalid(
                        "invalid_value",
                        "`last_received_server_event_seq` must be a non-negative integer",
                        event_id.clone(),
                    )
                })?,
            },
        },
        "input_audio_buffer.append" | "input.audio.append" | "push_chunk" => {
            let audio = required_string(&body, "audio", event_id.as_ref())?;
            // A hint of another type is ignored, as the contract does.
            let transcript = field(&body, "transcript")
                .and_then(Value::as_str)
                .map(str::to_owned);
            RealtimeEvent::Append {
                event_id,
                audio,
                transcript,
                hints: AppendHints::of(&body),
            }
        }
        "input_audio_buffer.commit" | "input.commit" => {
            let response_create = match field(&body, "response_create") {
                None => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => {
                    return Err(RealtimeError::invalid(
                        "invalid_value",
                        "`response_create` must be a boolean",
                        event_id,
                    ))
                }
            };
            RealtimeEvent::Commit {
                event_id,
                response_create,
            }
        }
        "input_audio_buffer.clear" => RealtimeEvent::Clear { event_id },
        "response.create" => {
            if let Some(Value::Object(response)) = field(&body, "response") {
                if response.get("tools").is_some_and(|t| t.as_array().is_some_and(|a| !a.is_empty())) {
                    return Ok(RealtimeEvent::Unsupported {
                        event_id,
                        code: "unsupported_tools",
                        message: "tools are not supported: this gateway's engine makes no tool calls".into(),
                    });
                }
            }
            RealtimeEvent::ResponseCreate { event_id }
        }
        "response.cancel" => RealtimeEvent::ResponseCancel {
            event_id,
            kind: "response.cancel",
        },
        "output_audio_buffer.clear" => RealtimeEvent::ResponseCancel {
            event_id,
            kind: "output_audio_buffer.clear",
        },
        "input.cancel" => RealtimeEvent::ResponseCancel {
            event_id,
            kind: "input.cancel",
        },
        "playback.ack" | "audio.playback_ack" => RealtimeEvent::Acknowledge {
            event_id,
            kind: "playback.ack",
            body,
        },
        "conversation.item.truncate" => RealtimeEvent::Acknowledge {
            event_id,
            kind: "conversation.item.truncate",
            body,
        },
        "barge_in" => RealtimeEvent::ResponseCancel {
            event_id,
            kind: "barge_in",
        },
        "turn.signal" | "signal_turn" => RealtimeEvent::Unsupported {
            event_id,
            code: "unsupported_capability",
            message: format!(
                "`{kind}` is not supported: this gateway takes no turn signals; send barge_in or response.cancel to interrupt, input_audio_buffer.commit to end a turn"
            ),
        },
        "conversation.item.create"
        | "conversation.item.retrieve"
        | "conversation.item.delete"
        | "input.text.append"
        | "input_text.append"
        | "push_text" => RealtimeEvent::Unsupported {
            event_id,
            code: "unsupported_event",
            message: format!(
                "`{kind}` is not supported: this gateway's engine keeps no conversation items; send audio and commit"
            ),
        },
        other => {
            return Err(RealtimeError::invalid(
                "unknown_event_type",
                format!("unknown event type `{}`", crate::protocol::prefix(other)),
                event_id,
            ))
        }
    })
}

/// A `session.update` asking for what the stand-in engine cannot do.
fn unsupported_session(
    session: &Map<String, Value>,
    event_id: Option<&String>,
) -> Option<RealtimeEvent> {
    let vad = session
        .get("turn_detection")
        .or_else(|| {
            session
                .get("audio")
                .and_then(|a| a.pointer("/input/turn_detection"))
        })
        .filter(|v| !v.is_null());
    if vad.is_some() {
        return Some(RealtimeEvent::Unsupported {
            event_id: event_id.cloned(),
            code: "unsupported_turn_detection",
            message: "turn_detection is not supported: this gateway runs no VAD; use turn_detection=null and commit each turn".into(),
        });
    }
    if session
        .get("tools")
        .is_some_and(|t| t.as_array().is_some_and(|a| !a.is_empty()))
    {
        return Some(RealtimeEvent::Unsupported {
            event_id: event_id.cloned(),
            code: "unsupported_tools",
            message: "tools are not supported: this gateway's engine makes no tool calls".into(),
        });
    }
    None
}

/// Decodes an append's audio (standard base64, at most
/// [`MAX_REALTIME_AUDIO`] bytes).
///
/// ```
/// use duplex_gateway::protocol::realtime::decode_audio;
///
/// assert_eq!(decode_audio("AAEC", None)?, vec![0, 1, 2]);
/// assert_eq!(decode_audio("!!", Some("e1")).unwrap_err().code, "invalid_audio");
/// # Ok::<(), duplex_gateway::protocol::realtime::RealtimeError>(())
/// ```
///
/// # Errors
///
/// `invalid_audio`.
pub fn decode_audio(audio: &str, event_id: Option<&str>) -> Result<Vec<u8>, RealtimeError> {
    let mut out = Vec::new();
    decode_audio_into(audio, event_id, &mut out)?;
    Ok(out)
}

/// Decodes an append's audio into `out`, replacing what it held and
/// reusing its allocation (a connection decodes every chunk into the
/// same buffer).
///
/// ```
/// let mut chunk = vec![9; 8];
/// duplex_gateway::protocol::realtime::decode_audio_into("AAEC", None, &mut chunk)?;
/// assert_eq!(chunk, [0, 1, 2]);
/// # Ok::<(), duplex_gateway::protocol::realtime::RealtimeError>(())
/// ```
///
/// # Errors
///
/// `invalid_audio`; `out` is left empty.
pub fn decode_audio_into(
    audio: &str,
    event_id: Option<&str>,
    out: &mut Vec<u8>,
) -> Result<(), RealtimeError> {
    out.clear();
    let refuse = |why: String| {
        RealtimeError::invalid(
            "invalid_audio",
            format!(
                "audio must be standard padded base64 of at most {MAX_REALTIME_AUDIO} bytes: {why}"
            ),
            event_id.map(str::to_owned),
        )
    };
    if audio.len() > MAX_REALTIME_AUDIO.div_ceil(3) * 4 {
        return Err(refuse(format!("{} characters of base64", audio.len())));
    }
    base64::engine::general_purpose::STANDARD
        .decode_vec(audio, out)
        .map_err(|e| {
            out.clear();
            refuse(e.to_string())
        })
}

#[cfg(test)]
mod tests;
