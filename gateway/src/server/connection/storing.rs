//! A connection's side of storing: what it answers when a change was not
//! stored (on a node of a cluster), and when its session is gone.

use crate::profile::ManagerError as Error;
use duplex_std::Sessions;

use super::{Connection, Held};
use crate::protocol::ServerEvent;
use crate::server::durable::{Changes, Stored};
use crate::Id;
use duplex_core::ErrorKind;

impl Connection {
    /// Why a typed operation found no open session.
    pub(super) async fn not_open(&mut self, held: &Held, event_id: Option<&str>) -> ServerEvent {
        if self
            .shared
            .draining
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            // Detached by the drain between the check above and the lock.
            return ServerEvent::Moved {
                session_id: held.client_id.to_string(),
            };
        }
        match self
            .shared
            .manager
            .with_session(&held.session, duplex_core::AnySession::kind)
        {
            // Gone from here (expired, or dropped: another node took it
            // over): the connection no longer holds it, so the client can
            // resume or open another on it.
            None => {
                self.stop_responses();
                self.bound = None;
                if self.moved_elsewhere(&held.session).await {
                    // Its journal went with the copy: the stream is there.
                    self.rt = None;
                    return self.unstored(Stored::Lost, event_id).unwrap_or_else(|| {
                        self.refusal(
                            "session_moved",
                            "another node holds this session now",
                            event_id,
                        )
                    });
                }
                self.manager_error(
                    &Error::UnknownSession {
                        session: held.session.clone(),
                    },
                    event_id,
                )
            }
            Some(state) => self.refusal(
                ErrorKind::WrongState.as_str(),
                format!("session is {state}; this event needs it open"),
                event_id,
            ),
        }
    }

    /// Whether another node of the cluster holds the session now (this
    /// node dropped its copy when told of the takeover).
    async fn moved_elsewhere(&self, session: &Id) -> bool {
        let Some(node) = &self.shared.node else {
            return false;
        };
        matches!(
            node.directory.load(session.as_str()).await,
            Ok(Some(record)) if record.node != node.directory.node()
        )
    }

    /// After a change was applied locally: store it (a node of a cluster
    /// acknowledges nothing the directory does not hold). `None` if it is
    /// stored, else the refusal, the session being gone from here.
    pub(super) async fn stored(
        &mut self,
        session: &Id,
        changes: Changes,
        event_id: Option<&str>,
    ) -> Option<ServerEvent> {
        let outcome = self.shared.store(session, changes).await;
        if outcome == Stored::Lost {
            // Another node holds the session now: its journal is there.
            self.shared.journals.remove(session).await;
            self.rt = None;
        }
        if outcome == Stored::Unavailable {
            // Kept here, detached (below): the stream too, for the resume.
            if let Some(rt) = self.rt.take() {
                rt.stream.detach(rt.attachment).await;
            }
        }
        self.unstored(outcome, event_id)
    }

    /// The refusal for a change that was not stored (`None` if it was).
    pub(super) fn unstored(
        &mut self,
        outcome: Stored,
        event_id: Option<&str>,
    ) -> Option<ServerEvent> {
        match outcome {
            Stored::Yes => None,
            Stored::Lost => {
                self.stop_responses();
                self.bound = None;
                Some(self.refusal(
                    "session_moved",
                    "another node holds this session now; resume it to continue (nothing unacknowledged was applied here)",
                    event_id,
                ))
            }
            Stored::Unavailable => {
                // The session stays here, detached (with the change, not
                // acknowledged, to be stored with its next save): the
                // client resumes it and sends the change again.
                self.stop_responses();
                if let Some(held) = self.bound.take() {
                    let fence = self
                        .shared
                        .manager
                        .with_session(&held.session, |s| s.fence().clone());
                    if let Some(fence) = fence {
                        let _ = self
                            .shared
                            .manager
                            .detach_generation(&fence, held.generation);
                    }
                }
                Some(self.refusal(
                    "unavailable",
                    "the session store did not answer; the change is not acknowledged: resume and send it again",
                    event_id,
                ))
            }
        }
    }
}
