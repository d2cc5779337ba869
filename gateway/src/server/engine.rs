//! The engine driver: runs an [`Engine`](crate::engine::Engine)'s answer
//! to a committed turn on its own task, between the request the commit
//! bound on the session and its release.

use crate::GatewayProfile;
use std::sync::Arc;

use crate::profile::Fence;
use crate::Id;
use duplex_core::{Activity, Session, Unfinished};

use crate::engine::{Sink, Turn};
use crate::protocol::ServerEvent;
use crate::server::emit::Emitter;
use crate::server::state::Shared;
use crate::stats::bump;

/// Releases `request` if the session still holds it; whether it did.
pub(crate) fn release_held<S: Unfinished>(
    s: &mut Session<S, GatewayProfile>,
    request: &Id,
) -> bool {
    let held = s.resources().any(|(_, id, _)| id == request);
    if held {
        s.release(std::slice::from_ref(request));
    }
    held
}

/// What a piece of the model's output does to the session: touches its
/// lease (`MODEL_OUTPUT`) at the answer's fence, live or detached. A fence
/// the session has moved past (a barge-in, a newer turn) touches nothing.
/// A model speaks in pieces of tens of milliseconds and a lease counts
/// idleness in seconds: the commit that started the answer touched the
/// lease, and a piece touches it again only once a quarter of the idle TTL
/// (at most a second) has passed since, which keeps the session as alive
/// as a touch per piece would at a fraction of the cost.
fn model_output(shared: Arc<Shared>, fence: Fence) -> Box<dyn FnMut() + Send> {
    let every = shared
        .config
        .idle_ttl
        .map_or(MAX_OUTPUT_TOUCH, |ttl| (ttl / 4).min(MAX_OUTPUT_TOUCH));
    let mut last = tokio::time::Instant::now();
    Box::new(move || {
        let now = tokio::time::Instant::now();
        if now.duration_since(last) < every {
            return;
        }
        last = now;
        let (manager, output) = (&shared.manager, Activity::ModelOutput);
        let _ = manager
            .with_open(&fence.session, |s, now| s.touch(&fence, output, now))
            .or_else(|| {
                manager.with_detached(&fence.session, |s, now| s.touch(&fence, output, now))
            });
    })
}

/// The longest a speaking model's session goes between two touches.
const MAX_OUTPUT_TOUCH: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs the engine's answer to `turn`, then releases its request and sends
/// `response.done`, unless a barge-in or a close got there first (they
/// remove the session's entry for it and abort this task).
pub(crate) async fn answer(
    shared: Arc<Shared>,
    fence: Fence,
    request: Id,
    turn: Turn,
    emit: Emitter,
) {
    let session = fence.session.clone();
    let (epoch, turn_number) = (turn.epoch, turn.turn);
    // A client that went away still has its response generated: the
    // engine finishes and the request is released below (and a realtime
    // session's stream journals it for the resume).
    let output = model_output(Arc::clone(&shared), fence);
    let sink = Sink::new(emit.clone(), turn.clone(), output);
    shared.config.engine.respond(turn, sink).await;
    let released = {
        let mut in_flight = shared.responses.of(&session);
        if !in_flight.finish(&request) {
            return;
        }
        let manager = &shared.manager;
        manager
            .with_open(&session, |s, _| release_held(s, &request))
            .or_else(|| manager.with_detached(&session, |s, _| release_held(s, &request)))
            .unwrap_or(false)
    };
    let request_id = request.as_str().to_owned();
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
            turn: turn_number,
        };
        emit.event(done).await;
    }
}
