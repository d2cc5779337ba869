//! The stand-in engine behind the gateway: each committed turn gets a
//! response request bound on the session, streamed as a few deltas, then
//! `response.done` and the request released, unless a barge-in or a close
//! got there first. A real deployment puts its model here.

use duplex_core::profile::Conformance;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use duplex_core::{Id, Session, Unfinished};
use tokio::task::AbortHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::protocol::ServerEvent;
use crate::server::outbox::Outbox;
use crate::server::ownership::Owner;
use crate::server::state::Shared;
use crate::server::stream::Stream;
use crate::stats::bump;

/// A response being streamed.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) request: Id,
    pub(crate) epoch: u64,
    pub(crate) task: AbortHandle,
}

pub(crate) type ActiveList = Arc<Mutex<Vec<Active>>>;

pub(crate) fn lock(active: &ActiveList) -> MutexGuard<'_, Vec<Active>> {
    active.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Releases `request` if the session still holds it; whether it did.
pub(crate) fn release_held<S: Unfinished>(
    s: &mut Session<S, Conformance<Owner>>,
    request: &Id,
) -> bool {
    let held = s.resources().any(|(_, id, _)| id == request);
    if held {
        s.release(std::slice::from_ref(request));
    }
    held
}

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
        ServerEvent::Done { request_id, .. } => {
            stream.end_response(request_id, "completed", None).await;
        }
        _ => {}
    }
}

/// The stand-in engine: a few deltas, then `response.done` and the request
/// released, unless a barge-in or a close got there first (they remove the
/// entry from the active list and abort this task).
pub(crate) async fn stream_response(
    shared: Arc<Shared>,
    session: Id,
    request: Id,
    (epoch, turn): (u64, u64),
    emit: Emitter,
    active: ActiveList,
) {
    let request_id = request.as_str().to_owned();
    for index in 0..shared.config.deltas {
        tokio::time::sleep(shared.config.delta_interval).await;
        let delta = ServerEvent::Delta {
            request_id: request_id.clone(),
            epoch,
            turn,
            index,
            // Deltas join into the response's text: each after the first
            // starts with its space.
            text: format!(
                "{}piece {index} of the answer to turn {turn}.",
                if index == 0 { "" } else { " " }
            ),
        };
        // A client that went away still has its response generated: the
        // engine finishes and releases the request below (and a realtime
        // session's stream journals it for the resume).
        emit.event(delta).await;
    }
    let released = {
        let mut active = lock(&active);
        let Some(at) = active.iter().position(|a| a.request == request) else {
            return;
        };
        active.swap_remove(at);
        let manager = &shared.manager;
        manager
            .with_open(&session, |s, _| release_held(s, &request))
            .or_else(|| manager.with_detached(&session, |s, _| release_held(s, &request)))
            .unwrap_or(false)
    };
    // The release is acknowledged (response.done) only once stored. A
    // node of a cluster that cannot store it keeps the session, and its
    // next save carries the release; a node that lost the session to
    // another leaves the request to the new owner, whose stored state
    // still holds it.
    let stored = !released
        || shared.node.is_none()
        || shared
            .store(
                &session,
                crate::server::durable::Changes {
                    released: vec![request_id.clone()],
                    ..crate::server::durable::Changes::default()
                },
            )
            .await
            == crate::server::durable::Stored::Yes;
    if released && stored {
        bump(&shared.stats.responses_done);
        let done = ServerEvent::Done {
            request_id,
            epoch,
            turn,
        };
        emit.event(done).await;
    }
}
