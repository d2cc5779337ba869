//! Overlap on the wire: what a client says of an appended chunk (its
//! speech hints and overlap requests, as vllm-omni's serving layer reads
//! them), a session's overlap rule from its `session.update`, a chunk's
//! energy, and the `overlap.decision` event.
//!
//! The decision itself is the core's
//! ([`duplex_core::overlap`]); this module only reads and writes the wire.

use duplex_core::overlap::{
    Forced, OverlapAction, OverlapConfig, OverlapDecision, OverlapPolicy, OverlapRequest,
};
use serde_json::{json, Map, Value};

use super::RealtimeError;

/// What a client said of one appended chunk, for the overlap decision:
/// the release's hint keys (`duration_ms`, `audio_duration_ms`,
/// `is_speech`, `speech`, `vad`,
/// `speech_probability`, `overlap_action`, `overlap`, `force_barge_in`,
/// `force_listen`), read as its serving layer reads them (a hint of
/// another type is no hint). The chunk's `transcript` is the append's own
/// field.
///
/// ```
/// use duplex_core::overlap::{Forced, OverlapRequest};
/// use duplex_gateway::protocol::realtime::{decode, AppendHints, RealtimeEvent};
///
/// let e = decode(r#"{"type":"input_audio_buffer.append","audio":"AAA=","is_speech":false,"overlap_action":"interrupt","force_listen":1}"#)?;
/// let RealtimeEvent::Append { hints, .. } = e else { unreachable!() };
/// assert_eq!(hints, AppendHints {
///     speech: Some(false),
///     request: Some(OverlapRequest::BargeIn),
///     forced: Some(Forced::Listen),
///     vad_speech_started: None,
///     duration_ms: None,
/// });
/// # Ok::<(), duplex_gateway::protocol::realtime::RealtimeError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendHints {
    /// Whether the chunk is speech, if the client said: `is_speech`,
    /// `speech`, `vad.is_speech`, or a speech probability of at least 0.5
    /// (`vad.speech_probability`, `vad.probability`,
    /// `speech_probability`), the first that is given.
    pub speech: Option<bool>,
    /// `overlap_action` (else `overlap`), if it names a request.
    pub request: Option<OverlapRequest>,
    /// `force_barge_in` or `force_listen`, if either is truthy.
    pub forced: Option<Forced>,
    /// `vad.speech_started`, if a boolean.
    pub vad_speech_started: Option<bool>,
    /// How long the chunk plays, if the client said (`duration_ms`, else
    /// `audio_duration_ms`; vllm-omni's client sends it with every chunk,
    /// and its input rate may not be 16 kHz).
    pub duration_ms: Option<u32>,
}

/// The hint keys: an append with any of them goes to the full decoder,
/// which reads them all.
#[cfg(test)]
pub(crate) const HINT_KEYS: [&str; 10] = [
    "duration_ms",
    "audio_duration_ms",
    "is_speech",
    "speech",
    "speech_probability",
    "vad",
    "overlap_action",
    "overlap",
    "force_barge_in",
    "force_listen",
];

/// Python's truth of a JSON value, as the release tests its flags.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// A duration, read as the release reads it: any number (a boolean is
/// one in Python), truncated, at least 0.
fn millis(value: Option<&Value>) -> Option<u32> {
    match value? {
        Value::Bool(b) => Some(u32::from(*b)),
        Value::Number(n) => {
            let ms = n.as_f64()?.trunc().max(0.0);
            // Saturating: a float past u32 becomes u32::MAX.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Some(ms.min(f64::from(u32::MAX)) as u32)
        }
        _ => None,
    }
}

/// A probability of speech, read as the release reads it.
fn probable(value: Option<&Value>) -> Option<bool> {
    value.and_then(Value::as_f64).map(|p| p >= 0.5)
}

impl AppendHints {
    /// The hints of an append's body.
    pub(crate) fn of(body: &Map<String, Value>) -> Self {
        let vad = body.get("vad").and_then(Value::as_object);
        let speech = ["is_speech", "speech"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_bool))
            .or_else(|| {
                let vad = vad?;
                vad.get("is_speech").and_then(Value::as_bool).or_else(|| {
                    // `vad.get("speech_probability", vad.get("probability"))`:
                    // the first key present, whatever its value.
                    let key = if vad.contains_key("speech_probability") {
                        "speech_probability"
                    } else {
                        "probability"
                    };
                    probable(vad.get(key))
                })
            })
            .or_else(|| probable(body.get("speech_probability")));
        // `event.get("overlap_action") or event.get("overlap")`.
        let action = body.get("overlap_action");
        let explicit = if truthy(action) {
            action
        } else {
            body.get("overlap")
        };
        AppendHints {
            speech,
            request: explicit
                .and_then(Value::as_str)
                .and_then(OverlapRequest::parse),
            forced: Forced::from_flags(
                truthy(body.get("force_barge_in")),
                truthy(body.get("force_listen")),
            ),
            vad_speech_started: vad
                .and_then(|v| v.get("speech_started"))
                .and_then(Value::as_bool),
            duration_ms: ["duration_ms", "audio_duration_ms"]
                .iter()
                .find_map(|k| millis(body.get(*k))),
        }
    }
}

/// Whether 16-bit little-endian PCM is speech by its energy: a root mean
/// square of at least 0.003 of full scale (the release's
/// `overlap_silence_rms`). Audio that is not whole samples counts as
/// speech, none as silence, as there.
///
/// ```
/// use duplex_gateway::protocol::realtime::pcm16_is_speech;
///
/// assert!(!pcm16_is_speech(&[0; 640]));
/// assert!(pcm16_is_speech(&[0x00, 0x10].repeat(320)));
/// assert!(!pcm16_is_speech(&[]));
/// ```
#[must_use]
pub fn pcm16_is_speech(pcm: &[u8]) -> bool {
    if pcm.is_empty() {
        return false;
    }
    if !pcm.len().is_multiple_of(2) {
        return true;
    }
    // mean(s²) >= (0.003 · 32768)², in integers: Σs² · 10⁶ >= n · 9 · 32768².
    let squares: u128 = pcm
        .chunks_exact(2)
        .map(|s| u128::from(i16::from_le_bytes([s[0], s[1]]).unsigned_abs()).pow(2))
        .sum();
    let samples = (pcm.len() / 2) as u128;
    squares * 1_000_000 >= samples * 9 * 32_768 * 32_768
}

/// How long a chunk of 16 kHz pcm16 plays, in ms (the contract's default
/// input format).
#[must_use]
pub(crate) fn pcm16_ms(pcm: &[u8]) -> u32 {
    u32::try_from(pcm.len() / 32).unwrap_or(u32::MAX)
}

/// A session's overlap rule from a `session` object: `overlap_policy`,
/// `overlap_short_ack_ms` and `overlap_barge_in_ms`, at the top level or
/// in `extra_body` (which wins), as the release reads them; `None` if the
/// object names none of them.
///
/// # Errors
///
/// `invalid_value` for a policy that is not `listen_only`,
/// `barge_in_on_speech` or `thresholds`, or a threshold that is not an
/// integer in `0..=65535` ms (the release turns an unknown policy into
/// `listen_only`; here the client is told).
///
/// ```
/// use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
/// use duplex_gateway::protocol::realtime::overlap_rule;
///
/// let session = serde_json::json!({"extra_body": {"overlap_policy": "thresholds", "overlap_barge_in_ms": 900}});
/// let rule = overlap_rule(session.as_object().unwrap(), OverlapConfig::DEFAULT)?;
/// assert_eq!(rule, Some(OverlapConfig::new(OverlapPolicy::Thresholds, 700, 900)));
/// let bad = serde_json::json!({"overlap_policy": "shout"});
/// assert_eq!(overlap_rule(bad.as_object().unwrap(), OverlapConfig::DEFAULT).unwrap_err().code, "invalid_value");
/// # Ok::<(), duplex_gateway::protocol::realtime::RealtimeError>(())
/// ```
pub fn overlap_rule(
    session: &Map<String, Value>,
    current: OverlapConfig,
) -> Result<Option<OverlapConfig>, RealtimeError> {
    let extra = session.get("extra_body").and_then(Value::as_object);
    let get = |key: &str| {
        extra
            .and_then(|e| e.get(key))
            .or_else(|| session.get(key))
            .filter(|v| !v.is_null())
    };
    let keys = [
        "overlap_policy",
        "overlap_short_ack_ms",
        "overlap_barge_in_ms",
    ];
    if keys.iter().all(|k| get(k).is_none()) {
        return Ok(None);
    }
    let policy = match get("overlap_policy") {
        None => current.policy,
        Some(v) => v.as_str().and_then(OverlapPolicy::parse).ok_or_else(|| {
            RealtimeError::invalid(
                "invalid_value",
                format!("`overlap_policy` must be \"listen_only\", \"barge_in_on_speech\" or \"thresholds\", got {v}"),
                None,
            )
        })?,
    };
    let ms = |key: &str, current: u16| match get(key) {
        None => Ok(current),
        Some(v) => v
            .as_u64()
            .and_then(|ms| u16::try_from(ms).ok())
            .ok_or_else(|| {
                RealtimeError::invalid(
                    "invalid_value",
                    format!("`{key}` must be an integer number of ms in 0..=65535, got {v}"),
                    None,
                )
            }),
    };
    Ok(Some(OverlapConfig::new(
        policy,
        ms("overlap_short_ack_ms", current.short_ack_ms)?,
        ms("overlap_barge_in_ms", current.barge_in_ms)?,
    )))
}

/// The `overlap.decision` event of the contract, rendered: the decision,
/// and in `metadata` all of it, as the release sends it.
///
/// ```
/// use duplex_core::overlap::*;
/// use duplex_gateway::protocol::realtime::overlap_decision;
///
/// let d = OverlapDecision {
///     action: OverlapAction::Listen, reason: OverlapReason::ShortAck, duration_ms: 300,
///     overlap_speech_ms: 300, buffer_audio: true, defer_append: true, force_listen: true,
/// };
/// let e: serde_json::Value = serde_json::from_str(&overlap_decision("s1", 2, OverlapPolicy::Thresholds, &d))?;
/// assert_eq!((e["type"].as_str(), e["action"].as_str(), e["epoch"].as_u64()), (Some("overlap.decision"), Some("listen"), Some(2)));
/// assert_eq!(e["metadata"]["overlap_speech_ms"], 300);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[must_use]
pub fn overlap_decision(
    session_id: &str,
    epoch: u64,
    policy: OverlapPolicy,
    d: &OverlapDecision,
) -> String {
    let head = json!({
        "type": "overlap.decision",
        "session_id": session_id,
        "epoch": epoch,
        "policy": policy.as_str(),
        "action": d.action.as_str(),
        "reason": d.reason.as_str(),
    });
    let mut metadata = head.clone();
    metadata["duration_ms"] = Value::from(d.duration_ms);
    metadata["overlap_speech_ms"] = Value::from(d.overlap_speech_ms);
    metadata["buffer_audio"] = Value::from(d.buffer_audio);
    if d.action == OverlapAction::Listen {
        metadata["defer_runtime_append"] = Value::from(d.defer_append);
        metadata["force_listen"] = Value::from(d.force_listen);
    }
    let mut event = head;
    event["metadata"] = metadata;
    event.to_string()
}
