//! Speech over the model's, on the contract's paths: each chunk that
//! arrives while a response is in progress is put to the session's overlap
//! rule (the core's `decide_overlap`), the decision is sent as the
//! contract's `overlap.decision`, and it is carried out: a barge-in cancels
//! the response and the chunk starts the new turn; a listen keeps the chunk
//! in the turn unless it was only an acknowledgement; a drop throws it
//! away. A session's rule is its `session.update`'s (`overlap_policy`,
//! `overlap_short_ack_ms`, `overlap_barge_in_ms`).

use duplex_core::overlap::{is_short_ack, Overlap, OverlapAction, OverlapConfig};
use duplex_core::Error as CoreError;

use super::super::Connection;
use crate::protocol::realtime::{
    overlap_decision, overlap_rule, pcm16_is_speech, pcm16_ms, AppendHints, RealtimeError,
};
use crate::server::stream::SessionConfig;

impl Connection {
    /// Decides on a chunk that arrived while the model speaks, and says
    /// whether the chunk is to be appended. Nothing is decided (and the
    /// chunk is appended, or refused, as any other) when no response is
    /// in progress, or when the session cannot decide (its refusal is the
    /// append's).
    pub(super) async fn rt_overlap(
        &mut self,
        pcm: &[u8],
        transcript: Option<&str>,
        hints: AppendHints,
    ) -> bool {
        let (Some(rt), Some(held)) = (self.rt.as_ref(), self.bound.as_ref()) else {
            return true;
        };
        if !rt.stream.responding().await {
            return true;
        }
        let epoch = rt.conv.epoch;
        let fence = held.fence(epoch, rt.conv.turn);
        let input = Overlap {
            duration_ms: hints.duration_ms.unwrap_or_else(|| pcm16_ms(pcm)),
            speech: hints.speech.unwrap_or_else(|| pcm16_is_speech(pcm)),
            request: hints.request,
            forced: hints.forced,
            vad_speech_started: hints.vad_speech_started,
            short_ack_transcript: transcript.is_some_and(is_short_ack),
        };
        let decided = self.shared.manager.with_open(&held.session, |s, _| {
            let d = s.decide_overlap(&fence, &input)?;
            Ok::<_, CoreError>((d, s.overlap_config().policy))
        });
        let Some(Ok((decision, policy))) = decided else {
            return true;
        };
        let event = overlap_decision(&held.client_id, epoch, policy, &decision);
        rt.stream
            .answer(rt.attachment, &self.outbox, vec![event])
            .await;
        match decision.action {
            OverlapAction::BargeIn => {
                self.rt_barge_in(None, "barge_in").await;
                true
            }
            OverlapAction::Listen => decision.buffer_audio,
            OverlapAction::Drop => false,
        }
    }

    /// The overlap rule a `session` object asks for, checked against the
    /// session's current one (the defaults before it opens).
    ///
    /// # Errors
    ///
    /// `invalid_value`, naming the field and what it must be.
    pub(super) fn overlap_asked(
        &self,
        session: &SessionConfig,
    ) -> Result<Option<OverlapConfig>, RealtimeError> {
        let current = self
            .bound
            .as_ref()
            .and_then(|held| {
                self.shared
                    .manager
                    .with_open(&held.session, |s, _| s.overlap_config())
            })
            .unwrap_or(OverlapConfig::DEFAULT);
        overlap_rule(session, current)
    }

    /// The session takes `rule` from now on (the speech heard is kept).
    pub(super) fn set_overlap(&self, rule: Option<OverlapConfig>) {
        if let (Some(rule), Some(held)) = (rule, self.bound.as_ref()) {
            self.shared
                .manager
                .with_open(&held.session, |s, _| s.set_overlap_config(rule));
        }
    }
}
