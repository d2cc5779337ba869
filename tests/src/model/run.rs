//! Running a script: once per storage, every step checked, the two
//! transcripts compared.

use duplex_core::storage::{Heap, Inline, Storage};
use duplex_core::{CloseReason, Instant, ManualClock, StateKind};
use duplex_std::{ManagerConfig, SessionManager};

use super::checks::check_step;
use super::routes::check_routes;
use super::{id, session, Harness, Op, Released, COMPLETED_LIMIT, MAX_SESSIONS};

/// Runs `ops` against a fresh manager (admission limit 2, completed-append
/// limit 4), checking every invariant after every step, then closes every
/// session and checks that each held request is released exactly once;
/// once with [`Inline`] storage and once with [`Heap`], which must behave
/// the same: every step's outcome and every session's view are compared.
///
/// # Errors
///
/// The first broken invariant, or the first step where the two storages
/// differ, in words.
///
/// # Panics
///
/// If the manager itself panics (which the fuzzer reports as a crash).
pub fn run(ops: &[Op]) -> Result<(), String> {
    let inline = run_with::<Inline>(ops)?;
    let heap = run_with::<Heap>(ops).map_err(|e| format!("heap storage: {e}"))?;
    if let Some((step, (a, b))) = inline
        .iter()
        .zip(&heap)
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        return Err(format!(
            "step {step}: inline storage gave {a}, heap storage {b}"
        ));
    }
    ensure!(
        inline.len() == heap.len(),
        "the storages ran different numbers of steps"
    );
    Ok(())
}

/// [`run`] with storage `M`: the transcript of each step (its outcome and
/// the sessions' views after it).
fn run_with<M: Storage>(ops: &[Op]) -> Result<Vec<String>, String> {
    let mut transcript = Vec::with_capacity(ops.len());
    let clock = ManualClock::new(Instant::from_millis(1_000));
    let config = ManagerConfig {
        max_sessions: Some(MAX_SESSIONS),
        completed_append_limit: Some(COMPLETED_LIMIT),
    };
    let mut h = Harness::<M> {
        m: SessionManager::with_capacities(&clock, config).expect("the model's config is valid"),
        clock: &clock,
        incarnations: [0; 3],
        handles: Vec::new(),
    };
    for (step, op) in ops.iter().enumerate() {
        let before = h.sessions();
        let outcome = h.apply(op);
        let after = h.sessions();
        check_step(op, &before, &after, &outcome).map_err(|e| format!("step {step}: {e}"))?;
        let sessions = after.keys().filter_map(|s| h.m.get(&id(s)));
        check_routes(sessions).map_err(|e| format!("step {step}, after {op:?}: {e}"))?;
        if let (Op::ReleaseDrained { s }, Ok(_)) = (op, &outcome) {
            let left = h.m.get(&session(*s)).map(duplex_core::AnySession::draining);
            ensure!(
                left.as_ref()
                    .is_none_or(|l| l.as_ref().is_ok_and(|l| l.is_empty())),
                "step {step}: release_drained left {left:?} draining"
            );
        }
        transcript.push(format!("{outcome:?} {after:?}"));
        let due = h.m.next_deadline();
        let expected = after
            .keys()
            .filter_map(|s| h.m.get(&id(s)).and_then(duplex_core::AnySession::deadline))
            .min();
        ensure!(
            due == expected,
            "step {step}: next_deadline {due:?}, sessions say {expected:?}"
        );
    }
    let before = h.sessions();
    let mut reported = Released::new();
    for (s, snap) in &before {
        let ids = if snap.state == StateKind::Closing {
            h.m.finalize(&id(s))
                .map_err(|e| format!("end: finalize {s}: {e}"))?
        } else {
            h.m.close(&snap.fence, CloseReason::ExplicitClose)
                .map_err(|e| format!("end: close {s}: {e}"))?
                .ok_or_else(|| format!("end: {s} did not close"))?
        };
        reported.insert(s.clone(), ids.iter().map(ToString::to_string).collect());
    }
    ensure!(h.m.is_empty(), "end: sessions left after closing all");
    let held: Released = before
        .iter()
        .map(|(s, snap)| {
            (
                s.clone(),
                snap.resources
                    .iter()
                    .map(|(_, r, _)| r.to_string())
                    .collect(),
            )
        })
        .collect();
    ensure!(
        held == reported,
        "end: held {held:?}, but closing released {reported:?}"
    );
    transcript.push(format!("end {reported:?}"));
    Ok(transcript)
}
