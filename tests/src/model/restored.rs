//! The checks a restored session passes, shared by the `restore` fuzz
//! target and `tests/snapshots.rs`.

use std::collections::BTreeSet;

use duplex_core::profile::conformance;
use duplex_core::{AnySession, CloseReason, StateKind};
use duplex_std::SessionView;

/// The checks a restored session passes (the `restore` fuzz target's):
/// `first` and `again` (restored from `first`'s own image) show the same
/// facts; the tables are within capacity and consistent; and `again`
/// still obeys the rules when used: an append by its own fence gets the
/// next sequence number, and closing releases exactly the requests it
/// held, each once.
///
/// # Errors
///
/// The first broken invariant, in words.
pub fn check_restored(first: &AnySession, again: AnySession) -> Result<(), String> {
    let (a, b) = (SessionView::of(first), SessionView::of(&again));
    ensure!(
        a == b,
        "the image of a restored session restores differently: {a:?} vs {b:?}"
    );
    let Some(s) = b else {
        return Ok(());
    };
    ensure!(
        s.resources.len() <= conformance::RESOURCES
            && s.bindings.len() <= conformance::BINDINGS
            && s.completed.len() <= conformance::COMPLETED
            && s.active_operations.len() <= conformance::ACTIVE_OPS,
        "a table over capacity: {s:?}"
    );
    ensure!(
        s.input_turn_seq <= s.input_seq,
        "turn sequence ahead of the sequence: {s:?}"
    );
    let mut stages = BTreeSet::new();
    for (stage, request) in &s.bindings {
        ensure!(stages.insert(*stage), "two bindings on stage {stage}");
        let held = s
            .resources
            .iter()
            .any(|(st, r, state)| st == stage && r == request && state.is_submitted());
        ensure!(
            held,
            "binding {stage} -> {request} is not a submitted resource"
        );
    }
    let held: BTreeSet<String> = s.resources.iter().map(|(_, r, _)| r.to_string()).collect();
    let fence = s.fence.clone();
    let mut session = again;
    if let Some(open) = session.as_open_mut() {
        if let Some(mode) = open.modes().iter().next() {
            let appended = open
                .append(&fence, mode)
                .map_err(|e| format!("its own fence was refused: {e}"))?;
            ensure!(
                appended.seq == s.input_seq.saturating_add(1),
                "append after restore got seq {}",
                appended.seq
            );
        }
    }
    let released = match session.kind() {
        StateKind::Open | StateKind::Detached => session
            .close(&fence, CloseReason::ExplicitClose)
            .map_err(|e| format!("its own fence could not close it: {e}"))?,
        StateKind::Closing => session
            .finalize()
            .map_err(|e| format!("finalize refused: {e}"))?,
        StateKind::Closed => return Ok(()),
    };
    let got: Vec<String> = released.iter().map(ToString::to_string).collect();
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    ensure!(
        unique.len() == got.len(),
        "a request released twice: {got:?}"
    );
    ensure!(
        unique == held,
        "closing released {unique:?}, but the session held {held:?}"
    );
    Ok(())
}
