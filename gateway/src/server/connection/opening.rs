//! Opening a session on a connection: a new one, or a resume (here, or
//! taken over from another node of a cluster).

use crate::profile::Fence;
use crate::profile::ManagerError as Error;
use crate::Id;
use duplex_core::{InputLimits, InputMode, LeaseConfig, Modes, OpenOptions};
use duplex_std::Sessions;

use super::{Connection, Held, AUDIO};
use crate::protocol::ServerEvent;
use crate::server::auth::scoped;
use crate::server::durable::{Changes, Resumed, Stored};
use crate::server::ownership::{new_session_id, Owner};
use crate::server::policy::Refusal;
use crate::stats::bump;

impl Connection {
    pub(super) async fn open(
        &mut self,
        session_id: Option<String>,
        resume_token: Option<String>,
    ) -> ServerEvent {
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
            Some(token) => self.resume(session_id, &token).await,
            None => self.open_new(session_id).await,
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

    async fn resume(&mut self, session_id: Option<String>, token: &str) -> ServerEvent {
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
        // A node of a cluster resumes from the directory unless it holds
        // the session's current state itself.
        match self.shared.take_over(&session, token).await {
            Ok(Resumed::TakenOver(fence, owner, next)) => {
                bump(&self.shared.stats.resumed);
                return self.resumed(session, session_id, &fence, &owner, next);
            }
            Ok(Resumed::Here) => {}
            Err(Refusal::Refused) => return self.resume_refused(),
            Err(Refusal::Full) => {
                return self.manager_error(
                    &Error::CapacityExhausted {
                        limit: self.shared.config.max_sessions,
                    },
                    None,
                )
            }
            Err(Refusal::Unavailable) => {
                return self.refusal(
                    "unavailable",
                    "the session store did not answer; try the resume again",
                    None,
                )
            }
            Err(Refusal::StateLost) => {
                tracing::debug!(%session, "resume answered state_lost");
                bump(&self.shared.stats.state_lost);
                return self.refusal(
                    "state_lost",
                    "the session store lost its data a moment ago and does not have this session: its state is gone; open a new session",
                    None,
                );
            }
        }
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
        // A node of a cluster first makes sure the store takes writes (and
        // has what the session kept for it), so that a store that does not
        // answer leaves the token unspent.
        if self.shared.node.is_some() {
            match self.shared.store(&session, Changes::default()).await {
                Stored::Yes => {}
                Stored::Lost => return self.resume_refused(),
                Stored::Unavailable => {
                    return self.refusal(
                        "unavailable",
                        "the session store did not answer; try the resume again",
                        None,
                    )
                }
            }
        }
        // The token is the owner's for `generation`; the core resumes only
        // if the session is still there, under the same shard lock, so of
        // two resumes with one token only the first wins.
        match self.shared.manager.resume(&fence, generation) {
            Ok(next) => {
                match self.shared.store(&session, Changes::default()).await {
                    Stored::Yes => {}
                    Stored::Lost => return self.resume_refused(),
                    // The store went away in between: the session goes back
                    // to waiting (detached, it expires after the grace);
                    // this token is spent.
                    Stored::Unavailable => {
                        let _ = self.shared.manager.detach_generation(&fence, next);
                        return self.refusal(
                            "unavailable",
                            "the session store did not answer; the session was not resumed",
                            None,
                        );
                    }
                }
                bump(&self.shared.stats.resumed);
                self.resumed(session, session_id, &fence, &owner, next)
            }
            Err(_) => self.resume_refused(),
        }
    }

    /// The answer to a resume that took the session at lease generation
    /// `next`.
    fn resumed(
        &mut self,
        session: Id,
        session_id: String,
        fence: &Fence,
        owner: &Owner,
        next: u64,
    ) -> ServerEvent {
        let resume_token = self.shared.keys.token(session.as_str(), owner, next);
        self.bound = Some(Held {
            session,
            client_id: session_id.as_str().into(),
            incarnation: fence.incarnation,
            generation: next,
        });
        ServerEvent::Opened {
            resume_token,
            session_id,
            incarnation: fence.incarnation,
            epoch: fence.epoch,
            turn: fence.turn,
            resumed: true,
        }
    }

    async fn open_new(&mut self, session_id: Option<String>) -> ServerEvent {
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
            options(
                self.shared.lease,
                self.shared.config.limits.max_pending_input_bytes,
                owner,
            ),
        ) {
            Ok(()) => {
                match self.shared.store_new(&session).await {
                    Stored::Yes => {}
                    // Another node's live session has this id.
                    Stored::Lost => {
                        return self.manager_error(&Error::SessionExists { session }, None)
                    }
                    Stored::Unavailable => {
                        return self.refusal(
                            "unavailable",
                            "the session store did not answer; the session was not opened",
                            None,
                        )
                    }
                }
                bump(&self.shared.stats.opened);
                self.bound = Some(Held {
                    session: session.clone(),
                    client_id: session_id.as_str().into(),
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
}

/// The options every gateway session opens with: its audio held for the
/// engine is bounded by `pending_bytes` (committed turns by the request
/// table: each answer binds one).
fn options(lease: LeaseConfig, pending_bytes: u32, owner: Owner) -> OpenOptions<Owner> {
    OpenOptions::new(owner, ())
        .modes(Modes::only(AUDIO).with(InputMode::TurnCommitOnly))
        .lease(lease)
        .input_limits(InputLimits::new(
            pending_bytes,
            InputLimits::DEFAULT.turns(),
        ))
}
