//! The engine seam: what a model implements to answer the gateway's
//! sessions.
//!
//! The gateway owns everything around a model: the session in the core
//! (its fence, lease and stage requests), the journal a client resumes
//! from, the cluster's store. An [`Engine`] sees none of it. It is handed
//! the session's audio as it is applied ([`Engine::audio`]), each committed
//! turn to answer ([`Engine::respond`], through a [`Sink`]), and told when
//! the gateway stopped an answer ([`Engine::cancelled`]), when a session's
//! configuration changed ([`Engine::configured`]) and when a session ended
//! ([`Engine::ended`]).
//!
//! Around each answer the gateway binds a request on the session's
//! response stage before calling `respond`, and releases it when the
//! answer's future ends (then sends `response.done`), or at the barge-in,
//! `response.cancel`, close or expiry that stops it. Stopping an answer
//! drops its future: a model's work in flight is cancelled by the
//! session's fence, wherever the turn was started, without the engine
//! keeping any bookkeeping of its own.
//!
//! # Examples
//!
//! An engine that answers every turn with one line of text:
//!
//! ```
//! use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
//!
//! struct Hello;
//!
//! impl Engine for Hello {
//!     fn respond(&self, turn: Turn, mut sink: Sink) -> Reply {
//!         Box::pin(async move {
//!             sink.text(&format!("hello, turn {}", turn.turn)).await;
//!         })
//!     }
//! }
//!
//! let config = duplex_gateway::Config {
//!     engine: std::sync::Arc::new(Hello),
//!     ..duplex_gateway::Config::default()
//! };
//! # drop(config);
//! ```
//!
//! `gateway/examples/parrot.rs` is a whole one: it says the user's own
//! audio back after each commit.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::server::emit::Emitter;

/// An answer being generated: the future [`Engine::respond`] returns. The
/// gateway runs it on its own task and drops it to stop it.
///
/// ```
/// use duplex_gateway::engine::Reply;
///
/// let silent: Reply = Box::pin(async {});
/// # drop(silent);
/// ```
pub type Reply = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A model behind the gateway.
///
/// Every method but [`respond`](Engine::respond) has a default that does
/// nothing. The synchronous ones run on the connection's task, in the path
/// of the client's event: they should only record what they are told
/// (hand work to a task or a channel, never block).
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use duplex_gateway::engine::{Engine, Input, Reply, Sink, Turn};
///
/// /// Counts what each session said, and answers with the count.
/// #[derive(Default)]
/// struct Counter(Mutex<HashMap<String, usize>>);
///
/// impl Engine for Counter {
///     fn audio(&self, input: Input<'_>) {
///         *self.0.lock().unwrap().entry(input.session.to_owned()).or_default() += input.audio.len();
///     }
///
///     fn respond(&self, turn: Turn, mut sink: Sink) -> Reply {
///         let heard = self.0.lock().unwrap().remove(&turn.session).unwrap_or(0);
///         Box::pin(async move { sink.text(&format!("{heard} bytes")).await })
///     }
///
///     fn ended(&self, session: &str) {
///         self.0.lock().unwrap().remove(session);
///     }
/// }
///
/// let counter = Counter::default();
/// counter.audio(Input::new("call-1", (0, 0), &[0; 640]));
/// counter.ended("call-1");
/// assert!(counter.0.lock().unwrap().is_empty());
/// ```
pub trait Engine: Send + Sync + 'static {
    /// Audio the session appended, decoded, once per applied chunk (a
    /// chunk the client sent again is not repeated). The realtime dialect
    /// carries 16 kHz, 16-bit little-endian mono PCM; the native dialect
    /// whatever its clients agree on.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Input, Reply, Sink, Turn};
    /// # struct Deaf;
    /// # impl Engine for Deaf { fn respond(&self, _: Turn, _: Sink) -> Reply { Box::pin(async {}) } }
    /// // The default hears and keeps nothing.
    /// Deaf.audio(Input::new("call-1", (0, 0), &[0; 640]));
    /// ```
    fn audio(&self, input: Input<'_>) {
        let _ = input;
    }

    /// The user's turn ended: answer it through `sink`. The answer ends
    /// when the future does; the gateway then releases its request and
    /// sends `response.done`.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// struct Polite;
    /// impl Engine for Polite {
    ///     fn respond(&self, _: Turn, mut sink: Sink) -> Reply {
    ///         Box::pin(async move { sink.text("After you.").await })
    ///     }
    /// }
    /// ```
    fn respond(&self, turn: Turn, sink: Sink) -> Reply;

    /// The gateway stopped `turn`'s answer before its end (a barge-in,
    /// `response.cancel`, a close, an expiry, the session moved to another
    /// node): its future is already dropped. For work that lives outside
    /// the future, such as a request to another server.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// # struct Quiet;
    /// # impl Engine for Quiet { fn respond(&self, _: Turn, _: Sink) -> Reply { Box::pin(async {}) } }
    /// // The default has nothing outside the future to stop.
    /// Quiet.cancelled(&Turn::new("call-1", "r7", (0, 1)));
    /// ```
    fn cancelled(&self, turn: &Turn) {
        let _ = turn;
    }

    /// The model's unit of input, in milliseconds, if it has one: the
    /// realtime dialect's capabilities tell clients `chunk_period_ms`, and
    /// vllm-omni's clients pad a turn's audio to a whole number of units.
    /// `None` (the default) tells them `null`: the engine takes audio of
    /// any length.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// struct Native;
    /// impl Engine for Native {
    ///     fn respond(&self, _: Turn, _: Sink) -> Reply { Box::pin(async {}) }
    ///     fn chunk_period_ms(&self) -> Option<u32> { Some(80) }
    /// }
    /// assert_eq!(Native.chunk_period_ms(), Some(80));
    /// ```
    fn chunk_period_ms(&self) -> Option<u32> {
        None
    }

    /// The session's configuration changed: the realtime dialect's merged
    /// `session` object, from `session.update`, as the client sent it
    /// (its `extra_body`, its instructions, its reference audio).
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// # struct Plain;
    /// # impl Engine for Plain { fn respond(&self, _: Turn, _: Sink) -> Reply { Box::pin(async {}) } }
    /// let config = serde_json::json!({"instructions": "Be brief."});
    /// // The default ignores the configuration.
    /// Plain.configured("call-1", config.as_object().unwrap());
    /// ```
    fn configured(&self, session: &str, config: &Map<String, Value>) {
        let _ = (session, config);
    }

    /// The session ended on this gateway (closed, expired, or moved to
    /// another node): forget what is kept for it. In a cluster it may also
    /// come for a session the engine was never told of (an open refused
    /// because another node holds the id): there is nothing to forget.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// # struct Forgetful;
    /// # impl Engine for Forgetful { fn respond(&self, _: Turn, _: Sink) -> Reply { Box::pin(async {}) } }
    /// // The default kept nothing to forget.
    /// Forgetful.ended("call-1");
    /// ```
    fn ended(&self, session: &str) {
        let _ = session;
    }
}

/// One applied chunk of a session's audio.
///
/// ```
/// let chunk = duplex_gateway::engine::Input::new("call-1", (1, 4), &[0; 640]);
/// assert_eq!((chunk.epoch, chunk.turn, chunk.audio.len()), (1, 4, 640));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Input<'a> {
    /// The session's id on this gateway (scoped to its principal when
    /// connections authenticate).
    pub session: &'a str,
    /// The epoch and turn the chunk was appended at.
    pub epoch: u64,
    /// See `epoch`.
    pub turn: u64,
    /// The decoded audio.
    pub audio: &'a [u8],
}

impl<'a> Input<'a> {
    /// A chunk of `session` at `(epoch, turn)`.
    ///
    /// ```
    /// let i = duplex_gateway::engine::Input::new("call-1", (0, 2), b"\0\0");
    /// assert_eq!((i.session, i.turn, i.audio.len()), ("call-1", 2, 2));
    /// ```
    #[must_use]
    pub fn new(session: &'a str, (epoch, turn): (u64, u64), audio: &'a [u8]) -> Self {
        Input {
            session,
            epoch,
            turn,
            audio,
        }
    }
}

/// A committed turn to answer.
///
/// ```
/// let turn = duplex_gateway::engine::Turn::new("call-1", "r3", (0, 2));
/// assert_eq!((turn.session.as_str(), turn.turn), ("call-1", 2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Turn {
    /// The session's id on this gateway (as [`Input::session`]).
    pub session: String,
    /// The request the gateway bound for the answer.
    pub request: String,
    /// The epoch of the turn: a barge-in moves the session past it.
    pub epoch: u64,
    /// The turn's number.
    pub turn: u64,
}

impl Turn {
    /// A turn of `session` answered under `request`.
    ///
    /// ```
    /// let t = duplex_gateway::engine::Turn::new("call-1", "r7", (0, 1));
    /// assert_eq!((t.request.as_str(), t.epoch, t.turn), ("r7", 0, 1));
    /// ```
    #[must_use]
    pub fn new(session: &str, request: &str, (epoch, turn): (u64, u64)) -> Self {
        Turn {
            session: session.to_owned(),
            request: request.to_owned(),
            epoch,
            turn,
        }
    }
}

/// Where an answer's pieces go: the client's dialect, numbered and
/// journaled for a resume when the dialect is the realtime one.
///
/// A piece sent after the gateway stopped the answer is dropped (the
/// future is dropped with it, so this happens only between the stop and
/// the drop). The answer is the session's activity (`MODEL_OUTPUT`): a
/// session whose model is still speaking does not expire idle.
///
/// ```
/// use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
///
/// struct Counting;
/// impl Engine for Counting {
///     fn respond(&self, turn: Turn, mut sink: Sink) -> Reply {
///         Box::pin(async move {
///             for n in 1..=3 {
///                 sink.text(&format!("{n} ")).await;
///             }
///             let _ = turn;
///         })
///     }
/// }
/// ```
pub struct Sink {
    emit: Emitter,
    turn: Turn,
    index: u32,
    /// Records the model's output on the session's lease.
    output: Box<dyn FnMut() + Send>,
}

impl core::fmt::Debug for Sink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sink")
            .field("turn", &self.turn)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Sink {
    pub(crate) fn new(emit: Emitter, turn: Turn, output: Box<dyn FnMut() + Send>) -> Self {
        Sink {
            emit,
            turn,
            index: 0,
            output,
        }
    }

    /// The turn this sink answers.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// struct Echo;
    /// impl Engine for Echo {
    ///     fn respond(&self, _: Turn, mut sink: Sink) -> Reply {
    ///         Box::pin(async move {
    ///             let line = format!("turn {}", sink.turn().turn);
    ///             sink.text(&line).await;
    ///         })
    ///     }
    /// }
    /// ```
    #[must_use]
    pub fn turn(&self) -> &Turn {
        &self.turn
    }

    /// Sends a piece of the answer's text (`response.delta` in the native
    /// dialect, `response.output_text.delta` in the realtime one). Pieces
    /// join into the answer's text.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// struct Two;
    /// impl Engine for Two {
    ///     fn respond(&self, _: Turn, mut sink: Sink) -> Reply {
    ///         Box::pin(async move {
    ///             sink.text("Hello").await;
    ///             sink.text(", world.").await;
    ///         })
    ///     }
    /// }
    /// ```
    pub async fn text(&mut self, text: &str) {
        let (index, t) = (self.next(), &self.turn);
        self.emit
            .text(&t.request, (t.epoch, t.turn), index, text)
            .await;
    }

    /// Sends a piece of the answer's audio (`response.audio` in the native
    /// dialect, `response.output_audio.delta` in the realtime one, where it
    /// is 16 kHz, 16-bit little-endian mono PCM), base64-encoded on the
    /// wire.
    ///
    /// ```
    /// # use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
    /// struct Beep;
    /// impl Engine for Beep {
    ///     fn respond(&self, _: Turn, mut sink: Sink) -> Reply {
    ///         Box::pin(async move {
    ///             let tone: Vec<u8> = (0..320_i16).flat_map(|i| ((i % 16 - 8) * 2000).to_le_bytes()).collect();
    ///             sink.audio(&tone).await;
    ///         })
    ///     }
    /// }
    /// ```
    pub async fn audio(&mut self, audio: &[u8]) {
        let (index, t) = (self.next(), &self.turn);
        self.emit
            .audio(&t.request, (t.epoch, t.turn), index, audio)
            .await;
    }

    fn next(&mut self) -> u32 {
        (self.output)();
        let index = self.index;
        self.index = self.index.saturating_add(1);
        index
    }
}

/// The engine a gateway runs unless told otherwise: each turn is answered
/// with a few pieces of text, one every `interval` (`piece 0 of the
/// answer to turn 1.`). For load tests and for trying the protocol.
///
/// ```
/// let engine = duplex_gateway::engine::StandIn::default();
/// assert_eq!((engine.deltas, engine.interval.as_millis()), (3, 5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandIn {
    /// Pieces of text a response.
    pub deltas: u32,
    /// The time before each piece.
    pub interval: Duration,
}

impl Default for StandIn {
    fn default() -> Self {
        StandIn {
            deltas: 3,
            interval: Duration::from_millis(5),
        }
    }
}

impl Engine for StandIn {
    fn respond(&self, turn: Turn, mut sink: Sink) -> Reply {
        let StandIn { deltas, interval } = *self;
        Box::pin(async move {
            for index in 0..deltas {
                tokio::time::sleep(interval).await;
                // Pieces join into the response's text: each after the
                // first starts with its space.
                let space = if index == 0 { "" } else { " " };
                let piece = format!("{space}piece {index} of the answer to turn {}.", turn.turn);
                sink.text(&piece).await;
            }
        })
    }
}
