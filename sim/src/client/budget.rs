//! A client's input budgets: a chunk's bytes reserved before its append,
//! the turn taken up and its audio consumed when the answer ends, and the
//! flood fault. The client keeps its own count of what the session holds
//! and checks every answer against it.

use duplex_core::{ErrorKind, PendingInput};
use duplex_std::{Error, InputBudgets};

use super::{lost, Client};
use crate::{World, CHUNK_BYTES, INPUT_LIMITS};

impl Client {
    /// Reserves one chunk's bytes before its append: `Some(true)` when
    /// admitted, `Some(false)` when the byte budget refused it, which the
    /// client predicts from its own count; `None` when the session is gone.
    pub(super) fn reserve_chunk(&mut self, w: &mut World<'_>) -> Option<bool> {
        let fits = self.pending.bytes + CHUNK_BYTES <= INPUT_LIMITS.bytes();
        let expected = PendingInput {
            bytes: self.pending.bytes + CHUNK_BYTES,
            ..self.pending
        };
        w.op();
        match w.m.reserve_input(&self.fence, u64::from(CHUNK_BYTES)) {
            Ok(p) if fits && p == expected => {
                self.pending = p;
                Some(true)
            }
            Err(e) if !fits && e.kind() == ErrorKind::InputBackpressure => {
                w.report.backpressure += 1;
                Some(false)
            }
            Err(e) if lost(&e) => {
                self.start_over(w);
                None
            }
            other => {
                let want = if fits {
                    format!("Ok({expected:?})")
                } else {
                    "input_backpressure".to_owned()
                };
                w.violation(&self.name, "reserve_input", &want, format!("{other:?}"));
                self.start_over(w);
                None
            }
        }
    }

    /// The model took the turn up and consumed its audio: both budgets
    /// come back to nothing. Returns whether the session is still there.
    pub(super) fn consume_input(&mut self, w: &mut World<'_>) -> bool {
        w.op();
        let turn = w.m.release_turn(&self.id);
        w.op();
        let bytes = w.m.release_input(&self.id, u64::from(self.pending.bytes));
        match (turn, bytes) {
            (Ok(_), Ok(p)) if p == PendingInput::default() => {
                self.pending = p;
                true
            }
            (Err(e), _) | (_, Err(e)) if lost(&e) => {
                self.start_over(w);
                false
            }
            other => {
                w.violation(
                    &self.name,
                    "release_input",
                    "nothing pending",
                    format!("{other:?}"),
                );
                self.start_over(w);
                false
            }
        }
    }

    /// A flood: a burst of audio one byte past what the budget has left,
    /// then commits until the turn budget refuses one (those admitted are
    /// given back). Each refusal must come exactly at the limit and change
    /// nothing. Returns whether the session is still there.
    pub(super) fn flood(&mut self, w: &mut World<'_>) -> bool {
        let burst = u64::from(INPUT_LIMITS.bytes() - self.pending.bytes) + 1;
        let room = INPUT_LIMITS.turns() - self.pending.turns;
        w.op();
        let refused = w.m.reserve_input(&self.fence, burst);
        let mut admitted = 0;
        let mut turn = Ok(self.pending);
        while turn.is_ok() && admitted <= room {
            w.op();
            turn = w.m.reserve_turn(&self.fence);
            admitted += u16::from(turn.is_ok());
        }
        for _ in 0..admitted {
            w.op();
            if let Err(e) = w.m.release_turn(&self.id) {
                self.failed(w, "release_turn", &e);
                return false;
            }
        }
        w.op();
        let after = w.m.pending_input(&self.id);
        let backpressure = |r: &Result<PendingInput, Error>| matches!(r, Err(e) if e.kind() == ErrorKind::InputBackpressure);
        match (&refused, &after) {
            (Err(e), _) | (_, Err(e)) if lost(e) => {
                self.start_over(w);
                false
            }
            (_, Ok((p, _)))
                if backpressure(&refused)
                    && backpressure(&turn)
                    && admitted == room
                    && *p == self.pending =>
            {
                w.report.floods_refused += 1;
                true
            }
            _ => {
                let want = format!(
                    "two refusals, {room} turns admitted, {:?} after",
                    self.pending
                );
                let got = format!("{refused:?}, {turn:?} after {admitted}, {after:?}");
                w.violation(&self.name, "flood", &want, got);
                self.start_over(w);
                false
            }
        }
    }
}
