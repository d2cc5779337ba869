//! The realtime dialect's audio output events.

use serde_json::json;

use super::ResponseIds;

/// A piece of a response's audio (`response.output_audio.delta`), already
/// base64-encoded: the text of one JSON object.
///
/// ```
/// use duplex_gateway::protocol::realtime::{audio_delta, ResponseIds};
///
/// let d: serde_json::Value = serde_json::from_str(&audio_delta(&ResponseIds::of("r1"), "AAA="))?;
/// assert_eq!(d["type"], "response.output_audio.delta");
/// assert_eq!((d["response_id"].as_str(), d["delta"].as_str()), (Some("resp_r1"), Some("AAA=")));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[must_use]
pub fn audio_delta(ids: &ResponseIds, base64: &str) -> String {
    json!({
        "type": "response.output_audio.delta",
        "response_id": ids.response,
        "item_id": ids.item,
        "output_index": 0,
        "content_index": 0,
        "delta": base64,
    })
    .to_string()
}
