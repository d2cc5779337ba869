//! The realtime dialect's server events, as the contract orders them
//! (their `server_event_seq` is added by the session's journal).

use serde::Serialize;
use serde_json::{json, Map, Value};

/// Room every rendered event leaves after its text for the
/// `,"server_event_seq":N` the session's stream appends (20 digits at
/// most), so numbering an event never moves it to a bigger allocation.
pub(crate) const SEQ_ROOM: usize = 40;

/// The first allocation of a rendered event: most fit it (a text delta
/// is about 250 bytes), and a bigger one grows once or twice.
const RENDERED: usize = 320;

/// The session's capabilities, as `session.created` reports them, with
/// the engine's unit of input (`chunk_period_ms`; `null` if it has none).
///
/// ```
/// let c = duplex_gateway::protocol::realtime::capabilities(Some(80));
/// assert_eq!(c["supports_session_resume"], true);
/// assert_eq!(c["supports_barge_in"], true);
/// assert_eq!(c["session_admission_mode"], "serving_managed");
/// assert_eq!(c["chunk_period_ms"], 80);
/// assert!(duplex_gateway::protocol::realtime::capabilities(None)["chunk_period_ms"].is_null());
/// ```
pub fn capabilities(chunk_period_ms: Option<u32>) -> Value {
    json!({
        "implementation_level": "serving_session_adapter",
        "supports_input_append": true,
        "supports_barge_in": true,
        "supports_session_resume": true,
        "supports_session_lease": true,
        "supports_multi_session": true,
        // The gateway admits sessions itself (its --max-sessions), as the
        // release's serving layer does.
        "session_admission_mode": "serving_managed",
        "supports_audio_truncate": false,
        "chunk_period_ms": chunk_period_ms,
        "input_modes": ["append_audio_chunk"],
    })
}

/// The `session` object of `session.created` and `session.updated`.
///
/// ```
/// use duplex_gateway::protocol::realtime::session_object;
///
/// let s = session_object("call-1", 2, 5, &serde_json::Map::new(), None);
/// assert_eq!((s["id"].as_str(), s["epoch"].as_u64(), s["turn_id"].as_u64()), (Some("call-1"), Some(2), Some(5)));
/// assert!(s["turn_detection"].is_null());
/// ```
pub fn session_object(
    id: &str,
    epoch: u64,
    turn: u64,
    config: &Map<String, Value>,
    chunk_period_ms: Option<u32>,
) -> Value {
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
        "capabilities": capabilities(chunk_period_ms),
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

/// A content part of an item.
#[derive(Serialize)]
#[serde(tag = "type")]
enum Part<'a> {
    #[serde(rename = "output_text")]
    OutputText { text: &'a str },
    #[serde(rename = "input_audio")]
    InputAudio { transcript: Option<&'a str> },
    #[serde(rename = "text")]
    Text { text: &'a str },
}

/// A `realtime.item` of the conversation.
#[derive(Serialize)]
struct Item<'a> {
    id: &'a str,
    object: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    status: &'a str,
    content: &'a [Part<'a>],
}

impl<'a> Item<'a> {
    fn assistant(ids: &'a ResponseIds, status: &'a str, content: &'a [Part<'a>]) -> Self {
        Item {
            id: &ids.item,
            object: "realtime.item",
            kind: "message",
            role: "assistant",
            status,
            content,
        }
    }
}

/// `status_details` of a response that did not complete.
#[derive(Serialize)]
struct Details<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    reason: &'a str,
}

/// The duplex event a `response.created` carries in its metadata.
#[derive(Serialize)]
struct Metadata<'a> {
    duplex_event: DuplexCreated<'a>,
}

#[derive(Serialize)]
struct DuplexCreated<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    response_id: &'a str,
    epoch: u64,
    turn_id: u64,
}

/// A `realtime.response`.
#[derive(Serialize)]
struct Response<'a> {
    id: &'a str,
    object: &'static str,
    status: &'a str,
    status_details: Option<Details<'a>>,
    output: &'a [Item<'a>],
    modalities: [&'static str; 1],
    output_modalities: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
}

impl<'a> Response<'a> {
    fn text(id: &'a str, status: &'a str, output: &'a [Item<'a>]) -> Self {
        Response {
            id,
            object: "realtime.response",
            status,
            status_details: None,
            output,
            modalities: ["text"],
            output_modalities: ["text"],
            metadata: None,
        }
    }
}

/// The native `input.committed` a commit's answer wraps.
#[derive(Serialize)]
struct InputCommitted {
    #[serde(rename = "type")]
    kind: &'static str,
    turn_id: u64,
    epoch: u64,
}

/// The server events of responses and commits, typed: rendered by serde
/// straight to text (a response is a dozen events; building each as a
/// JSON tree first cost more than sending it).
#[derive(Serialize)]
#[serde(tag = "type")]
enum Event<'a> {
    #[serde(rename = "response.created")]
    ResponseCreated {
        response_id: &'a str,
        response: Response<'a>,
    },
    #[serde(rename = "conversation.item.added")]
    ItemAdded {
        previous_item_id: Option<&'a str>,
        item: &'a Item<'a>,
    },
    #[serde(rename = "conversation.item.created")]
    ItemCreated {
        previous_item_id: Option<&'a str>,
        item: &'a Item<'a>,
    },
    #[serde(rename = "conversation.item.done")]
    ItemDone {
        previous_item_id: Option<&'a str>,
        item: &'a Item<'a>,
    },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        response_id: &'a str,
        output_index: u32,
        item: &'a Item<'a>,
    },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        response_id: &'a str,
        output_index: u32,
        item: &'a Item<'a>,
    },
    #[serde(rename = "response.content_part.added")]
    PartAdded {
        response_id: &'a str,
        item_id: &'a str,
        output_index: u32,
        content_index: u32,
        part: Part<'a>,
    },
    #[serde(rename = "response.content_part.done")]
    PartDone {
        response_id: &'a str,
        item_id: &'a str,
        output_index: u32,
        content_index: u32,
        part: Part<'a>,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        response_id: &'a str,
        item_id: &'a str,
        output_index: u32,
        content_index: u32,
        delta: &'a str,
    },
    #[serde(rename = "response.output_text.done")]
    TextDone {
        response_id: &'a str,
        item_id: &'a str,
        output_index: u32,
        content_index: u32,
        text: &'a str,
    },
    #[serde(rename = "response.done")]
    ResponseDone {
        response_id: &'a str,
        response: Response<'a>,
    },
    #[serde(rename = "rate_limits.updated")]
    RateLimits { rate_limits: [(); 0] },
    #[serde(rename = "input_audio_buffer.committed")]
    Committed {
        previous_item_id: Option<&'a str>,
        item_id: &'a str,
        event: InputCommitted,
    },
    #[serde(rename = "input_audio_buffer.speech_started")]
    SpeechStarted {
        audio_start_ms: u64,
        item_id: &'a str,
    },
    #[serde(rename = "input_audio_buffer.speech_stopped")]
    SpeechStopped { audio_end_ms: u64, item_id: &'a str },
    #[serde(rename = "conversation.item.input_audio_transcription.completed")]
    Transcribed {
        item_id: &'a str,
        content_index: u32,
        transcript: &'a str,
    },
}

impl Event<'_> {
    /// The event's JSON text. Every field is a string, a number, a bool,
    /// null or a sequence of those, which always serialises.
    /// It leaves [`SEQ_ROOM`] bytes free after the text.
    fn render(&self) -> String {
        with_room(self)
    }
}

/// The JSON text of `event`, leaving [`SEQ_ROOM`] bytes free after it
/// for the stream to number it in place.
pub(crate) fn numberable(event: &Value) -> String {
    with_room(event)
}

/// A copy of the rendered event `text`, with [`SEQ_ROOM`] bytes free
/// after it: an answer rendered once and sent many times (a session's
/// `session.heartbeat_ack`) is numbered without a reallocation.
pub(crate) fn numberable_copy(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + SEQ_ROOM);
    out.push_str(text);
    out
}

/// `value`'s JSON text with [`SEQ_ROOM`] bytes free after it; empty for
/// a value that does not serialise (every event here does: its fields
/// are strings, numbers, bools, nulls and sequences of those).
fn with_room(value: &impl Serialize) -> String {
    let mut out = Vec::with_capacity(RENDERED);
    if serde_json::to_writer(&mut out, value).is_err() {
        return String::new();
    }
    out.reserve(SEQ_ROOM);
    String::from_utf8(out).unwrap_or_default()
}

/// The events that open a response, in the contract's order:
/// `response.created`, `conversation.item.added` and `.created`,
/// `response.output_item.added`, `response.content_part.added`; each the
/// text of one JSON object.
///
/// ```
/// use duplex_gateway::protocol::realtime::{response_opened, ResponseIds};
///
/// let events = response_opened(&ResponseIds::of("r1"), 0, 3);
/// let first: serde_json::Value = serde_json::from_str(&events[0])?;
/// let last: serde_json::Value = serde_json::from_str(&events[4])?;
/// assert_eq!(first["type"], "response.created");
/// assert_eq!(first["response"]["metadata"]["duplex_event"]["turn_id"], 3);
/// assert_eq!(last["type"], "response.content_part.added");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn response_opened(ids: &ResponseIds, epoch: u64, turn: u64) -> Vec<String> {
    let item = &Item::assistant(ids, "in_progress", &[]);
    let mut response = Response::text(&ids.response, "in_progress", &[]);
    response.metadata = Some(Metadata {
        duplex_event: DuplexCreated {
            kind: "response.created",
            response_id: &ids.response,
            epoch,
            turn_id: turn,
        },
    });
    [
        Event::ResponseCreated {
            response_id: &ids.response,
            response,
        },
        Event::ItemAdded {
            previous_item_id: None,
            item,
        },
        Event::ItemCreated {
            previous_item_id: None,
            item,
        },
        Event::OutputItemAdded {
            response_id: &ids.response,
            output_index: 0,
            item,
        },
        Event::PartAdded {
            response_id: &ids.response,
            item_id: &ids.item,
            output_index: 0,
            content_index: 0,
            part: Part::Text { text: "" },
        },
    ]
    .iter()
    .map(Event::render)
    .collect()
}

/// `session.heartbeat_ack`, rendered (a streaming client may send a
/// heartbeat with every chunk, so it is written without a JSON tree).
///
/// ```
/// let ack: serde_json::Value =
///     serde_json::from_str(&duplex_gateway::protocol::realtime::heartbeat_ack("call \"1\""))?;
/// assert_eq!(ack, serde_json::json!({"type": "session.heartbeat_ack", "session_id": "call \"1\""}));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn heartbeat_ack(session_id: &str) -> String {
    const HEAD: &[u8] = br#"{"type":"session.heartbeat_ack","session_id":"#;
    let mut out = Vec::with_capacity(HEAD.len() + 3 + session_id.len() + SEQ_ROOM);
    out.extend_from_slice(HEAD);
    // A `&str` always serialises.
    if serde_json::to_writer(&mut out, session_id).is_err() {
        return String::new();
    }
    out.push(b'}');
    // Only an id with characters to escape outgrew the estimate.
    out.reserve(SEQ_ROOM);
    String::from_utf8(out).unwrap_or_default()
}

/// One text delta of a response, as JSON text.
///
/// ```
/// use duplex_gateway::protocol::realtime::{text_delta, ResponseIds};
///
/// let d: serde_json::Value = serde_json::from_str(&text_delta(&ResponseIds::of("r1"), "Hi"))?;
/// assert_eq!((d["type"].as_str(), d["delta"].as_str()), (Some("response.output_text.delta"), Some("Hi")));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn text_delta(ids: &ResponseIds, delta: &str) -> String {
    Event::TextDelta {
        response_id: &ids.response,
        item_id: &ids.item,
        output_index: 0,
        content_index: 0,
        delta,
    }
    .render()
}

/// The events that end a response: for `completed`, the `.done` events of
/// the text, the part and the item; then `response.done` with `status`
/// (`completed` or `cancelled`, with `reason`) and `rate_limits.updated`;
/// each the text of one JSON object.
///
/// ```
/// use duplex_gateway::protocol::realtime::{response_ended, ResponseIds};
///
/// let ids = ResponseIds::of("r1");
/// assert_eq!(response_ended(&ids, "Hi", "completed", None).len(), 6);
/// let cancelled = response_ended(&ids, "H", "cancelled", Some("barge_in"));
/// let done: serde_json::Value = serde_json::from_str(&cancelled[0])?;
/// assert_eq!(done["response"]["status_details"]["reason"], "barge_in");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn response_ended(
    ids: &ResponseIds,
    text: &str,
    status: &str,
    reason: Option<&str>,
) -> Vec<String> {
    let completed = status == "completed";
    let content = [Part::OutputText { text }];
    let item = Item::assistant(
        ids,
        if completed { "completed" } else { "incomplete" },
        &content,
    );
    let item = &item;
    let mut out = Vec::with_capacity(6);
    if completed {
        out.push(
            Event::TextDone {
                response_id: &ids.response,
                item_id: &ids.item,
                output_index: 0,
                content_index: 0,
                text,
            }
            .render(),
        );
        out.push(
            Event::PartDone {
                response_id: &ids.response,
                item_id: &ids.item,
                output_index: 0,
                content_index: 0,
                part: Part::Text { text },
            }
            .render(),
        );
        out.push(
            Event::OutputItemDone {
                response_id: &ids.response,
                output_index: 0,
                item,
            }
            .render(),
        );
        out.push(
            Event::ItemDone {
                previous_item_id: None,
                item,
            }
            .render(),
        );
    }
    let mut response = Response::text(&ids.response, status, std::slice::from_ref(item));
    response.status_details = reason.map(|reason| Details {
        kind: status,
        reason,
    });
    out.push(
        Event::ResponseDone {
            response_id: &ids.response,
            response,
        }
        .render(),
    );
    out.push(Event::RateLimits { rate_limits: [] }.render());
    out
}

/// `input_audio_buffer.speech_started` for the user item `item`: the
/// contract sends it at a turn's first chunk (its serving layer does,
/// with no voice activity detection, at 0 ms).
///
/// ```
/// let event: serde_json::Value =
///     serde_json::from_str(&duplex_gateway::protocol::realtime::speech_started("item_user_0_0"))?;
/// assert_eq!(event["type"], "input_audio_buffer.speech_started");
/// assert_eq!((event["audio_start_ms"].as_u64(), event["item_id"].as_str()), (Some(0), Some("item_user_0_0")));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn speech_started(item: &str) -> String {
    Event::SpeechStarted {
        audio_start_ms: 0,
        item_id: item,
    }
    .render()
}

/// A committed user turn: its item, the item before it, where the
/// session stood, and the transcript its chunks' hints gave.
///
/// ```
/// use duplex_gateway::protocol::realtime::Commit;
///
/// let commit = Commit { item: "item_1", previous: None, turn: 0, epoch: 0, transcript: Some("hello") };
/// let kinds = |events: Vec<String>| -> Vec<String> {
///     events.iter()
///         .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap()["type"].as_str().unwrap().to_owned())
///         .collect()
/// };
/// assert_eq!(kinds(commit.events()), [
///     "conversation.item.added", "conversation.item.created",
///     "input_audio_buffer.committed", "conversation.item.done",
/// ]);
/// assert_eq!(kinds(commit.contract_events()), [
///     "input_audio_buffer.speech_stopped", "conversation.item.added", "conversation.item.created",
///     "input_audio_buffer.committed", "conversation.item.input_audio_transcription.completed",
///     "conversation.item.done",
/// ]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The user item the turn becomes.
    pub item: &'a str,
    /// The item before it, if any.
    pub previous: Option<&'a str>,
    /// The turn committed.
    pub turn: u64,
    /// The session's epoch.
    pub epoch: u64,
    /// What the turn's chunks said they say, if they did.
    pub transcript: Option<&'a str>,
}

impl Commit<'_> {
    /// The events of the commit: the user item (its audio carrying the
    /// transcript, if any), `input_audio_buffer.committed` and
    /// `conversation.item.done`; each the text of one JSON object.
    ///
    /// ```
    /// let commit = duplex_gateway::protocol::realtime::Commit {
    ///     item: "item_1", previous: None, turn: 0, epoch: 0, transcript: None,
    /// };
    /// let answer: serde_json::Value = serde_json::from_str(&commit.events()[2])?;
    /// assert_eq!(answer["type"], "input_audio_buffer.committed");
    /// assert_eq!(answer["item_id"], "item_1");
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn events(&self) -> Vec<String> {
        self.rendered(self.transcript, false)
    }

    /// The events of the commit on a socket of the contract, in the order
    /// its serving layer sends them: speech stops, then [`events`]', with
    /// `conversation.item.input_audio_transcription.completed` after
    /// `input_audio_buffer.committed` when the turn has a transcript (the
    /// item names none as an empty one).
    ///
    /// [`events`]: Commit::events
    ///
    /// ```
    /// let commit = duplex_gateway::protocol::realtime::Commit {
    ///     item: "item_1", previous: None, turn: 0, epoch: 0, transcript: None,
    /// };
    /// let first: serde_json::Value = serde_json::from_str(&commit.contract_events()[0])?;
    /// assert_eq!(first["type"], "input_audio_buffer.speech_stopped");
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn contract_events(&self) -> Vec<String> {
        self.rendered(Some(self.transcript.unwrap_or("")), true)
    }

    fn rendered(&self, said: Option<&str>, contract: bool) -> Vec<String> {
        let content = [Part::InputAudio { transcript: said }];
        let user = &Item {
            id: self.item,
            object: "realtime.item",
            kind: "message",
            role: "user",
            status: "completed",
            content: &content,
        };
        let previous_item_id = self.previous;
        let mut events = Vec::with_capacity(6);
        if contract {
            events.push(Event::SpeechStopped {
                audio_end_ms: 0,
                item_id: self.item,
            });
        }
        events.push(Event::ItemAdded {
            previous_item_id,
            item: user,
        });
        events.push(Event::ItemCreated {
            previous_item_id,
            item: user,
        });
        events.push(Event::Committed {
            previous_item_id,
            item_id: self.item,
            event: InputCommitted {
                kind: "input.committed",
                turn_id: self.turn,
                epoch: self.epoch,
            },
        });
        if let Some(transcript) = said.filter(|t| contract && !t.is_empty()) {
            events.push(Event::Transcribed {
                item_id: self.item,
                content_index: 0,
                transcript,
            });
        }
        events.push(Event::ItemDone {
            previous_item_id,
            item: user,
        });
        events.iter().map(Event::render).collect()
    }
}

#[cfg(test)]
mod tests;
