//! The events a streaming client sends many times a second (an append
//! and a heartbeat per chunk, an acknowledgement now and then), decoded
//! without building a JSON tree.

use std::borrow::Cow;

use serde::de::IgnoredAny;

use super::{AppendHints, RealtimeEvent, MAX_EVENT_ID, MAX_MESSAGE};

/// The fields of the events a streaming client sends many times a second
/// (an append and a heartbeat per chunk, an acknowledgement now and
/// then), read without building a JSON tree: strings are borrowed from
/// the message where they need no unescaping.
#[derive(serde::Deserialize)]
struct Hot<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    event_id: Option<Text<'a>>,
    #[serde(default, borrow)]
    audio: Option<Text<'a>>,
    #[serde(default)]
    server_event_seq: Option<u64>,
    #[serde(default, borrow)]
    transcript: Option<Text<'a>>,
    /// An append's overlap hints (`AppendHints`): any of them sends the
    /// append to the full decoder, which reads them as the release does.
    #[serde(default)]
    duration_ms: Option<IgnoredAny>,
    #[serde(default)]
    audio_duration_ms: Option<IgnoredAny>,
    #[serde(default)]
    is_speech: Option<IgnoredAny>,
    #[serde(default)]
    speech: Option<IgnoredAny>,
    #[serde(default)]
    speech_probability: Option<IgnoredAny>,
    #[serde(default)]
    vad: Option<IgnoredAny>,
    #[serde(default)]
    overlap_action: Option<IgnoredAny>,
    #[serde(default)]
    overlap: Option<IgnoredAny>,
    #[serde(default)]
    force_barge_in: Option<IgnoredAny>,
    #[serde(default)]
    force_listen: Option<IgnoredAny>,
}

impl Hot<'_> {
    /// Whether the message carries an overlap hint.
    fn hinted(&self) -> bool {
        [
            &self.duration_ms,
            &self.audio_duration_ms,
            &self.is_speech,
            &self.speech,
            &self.speech_probability,
            &self.vad,
            &self.overlap_action,
            &self.overlap,
            &self.force_barge_in,
            &self.force_listen,
        ]
        .iter()
        .any(|hint| hint.is_some())
    }
}

/// A string field that borrows from the message unless it has escapes.
/// serde borrows a `Cow<str>` only where it is the field's own type; an
/// `Option<Cow<str>>` would be copied every time (the chunk's audio
/// included).
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// One of the frequent events, its strings borrowed from the message
/// where they need no unescaping: what a connection answers without
/// copying the chunk's audio out of the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HotEvent<'a> {
    /// `input_audio_buffer.append` (or an alias), without overlap hints.
    Append {
        event_id: Option<Cow<'a, str>>,
        audio: Cow<'a, str>,
        transcript: Option<Cow<'a, str>>,
    },
    /// `session.heartbeat`.
    Heartbeat,
    /// `session.event_ack`.
    EventAck { seq: u64 },
}

impl HotEvent<'_> {
    /// The event as the full decoder gives it.
    pub(crate) fn into_owned(self) -> RealtimeEvent {
        match self {
            HotEvent::Append {
                event_id,
                audio,
                transcript,
            } => RealtimeEvent::Append {
                event_id: event_id.map(Cow::into_owned),
                audio: audio.into_owned(),
                transcript: transcript.map(Cow::into_owned),
                hints: AppendHints::default(),
            },
            HotEvent::Heartbeat => RealtimeEvent::Heartbeat,
            HotEvent::EventAck { seq } => RealtimeEvent::EventAck { seq },
        }
    }
}

/// `text` as one of the frequent events, when it is one and every field
/// the full decoder checks is well formed; `None` sends it to the full
/// decoder, which answers exactly as it would have anyway (a property
/// test holds the two to the same answers).
pub(crate) fn decode_hot(text: &str) -> Option<HotEvent<'_>> {
    if text.len() > MAX_MESSAGE {
        return None;
    }
    let hot: Hot<'_> = serde_json::from_str(text).ok()?;
    let hinted = hot.hinted();
    let event_id = hot.event_id.map(|Text(id)| id);
    if event_id.as_ref().is_some_and(|id| id.len() > MAX_EVENT_ID) {
        return None;
    }
    match hot.kind.as_ref() {
        "input_audio_buffer.append" | "input.audio.append" | "push_chunk" if !hinted => {
            Some(HotEvent::Append {
                event_id,
                audio: hot.audio?.0,
                transcript: hot.transcript.map(|Text(t)| t),
            })
        }
        "session.heartbeat" => Some(HotEvent::Heartbeat),
        "session.event_ack" => Some(HotEvent::EventAck {
            seq: hot.server_event_seq?,
        }),
        _ => None,
    }
}
