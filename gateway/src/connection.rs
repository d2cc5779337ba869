//! One WebSocket connection's events: it holds at most one session, decodes
//! each text message, runs it on the shared manager and answers into its
//! outbox (the socket itself is `transport`'s). The stand-in engine's
//! responses stream from their own tasks.
//!
//! Every operation that changes a session runs inside one shard lock with a
//! check of the lease generation the connection was handed: after a client
//! reconnects and resumes, anything still arriving on the superseded socket
//! is refused (`generation_mismatch`) instead of racing the new one.

use std::sync::{Arc, Mutex};

use duplex_core::ErrorKind;
use duplex_core::{
    Activity, Appended, CloseReason, Error as CoreError, Fence, Finality, Id, InputMode,
    LeaseConfig, Modes, OpenOptions,
};
use duplex_std::{Error, Sessions};
use tokio_tungstenite::tungstenite::Message;

use crate::auth::scoped;
use crate::engine::{lock, release_held, stream_response, Active, ActiveList};
use crate::ownership::{new_session_id, Owner};
use crate::protocol::{decode, decode_audio, ClientEvent, ProtocolError, ServerEvent, AUDIT_PAGE};
use crate::state::Shared;
use crate::stats::{add, bump};
use crate::transport::Outbox;

/// Chunks are appended in this mode.
const AUDIO: InputMode = InputMode::AppendAudioChunk;

/// The stage the stand-in engine binds its response requests on.
const RESPONSE_STAGE: u32 = 0;

/// The session a connection holds, and the lease generation it was handed.
#[derive(Debug, Clone)]
struct Held {
    /// The id the manager knows it by (scoped to the principal).
    session: Id,
    /// The id the client knows it by.
    client_id: String,
    incarnation: u64,
    generation: u64,
}

impl Held {
    fn fence(&self, epoch: u64, turn: u64) -> Fence {
        Fence::new(self.session.clone(), self.incarnation)
            .with_epoch(epoch)
            .with_turn(turn)
    }
}

/// A connection's state.
#[derive(Debug)]
pub(crate) struct Connection {
    shared: Arc<Shared>,
    outbox: Outbox,
    /// Who the connection authenticated as (`None` without `--auth-secret`).
    principal: Option<String>,
    bound: Option<Held>,
    active: ActiveList,
}

impl Connection {
    /// A connection that answers into `outbox` (also used by the
    /// decoder's property test, without a socket).
    pub(crate) fn new(shared: Arc<Shared>, outbox: Outbox, principal: Option<String>) -> Self {
        Connection {
            shared,
            outbox,
            principal,
            bound: None,
            active: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Decodes and answers one text message.
    pub(crate) async fn on_text(&mut self, text: &str) {
        let reply = match decode(text) {
            Ok(event) => self.on_event(event),
            Err(e) => Some(self.protocol_error(&e)),
        };
        if let Some(reply) = reply {
            self.send(reply).await;
        }
    }

    pub(crate) async fn send(&self, event: ServerEvent) {
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

    fn on_event(&mut self, event: ClientEvent) -> Option<ServerEvent> {
        match event {
            ClientEvent::Open {
                session_id,
                resume_token,
            } => Some(self.open(session_id, resume_token)),
            ClientEvent::Append {
                event_id,
                epoch,
                turn,
                audio,
            } => Some(self.append(event_id, epoch, turn, &audio)),
            ClientEvent::Commit { epoch, turn } => self.commit(epoch, turn),
            ClientEvent::Cancel { epoch, turn } => Some(self.cancel(epoch, turn)),
            ClientEvent::Close {} => Some(self.close()),
            ClientEvent::Audit {
                session_id,
                admin_token,
                from,
                principal,
            } => self.not_admin(admin_token.as_deref()).or_else(|| {
                let session = scoped(principal.as_deref(), &session_id);
                Some(self.audit(session, from.unwrap_or(0)))
            }),
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

    /// Why a typed operation found no open session.
    fn not_open(&self, held: &Held, event_id: Option<&str>) -> ServerEvent {
        match self
            .shared
            .manager
            .with_session(&held.session, duplex_core::AnySession::kind)
        {
            None => self.manager_error(
                &Error::UnknownSession {
                    session: held.session.clone(),
                },
                event_id,
            ),
            Some(state) => self.refusal(
                ErrorKind::WrongState.as_str(),
                format!("session is {state}; this event needs it open"),
                event_id,
            ),
        }
    }

    fn open(&mut self, session_id: Option<String>, resume_token: Option<String>) -> ServerEvent {
        if let Some(held) = &self.bound {
            return self.refusal(
                "already_open",
                format!(
                    "this connection holds session {}; one session per connection",
                    held.client_id
                ),
                None,
            );
        }
        match resume_token {
            Some(token) => self.resume(session_id, &token),
            None => self.open_new(session_id),
        }
    }

    /// The one answer to a resume that is not the owner's: the same
    /// whether the session is unknown or the token wrong, so that it tells
    /// nothing about which ids are live or what the token should be.
    fn resume_refused(&self) -> ServerEvent {
        bump(&self.shared.stats.resumes_refused);
        self.refusal(
            "resume_refused",
            "no session with this id accepts this resume token (a token resumes once; the session may also have closed or expired)",
            None,
        )
    }

    fn resume(&mut self, session_id: Option<String>, token: &str) -> ServerEvent {
        let Some(session_id) = session_id else {
            return self.refusal(
                "malformed",
                "a resume (resume_token given) needs the session_id",
                None,
            );
        };
        if <Id>::new(&session_id).is_err() {
            return self.resume_refused();
        }
        let Ok(session) = Id::new(&scoped(self.principal.as_deref(), &session_id)) else {
            return self.resume_refused();
        };
        let Some((fence, owner, generation)) = self
            .shared
            .manager
            .with_session(&session, |s| {
                let owner = s
                    .as_open()
                    .map(|o| *o.session_config())
                    .or_else(|| s.as_detached().map(|d| *d.session_config()))?;
                Some((s.fence().clone(), owner, s.lease_generation()))
            })
            .flatten()
        else {
            return self.resume_refused();
        };
        let keys = &self.shared.keys;
        if !keys.verify(session.as_str(), &owner, generation, token) {
            return self.resume_refused();
        }
        // The token is the owner's for `generation`; the core resumes only
        // if the session is still there, under the same shard lock, so of
        // two resumes with one token only the first wins.
        match self.shared.manager.resume(&fence, generation) {
            Ok(next) => {
                bump(&self.shared.stats.resumed);
                self.bound = Some(Held {
                    session: session.clone(),
                    client_id: session_id.clone(),
                    incarnation: fence.incarnation,
                    generation: next,
                });
                ServerEvent::Opened {
                    resume_token: keys.token(session.as_str(), &owner, next),
                    session_id,
                    incarnation: fence.incarnation,
                    epoch: fence.epoch,
                    turn: fence.turn,
                    resumed: true,
                }
            }
            Err(_) => self.resume_refused(),
        }
    }

    fn open_new(&mut self, session_id: Option<String>) -> ServerEvent {
        let session_id = match session_id.map_or_else(new_session_id, Ok) {
            Ok(id) => id,
            Err(e) => return self.cannot_draw(&e),
        };
        // The client's id is checked as the client gave it; the manager
        // knows it scoped to the principal.
        if let Err(e) = self.id(&session_id, None) {
            return e;
        }
        let session = match self.id(&scoped(self.principal.as_deref(), &session_id), None) {
            Ok(id) => id,
            Err(e) => return e,
        };
        // Admission first (in the manager's order: an existing id, then a
        // full gateway), so a refused open costs no secret; the permit
        // gives its slot back if the open does not happen.
        let permit = match self.shared.manager.admit_for(&session) {
            Ok(permit) => permit,
            Err(e) => return self.manager_error(&e, None),
        };
        let owner = match Owner::draw() {
            Ok(owner) => owner,
            Err(e) => return self.cannot_draw(&e),
        };
        match permit.open(
            Fence::new(session.clone(), 0),
            options(self.shared.lease, owner),
        ) {
            Ok(()) => {
                bump(&self.shared.stats.opened);
                self.bound = Some(Held {
                    session: session.clone(),
                    client_id: session_id.clone(),
                    incarnation: 0,
                    generation: 0,
                });
                ServerEvent::Opened {
                    resume_token: self.shared.keys.token(session.as_str(), &owner, 0),
                    session_id,
                    incarnation: 0,
                    epoch: 0,
                    turn: 0,
                    resumed: false,
                }
            }
            Err(e) => self.manager_error(&e, None),
        }
    }

    /// The OS random source failed: no session id or secret can be made.
    fn cannot_draw(&self, e: &impl std::fmt::Display) -> ServerEvent {
        tracing::error!("open refused: {e}");
        self.refusal(
            "internal",
            "the server cannot make a session id or token now",
            None,
        )
    }

    fn append(&mut self, event_id: String, epoch: u64, turn: u64, audio: &str) -> ServerEvent {
        let ev = Some(event_id.as_str());
        let held = match self.bound(ev) {
            Ok(held) => held,
            Err(e) => return e,
        };
        let chunk = match decode_audio(audio) {
            Ok(chunk) => chunk,
            Err(e) => return self.refusal(e.kind(), e.to_string(), ev),
        };
        let op = match self.id(&event_id, ev) {
            Ok(op) => op,
            Err(e) => return e,
        };
        let fence = held.fence(epoch, turn);
        let audit = self.shared.audit.as_ref();
        let applied = self.shared.manager.with_open(&held.session, |s, now| {
            s.check_generation(held.generation)?;
            if let Some(r) = s.completed(&fence, &op, AUDIO, Finality::Partial)? {
                let at = |i: usize| r.get(i).and_then(|&v| u64::try_from(v).ok()).unwrap_or(0);
                let cached = Appended {
                    seq: at(0),
                    turn_seq: at(1),
                    turn_id: turn,
                };
                return Ok((cached, true));
            }
            let a = s.append(&fence, AUDIO)?;
            // Neither step below can fail once the append admitted the
            // fence: touch admits the same fence, and two results fit the
            // completed-append cache's results table.
            s.touch(&fence, Activity::Append, now)?;
            let results = [a.seq, a.turn_seq].map(|v| i64::try_from(v).unwrap_or(i64::MAX));
            s.record_completed(&fence, &op, AUDIO, Finality::Partial, &results)?;
            if let Some(audit) = audit {
                audit.push(held.session.as_str(), (epoch, a.seq, event_id.clone()));
            }
            Ok::<_, CoreError>((a, false))
        });
        match applied {
            None => self.not_open(&held, ev),
            Some(Err(e)) => self.manager_error(&Error::from(e), ev),
            Some(Ok((a, duplicate))) => {
                let _ = chunk; // the stand-in engine consumes the audio here
                bump(if duplicate {
                    &self.shared.stats.duplicates
                } else {
                    &self.shared.stats.appended
                });
                ServerEvent::Appended {
                    event_id,
                    seq: a.seq,
                    turn_seq: a.turn_seq,
                    duplicate,
                }
            }
        }
    }

    /// The user's turn ended: bind the engine's response request and stream
    /// it from a task. Answers only on refusal; the response is the answer.
    fn commit(&mut self, epoch: u64, turn: u64) -> Option<ServerEvent> {
        let held = match self.bound(None) {
            Ok(held) => held,
            Err(e) => return Some(e),
        };
        let n = self
            .shared
            .next_request
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = match self.id(&format!("r{n}"), None) {
            Ok(id) => id,
            Err(e) => return Some(e),
        };
        let fence = held.fence(epoch, turn);
        // The active list is locked across the bind and the spawn, so the
        // task cannot look for its entry before it is there.
        let mut active = lock(&self.active);
        let bound = self.shared.manager.with_open(&held.session, |s, now| {
            s.check_generation(held.generation)?;
            s.bind(&fence, RESPONSE_STAGE, &request)?;
            s.touch(&fence, Activity::Signal, now)
        });
        match bound {
            None => return Some(self.not_open(&held, None)),
            Some(Err(e)) => return Some(self.manager_error(&Error::from(e), None)),
            Some(Ok(())) => {}
        }
        bump(&self.shared.stats.requests_bound);
        let task = tokio::spawn(stream_response(
            Arc::clone(&self.shared),
            held.session.clone(),
            request.clone(),
            (epoch, turn),
            self.outbox.clone(),
            Arc::clone(&self.active),
        ));
        active.push(Active {
            request,
            epoch,
            task: task.abort_handle(),
        });
        None
    }

    /// Barge-in: the epoch moves on, and every response of an older epoch
    /// this connection is streaming is cancelled and its request released.
    fn cancel(&mut self, epoch: u64, turn: u64) -> ServerEvent {
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
        let mut active = lock(&self.active);
        let result = self.shared.manager.with_open(&held.session, |s, _| {
            s.check_generation(held.generation)?;
            let mut ids: Vec<String> = s
                .cancel(&cancelled, &next)?
                .iter()
                .map(|id| id.as_str().to_owned())
                .collect();
            // Responses of older epochs at another position are released
            // here, in the same lock, so each is reported once.
            for a in active.iter().filter(|a| a.epoch < next_epoch) {
                if release_held(s, &a.request) {
                    ids.push(a.request.as_str().to_owned());
                }
            }
            Ok::<_, CoreError>(ids)
        });
        match result {
            None => self.not_open(&held, None),
            Some(Err(e)) => self.manager_error(&Error::from(e), None),
            Some(Ok(request_ids)) => {
                active.retain(|a| {
                    let cancel =
                        a.epoch < next_epoch || request_ids.iter().any(|r| r == a.request.as_str());
                    if cancel {
                        a.task.abort();
                    }
                    !cancel
                });
                add(&self.shared.stats.requests_cancelled, request_ids.len());
                ServerEvent::Cancelled {
                    epoch: next_epoch,
                    turn,
                    request_ids,
                }
            }
        }
    }

    fn close(&mut self) -> ServerEvent {
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
                self.stop_responses();
                let request_ids: Vec<String> = released
                    .iter()
                    .flat_map(|ids| ids.iter().map(|id| id.as_str().to_owned()))
                    .collect();
                bump(&self.shared.stats.closed);
                add(&self.shared.stats.requests_closed, request_ids.len());
                self.bound = None;
                ServerEvent::Closed {
                    session_id: held.client_id,
                    request_ids,
                }
            }
        }
    }

    /// The refusal of an admin event without the admin token; `None` if
    /// `token` is the admin token.
    fn not_admin(&self, token: Option<&str>) -> Option<ServerEvent> {
        let keys = &self.shared.keys;
        if keys.is_admin(token) {
            return None;
        }
        let why = if keys.admin_enabled() {
            "admin events need the gateway's admin token in `admin_token`"
        } else {
            "admin events are disabled; start the gateway with --admin-token"
        };
        Some(self.refusal("forbidden", why, None))
    }

    fn audit(&self, session_id: String, from: u64) -> ServerEvent {
        match &self.shared.audit {
            Some(audit) => {
                let (applied, next) = audit.page(&session_id, from, AUDIT_PAGE);
                ServerEvent::Audit {
                    applied,
                    next,
                    session_id,
                }
            }
            None => self.refusal(
                "audit_disabled",
                "the gateway keeps no audit log; start it with --audit",
                None,
            ),
        }
    }

    /// Stops streaming this connection's responses (close, shutdown). Their
    /// requests stay in the session until the close releases them.
    pub(crate) fn stop_responses(&self) {
        for a in lock(&self.active).drain(..) {
            a.task.abort();
        }
    }

    /// The socket went away without `session.close`: detach, unless a newer
    /// connection already holds the session. Responses being streamed run
    /// to their end and release their requests.
    pub(crate) fn dropped(&self) {
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
        }
    }
}

/// The options every gateway session opens with.
fn options(lease: LeaseConfig, owner: Owner) -> OpenOptions<Owner> {
    OpenOptions::new(owner, ())
        .modes(Modes::only(AUDIO).with(InputMode::TurnCommitOnly))
        .lease(lease)
}
