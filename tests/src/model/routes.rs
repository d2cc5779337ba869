//! The routes of request output, checked after every step from what each
//! session shows of its requests (the fence each was bound under): whose
//! output a request's output is.

use std::collections::{BTreeMap, BTreeSet};

use duplex_core::drain::Owner;
use duplex_core::profile::Profile;
use duplex_core::storage::StoredId as _;
use duplex_core::{AnySession, Session, Unfinished};

/// Checks every unfinished session `m` lists.
pub(super) fn check_routes<'a, P: Profile>(
    sessions: impl Iterator<Item = &'a AnySession<P>>,
) -> Result<(), String> {
    for any in sessions {
        if let Some(s) = any.as_open() {
            check(any, s)?;
        } else if let Some(s) = any.as_detached() {
            check(any, s)?;
        } else if let Some(s) = any.as_closing() {
            check(any, s)?;
        }
    }
    Ok(())
}

/// A request is the current response's if, on some stage, it is bound or
/// reserved at the session's fence or ahead of it; else it drains if it
/// works for an earlier turn or response of the session's epoch; else it
/// belongs to a cancelled epoch and is stale.
fn check<S: Unfinished, P: Profile>(any: &AnySession<P>, s: &Session<S, P>) -> Result<(), String> {
    let name = s.id().to_string();
    let now = s.fence();
    let mut want: BTreeMap<String, Owner> = BTreeMap::new();
    for (_, r, _, at) in s.resources_with_fences() {
        let r = r.text().to_string();
        let owner = if at.epoch < now.epoch {
            Owner::Stale
        } else if at.epoch == now.epoch && (at.turn < now.turn || at.response < now.response) {
            Owner::Draining
        } else {
            Owner::Current
        };
        let best = want.entry(r).or_insert(owner);
        *best = (*best).max(owner);
    }
    for (r, owner) in &want {
        let got = s.route_output(r).map(|route| route.owner);
        ensure!(
            got == Some(*owner),
            "{name}: the output of {r} routes {got:?}, expected {owner:?}"
        );
    }
    ensure!(
        s.route_output("never-held").is_none(),
        "{name}: an unknown request's output has a route"
    );
    let draining: BTreeSet<String> = want
        .iter()
        .filter(|(_, o)| **o != Owner::Current)
        .map(|(r, _)| r.clone())
        .collect();
    let listed: BTreeSet<String> = any
        .draining()
        .map_err(|e| format!("{name}: draining: {e}"))?
        .iter()
        .map(ToString::to_string)
        .collect();
    ensure!(
        listed == draining,
        "{name}: draining lists {listed:?}, expected {draining:?}"
    );
    Ok(())
}
