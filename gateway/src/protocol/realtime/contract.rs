//! Where vllm-omni's duplex contract names a refusal otherwise than
//! OpenAI's Realtime API. The realtime dialect speaks OpenAI's codes on
//! plain `/v1/realtime` and the contract's on `/v1/duplex` and
//! `/v1/realtime?duplex=1`.

use serde_json::Value;

/// OpenAI's code (or the gateway's own) and the contract's for the same
/// refusal.
const CODES: [(&str, &str); 5] = [
    (
        "input_audio_buffer_commit_empty",
        "input_audio_buffer_empty",
    ),
    ("response_cancel_not_active", "response_not_active"),
    (
        "conversation_already_has_active_response",
        "response_already_active",
    ),
    ("duplex_session_busy", "resource_exhausted"),
    ("too_large", "event_too_large"),
];

/// The contract's code for `event`, an `error` whose code the contract
/// names otherwise; `None` for any other event.
///
/// ```
/// use duplex_gateway::protocol::realtime::{contract_code, RealtimeError};
///
/// let empty = RealtimeError::invalid("input_audio_buffer_commit_empty", "no audio", None);
/// assert_eq!(contract_code(&empty.to_value()), Some("input_audio_buffer_empty"));
/// let json = RealtimeError::invalid("invalid_json", "not JSON", None);
/// assert_eq!(contract_code(&json.to_value()), None);
/// ```
#[must_use]
pub fn contract_code(event: &Value) -> Option<&'static str> {
    if event.get("type")? != "error" {
        return None;
    }
    let code = event.get("error")?.get("code")?.as_str()?;
    CODES
        .iter()
        .find(|(ours, _)| *ours == code)
        .map(|(_, theirs)| *theirs)
}

/// Renames `event`'s code to the contract's, if the contract names it
/// otherwise.
///
/// ```
/// use duplex_gateway::protocol::realtime::{contract_codes, RealtimeError};
///
/// let mut busy = RealtimeError::invalid("duplex_session_busy", "full", None).to_value();
/// contract_codes(&mut busy);
/// assert_eq!(busy["error"]["code"], "resource_exhausted");
/// ```
pub fn contract_codes(event: &mut Value) {
    if let Some(code) = contract_code(event) {
        event["error"]["code"] = Value::from(code);
    }
}
