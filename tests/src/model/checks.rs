//! The checks of one step: what must hold of the sessions after an
//! operation, given what they were before it.

use std::collections::BTreeSet;

use duplex_core::profile::conformance;
use duplex_core::{Fence, Id, StateKind};
use duplex_std::SessionView;

use duplex_core::overlap::OverlapRequest;

use super::{overlap_request, session, Op, Released, Views, COMPLETED_LIMIT, MAX_SESSIONS};

/// Request ids whose `(stage, request)` resources left each session.
fn vanished(before: &Views, after: &Views) -> Released {
    let mut out = Released::new();
    for (s, b) in before {
        let kept: BTreeSet<(u32, &Id)> = after
            .get(s)
            .map(|a| a.resources.iter().map(|(st, r, _)| (*st, r)).collect())
            .unwrap_or_default();
        for (st, r, _) in &b.resources {
            if !kept.contains(&(*st, r)) {
                out.entry(s.clone()).or_default().insert(r.to_string());
            }
        }
    }
    out
}

fn not_behind(before: &Fence, after: &Fence) -> bool {
    after.epoch > before.epoch
        || (after.epoch == before.epoch
            && after.turn >= before.turn
            && after.response >= before.response)
}

pub(super) fn check_step(
    op: &Op,
    before: &Views,
    after: &Views,
    outcome: &Result<Released, duplex_std::Error>,
) -> Result<(), String> {
    ensure!(
        after.len() <= MAX_SESSIONS,
        "admission exceeded: {} sessions",
        after.len()
    );
    for (s, a) in after {
        ensure!(
            a.resources.len() <= conformance::RESOURCES
                && a.bindings.len() <= conformance::BINDINGS,
            "{s}: a table is over capacity"
        );
        ensure!(
            a.completed.len() <= COMPLETED_LIMIT
                && a.active_operations.len() <= conformance::ACTIVE_OPS,
            "{s}: a table is over capacity"
        );
        ensure!(
            a.pending_input.bytes <= a.input_limits.bytes()
                && a.pending_input.turns <= a.input_limits.turns(),
            "{s}: pending input {:?} past its limits {:?}",
            a.pending_input,
            a.input_limits
        );
        if let Some(b) = before.get(s) {
            ensure!(
                a.fence.epoch == b.fence.epoch || a.overlap_speech_ms == 0,
                "{s}: the epoch moved {} -> {} but {} ms of overlapping speech are still counted",
                b.fence.epoch,
                a.fence.epoch,
                a.overlap_speech_ms
            );
            if b.fence.incarnation == a.fence.incarnation {
                ensure!(
                    not_behind(&b.fence, &a.fence),
                    "{s}: fence moved backwards {} -> {}",
                    b.fence,
                    a.fence
                );
            }
            ensure!(
                b.state != StateKind::Closing || a.state == StateKind::Closing,
                "{s}: closing is irreversible, but it became {}",
                a.state
            );
        }
    }
    let reported = match outcome {
        Err(e) => {
            ensure!(before == after, "a failed {op:?} ({e}) changed a session");
            return Ok(());
        }
        Ok(reported) => reported,
    };
    let gone = vanished(before, after);
    if let Op::Release { s, requests } = op {
        let name = session(*s).to_string();
        let named: BTreeSet<&str> = requests.iter().map(String::as_str).collect();
        let held: BTreeSet<String> = before
            .get(&name)
            .map(|b| b.resources.iter().map(|(_, r, _)| r.to_string()).collect())
            .unwrap_or_default();
        let want: BTreeSet<String> = held
            .into_iter()
            .filter(|r| named.contains(r.as_str()))
            .collect();
        let got = gone.get(&name).cloned().unwrap_or_default();
        ensure!(got == want, "release dropped {got:?}, expected {want:?}");
        ensure!(gone.len() <= 1, "release touched another session: {gone:?}");
    } else {
        ensure!(
            &gone == reported,
            "after {op:?}: released {gone:?}, but reported {reported:?}"
        );
    }
    if let Op::Migrate { s, .. } = op {
        let name = session(*s).to_string();
        if let (Some(b), Some(a)) = (before.get(&name), after.get(&name)) {
            let mut moved = b.clone();
            moved.fence.incarnation = a.fence.incarnation;
            moved.last_activity = a.last_activity;
            moved.detached_at = b.detached_at.map(|_| a.last_activity);
            // Unchanged when there was no higher incarnation to move to.
            ensure!(
                a == b || (a.fence.incarnation > b.fence.incarnation && *a == moved),
                "{name}: migration changed more than the incarnation and the lease clock: {b:?} -> {a:?}"
            );
        }
    }
    if let Op::ResumeBy { s, control, .. } = op {
        let name = session(*s).to_string();
        if let (Some(b), Some(a)) = (before.get(&name), after.get(&name)) {
            let named = |v: &SessionView| v.resumed_by.as_ref().map(ToString::to_string);
            if named(b).as_deref() == Some(control.as_str()) {
                ensure!(
                    a == b,
                    "{name}: a resume asked again changed the session: {b:?} -> {a:?}"
                );
            } else {
                ensure!(
                    a.lease_generation == b.lease_generation + 1
                        && named(a).as_deref() == Some(control.as_str())
                        && a.state == StateKind::Open,
                    "{name}: a resume by {control} did not move on and record it: {b:?} -> {a:?}"
                );
            }
        }
    }
    if let Op::Drain { s, keep, .. } = op {
        let name = session(*s).to_string();
        if let (Some(b), Some(a)) = (before.get(&name), after.get(&name)) {
            for (stage, r, _) in &b.resources {
                let kept = *stage < 8 && keep & (1 << stage) != 0;
                ensure!(
                    !kept || a.resources.iter().any(|(st, x, _)| st == stage && x == r),
                    "{name}: a drain keeping stage {stage} released its request {r}"
                );
            }
        }
    }
    check_input(op, before, after)?;
    check_overlap(op, before, after)?;
    if matches!(op, Op::Append { .. } | Op::Commit { .. }) {
        for (s, a) in after {
            let Some(b) = before.get(s) else { continue };
            if a.input_seq != b.input_seq || a.fence.epoch != b.fence.epoch {
                let want = if a.fence.epoch == b.fence.epoch {
                    b.input_seq + 1
                } else {
                    1
                };
                ensure!(
                    a.input_seq == want,
                    "{s}: append moved seq {} -> {}, expected {want}",
                    b.input_seq,
                    a.input_seq
                );
            }
        }
    }
    Ok(())
}

/// What a successful input budget operation did to its session's pending
/// input: exactly what it asked, no more.
fn check_input(op: &Op, before: &Views, after: &Views) -> Result<(), String> {
    let s = match op {
        Op::ReserveInput { s, .. }
        | Op::ReserveTurn { s, .. }
        | Op::ReleaseInput { s, .. }
        | Op::ReleaseTurn { s }
        | Op::DropInput { s, .. } => *s,
        _ => return Ok(()),
    };
    let name = session(s).to_string();
    let (Some(b), Some(a)) = (before.get(&name), after.get(&name)) else {
        return Ok(());
    };
    let (b, a) = (b.pending_input, a.pending_input);
    let want = match op {
        Op::ReserveInput { bytes, .. } => (b.bytes + u32::from(*bytes), b.turns),
        Op::ReserveTurn { .. } => (b.bytes, b.turns + 1),
        Op::ReleaseInput { bytes, .. } => (b.bytes.saturating_sub(u32::from(*bytes)), b.turns),
        Op::ReleaseTurn { .. } => (b.bytes, b.turns.saturating_sub(1)),
        Op::DropInput { turns_too, .. } => (0, if *turns_too { 0 } else { b.turns }),
        _ => (b.bytes, b.turns),
    };
    ensure!(
        (a.bytes, a.turns) == want,
        "{name}: after {op:?} pending input is {a:?}, expected {want:?} (was {b:?})"
    );
    Ok(())
}

/// What a successful overlap operation did to the speech its session has
/// heard: a client's listen, continue or drop and a reset start again;
/// its barge-in and silence keep the count; other speech adds to it
/// (saturating, as the core does).
fn check_overlap(op: &Op, before: &Views, after: &Views) -> Result<(), String> {
    let s = match op {
        Op::DecideOverlap { s, .. } | Op::ResetOverlap { s } => *s,
        _ => return Ok(()),
    };
    let name = session(s).to_string();
    let (Some(b), Some(a)) = (before.get(&name), after.get(&name)) else {
        return Ok(());
    };
    let heard = b.overlap_speech_ms;
    let want = match op {
        Op::DecideOverlap {
            ms,
            speech,
            request,
            ..
        } => match overlap_request(*request) {
            Some(OverlapRequest::BargeIn) => heard,
            Some(_) => 0,
            None if *speech => heard.saturating_add(u32::from(*ms)),
            None => heard,
        },
        _ => 0,
    };
    ensure!(
        a.overlap_speech_ms == want,
        "{name}: after {op:?} {} ms of overlapping speech are counted, expected {want} (was {heard})",
        a.overlap_speech_ms
    );
    Ok(())
}
