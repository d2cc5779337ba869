//! The realtime dialect on a connection: its events run on the same
//! session operations as the native dialect's (open and resume, append,
//! commit, barge-in, close), with the fence kept here for the client, and
//! every answer goes out through the session's stream (numbered and
//! journaled; `server::stream`).

use std::borrow::Cow;
use std::sync::Arc;

use crate::profile::ManagerError as Error;
use duplex_core::Activity;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{Applied, Connection};
use crate::protocol::realtime::{
    self, error_for, AppendHints, HotEvent, RealtimeError, RealtimeEvent,
};
use crate::protocol::ServerEvent;
use crate::server::stream::{Config, Conversation, SessionConfig, Store, Stream};

/// The realtime state of the session a connection holds.
#[derive(Debug)]
pub(crate) struct Rt {
    pub(crate) stream: Arc<Stream>,
    /// This socket's attachment number on the stream.
    pub(crate) attachment: u64,
    /// Where the session's conversation stands (kept on the stream for a
    /// resume at each change).
    pub(crate) conv: Conversation,
    /// Chunks appended without an `event_id`, for their server-made keys.
    anonymous: u64,
    /// This session's `session.heartbeat_ack`, rendered once and copied
    /// for each heartbeat (it never changes).
    heartbeat_ack: String,
}

impl Rt {
    /// The state of a session just opened or resumed on this socket, at
    /// the session's `(epoch, turn)`; `client_id` is the id its client
    /// knows it by.
    pub(super) fn new(
        stream: Arc<Stream>,
        client_id: &str,
        attachment: u64,
        conv: Conversation,
    ) -> Self {
        stream.keep(&conv);
        Rt {
            stream,
            attachment,
            conv,
            anonymous: 0,
            heartbeat_ack: realtime::heartbeat_ack(client_id),
        }
    }

    /// Keeps the conversation where a resume finds it.
    fn keep(&self) {
        self.stream.keep(&self.conv);
    }
}

/// The core's id for a client's `event_id`: the id itself when it fits the
/// gateway's ids ([`ID_LEN`](crate::profile::ID_LEN) bytes), else `h` and
/// the 64 hex digits of its SHA-256 (so ids up to
/// [`realtime::MAX_EVENT_ID`] bytes are idempotency keys).
fn operation_id(event_id: &str) -> Cow<'_, str> {
    const _: () = assert!(crate::profile::ID_LEN > 64, "a hashed event id must fit");
    if event_id.len() <= crate::profile::ID_LEN {
        return Cow::Borrowed(event_id);
    }
    let digest = Sha256::digest(event_id.as_bytes());
    let hex = digest.iter().fold(String::with_capacity(64), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    });
    Cow::Owned(format!("h{hex}"))
}

/// `extra_body.auto_response` of a `session` object.
fn auto_response(config: &Map<String, Value>) -> Option<bool> {
    config
        .get("extra_body")
        .and_then(|e| e.get("auto_response"))
        .and_then(Value::as_bool)
}

impl Connection {
    /// Decodes and answers one text message of the realtime dialect.
    pub(super) async fn on_realtime_text(&mut self, text: &str) {
        let events_in = &self.shared.metrics.realtime.events_in;
        // A chunk is answered from the message itself: its audio is
        // decoded from where it lies, never copied out first.
        // The message is parsed once: the fast path, or else the tree.
        let decoded = match realtime::decode_hot(text) {
            Some(HotEvent::Append {
                event_id,
                audio,
                transcript,
            }) => {
                events_in.bump("input_audio_buffer.append");
                if !self.told_moved().await {
                    let hints = AppendHints::default();
                    self.rt_append(event_id.as_deref(), &audio, transcript.as_deref(), hints)
                        .await;
                }
                return;
            }
            Some(hot) => Ok(hot.into_owned()),
            None => realtime::decode_tree(text),
        };
        match decoded {
            Ok(event) => {
                events_in.bump(event.name());
                self.on_realtime_event(event).await;
            }
            Err(e) => {
                events_in.bump("invalid");
                crate::stats::bump(&self.shared.stats.refused);
                self.rt_send(vec![e.to_value()]).await;
            }
        }
    }

    /// Sends events: through the session's stream when the connection
    /// holds one, else straight to the socket (unnumbered: no session).
    pub(super) async fn rt_send(&self, mut events: Vec<Value>) {
        if self.contract() {
            events.iter_mut().for_each(realtime::contract_codes);
        }
        match &self.rt {
            Some(rt) => {
                rt.stream
                    .answer(
                        rt.attachment,
                        &self.outbox,
                        events.iter().map(realtime::numberable),
                    )
                    .await;
            }
            None => {
                for e in &events {
                    self.unnumbered(e).await;
                }
            }
        }
    }

    /// Sends `event` to this socket alone, outside the session's stream:
    /// an answer on a socket that holds no session, or one about the
    /// attachment (`session.moved`, `session.resync_required`).
    pub(super) async fn unnumbered(&self, event: &Value) {
        let mut event = Cow::Borrowed(event);
        if self.contract() && realtime::contract_code(&event).is_some() {
            realtime::contract_codes(event.to_mut());
        }
        self.outbox
            .send(tokio_tungstenite::tungstenite::Message::text(
                event.to_string(),
            ))
            .await;
    }

    /// Whether vllm-omni's duplex contract rules this socket (else
    /// OpenAI's Realtime API does).
    fn contract(&self) -> bool {
        matches!(
            self.dialect,
            super::Dialect::Realtime { contract: true, .. }
        )
    }

    /// A native answer that is a refusal, as the realtime error.
    pub(super) fn rt_error(event: &ServerEvent, event_id: Option<&str>) -> Option<Value> {
        match event {
            // The store lost the session: in the contract's words, it
            // expired (its state is gone; the client starts again).
            ServerEvent::Error { kind, message, .. } if kind == "state_lost" => Some(json!({
                "type": "session.expired",
                "reason": "state_lost",
                "message": message,
            })),
            ServerEvent::Error { kind, message, .. } => {
                let (class, code) = error_for(kind);
                Some(
                    RealtimeError {
                        class,
                        code,
                        message: message.clone(),
                        event_id: event_id.map(str::to_owned),
                    }
                    .to_value(),
                )
            }
            ServerEvent::Moved { session_id } => {
                Some(json!({"type": "session.moved", "session_id": session_id}))
            }
            _ => None,
        }
    }

    fn no_session(event_id: Option<String>) -> Value {
        RealtimeError::invalid(
            "no_session",
            "no session on this connection; send session.update (or session.resume) first",
            event_id,
        )
        .to_value()
    }

    /// Whether the session moved to another node (drained or adopted):
    /// the socket is told so, and the event that found out is not served.
    async fn told_moved(&mut self) -> bool {
        let Some(moved) = self.drain_answer() else {
            return false;
        };
        // `session.moved` tells this socket to go elsewhere: it describes
        // the attachment, not the session, so it is not numbered (as
        // `session.replaced` is not). Numbered, it would put the client's
        // cursor past what this node could still store once another node
        // adopted the session.
        if let Some(e) = Self::rt_error(&moved, None) {
            self.unnumbered(&e).await;
        }
        true
    }

    async fn on_realtime_event(&mut self, event: RealtimeEvent) {
        let session_event = !matches!(
            event,
            RealtimeEvent::EventAck { .. } | RealtimeEvent::Unsupported { .. }
        );
        if session_event && self.told_moved().await {
            return;
        }
        match event {
            RealtimeEvent::SessionUpdate { event_id, session } => {
                if self.rt.is_some() {
                    self.rt_update(session, event_id).await;
                } else {
                    let id = session
                        .get("session_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .or_else(|| match &self.dialect {
                            super::Dialect::Realtime { session_id, .. } => session_id.clone(),
                            super::Dialect::Native => None,
                        });
                    self.rt_open(id, session, event_id).await;
                }
            }
            RealtimeEvent::Heartbeat => self.rt_heartbeat().await,
            RealtimeEvent::EventAck { seq } => {
                let Some(rt) = &self.rt else { return };
                if let Err(head) = rt.stream.ack(seq).await {
                    let e = RealtimeError::invalid(
                        "invalid_event_ack",
                        format!("session.event_ack of {seq} is past the last event sent, {head}; nothing was dropped"),
                        None,
                    );
                    self.rt_send(vec![e.to_value()]).await;
                }
            }
            RealtimeEvent::Close => self.rt_close().await,
            RealtimeEvent::Resume {
                session_id,
                resume_token,
                last_seq,
            } => self.rt_resume(session_id, resume_token, last_seq).await,
            RealtimeEvent::Append {
                event_id,
                audio,
                transcript,
                hints,
            } => {
                self.rt_append(event_id.as_deref(), &audio, transcript.as_deref(), hints)
                    .await;
            }
            RealtimeEvent::Commit {
                event_id,
                response_create,
            } => self.rt_commit(event_id, response_create).await,
            RealtimeEvent::Clear { event_id } => self.rt_clear_input(event_id).await,
            RealtimeEvent::ResponseCreate { event_id } => self.rt_respond(event_id).await,
            RealtimeEvent::ResponseCancel { event_id, kind } => {
                self.rt_cancel(event_id, kind).await;
            }
            RealtimeEvent::Acknowledge {
                event_id,
                kind,
                body,
            } => self.rt_acknowledge(event_id, kind, &body).await,
            RealtimeEvent::Unsupported {
                event_id,
                code,
                message,
            } => {
                crate::stats::bump(&self.shared.stats.refused);
                let e = RealtimeError::invalid(code, message, event_id);
                self.rt_send(vec![e.to_value()]).await;
            }
        }
    }

    /// Opens a new session (the first `session.update`, or the socket's
    /// start): `session.created`, then `session.updated`.
    pub(super) async fn rt_open(
        &mut self,
        session_id: Option<String>,
        config: SessionConfig,
        event_id: Option<String>,
    ) {
        // The configuration is checked, measured and charged before the
        // session opens: a refused one opens nothing.
        let overlap = match self.overlap_asked(&config) {
            Ok(rule) => rule,
            Err(e) => return self.config_refused(e, event_id).await,
        };
        let config = match Config::new(config, &self.shared.journals.config_bytes) {
            Ok(config) => config,
            Err(e) => return self.config_refused(e, event_id).await,
        };
        let opened = self.open(session_id, None).await;
        let ServerEvent::Opened {
            session_id,
            incarnation,
            epoch,
            turn,
            resume_token,
            ..
        } = opened
        else {
            if let Some(e) = Self::rt_error(&opened, event_id.as_deref()) {
                self.rt_send(vec![e]).await;
            }
            return;
        };
        let Some(held) = self.bound.clone() else {
            return;
        };
        self.set_overlap(overlap);
        let stream = self.shared.journals.stream(&held.session);
        self.store_journal(&stream, &held).await;
        let auto = auto_response(&config).unwrap_or(false);
        let conv = Conversation::at((epoch, turn), auto, config);
        let session = conv.session_object(&session_id, self.shared.config.engine.chunk_period_ms());
        // `session.created` is the socket's, not the journal's, as in the
        // contract: unnumbered, never replayed, and its resume token never
        // stored with the journal.
        let created = |attachment: u64| {
            json!({
                "type": "session.created",
                "incarnation": incarnation,
                "attachment_generation": attachment,
                "resume_token": resume_token,
                "session": session.clone(),
            })
        };
        let Ok((attachment, _)) = stream
            .attach(self.outbox.clone(), None, Some(created))
            .await
        else {
            return;
        };
        if !conv.config.is_empty() {
            self.shared
                .config
                .engine
                .configured(held.session.as_str(), &conv.config);
        }
        self.rt = Some(Rt::new(stream, &held.client_id, attachment, conv));
        self.rt_send(vec![json!({"type": "session.updated", "session": session})])
            .await;
    }

    /// On a node of a cluster: the stream stores its journal in the
    /// directory, fenced by the incarnation this node holds the session at.
    pub(super) async fn store_journal(&self, stream: &Stream, held: &super::Held) {
        if let Some(node) = &self.shared.node {
            stream
                .store_in(Store {
                    directory: node.directory.clone(),
                    session: held.session.as_str().to_owned(),
                    incarnation: held.incarnation,
                })
                .await;
        }
    }

    /// A later `session.update`: merged into the session's config, echoed.
    /// A configuration past its bounds (`stream::Config`) is refused.
    async fn config_refused(&self, e: RealtimeError, event_id: Option<String>) {
        crate::stats::bump(&self.shared.stats.refused);
        let e = RealtimeError { event_id, ..e };
        self.rt_send(vec![e.to_value()]).await;
    }

    async fn rt_update(&mut self, update: SessionConfig, event_id: Option<String>) {
        let overlap = match self.overlap_asked(&update) {
            Ok(rule) => rule,
            Err(e) => return self.config_refused(e, event_id).await,
        };
        let Some(rt) = self.rt.as_mut() else { return };
        match rt
            .conv
            .config
            .merged(update, &self.shared.journals.config_bytes)
        {
            Ok(merged) => rt.conv.config = Arc::new(merged),
            Err(e) => return self.config_refused(e, event_id).await,
        }
        self.set_overlap(overlap);
        let Some(rt) = self.rt.as_mut() else { return };
        if let Some(auto) = auto_response(&rt.conv.config) {
            rt.conv.auto_response = auto;
        }
        rt.keep();
        let (id, session) = self
            .bound
            .as_ref()
            .map(|h| (h.client_id.to_string(), Some(&h.session)))
            .unwrap_or_default();
        if let Some(session) = session {
            let engine = &self.shared.config.engine;
            engine.configured(session.as_str(), &rt.conv.config);
        }
        let session = rt
            .conv
            .session_object(&id, self.shared.config.engine.chunk_period_ms());
        self.rt_send(vec![json!({"type": "session.updated", "session": session})])
            .await;
    }

    async fn rt_heartbeat(&mut self) {
        let (Some(held), Some(rt)) = (self.bound.as_ref(), self.rt.as_ref()) else {
            self.rt_send(vec![Self::no_session(None)]).await;
            return;
        };
        let fence = held.fence(rt.conv.epoch, rt.conv.core_turn);
        let touched = self.shared.manager.with_open(&held.session, |s, now| {
            s.check_generation(held.generation)?;
            s.touch(&fence, Activity::Heartbeat, now)
        });
        let refusal = match touched {
            Some(Ok(())) => {
                let ack = realtime::numberable_copy(&rt.heartbeat_ack);
                rt.stream.answer(rt.attachment, &self.outbox, [ack]).await;
                return;
            }
            Some(Err(e)) => self.manager_error(&Error::from(e), None),
            // The refusal (rare) takes its own copy of the session: the
            // answer above borrows what the connection holds.
            None => {
                let held = held.clone();
                self.not_open(&held, None).await
            }
        };
        let answer = Self::rt_error(&refusal, None).unwrap_or(Value::Null);
        self.rt_send(vec![answer]).await;
    }

    async fn rt_append(
        &mut self,
        event_id: Option<&str>,
        audio: &str,
        transcript: Option<&str>,
        hints: AppendHints,
    ) {
        let (Some(held), Some(rt)) = (self.bound.clone(), self.rt.as_mut()) else {
            self.rt_send(vec![Self::no_session(event_id.map(str::to_owned))])
                .await;
            return;
        };
        let mut chunk = std::mem::take(&mut self.audio);
        if let Err(e) = realtime::decode_audio_into(audio, event_id, &mut chunk) {
            self.audio = chunk;
            self.rt_send(vec![e.to_value()]).await;
            return;
        }
        let op = if let Some(id) = event_id {
            operation_id(id)
        } else {
            rt.anonymous += 1;
            Cow::Owned(format!("~{}.{}", rt.attachment, rt.anonymous))
        };
        let key = match self.id(&op, Some(&op)) {
            Ok(key) => key,
            Err(refusal) => {
                self.audio = chunk;
                if let Some(e) = Self::rt_error(&refusal, event_id) {
                    self.rt_send(vec![e]).await;
                }
                return;
            }
        };
        // A chunk sent again keeps the fence of its first send: the core
        // answers it from the idempotency cache, or refuses it as stale
        // once the session has moved past that fence (never applies it
        // again under a newer one; a barge-in clears the core's cache, so
        // the stream remembers).
        // The stream is borrowed on either side of the append, not cloned
        // across it: its count shares a cache line with the lock the
        // engine's task takes, and a chunk would pay for that line twice.
        let first = self.rt.as_ref().and_then(|rt| rt.stream.fence_of(&key));
        // Over the model's speech, on the contract's paths, the session
        // decides what the chunk is (a chunk sent again was decided when
        // it first came).
        if first.is_none() && self.contract() && !self.rt_overlap(&chunk, transcript, hints).await {
            self.audio = chunk;
            return;
        }
        let Some(rt) = self.rt.as_ref() else {
            self.audio = chunk;
            return;
        };
        let (epoch, turn) = first.unwrap_or((rt.conv.epoch, rt.conv.turn));
        let applied = self.append_chunk(held, &key, epoch, turn, &chunk).await;
        self.audio = chunk;
        // An append is answered by nothing in this dialect.
        match applied {
            Ok(Applied { duplicate, .. }) => {
                // The connection's events run one at a time: the session the
                // append went to is still the one this socket holds.
                let contract = self.contract();
                if let Some(rt) = self.rt.as_mut() {
                    if !duplicate {
                        rt.stream.remember_fence(key, (epoch, turn));
                    }
                    let hint = transcript.filter(|_| !duplicate);
                    // The turn's first chunk: on the contract's sockets,
                    // speech starts (its serving layer says so without
                    // voice activity detection too).
                    let started = contract && !rt.conv.pending;
                    if !rt.conv.pending || rt.conv.core_turn < turn || hint.is_some() {
                        rt.conv.pending = true;
                        rt.conv.core_turn = rt.conv.core_turn.max(turn);
                        if let Some(hint) = hint {
                            rt.conv.heard(hint);
                        }
                        rt.keep();
                    }
                    if started {
                        let item = rt.conv.item();
                        let event = realtime::speech_started(&item);
                        rt.stream
                            .answer(rt.attachment, &self.outbox, vec![event])
                            .await;
                    }
                }
            }
            Err(refusal) => {
                if let Some(e) = Self::rt_error(&refusal, event_id) {
                    self.rt_send(vec![e]).await;
                }
            }
        }
    }

    async fn rt_commit(&mut self, event_id: Option<String>, response_create: Option<bool>) {
        let contract = self.contract();
        let Some(rt) = self.rt.as_mut() else {
            self.rt_send(vec![Self::no_session(event_id)]).await;
            return;
        };
        if !rt.conv.pending {
            let e = RealtimeError::invalid(
                "input_audio_buffer_commit_empty",
                "input_audio_buffer.commit needs audio appended since the last commit",
                event_id,
            );
            self.rt_send(vec![e.to_value()]).await;
            return;
        }
        let item = rt.conv.item();
        let transcript = rt.conv.take_transcript();
        let commit = realtime::Commit {
            item: &item,
            previous: rt.conv.last_item.as_deref(),
            turn: rt.conv.turn,
            epoch: rt.conv.epoch,
            transcript: transcript.as_deref(),
        };
        let events = if contract {
            commit.contract_events()
        } else {
            commit.events()
        };
        rt.stream.made_item(&item).await;
        rt.conv.last_item = Some(item);
        rt.conv.pending = false;
        // The turn is the engine's now, answered or not: its audio no
        // longer counts against the session's budget.
        self.release_input();
        let Some(rt) = self.rt.as_mut() else { return };
        rt.conv.turn += 1;
        rt.keep();
        let respond = response_create.unwrap_or(rt.conv.auto_response);
        rt.stream.answer(rt.attachment, &self.outbox, events).await;
        if respond {
            self.rt_respond(event_id).await;
        }
    }

    /// `response.create`: the engine answers the last turn the core saw.
    async fn rt_respond(&mut self, event_id: Option<String>) {
        let Some(rt) = self.rt.as_ref() else {
            self.rt_send(vec![Self::no_session(event_id)]).await;
            return;
        };
        if rt.stream.responding().await {
            let e = RealtimeError::invalid(
                "conversation_already_has_active_response",
                "a response is in progress; cancel it (response.cancel) or wait for response.done",
                event_id,
            );
            self.rt_send(vec![e.to_value()]).await;
            return;
        }
        let (epoch, turn) = (rt.conv.epoch, rt.conv.core_turn);
        if let Some(refusal) = self.commit(epoch, turn).await {
            if let Some(e) = Self::rt_error(&refusal, event_id.as_deref()) {
                self.rt_send(vec![e]).await;
            }
        }
    }

    async fn rt_close(&mut self) {
        let Some(rt) = self.rt.as_ref() else {
            self.rt_send(vec![Self::no_session(None)]).await;
            return;
        };
        let stream = Arc::clone(&rt.stream);
        let session = self.bound.as_ref().map(|h| h.session.clone());
        let answer = self.close().await;
        match &answer {
            ServerEvent::Closed { session_id, .. } => {
                stream.cancel_all("session_closed").await;
                stream
                    .emit(vec![json!({"type": "session.closed", "session_id": session_id, "reason": "client_close"})])
                    .await;
                if let Some(session) = session {
                    self.shared.journals.remove(&session).await;
                }
                self.rt = None;
            }
            other => {
                if let Some(e) = Self::rt_error(other, None) {
                    self.rt_send(vec![e]).await;
                }
            }
        }
    }
}

mod control;
mod overlap;
