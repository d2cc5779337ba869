//! Overlap decisions, with vllm-omni 0.30's names: `decide_overlap` takes
//! what the release's `overlap_policy.decide` reads of an append (its
//! duration, whether it is speech, the client's `overlap_action`,
//! `force_barge_in`, `force_listen`, a VAD's `speech_started`, a
//! transcript) and answers the release's decision as a dict.

use duplex_core::overlap::{
    is_short_ack, Forced, Overlap, OverlapConfig, OverlapDecision, OverlapRequest,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args::{self, given};
use crate::session::PySession;

/// The decision as the release's dict, every key present: `action`,
/// `reason`, `duration_ms`, `overlap_speech_ms`, `buffer_audio`,
/// `defer_runtime_append` and `force_listen` (the last two mean something
/// for a listen only, and are false otherwise).
fn decision_dict<'py>(py: Python<'py>, d: &OverlapDecision) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("action", d.action.as_str())?;
    out.set_item("reason", d.reason.as_str())?;
    out.set_item("duration_ms", d.duration_ms)?;
    out.set_item("overlap_speech_ms", d.overlap_speech_ms)?;
    out.set_item("buffer_audio", d.buffer_audio)?;
    out.set_item("defer_runtime_append", d.defer_append)?;
    out.set_item("force_listen", d.force_listen)?;
    Ok(out)
}

#[pymethods]
impl PySession {
    /// Decides what to do with an append that arrived while the model was
    /// speaking: `{"action": "listen" | "barge_in" | "drop", "reason": ...}`.
    /// An `overlap_action` the release does not know is no request, as
    /// there.
    #[pyo3(signature = (fence, duration_ms, is_speech, *, overlap_action = None, force_barge_in = None, force_listen = None, vad_speech_started = None, transcript = None))]
    // One parameter per Python argument, as the release's event has them.
    #[allow(clippy::too_many_arguments)]
    fn decide_overlap<'py>(
        &self,
        py: Python<'py>,
        fence: &Bound<'py, PyAny>,
        duration_ms: &Bound<'py, PyAny>,
        is_speech: &Bound<'py, PyAny>,
        overlap_action: Option<&Bound<'py, PyAny>>,
        force_barge_in: Option<&Bound<'py, PyAny>>,
        force_listen: Option<&Bound<'py, PyAny>>,
        vad_speech_started: Option<&Bound<'py, PyAny>>,
        transcript: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let flag = |v: Option<&Bound<'py, PyAny>>, name| {
            given(v).map_or(Ok(false), |v| args::flag(v, name))
        };
        let input = Overlap {
            duration_ms: args::integer::<u32>(duration_ms, "duration_ms", "0..2**32")?,
            speech: args::flag(is_speech, "is_speech")?,
            request: match given(overlap_action) {
                Some(v) => OverlapRequest::parse(args::text(v, "overlap_action")?),
                None => None,
            },
            forced: Forced::from_flags(
                flag(force_barge_in, "force_barge_in")?,
                flag(force_listen, "force_listen")?,
            ),
            vad_speech_started: given(vad_speech_started)
                .map(|v| args::flag(v, "vad_speech_started"))
                .transpose()?,
            short_ack_transcript: match given(transcript) {
                Some(v) => is_short_ack(args::text(v, "transcript")?),
                None => false,
            },
        };
        let decision = fenced!(self, py, fence, |s, f| s.decide_overlap(&f, &input))?;
        decision_dict(py, &decision)
    }

    /// Forgets the overlapping speech heard (the response ended); returns
    /// how much there was, in ms.
    fn reset_overlap_speech(&self, py: Python<'_>) -> PyResult<u32> {
        budget!(self, py, 0, |s| s.reset_overlap_speech())
    }

    /// The overlapping speech heard since the last reset, in ms (0 once
    /// closed).
    #[getter]
    fn overlap_speech_ms(&self, py: Python<'_>) -> PyResult<u32> {
        budget!(self, py, 0, |s| s.overlap_speech_ms())
    }

    /// The session's overlap rule, with the release's keys:
    /// `{"overlap_policy": str, "overlap_short_ack_ms": int,
    /// "overlap_barge_in_ms": int}` (the defaults once closed).
    #[getter]
    fn overlap_config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let config = budget!(self, py, OverlapConfig::DEFAULT, |s| s.overlap_config())?;
        let out = PyDict::new(py);
        out.set_item("overlap_policy", config.policy.as_str())?;
        out.set_item("overlap_short_ack_ms", config.short_ack_ms)?;
        out.set_item("overlap_barge_in_ms", config.barge_in_ms)?;
        Ok(out)
    }
}
