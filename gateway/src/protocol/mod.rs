//! The wire protocol: one JSON object per WebSocket text message, tagged by
//! `type` (see `PROTOCOL.md`). Audio travels base64-encoded inside
//! `input.append`, so every event is self-describing text a person can read
//! in a packet capture; binary frames are refused.
//!
//! Decoding never panics: any byte sequence a client sends becomes either a
//! [`ClientEvent`] or a [`ProtocolError`] with the kind the server reports.

pub mod realtime;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The largest text message the server interprets. A larger one (up to the
/// transport limit, [`MAX_FRAME`]) is answered with `error` kind `too_large`
/// and the connection stays up.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The transport limit: a message or frame above this closes the connection
/// (WebSocket close code 1009), so no client can make the server buffer more.
pub const MAX_FRAME: usize = 1024 * 1024;

/// Each side's WebSocket read buffer (larger messages still arrive whole;
/// the buffer grows for them).
pub const READ_BUFFER: usize = 4 * 1024;

/// The most entries one `session.audit` reply carries (about 60 KB).
pub const AUDIT_PAGE: usize = 1_000;

/// The largest decoded audio chunk accepted in one `input.append` (a 20 ms
/// chunk of 16 kHz 16-bit mono audio is 640 bytes).
pub const MAX_AUDIO: usize = 16 * 1024;

/// A client's event, decoded.
///
/// ```
/// use duplex_gateway::protocol::{decode, ClientEvent};
///
/// let e = decode(r#"{"type":"input.commit","epoch":0,"turn":2}"#)?;
/// assert_eq!(e, ClientEvent::Commit { epoch: 0, turn: 2 });
/// # Ok::<(), duplex_gateway::protocol::ProtocolError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type")]
pub enum ClientEvent {
    /// Opens a new session, or resumes one with `session_id` and the
    /// `resume_token` the client was last given.
    #[serde(rename = "session.open")]
    Open {
        /// The session to resume (with `resume_token`), or the id to open a
        /// new session under (without it; the server picks one if absent).
        #[serde(default)]
        session_id: Option<String>,
        /// The token of the last `session.opened`: resume.
        #[serde(default)]
        resume_token: Option<String>,
    },
    /// One chunk of user audio at the client's fence position.
    #[serde(rename = "input.append")]
    Append {
        /// The client's idempotency key for this chunk.
        event_id: String,
        /// The client's epoch.
        epoch: u64,
        /// The client's turn.
        turn: u64,
        /// The chunk, base64 (standard alphabet, padded).
        audio: String,
    },
    /// The end of the user's turn: the engine answers it.
    #[serde(rename = "input.commit")]
    Commit {
        /// The client's epoch.
        epoch: u64,
        /// The turn that ended.
        turn: u64,
    },
    /// Barge-in: the user talks over the response.
    #[serde(rename = "response.cancel")]
    Cancel {
        /// The epoch being cancelled.
        epoch: u64,
        /// The client's turn.
        turn: u64,
    },
    /// Closes the connection's session.
    #[serde(rename = "session.close")]
    Close {},
    /// Asks for the input a session has applied (gateway run with
    /// `--audit`; admin access).
    #[serde(rename = "session.audit")]
    Audit {
        /// The session, current or gone.
        session_id: String,
        /// The gateway's admin token.
        #[serde(default)]
        admin_token: Option<String>,
        /// The first entry wanted (0 if absent): the `next` of the
        /// previous page.
        #[serde(default)]
        from: Option<u64>,
        /// The principal that owns the session, on a gateway with
        /// `--auth-secret` (session ids are scoped to their principal).
        #[serde(default)]
        principal: Option<String>,
    },
    /// Asks for the server's counters (admin access).
    #[serde(rename = "admin.stats")]
    Stats {
        /// The gateway's admin token.
        #[serde(default)]
        admin_token: Option<String>,
    },
    /// Any other `type`.
    #[serde(other)]
    Unknown,
}

/// A server's event.
///
/// ```
/// use duplex_gateway::protocol::ServerEvent;
///
/// let e = ServerEvent::Appended { event_id: "e1".into(), seq: 1, turn_seq: 1, duplicate: false };
/// assert_eq!(
///     e.to_json(),
///     r#"{"type":"input.appended","event_id":"e1","seq":1,"turn_seq":1,"duplicate":false}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ServerEvent {
    /// The session is open on this connection.
    #[serde(rename = "session.opened")]
    Opened {
        /// The session id.
        session_id: String,
        /// The session's incarnation.
        incarnation: u64,
        /// The session's epoch.
        epoch: u64,
        /// The session's turn.
        turn: u64,
        /// The secret that resumes this session on the next reconnect
        /// (good for one resume: each `session.opened` brings a new one).
        resume_token: String,
        /// Whether an existing session was resumed.
        resumed: bool,
    },
    /// An `input.append` was applied, or had been (`duplicate`).
    #[serde(rename = "input.appended")]
    Appended {
        /// The client's event id.
        event_id: String,
        /// Position in the epoch's input sequence.
        seq: u64,
        /// Position within the turn.
        turn_seq: u64,
        /// The event id had been applied before: answered from the
        /// completed-append cache, nothing appended.
        duplicate: bool,
    },
    /// A piece of the engine's response.
    #[serde(rename = "response.delta")]
    Delta {
        /// The engine's request.
        request_id: String,
        /// The response's epoch.
        epoch: u64,
        /// The turn answered.
        turn: u64,
        /// 0-based piece number.
        index: u32,
        /// The piece.
        text: String,
    },
    /// A piece of the engine's response audio.
    #[serde(rename = "response.audio")]
    Audio {
        /// The engine's request.
        request_id: String,
        /// The response's epoch.
        epoch: u64,
        /// The turn answered.
        turn: u64,
        /// 0-based piece number (text and audio pieces count together).
        index: u32,
        /// The audio, base64 (standard alphabet, padded).
        audio: String,
    },
    /// The response is complete and its request released.
    #[serde(rename = "response.done")]
    Done {
        /// The engine's request.
        request_id: String,
        /// The response's epoch.
        epoch: u64,
        /// The turn answered.
        turn: u64,
    },
    /// Barge-in took effect.
    #[serde(rename = "response.cancelled")]
    Cancelled {
        /// The new epoch.
        epoch: u64,
        /// The turn.
        turn: u64,
        /// The engine requests of the old epoch, cancelled and released.
        request_ids: Vec<String>,
    },
    /// The session is closed.
    #[serde(rename = "session.closed")]
    Closed {
        /// The session id.
        session_id: String,
        /// The engine requests released by the close.
        request_ids: Vec<String>,
    },
    /// The node is shutting down and has stored the session: resume it on
    /// another node of the cluster (the connection closes next).
    #[serde(rename = "session.moved")]
    Moved {
        /// The session id.
        session_id: String,
    },
    /// The input a session applied, in order.
    #[serde(rename = "session.audit")]
    Audit {
        /// The session id.
        session_id: String,
        /// `[epoch, seq, event_id]` per applied chunk, at most
        /// [`AUDIT_PAGE`] from `from`.
        applied: Vec<(u64, u64, String)>,
        /// Where the next page starts, or `None` if this page is the last.
        next: Option<u64>,
    },
    /// The server's counters.
    #[serde(rename = "admin.stats")]
    Stats {
        /// Sessions in the manager now.
        sessions: u64,
        /// Connections open now.
        connections: u64,
        /// The counters since start.
        counters: Box<crate::stats::Counters>,
    },
    /// A refusal.
    #[serde(rename = "error")]
    Error {
        /// The error kind: the manager's (`fence_mismatch`, ...) or the
        /// gateway's (`malformed`, ...).
        kind: String,
        /// What was expected.
        message: String,
        /// The refused append's event id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
}

impl ClientEvent {
    /// The event's `type` (`unknown` for any other).
    ///
    /// ```
    /// use duplex_gateway::protocol::ClientEvent;
    ///
    /// assert_eq!(ClientEvent::Commit { epoch: 0, turn: 1 }.name(), "input.commit");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            ClientEvent::Open { .. } => "session.open",
            ClientEvent::Append { .. } => "input.append",
            ClientEvent::Commit { .. } => "input.commit",
            ClientEvent::Cancel { .. } => "response.cancel",
            ClientEvent::Close {} => "session.close",
            ClientEvent::Audit { .. } => "session.audit",
            ClientEvent::Stats { .. } => "admin.stats",
            ClientEvent::Unknown => "unknown",
        }
    }
}

// The realtime dialect's names sit here, beside the native ones.
impl realtime::RealtimeEvent {
    /// The event's `type` as the client sent it (`unsupported` for a
    /// contract event the stand-in refuses).
    ///
    /// ```
    /// use duplex_gateway::protocol::realtime::RealtimeEvent;
    ///
    /// assert_eq!(RealtimeEvent::Heartbeat.name(), "session.heartbeat");
    /// ```
    pub fn name(&self) -> &'static str {
        use realtime::RealtimeEvent as E;
        match self {
            E::SessionUpdate { .. } => "session.update",
            E::Heartbeat => "session.heartbeat",
            E::EventAck { .. } => "session.event_ack",
            E::Close => "session.close",
            E::Resume { .. } => "session.resume",
            E::Append { .. } => "input_audio_buffer.append",
            E::Commit { .. } => "input_audio_buffer.commit",
            E::Clear { .. } => "input_audio_buffer.clear",
            E::ResponseCreate { .. } => "response.create",
            E::ResponseCancel { kind, .. } | E::Acknowledge { kind, .. } => kind,
            E::Unsupported { .. } => "unsupported",
        }
    }
}

impl ServerEvent {
    /// The event as its JSON text.
    pub fn to_json(&self) -> String {
        // Serialising these types cannot fail: every field is a string,
        // an integer, or a sequence of them.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!(r#"{{"type":"error","kind":"internal","message":"{e}"}}"#))
    }

    /// An `error` event from a refusal.
    pub fn error(kind: impl Into<String>, message: impl Into<String>) -> ServerEvent {
        ServerEvent::Error {
            kind: kind.into(),
            message: message.into(),
            event_id: None,
        }
    }
}

/// Why a client's message was refused before it reached the manager.
///
/// ```
/// use duplex_gateway::protocol::{decode, ProtocolError};
///
/// assert!(matches!(decode("{"), Err(ProtocolError::Malformed(_))));
/// assert_eq!(decode(r#"{"type":"nope"}"#), Err(ProtocolError::UnknownType));
/// assert_eq!(decode("{\"type\":\"nope\"}").unwrap_err().kind(), "unknown_type");
/// // A large bad value is not echoed back.
/// let huge = format!(r#"{{"type":"input.commit","epoch":"{}","turn":0}}"#, "9".repeat(60_000));
/// let message = decode(&huge).unwrap_err().to_string();
/// assert!(message.len() < 300, "{}", message.len());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// Not a JSON object of a known shape.
    #[error("expected one JSON object per message with a string field `type`: {0}")]
    Malformed(String),
    /// A `type` the server does not know.
    #[error("unknown event type; expected one of session.open, input.append, input.commit, response.cancel, session.close, session.audit, admin.stats")]
    UnknownType,
    /// Larger than [`MAX_MESSAGE`].
    #[error("message of {0} bytes; the limit is {MAX_MESSAGE}")]
    TooLarge(usize),
    /// A binary frame.
    #[error("binary frames are not part of the protocol; send JSON text with base64 audio")]
    Binary,
    /// `audio` is not base64 or decodes to more than [`MAX_AUDIO`] bytes.
    #[error("audio must be standard padded base64 of at most {MAX_AUDIO} bytes: {0}")]
    InvalidAudio(String),
}

impl ProtocolError {
    /// The `kind` reported in the `error` event.
    pub fn kind(&self) -> &'static str {
        match self {
            ProtocolError::Malformed(_) => "malformed",
            ProtocolError::UnknownType => "unknown_type",
            ProtocolError::TooLarge(_) => "too_large",
            ProtocolError::Binary => "binary_unsupported",
            ProtocolError::InvalidAudio(_) => "invalid_audio",
        }
    }
}

/// Decodes one text message.
///
/// # Errors
///
/// [`ProtocolError::TooLarge`], [`ProtocolError::Malformed`],
/// [`ProtocolError::UnknownType`].
pub fn decode(text: &str) -> Result<ClientEvent, ProtocolError> {
    if text.len() > MAX_MESSAGE {
        return Err(ProtocolError::TooLarge(text.len()));
    }
    match serde_json::from_str::<ClientEvent>(text) {
        Ok(ClientEvent::Unknown) => Err(ProtocolError::UnknownType),
        Ok(event) => Ok(event),
        Err(e) => Err(ProtocolError::Malformed(prefix(&e.to_string()))),
    }
}

/// The longest explanation an error carries: enough to say what was
/// expected, never a copy of a large input (the decoder's messages quote
/// the offending value).
pub const MAX_EXPLANATION: usize = 160;

/// `text` cut to at most [`MAX_EXPLANATION`] bytes, on a character
/// boundary, marked with `…` when cut.
pub(crate) fn prefix(text: &str) -> String {
    if text.len() <= MAX_EXPLANATION {
        return text.to_owned();
    }
    let mut end = MAX_EXPLANATION - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Decodes an `input.append`'s audio.
///
/// ```
/// use duplex_gateway::protocol::decode_audio;
///
/// assert_eq!(decode_audio("AAEC")?, vec![0, 1, 2]);
/// assert!(decode_audio("not base64!").is_err());
/// # Ok::<(), duplex_gateway::protocol::ProtocolError>(())
/// ```
///
/// # Errors
///
/// [`ProtocolError::InvalidAudio`].
pub fn decode_audio(audio: &str) -> Result<Vec<u8>, ProtocolError> {
    let mut out = Vec::new();
    decode_audio_into(audio, &mut out)?;
    Ok(out)
}

/// Decodes an `input.append`'s audio into `out`, replacing what it held
/// and reusing its allocation (a connection decodes every chunk into the
/// same buffer).
///
/// ```
/// let mut chunk = vec![9; 8];
/// duplex_gateway::protocol::decode_audio_into("AAEC", &mut chunk)?;
/// assert_eq!(chunk, [0, 1, 2]);
/// # Ok::<(), duplex_gateway::protocol::ProtocolError>(())
/// ```
///
/// # Errors
///
/// [`ProtocolError::InvalidAudio`]; `out` is left empty.
pub fn decode_audio_into(audio: &str, out: &mut Vec<u8>) -> Result<(), ProtocolError> {
    out.clear();
    // Base64 grows 3 bytes into 4 characters: refuse before decoding.
    if audio.len() > MAX_AUDIO.div_ceil(3) * 4 {
        return Err(ProtocolError::InvalidAudio(format!(
            "{} characters of base64",
            audio.len()
        )));
    }
    base64::engine::general_purpose::STANDARD
        .decode_vec(audio, out)
        .map_err(|e| {
            out.clear();
            ProtocolError::InvalidAudio(e.to_string())
        })
}

/// Encodes audio for an `input.append`.
///
/// ```
/// assert_eq!(duplex_gateway::protocol::encode_audio(&[0, 1, 2]), "AAEC");
/// ```
pub fn encode_audio(audio: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(audio)
}
