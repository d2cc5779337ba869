//! Outcomes written as the trace's JSON, without allocation.

use core::fmt::Write as _;

use duplex_core::profile::conformance;
use duplex_core::{AnySession, Appended, CloseReason, Fence, Id, Instant, Session, Unfinished};
use heapless::Vec;

use crate::Line;

fn quoted(out: &mut Line, s: &str) {
    let _ = write!(out, "\"{s}\"");
}

pub(crate) fn ids<'a>(out: &mut Line, ids: impl IntoIterator<Item = &'a Id>) {
    out.push('[').ok();
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            out.push(',').ok();
        }
        quoted(out, id.as_str());
    }
    out.push(']').ok();
}

pub(crate) fn fence_json(out: &mut Line, f: &Fence) {
    let _ = write!(
        out,
        "{{\"session\":\"{}\",\"incarnation\":{},\"epoch\":{},\"turn\":{},\"response\":{}}}",
        f.session.as_str(),
        f.incarnation,
        f.epoch,
        f.turn,
        f.response
    );
}

pub(crate) fn appended(out: &mut Line, a: Appended) {
    let _ = write!(
        out,
        "{{\"seq\":{},\"turn_seq\":{},\"turn_id\":{}}}",
        a.seq, a.turn_seq, a.turn_id
    );
}

/// The session as the trace's `inspect` writes it.
pub(crate) fn view(o: &mut Line, s: &AnySession) {
    if let Some(t) = s.as_open() {
        typed(o, t, None, None);
    } else if let Some(t) = s.as_detached() {
        typed(o, t, Some(t.state().since()), None);
    } else if let Some(t) = s.as_closing() {
        typed(o, t, None, Some(t.state().reason()));
    } else {
        o.push_str("{\"absent\":true}").ok();
    }
}

pub(crate) fn typed<S: Unfinished>(
    o: &mut Line,
    s: &Session<S>,
    detached_at: Option<Instant>,
    reason: Option<CloseReason>,
) {
    let _ = write!(o, "{{\"state\":\"{}\",\"fence\":", s.kind().as_str());
    fence_json(o, s.fence());
    let _ = write!(
        o,
        ",\"input_seq\":{},\"input_turn_seq\":{},\"lease_generation\":{},\"config_generation\":{},\"last_activity_ms\":{},\"detached_at_ms\":",
        s.input_seq(),
        s.input_turn_seq(),
        s.lease_generation(),
        s.config_generation(),
        s.last_activity().as_millis()
    );
    match detached_at {
        Some(t) => {
            let _ = write!(o, "{}", t.as_millis());
        }
        None => {
            o.push_str("null").ok();
        }
    }
    o.push_str(",\"active_operations\":").ok();
    let mut active: Vec<&Id, { conformance::ACTIVE_OPS }> = s.active_operations().collect();
    active.sort_unstable();
    ids(o, active.iter().copied());
    o.push_str(",\"bindings\":[").ok();
    for (i, (stage, id)) in s.bindings().enumerate() {
        let _ = write!(
            o,
            "{}[{stage},\"{}\"]",
            if i > 0 { "," } else { "" },
            id.as_str()
        );
    }
    o.push_str("],\"resources\":[").ok();
    for (i, (stage, id, state)) in s.resources().enumerate() {
        let _ = write!(
            o,
            "{}[{stage},\"{}\",{}]",
            if i > 0 { "," } else { "" },
            id.as_str(),
            state.is_submitted()
        );
    }
    o.push_str("],\"completed\":").ok();
    ids(o, s.completed_operations());
    o.push_str(",\"close_reason\":").ok();
    match reason {
        Some(r) => quoted(o, r.as_str()),
        None => {
            o.push_str("null").ok();
        }
    }
    o.push('}').ok();
}
