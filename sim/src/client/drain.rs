//! A speaker whose request outlives its turn: the next turn starts while
//! the answer still plays, or a barge-in lets the speaker flush, and the
//! session keeps that request bound (`drain`). Until it stops, the client
//! asks at every step where its late output goes: to the response it was
//! bound for (draining) within its epoch, dropped (stale) after a
//! barge-in, never to the current response. When it stops, the session
//! releases it once (`release_drained`).

use duplex_core::drain::Owner;
use duplex_core::{Fence, Id};
use duplex_std::Drains;

use super::{lost, Client};
use crate::World;

/// The speaker stage: its request is the one that drains.
pub(crate) const SPEAKER: u32 = 1;

impl Client {
    /// Moves from `cancelled` to `next`, keeping the speaker's request
    /// bound: the others are released and must be exactly this response's.
    /// Returns whether the session is still there.
    pub(super) fn drain_to(&mut self, w: &mut World<'_>, cancelled: &Fence, next: &Fence) -> bool {
        w.op();
        let ids = match w.m.drain(cancelled, next, |stage| stage == SPEAKER) {
            Ok(ids) => ids,
            Err(e) => {
                self.failed(w, "drain", &e);
                return false;
            }
        };
        let mut got: Vec<&str> = ids.iter().map(Id::as_str).collect();
        let mut want: Vec<&str> = self
            .requests
            .iter()
            .filter(|(stage, _)| *stage != SPEAKER)
            .map(|(_, r)| r.as_str())
            .collect();
        got.sort_unstable();
        want.sort_unstable();
        if got != want {
            w.violation(
                &self.name,
                "drain",
                &format!("{want:?}"),
                format!("{got:?}"),
            );
        }
        w.released(&self.name, "drain", ids.iter().map(Id::as_str));
        w.report.drained += 1;
        let kept = self.requests.iter().filter(|(stage, _)| *stage == SPEAKER);
        for (_, request) in kept {
            self.draining
                .push((request.clone(), cancelled.epoch, cancelled.turn));
        }
        self.requests.clear();
        true
    }

    /// Where each draining request's output goes, as the client knows it;
    /// now and then the speaker stops and the session releases exactly what
    /// drained. Returns whether the session is still there.
    pub(super) fn check_draining(&mut self, w: &mut World<'_>) -> bool {
        if self.draining.is_empty() {
            return true;
        }
        for (request, epoch, turn) in &self.draining {
            let owner = if *epoch < self.fence.epoch {
                Owner::Stale
            } else {
                Owner::Draining
            };
            w.op();
            match w.m.route_output(&self.id, request) {
                Ok(Some(r))
                    if r.owner == owner && r.stage == SPEAKER && r.bound_at.turn == *turn =>
                {
                    w.report.late_outputs += 1;
                }
                Err(e) if lost(&e) => {
                    self.start_over(w);
                    return false;
                }
                other => {
                    let want = format!("{owner:?} on stage {SPEAKER}, turn {turn}");
                    w.violation(&self.name, "route_output", &want, format!("{other:?}"));
                }
            }
        }
        if !w.chance(0.2) {
            return true;
        }
        w.op();
        match w.m.release_drained(&self.id) {
            Ok(ids) => {
                let mut got: Vec<&str> = ids.iter().map(Id::as_str).collect();
                let mut want: Vec<&str> =
                    self.draining.iter().map(|(r, _, _)| r.as_str()).collect();
                got.sort_unstable();
                want.sort_unstable();
                if got != want {
                    w.violation(
                        &self.name,
                        "release_drained",
                        &format!("{want:?}"),
                        format!("{got:?}"),
                    );
                }
                w.released(&self.name, "release_drained", ids.iter().map(Id::as_str));
                self.draining.clear();
                true
            }
            Err(e) if lost(&e) => {
                self.start_over(w);
                false
            }
            Err(e) => {
                self.failed(w, "release_drained", &e);
                false
            }
        }
    }
}
