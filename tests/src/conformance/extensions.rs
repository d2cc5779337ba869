//! The operations vllm-omni 0.30's session added to the seed's, as
//! `tests/conformance/FORMAT.md` ("Extensions") writes them: input
//! budgets, overlap decisions, a resume named by its control id, and
//! draining requests; and the `manager` fields that set its sessions'
//! input limits and overlap rule.

use duplex_core::drain::OutputRoute;
use duplex_core::overlap::{
    is_short_ack, Forced, Overlap, OverlapConfig, OverlapPolicy, OverlapRequest,
};
use duplex_core::{InputLimits, OpenOptions, PendingInput};
use duplex_std::{Drains as _, InputBudgets as _, Overlaps as _, Sessions as _};
use serde_json::{json, Map, Value};

use super::json::{bad, bool_of, fence_of, field, ids_json, session_of, str_of, u64_of};
use super::{Outcome, ParseError, Runner, UNKNOWN};

/// The extension operations.
pub(super) const OPS: [&str; 12] = [
    "reserve_input",
    "reserve_turn",
    "release_input",
    "release_turn",
    "release_all_input",
    "cancel_pending_input",
    "decide_overlap",
    "reset_overlap_speech",
    "resume_by",
    "drain",
    "route_output",
    "release_drained",
];

fn pending_json(p: PendingInput) -> Value {
    json!({"bytes": p.bytes, "turns": p.turns})
}

fn narrow<T: TryFrom<u64>>(v: &Value, name: &str) -> Result<T, ParseError> {
    T::try_from(u64_of(v, name)?).map_err(|_| bad(format!("`{name}` is out of range")))
}

/// What a `manager` line gives every session it opens: `input_limits`
/// and `overlap`, when given (else the defaults).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Extras {
    input_limits: Option<InputLimits>,
    overlap: Option<OverlapConfig>,
}

impl Extras {
    /// A `manager` line's.
    pub(super) fn of(op: &Map<String, Value>) -> Result<Self, ParseError> {
        let mut extras = Extras::default();
        if let Some(limits) = op.get("input_limits").filter(|v| !v.is_null()) {
            let l = limits
                .as_object()
                .ok_or_else(|| bad("`input_limits` must be an object"))?;
            extras.input_limits = Some(InputLimits::new(
                narrow(field(l, "bytes")?, "bytes")?,
                narrow(field(l, "turns")?, "turns")?,
            ));
        }
        if let Some(rule) = op.get("overlap").filter(|v| !v.is_null()) {
            let r = rule
                .as_object()
                .ok_or_else(|| bad("`overlap` must be an object"))?;
            let name = str_of(field(r, "policy")?, "policy")?;
            let policy = OverlapPolicy::parse(name)
                .ok_or_else(|| bad(format!("unknown policy {name:?}")))?;
            extras.overlap = Some(OverlapConfig::new(
                policy,
                narrow(field(r, "short_ack_ms")?, "short_ack_ms")?,
                narrow(field(r, "barge_in_ms")?, "barge_in_ms")?,
            ));
        }
        Ok(extras)
    }

    /// `options` with them.
    pub(super) fn apply<SC, RC>(self, mut options: OpenOptions<SC, RC>) -> OpenOptions<SC, RC> {
        if let Some(limits) = self.input_limits {
            options = options.input_limits(limits);
        }
        if let Some(rule) = self.overlap {
            options = options.overlap(rule);
        }
        options
    }
}

/// An optional boolean field.
fn flag(op: &Map<String, Value>, name: &str) -> Result<Option<bool>, ParseError> {
    match op.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => bool_of(v, name).map(Some),
    }
}

/// `decide_overlap`'s input.
fn overlap_of(op: &Map<String, Value>) -> Result<Overlap, ParseError> {
    let word = |name| -> Result<Option<&str>, ParseError> {
        match op.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => str_of(v, name).map(Some),
        }
    };
    Ok(Overlap {
        duration_ms: narrow(field(op, "duration_ms")?, "duration_ms")?,
        speech: bool_of(field(op, "speech")?, "speech")?,
        request: word("request")?.and_then(OverlapRequest::parse),
        forced: Forced::from_flags(
            flag(op, "force_barge_in")?.unwrap_or(false),
            flag(op, "force_listen")?.unwrap_or(false),
        ),
        vad_speech_started: flag(op, "vad_speech_started")?,
        short_ack_transcript: word("transcript")?.is_some_and(is_short_ack),
    })
}

fn route_json(route: Option<OutputRoute>) -> Value {
    route.map_or(Value::Null, |r| {
        json!({
            "owner": r.owner.as_str(),
            "stage": r.stage,
            "epoch": r.bound_at.epoch,
            "turn": r.bound_at.turn,
            "response": r.bound_at.response,
        })
    })
}

/// `drain`'s stages to keep.
fn keep_of(op: &Map<String, Value>) -> Result<Vec<u32>, ParseError> {
    field(op, "keep")?
        .as_array()
        .ok_or_else(|| bad("`keep` must be a list of stages"))?
        .iter()
        .map(|v| narrow(v, "keep"))
        .collect()
}

impl Runner {
    /// Runs an extension operation.
    pub(super) fn op_extension(
        &mut self,
        name: &str,
        op: &Map<String, Value>,
    ) -> Result<Outcome, ParseError> {
        let m = &mut self.manager;
        let kind = |e: duplex_std::Error| e.kind();
        if name == "drain" {
            let keep = keep_of(op)?;
            let (Some(cancelled), Some(next)) = (
                fence_of(field(op, "cancelled")?)?,
                fence_of(field(op, "next")?)?,
            ) else {
                return Ok(UNKNOWN);
            };
            return Ok(m
                .drain(&cancelled, &next, |stage| keep.contains(&stage))
                .map(|ids| json!({"ids": ids_json(&ids)}))
                .map_err(kind));
        }
        if matches!(
            name,
            "reserve_input" | "reserve_turn" | "decide_overlap" | "resume_by"
        ) {
            let Some(f) = fence_of(field(op, "fence")?)? else {
                return Ok(UNKNOWN);
            };
            return Ok(match name {
                "reserve_input" => {
                    let bytes = u64_of(field(op, "bytes")?, "bytes")?;
                    m.reserve_input(&f, bytes).map(pending_json).map_err(kind)
                }
                "reserve_turn" => m.reserve_turn(&f).map(pending_json).map_err(kind),
                "decide_overlap" => {
                    let input = overlap_of(op)?;
                    m.decide_overlap(&f, &input)
                        .map(|d| {
                            json!({
                                "action": d.action.as_str(),
                                "reason": d.reason.as_str(),
                                "duration_ms": d.duration_ms,
                                "overlap_speech_ms": d.overlap_speech_ms,
                                "buffer_audio": d.buffer_audio,
                                "defer_append": d.defer_append,
                                "force_listen": d.force_listen,
                            })
                        })
                        .map_err(kind)
                }
                _ => {
                    let generation =
                        u64_of(field(op, "expected_generation")?, "expected_generation")?;
                    let control = str_of(field(op, "control_id")?, "control_id")?;
                    match duplex_core::Id::<{ duplex_core::profile::conformance::ID_LEN }>::new(
                        control,
                    ) {
                        Err(e) => Err(e.kind()),
                        Ok(control) => m
                            .resume_idempotent(&f, generation, &control)
                            .map(|g| json!({ "generation": g }))
                            .map_err(kind),
                    }
                }
            });
        }
        let Some(session) = session_of(field(op, "session")?)? else {
            return Ok(UNKNOWN);
        };
        Ok(match name {
            "release_input" => {
                let bytes = u64_of(field(op, "bytes")?, "bytes")?;
                m.release_input(&session, bytes)
                    .map(pending_json)
                    .map_err(kind)
            }
            "release_turn" => m.release_turn(&session).map(pending_json).map_err(kind),
            "release_all_input" => m
                .release_all_input(&session)
                .map(|bytes| json!({ "bytes": bytes }))
                .map_err(kind),
            "cancel_pending_input" => m
                .cancel_pending_input(&session)
                .map(pending_json)
                .map_err(kind),
            "reset_overlap_speech" => m
                .reset_overlap_speech(&session)
                .map(|heard| json!({ "heard": heard }))
                .map_err(kind),
            "route_output" => {
                let request = str_of(field(op, "request_id")?, "request_id")?;
                m.route_output(&session, request)
                    .map(route_json)
                    .map_err(kind)
            }
            "release_drained" => m
                .release_drained(&session)
                .map(|ids| json!({"ids": ids_json(&ids)}))
                .map_err(kind),
            other => return Err(bad(format!("unknown op {other:?}"))),
        })
    }
}
