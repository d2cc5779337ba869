//! One WebSocket connection's events: it holds at most one session, decodes
//! each text message, runs it on the shared manager and answers into its
//! outbox (the socket itself is `transport`'s). The stand-in engine's
//! responses stream from their own tasks.
//!
//! Every operation that changes a session runs inside one shard lock with a
//! check of the lease generation the connection was handed: after a client
//! reconnects and resumes, anything still arriving on the superseded socket
//! is refused (`generation_mismatch`) instead of racing the new one.

mod admin;
mod opening;
mod realtime;
mod resuming;
mod storing;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::profile::Fence;
use crate::profile::ManagerError as Error;
use crate::Id;
use duplex_core::ErrorKind;
use duplex_core::{Activity, Appended, CloseReason, Error as CoreError, Finality, InputMode};
use duplex_std::Sessions;
use tokio_tungstenite::tungstenite::Message;

use crate::engine::{Input, Turn};
use crate::protocol::{decode, decode_audio_into, ClientEvent, ProtocolError, ServerEvent};
use crate::server::auth::scoped;
use crate::server::durable::Changes;
use crate::server::emit::Emitter;
use crate::server::engine::answer;
use crate::server::outbox::Outbox;
use crate::server::responses::Active;
use crate::server::state::Shared;
use crate::stats::{add, bump};

/// Chunks are appended in this mode.
const AUDIO: InputMode = InputMode::AppendAudioChunk;

/// The stage the stand-in engine binds its response requests on.
const RESPONSE_STAGE: u32 = 0;

/// The session a connection holds, and the lease generation it was handed.
#[derive(Debug, Clone)]
struct Held {
    /// The id the manager knows it by (scoped to the principal).
    session: Id,
    /// The id the client knows it by (shared: a chunk's append takes its
    /// own copy of what the connection holds, and copies no string).
    client_id: Arc<str>,
    incarnation: u64,
    generation: u64,
}

/// A chunk the session applied (or had applied already: `duplicate`).
struct Applied {
    seq: u64,
    turn_seq: u64,
    duplicate: bool,
}

impl Held {
    fn fence(&self, epoch: u64, turn: u64) -> Fence {
        Fence::new(self.session.clone(), self.incarnation)
            .with_epoch(epoch)
            .with_turn(turn)
    }
}

/// Which dialect a connection speaks, from the path of its handshake.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Dialect {
    /// The gateway's own (`PROTOCOL.md`), on any other path.
    #[default]
    Native,
    /// The realtime dialect, on `/v1/realtime` and `/v1/duplex`.
    Realtime {
        /// Open a session when the socket connects (unless `autostart=0`).
        autostart: bool,
        /// The `session_id` query parameter: the id a session opens under.
        session_id: Option<String>,
        /// vllm-omni's duplex contract rules (`/v1/duplex`, or
        /// `/v1/realtime?duplex=1`): its error codes where they differ from
        /// OpenAI's. Plain `/v1/realtime` speaks OpenAI's.
        contract: bool,
    },
}

/// A connection's state.
#[derive(Debug)]
pub(crate) struct Connection {
    shared: Arc<Shared>,
    outbox: Outbox,
    /// Who the connection authenticated as (`None` without `--auth-secret`).
    principal: Option<String>,
    bound: Option<Held>,
    dialect: Dialect,
    /// The realtime dialect's state of the session held.
    rt: Option<realtime::Rt>,
    /// The last chunk's audio, decoded: one buffer for every chunk of the
    /// connection.
    audio: Vec<u8>,
}

impl Connection {
    /// A connection that answers into `outbox` (also used by the
    /// decoder's property test, without a socket).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn new(shared: Arc<Shared>, outbox: Outbox, principal: Option<String>) -> Self {
        Self::speaking(shared, outbox, principal, Dialect::Native)
    }

    /// A connection in `dialect`.
    pub(crate) fn speaking(
        shared: Arc<Shared>,
        outbox: Outbox,
        principal: Option<String>,
        dialect: Dialect,
    ) -> Self {
        Connection {
            shared,
            outbox,
            principal,
            bound: None,
            dialect,
            rt: None,
            audio: Vec::new(),
        }
    }

    /// The socket is up: a realtime connection opens its session now
    /// unless its handshake said `autostart=0` (as OpenAI's server sends
    /// `session.created` first).
    pub(crate) async fn started(&mut self) {
        if let Dialect::Realtime {
            autostart: true,
            session_id,
            ..
        } = self.dialect.clone()
        {
            self.rt_open(session_id, serde_json::Map::new(), None).await;
        }
    }

    /// Decodes and answers one text message.
    pub(crate) async fn on_text(&mut self, text: &str) {
        if self.dialect != Dialect::Native {
            self.on_realtime_text(text).await;
            return;
        }
        let events_in = &self.shared.metrics.native.events_in;
        let reply = match decode(text) {
            Ok(event) => {
                events_in.bump(event.name());
                self.on_event(event).await
            }
            Err(e) => {
                events_in.bump("invalid");
                Some(self.protocol_error(&e))
            }
        };
        if let Some(reply) = reply {
            self.send(reply).await;
        }
    }

    /// Sends a refusal (or another answer) in the connection's dialect.
    pub(crate) async fn send(&self, event: ServerEvent) {
        if self.dialect != Dialect::Native {
            if let Some(value) = Self::rt_error(&event, None) {
                self.rt_send(vec![value]).await;
            }
            return;
        }
        self.outbox.send(Message::text(event.to_json())).await;
    }

    /// An event over the connection's rate, refused unread.
    pub(crate) async fn rate_limited(&self) {
        bump(&self.shared.stats.rate_limited);
        let refusal = self.refusal(
            "rate_limited",
            "more events per second than this connection may send; nothing was applied",
            None,
        );
        self.send(refusal).await;
    }

    pub(crate) fn protocol_error(&self, e: &ProtocolError) -> ServerEvent {
        bump(&self.shared.stats.refused);
        ServerEvent::error(e.kind(), e.to_string())
    }

    fn refusal(
        &self,
        kind: &str,
        message: impl Into<String>,
        event_id: Option<&str>,
    ) -> ServerEvent {
        if kind == ErrorKind::FenceMismatch.as_str() {
            bump(&self.shared.stats.fence_refused);
        } else {
            bump(&self.shared.stats.refused);
        }
        ServerEvent::Error {
            kind: kind.to_owned(),
            message: message.into(),
            event_id: event_id.map(str::to_owned),
        }
    }

    fn manager_error(&self, e: &Error, event_id: Option<&str>) -> ServerEvent {
        let kind = e.kind();
        if kind == ErrorKind::GenerationMismatch {
            // The lease generation is the server's business: a superseded
            // socket learns that it was superseded, not the numbers.
            return self.refusal(
                kind.as_str(),
                "this connection no longer holds the session: a resume on another connection took it over",
                event_id,
            );
        }
        self.refusal(kind.as_str(), e.to_string(), event_id)
    }

    async fn on_event(&mut self, event: ClientEvent) -> Option<ServerEvent> {
        if let Some(moved) = self.draining(&event) {
            return Some(moved);
        }
        match event {
            ClientEvent::Open {
                session_id,
                resume_token,
            } => Some(self.open(session_id, resume_token).await),
            ClientEvent::Append {
                event_id,
                epoch,
                turn,
                audio,
            } => Some(self.append(event_id, epoch, turn, &audio).await),
            ClientEvent::Commit { epoch, turn } => self.commit(epoch, turn).await,
            ClientEvent::Cancel { epoch, turn } => Some(self.cancel(epoch, turn).await),
            ClientEvent::Close {} => Some(self.close().await),
            ClientEvent::Audit {
                session_id,
                admin_token,
                from,
                principal,
            } => {
                if let Some(refusal) = self.not_admin(admin_token.as_deref()) {
                    Some(refusal)
                } else {
                    let session = scoped(principal.as_deref(), &session_id);
                    Some(self.audit(session, from.unwrap_or(0)).await)
                }
            }
            ClientEvent::Stats { admin_token } => {
                self.not_admin(admin_token.as_deref()).or_else(|| {
                    Some(ServerEvent::Stats {
                        sessions: self.shared.manager.len() as u64,
                        connections: self.shared.slots.open() as u64,
                        counters: Box::new(self.shared.counters()),
                    })
                })
            }
            ClientEvent::Unknown => Some(self.protocol_error(&ProtocolError::UnknownType)),
        }
    }

    fn id(&self, id: &str, event_id: Option<&str>) -> Result<Id, ServerEvent> {
        Id::new(id).map_err(|e| self.manager_error(&Error::from(e), event_id))
    }

    fn bound(&self, event_id: Option<&str>) -> Result<Held, ServerEvent> {
        self.bound.clone().ok_or_else(|| {
            self.refusal(
                "no_session",
                "no session on this connection; send session.open first",
                event_id,
            )
        })
    }

    /// While the node drains, a session event is answered
    /// `session.moved`: the session is stored (or about to be) for another
    /// node to take over.
    fn draining(&self, event: &ClientEvent) -> Option<ServerEvent> {
        let session_event = matches!(
            event,
            ClientEvent::Append { .. }
                | ClientEvent::Commit { .. }
                | ClientEvent::Cancel { .. }
                | ClientEvent::Close {}
                | ClientEvent::Open { .. }
        );
        if !session_event {
            return None;
        }
        self.drain_answer()
    }

    /// While the node drains: the answer to any session event.
    fn drain_answer(&self) -> Option<ServerEvent> {
        if !self
            .shared
            .draining
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return None;
        }
        Some(match &self.bound {
            Some(held) => ServerEvent::Moved {
                session_id: held.client_id.to_string(),
            },
            None => self.refusal(
                "unavailable",
                "this node is shutting down; connect to another",
                None,
            ),
        })
    }

    async fn append(
        &mut self,
        event_id: String,
        epoch: u64,
        turn: u64,
        audio: &str,
    ) -> ServerEvent {
        let ev = Some(event_id.as_str());
        let held = match self.bound(ev) {
            Ok(held) => held,
            Err(e) => return e,
        };
        let mut chunk = std::mem::take(&mut self.audio);
        if let Err(e) = decode_audio_into(audio, &mut chunk) {
            self.audio = chunk;
            return self.refusal(e.kind(), e.to_string(), ev);
        }
        let applied = match self.id(&event_id, ev) {
            Ok(op) => self.append_chunk(held, &op, epoch, turn, &chunk).await,
            Err(e) => Err(e),
        };
        self.audio = chunk;
        match applied {
            Ok(Applied {
                seq,
                turn_seq,
                duplicate,
            }) => ServerEvent::Appended {
                event_id,
                seq,
                turn_seq,
                duplicate,
            },
            Err(refusal) => refusal,
        }
    }

    /// Appends one decoded chunk under `op` (its idempotency key) at
    /// `(epoch, turn)`; the refusal, in the native dialect, if it is not
    /// applied.
    async fn append_chunk(
        &mut self,
        held: Held,
        op: &Id,
        epoch: u64,
        turn: u64,
        chunk: &[u8],
    ) -> Result<Applied, ServerEvent> {
        let since = std::time::Instant::now();
        let ev = Some(op.as_str());
        let fence = held.fence(epoch, turn);
        let audit = self.shared.audit.as_ref();
        let applied = self.shared.manager.with_open(&held.session, |s, now| {
            s.check_generation(held.generation)?;
            if let Some(r) = s.completed(&fence, op, AUDIO, Finality::Partial)? {
                let at = |i: usize| r.get(i).and_then(|&v| u64::try_from(v).ok()).unwrap_or(0);
                let cached = Appended {
                    seq: at(0),
                    turn_seq: at(1),
                    turn_id: turn,
                };
                return Ok((cached, true));
            }
            // The chunk counts against the session's budget until its
            // turn is committed (or the input is dropped): past the budget
            // it is refused, and an append refused after it gives it back.
            let bytes = u64::try_from(chunk.len()).unwrap_or(u64::MAX);
            s.reserve_input(&fence, bytes)?;
            let a = match s.append(&fence, AUDIO) {
                Ok(a) => a,
                Err(e) => {
                    s.release_input(bytes);
                    return Err(e);
                }
            };
            // Neither step below can fail once the append admitted the
            // fence: touch admits the same fence, and two results fit the
            // completed-append cache's results table.
            s.touch(&fence, Activity::Append, now)?;
            let results = [a.seq, a.turn_seq].map(|v| i64::try_from(v).unwrap_or(i64::MAX));
            s.record_completed(&fence, op, AUDIO, Finality::Partial, &results)?;
            if let Some(audit) = audit {
                audit.push(
                    held.session.as_str(),
                    (epoch, a.seq, op.as_str().to_owned()),
                );
            }
            Ok::<_, CoreError>((a, false))
        });
        match applied {
            None => Err(self.not_open(&held, ev).await),
            Some(Err(e)) => Err(self.manager_error(&Error::from(e), ev)),
            Some(Ok((a, duplicate))) => {
                // The engine hears each chunk once.
                if !duplicate {
                    let input = Input::new(held.session.as_str(), (epoch, turn), chunk);
                    self.shared.config.engine.audio(input);
                }
                // A duplicate is stored too: its first acknowledgement may
                // not have been.
                let mut changes = Changes::default();
                if !duplicate && self.shared.node.is_some() {
                    changes.applied.push(format!("{epoch}:{}:{op}", a.seq));
                }
                if let Some(refusal) = self.stored(&held.session, changes, ev).await {
                    return Err(refusal);
                }
                bump(if duplicate {
                    &self.shared.stats.duplicates
                } else {
                    &self.shared.stats.appended
                });
                self.shared.metrics.appended(since);
                Ok(Applied {
                    seq: a.seq,
                    turn_seq: a.turn_seq,
                    duplicate,
                })
            }
        }
    }

    /// The user's turn ended: bind the engine's response request and stream
    /// it from a task. Answers only on refusal; the response is the answer.
    async fn commit(&mut self, epoch: u64, turn: u64) -> Option<ServerEvent> {
        let held = match self.bound(None) {
            Ok(held) => held,
            Err(e) => return Some(e),
        };
        let n = self
            .shared
            .next_request
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = match self.id(&format!("r{}{n}", self.shared.request_prefix), None) {
            Ok(id) => id,
            Err(e) => return Some(e),
        };
        let fence = held.fence(epoch, turn);
        let bound = self.shared.manager.with_open(&held.session, |s, now| {
            s.check_generation(held.generation)?;
            s.bind(&fence, RESPONSE_STAGE, &request)?;
            s.touch(&fence, Activity::Signal, now)?;
            // The engine takes the committed audio up with the answer.
            s.release_all_input();
            Ok::<_, CoreError>(())
        });
        match bound {
            None => return Some(self.not_open(&held, None).await),
            Some(Err(e)) => return Some(self.manager_error(&Error::from(e), None)),
            Some(Ok(())) => {}
        }
        // The engine starts a request only once the directory knows it is
        // bound: whoever takes the session over then releases it.
        if self.shared.node.is_some() {
            let changes = Changes {
                bound: vec![request.as_str().to_owned()],
                ..Changes::default()
            };
            if let Some(refusal) = self.stored(&held.session, changes, None).await {
                return Some(refusal);
            }
        }
        bump(&self.shared.stats.requests_bound);
        // A realtime session's response opens on its stream before the
        // engine's first delta can.
        let emit = match self.rt.as_ref() {
            Some(rt) => {
                rt.stream.open_response(request.as_str(), epoch, turn).await;
                Emitter::Realtime {
                    stream: Arc::clone(&rt.stream),
                    stored: self.shared.node.is_some(),
                }
            }
            None => Emitter::Native(self.outbox.clone()),
        };
        // The session's responses are locked across the spawn and the
        // push, so the task cannot look for its entry before it is there.
        let mut in_flight = self.shared.responses.of(&held.session);
        let answering = Turn::new(held.session.as_str(), request.as_str(), (epoch, turn));
        let task = tokio::spawn(answer(
            Arc::clone(&self.shared),
            fence,
            request.clone(),
            answering,
            emit,
        ));
        in_flight.push(Active {
            request,
            epoch,
            turn,
            task: task.abort_handle(),
        });
        None
    }

    /// Barge-in: the epoch moves on, and every response of an older epoch
    /// the session is answering is cancelled and its request released,
    /// whichever of its sockets started it.
    async fn cancel(&mut self, epoch: u64, turn: u64) -> ServerEvent {
        let held = match self.bound(None) {
            Ok(held) => held,
            Err(e) => return e,
        };
        let Some(next_epoch) = epoch.checked_add(1) else {
            return self.refusal(
                "fence_mismatch",
                "the epoch cannot advance past u64::MAX",
                None,
            );
        };
        let cancelled = held.fence(epoch, turn);
        let next = held.fence(next_epoch, turn);
        let request_ids = {
            let mut in_flight = self.shared.responses.of(&held.session);
            let result = self.shared.manager.with_open(&held.session, |s, _| {
                s.check_generation(held.generation)?;
                let mut ids: Vec<String> = s
                    .cancel(&cancelled, &next)?
                    .iter()
                    .map(|id| id.as_str().to_owned())
                    .collect();
                // The old epoch's input is thrown away with it.
                s.cancel_pending_input();
                // Requests of older epochs at another position are stale
                // now: released here, in the same lock, so each is
                // reported once.
                ids.extend(s.release_drained().iter().map(|id| id.as_str().to_owned()));
                Ok::<_, CoreError>(ids)
            });
            match result {
                None => None,
                Some(Err(e)) => return self.manager_error(&Error::from(e), None),
                Some(Ok(request_ids)) => {
                    let stopped = in_flight.cancel(|a| {
                        a.epoch < next_epoch || request_ids.iter().any(|r| r == a.request.as_str())
                    });
                    Some((request_ids, stopped))
                }
            }
        };
        let Some((request_ids, stopped)) = request_ids else {
            return self.not_open(&held, None).await;
        };
        self.shared.cancelled(&held.session, &stopped);
        add(&self.shared.stats.requests_cancelled, request_ids.len());
        let changes = Changes {
            released: request_ids.clone(),
            ..Changes::default()
        };
        if let Some(refusal) = self.stored(&held.session, changes, None).await {
            return refusal;
        }
        ServerEvent::Cancelled {
            epoch: next_epoch,
            turn,
            request_ids,
        }
    }

    async fn close(&mut self) -> ServerEvent {
        let held = match self.bound(None) {
            Ok(held) => held,
            Err(e) => return e,
        };
        let Some(fence) = self
            .shared
            .manager
            .with_session(&held.session, |s| s.fence().clone())
        else {
            self.bound = None;
            return self.manager_error(
                &Error::UnknownSession {
                    session: held.session,
                },
                None,
            );
        };
        // The generation is checked under the lock that closes: a resume
        // by a newer connection in between is never closed from here.
        match self.shared.manager.close_generation(
            &fence,
            held.generation,
            CloseReason::ClientClose,
        ) {
            Err(e) if e.kind() == ErrorKind::GenerationMismatch => {
                self.bound = None;
                self.manager_error(&e, None)
            }
            Err(e) => self.manager_error(&e, None),
            Ok(released) => {
                self.shared.ended(&held.session);
                let request_ids: Vec<String> = released
                    .iter()
                    .flat_map(|ids| ids.iter().map(|id| id.as_str().to_owned()))
                    .collect();
                bump(&self.shared.stats.closed);
                add(&self.shared.stats.requests_closed, request_ids.len());
                let stored = self
                    .shared
                    .store_close(
                        held.session.as_str(),
                        fence.incarnation,
                        request_ids.clone(),
                    )
                    .await;
                self.bound = None;
                if let Some(refusal) = self.unstored(stored, None) {
                    return refusal;
                }
                ServerEvent::Closed {
                    session_id: held.client_id.to_string(),
                    request_ids,
                }
            }
        }
    }

    /// At a cluster node's shutdown, after the drain stored every session:
    /// tell the client where its session went.
    pub(crate) fn moved(&self) -> Option<ServerEvent> {
        let held = self.bound.as_ref()?;
        self.shared.node.as_ref()?;
        Some(ServerEvent::Moved {
            session_id: held.client_id.to_string(),
        })
    }

    /// Stops generating the held session's responses (close, shutdown, the
    /// session gone from here), whichever socket started them. Their
    /// requests stay in the session until the close releases them.
    pub(crate) fn stop_responses(&self) {
        if let Some(held) = &self.bound {
            self.shared.stop_responses(&held.session);
        }
    }

    /// A realtime session's stream stops sending to this socket (it keeps
    /// journaling): the stream holds the socket's outbox until then, and
    /// the socket's writer ends only when no one does.
    pub(crate) async fn leave_stream(&self) {
        if let Some(rt) = &self.rt {
            rt.stream.detach(rt.attachment).await;
        }
    }

    /// The socket went away without `session.close`: detach, unless a newer
    /// connection already holds the session. Responses being streamed run
    /// to their end and release their requests.
    pub(crate) async fn dropped(&self) {
        self.leave_stream().await;
        let Some(held) = &self.bound else { return };
        let Some(fence) = self
            .shared
            .manager
            .with_session(&held.session, |s| s.fence().clone())
        else {
            return;
        };
        if self
            .shared
            .manager
            .detach_generation(&fence, held.generation)
            .is_ok()
        {
            bump(&self.shared.stats.detached);
            let _ = self.shared.store(&held.session, Changes::default()).await;
        }
    }
}
