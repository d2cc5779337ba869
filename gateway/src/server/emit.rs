//! Where an answer's pieces go: the client's outbox in the native
//! dialect, the session's stream (numbered, journaled) in the realtime
//! one. The engine's `Sink` writes through it; it knows neither the
//! manager nor the engine.

use std::sync::Arc;

use base64::Engine as _;
use tokio_tungstenite::tungstenite::Message;

use crate::protocol::ServerEvent;
use crate::server::outbox::Outbox;
use crate::server::stream::Stream;

/// Where a response's events go: a native connection's outbox, or a
/// realtime session's stream (numbered, journaled, sent to whichever
/// socket holds the session).
#[derive(Debug, Clone)]
pub(crate) enum Emitter {
    Native(Outbox),
    Realtime {
        stream: Arc<Stream>,
        /// Whether the stream may store its journal (the gateway is a
        /// node of a cluster).
        stored: bool,
    },
}

impl Emitter {
    /// A piece of the text of `request`'s answer to `(epoch, turn)`.
    pub(crate) async fn text(
        &self,
        request: &str,
        (epoch, turn): (u64, u64),
        index: u32,
        text: &str,
    ) {
        self.event(ServerEvent::Delta {
            request_id: request.to_owned(),
            epoch,
            turn,
            index,
            text: text.to_owned(),
        })
        .await;
    }

    /// A piece of the audio of `request`'s answer to `(epoch, turn)`.
    pub(crate) async fn audio(
        &self,
        request: &str,
        (epoch, turn): (u64, u64),
        index: u32,
        audio: &[u8],
    ) {
        self.event(ServerEvent::Audio {
            request_id: request.to_owned(),
            epoch,
            turn,
            index,
            audio: base64::engine::general_purpose::STANDARD.encode(audio),
        })
        .await;
    }

    /// Sends one of the engine's events, in the connection's dialect.
    ///
    /// A barge-in or a shutdown aborts the engine's task, possibly in the
    /// middle of an emit. Without a store that is harmless: an event
    /// numbered and journaled but not yet sent goes out first on the
    /// stream's next emit. A stream that stores its journal is emitted to
    /// in a task of its own, which this one awaits, so the abort lands
    /// between two events, never in a store write (one cut off halfway
    /// makes the stream stop storing).
    pub(crate) async fn event(&self, event: ServerEvent) {
        match self {
            Emitter::Native(outbox) => outbox.send(Message::text(event.to_json())).await,
            Emitter::Realtime { stream, stored } => {
                if *stored {
                    let stream = Arc::clone(stream);
                    let emit = tokio::spawn(async move { realtime_event(&stream, &event).await });
                    let _ = emit.await;
                } else {
                    realtime_event(stream, &event).await;
                }
            }
        }
    }
}

/// An engine event on a realtime session's stream.
async fn realtime_event(stream: &Stream, event: &ServerEvent) {
    match event {
        ServerEvent::Delta {
            request_id, text, ..
        } => stream.delta(request_id, text).await,
        ServerEvent::Audio {
            request_id, audio, ..
        } => stream.audio(request_id, audio).await,
        ServerEvent::Done { request_id, .. } => {
            stream.end_response(request_id, "completed", None).await;
        }
        _ => {}
    }
}
