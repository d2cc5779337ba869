//! The extension operations (`tests/conformance/FORMAT.md`,
//! "Extensions"): input budgets, overlap decisions, named resumes,
//! draining requests; and the `manager` line's input limits and overlap
//! rule.

use core::fmt::Write as _;

use duplex_core::overlap::{
    is_short_ack, Forced, Overlap, OverlapConfig, OverlapPolicy, OverlapRequest,
};
use duplex_core::*;

use crate::script::{Bad, Tokens};
use crate::{Outcome, Runner};

/// What a `manager` line gives every session it opens.
#[derive(Clone, Copy)]
pub(crate) struct Extras {
    pub(crate) input_limits: InputLimits,
    pub(crate) overlap: OverlapConfig,
}

impl Extras {
    pub(crate) const DEFAULT: Extras = Extras {
        input_limits: InputLimits::DEFAULT,
        overlap: OverlapConfig::DEFAULT,
    };

    /// The `manager` line's optional tail: `-`, or bytes, turns, policy,
    /// short-ack ms, barge-in ms.
    pub(crate) fn read(t: &mut Tokens<'_>) -> Result<Self, Bad> {
        let Some(bytes) = t.opt_num()? else {
            return Ok(Extras::DEFAULT);
        };
        let narrow = |v: u64| u16::try_from(v).map_err(|_| Bad("out of range"));
        let turns = narrow(t.num()?)?;
        let policy = OverlapPolicy::parse(t.next()?).ok_or(Bad("unknown overlap policy"))?;
        let (short, barge) = (narrow(t.num()?)?, narrow(t.num()?)?);
        Ok(Extras {
            input_limits: InputLimits::new(
                u32::try_from(bytes).map_err(|_| Bad("out of range"))?,
                turns,
            ),
            overlap: OverlapConfig::new(policy, short, barge),
        })
    }
}

impl Runner {
    fn pending(&mut self, r: Result<PendingInput, ErrorKind>) -> Outcome {
        let p = r?;
        self.ok(|o| {
            let _ = write!(o, "{{\"bytes\":{},\"turns\":{}}}", p.bytes, p.turns);
        })
    }

    /// An extension operation.
    #[inline(never)]
    pub(crate) fn op_extension(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        if matches!(
            op,
            "reserve_input" | "reserve_turn" | "decide_overlap" | "resume_by"
        ) {
            return self.op_fenced(t, op);
        }
        let id = Id::new(t.text()?).ok();
        let id = id.as_ref();
        Ok(match op {
            "release_input" => {
                let bytes = t.num()?;
                let r = self.with(id, |s, _| s.release_input(bytes));
                self.pending(r)
            }
            "release_turn" => {
                let r = self.with(id, |s, _| s.release_turn());
                self.pending(r)
            }
            "cancel_pending_input" => {
                let r = self.with(id, |s, _| s.cancel_pending_input());
                self.pending(r)
            }
            "release_all_input" => {
                let r = self.with(id, |s, _| s.release_all_input());
                r.and_then(|b| {
                    self.ok(|o| {
                        let _ = write!(o, "{{\"bytes\":{b}}}");
                    })
                })
            }
            "route_output" => {
                let request = t.text()?;
                let r = self.with(id, |s, _| s.route_output(request));
                r.and_then(|route| match route {
                    None => self.null(),
                    Some(r) => self.ok(|o| {
                        let at = r.bound_at;
                        let _ = write!(
                            o,
                            "{{\"owner\":\"{}\",\"stage\":{},\"epoch\":{},\"turn\":{},\"response\":{}}}",
                            r.owner.as_str(),
                            r.stage,
                            at.epoch,
                            at.turn,
                            at.response
                        );
                    }),
                })
            }
            "release_drained" => {
                let r = self.with(id, |s, _| s.release_drained());
                self.ids_result(r)
            }
            "reset_overlap_speech" => {
                let r = self.with(id, |s, _| s.reset_overlap_speech());
                r.and_then(|h| {
                    self.ok(|o| {
                        let _ = write!(o, "{{\"heard\":{h}}}");
                    })
                })
            }
            _ => return Err(Bad("unknown op")),
        })
    }

    /// `drain`: a cancelled and a next fence, and the stages to keep.
    #[inline(never)]
    pub(crate) fn op_drain(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        let (cancelled, next) = (t.fence()?, t.fence()?);
        let keep = t.ints()?;
        let (Some(cancelled), Some(next)) = (cancelled, next) else {
            return Ok(Err(ErrorKind::UnknownSession));
        };
        let r = self.with(Some(&cancelled.session), |s, _| {
            s.drain(&cancelled, &next, |stage| {
                keep.iter().any(|k| u32::try_from(*k) == Ok(stage))
            })
        });
        Ok(self.ids_result(r))
    }

    #[inline(never)]
    fn op_fenced(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        let f = t.fence()?;
        let id = f.as_ref().map(|f| &f.session);
        Ok(match op {
            "reserve_input" => {
                let bytes = t.num()?;
                let r = self.with(id, |s, _| {
                    s.reserve_input(f.as_ref().expect("found"), bytes)
                });
                self.pending(r)
            }
            "reserve_turn" => {
                let r = self.with(id, |s, _| s.reserve_turn(f.as_ref().expect("found")));
                self.pending(r)
            }
            "resume_by" => {
                let expected = t.num()?;
                let control = match Id::new(t.text()?) {
                    Ok(control) => control,
                    Err(e) => return Ok(Err(e.kind())),
                };
                let r = self.with(id, |s, now| {
                    s.resume_idempotent(f.as_ref().expect("found"), expected, &control, now)
                });
                r.and_then(|g| {
                    self.ok(|o| {
                        let _ = write!(o, "{{\"generation\":{g}}}");
                    })
                })
            }
            _ => {
                let input = Overlap {
                    duration_ms: u32::try_from(t.num()?).map_err(|_| Bad("out of range"))?,
                    speech: t.flag()?,
                    request: match t.next()? {
                        "-" => None,
                        word => OverlapRequest::parse(word),
                    },
                    forced: Forced::from_flags(t.flag()?, t.flag()?),
                    vad_speech_started: match t.next()? {
                        "-" => None,
                        v => Some(v == "1"),
                    },
                    short_ack_transcript: match t.next()? {
                        "-" => false,
                        text => is_short_ack(text),
                    },
                };
                let r = self.with(id, |s, _| {
                    s.decide_overlap(f.as_ref().expect("found"), &input)
                });
                r.and_then(|d| {
                    self.ok(|o| {
                        let _ = write!(
                            o,
                            "{{\"action\":\"{}\",\"reason\":\"{}\",\"duration_ms\":{},\"overlap_speech_ms\":{},\"buffer_audio\":{},\"defer_append\":{},\"force_listen\":{}}}",
                            d.action.as_str(),
                            d.reason.as_str(),
                            d.duration_ms,
                            d.overlap_speech_ms,
                            d.buffer_audio,
                            d.defer_append,
                            d.force_listen
                        );
                    })
                })
            }
        })
    }
}
