//! A client that speaks over the model's answer: bursts of speech and
//! silence, each chunk put to the session's overlap rule (`OVERLAP`:
//! thresholds of 300 and 900 ms). The client keeps its own count of the
//! speech the session has heard and predicts every decision: silence is
//! dropped, speech accumulates, a short acknowledgement is heard, and
//! enough overlapping speech barges in (the client then barges in, and the
//! new epoch starts the count again). When the answer ends, the session
//! forgets what it heard.

use duplex_core::overlap::{Overlap, OverlapAction, OverlapReason};
use duplex_std::Overlaps;

use super::{lost, Client};
use crate::{World, OVERLAP};

impl Client {
    /// What the session must decide on `input`, by the client's count:
    /// the action, the reason and the speech heard after it.
    fn predict(&self, input: &Overlap) -> (OverlapAction, OverlapReason, u32) {
        let (short, barge) = (
            u32::from(OVERLAP.short_ack_ms),
            u32::from(OVERLAP.barge_in_ms),
        );
        if !input.speech {
            return (
                OverlapAction::Drop,
                OverlapReason::SilenceOrNoise,
                self.heard,
            );
        }
        let heard = self.heard.saturating_add(input.duration_ms);
        let (action, reason) = if input.duration_ms <= short && heard <= short {
            (OverlapAction::Listen, OverlapReason::ShortAck)
        } else if heard >= barge {
            (OverlapAction::BargeIn, OverlapReason::LongOverlapSpeech)
        } else {
            (
                OverlapAction::Listen,
                OverlapReason::AccumulatingOverlapSpeech,
            )
        };
        (action, reason, heard)
    }

    /// A burst of one to four chunks over the answer; returns whether the
    /// answer goes on (no barge-in, the session still there).
    pub(super) fn overlap(&mut self, w: &mut World<'_>) -> bool {
        for _ in 0..w.range(1, 5) {
            let duration_ms = u32::try_from(w.range(20, 500)).unwrap_or(20);
            let input = if w.chance(0.7) {
                Overlap::speech(duration_ms)
            } else {
                Overlap::silence(duration_ms)
            };
            let (action, reason, heard) = self.predict(&input);
            w.op();
            match w.m.decide_overlap(&self.fence, &input) {
                Ok(d) if (d.action, d.reason, d.overlap_speech_ms) == (action, reason, heard) => {
                    w.report.overlaps += 1;
                    self.heard = heard;
                }
                Err(e) if lost(&e) => {
                    self.start_over(w);
                    return false;
                }
                other => {
                    let want = format!("{action:?} ({reason:?}) with {heard} ms heard");
                    w.violation(&self.name, "decide_overlap", &want, format!("{other:?}"));
                    self.start_over(w);
                    return false;
                }
            }
            if action == OverlapAction::BargeIn {
                w.report.overlap_barge_ins += 1;
                self.barge_in(w);
                return false;
            }
        }
        true
    }

    /// The answer ended: the session forgets the speech it heard over it,
    /// which must be the client's count. Returns whether the session is
    /// still there.
    pub(super) fn forget_overlap(&mut self, w: &mut World<'_>) -> bool {
        w.op();
        match w.m.reset_overlap_speech(&self.id) {
            Ok(heard) if heard == self.heard => {
                self.heard = 0;
                true
            }
            Err(e) if lost(&e) => {
                self.start_over(w);
                false
            }
            other => {
                let want = format!("Ok({})", self.heard);
                w.violation(
                    &self.name,
                    "reset_overlap_speech",
                    &want,
                    format!("{other:?}"),
                );
                self.start_over(w);
                false
            }
        }
    }
}
