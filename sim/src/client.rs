//! One simulated voice client: a small state machine that talks, listens,
//! barges in, drops and comes back, and checks every answer it gets.

use duplex_core::{Activity, CloseReason, ErrorKind, Fence, Finality, Id, InputMode, PendingInput};

use super::{Fault, World, GRACE, IDLE_TTL, STEP_MS};
use duplex_std::{Error, InputBudgets, Sessions};

mod budget;
mod drain;
pub(crate) use drain::SPEAKER;
mod overlap;

pub(crate) const AUDIO: InputMode = InputMode::AppendAudioChunk;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No session; (re)open at `until`.
    Offline { until: u64 },
    /// The user is speaking: `chunks` more 20 ms chunks this turn.
    Talking { chunks: u64 },
    /// The model is answering for `steps` more steps.
    Responding { steps: u64 },
    /// Disconnected; try to resume at `until`.
    Detached { until: u64 },
    /// Vanished without closing; comes back at `until`.
    Silent { until: u64 },
    /// Finished.
    Done,
}

#[derive(Debug)]
pub(crate) struct Client {
    name: String,
    id: Id,
    incarnation: u64,
    fence: Fence,
    generation: u64,
    /// The `seq` the next accepted append must get.
    next_seq: u64,
    /// Operation counter for unique operation and request ids.
    counter: u64,
    turns_left: u64,
    phase: Phase,
    /// A fence the session has moved past (a cancelled epoch or a previous
    /// incarnation), for late deliveries.
    stale: Option<Fence>,
    /// Requests of the current response: `(stage, id)`.
    requests: Vec<(u32, String)>,
    generating: Option<String>,
    /// What the session holds of this client's input, by the client's own
    /// count: every answer of the budgets is checked against it.
    pending: PendingInput,
    /// The speech the session has heard over the model's answer, by the
    /// client's own count.
    heard: u32,
    /// Requests kept bound past their turn or epoch: `(id, epoch, turn)`
    /// of the fence each was bound under.
    draining: Vec<(String, u64, u64)>,
}

/// Whether an error means the session is gone or closing under the client
/// (expired, closed for request cleanup): the client starts over.
fn lost(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::UnknownSession | ErrorKind::WrongState)
}

impl Client {
    pub(crate) fn new(index: usize, world: &mut World<'_>) -> Client {
        let name = format!("c{index}");
        let id = Id::new(&name).expect("client ids are short");
        let until = world.range(1, 200);
        Client {
            fence: Fence::new(id.clone(), 0),
            name,
            id,
            incarnation: 0,
            generation: 0,
            next_seq: 1,
            counter: 0,
            turns_left: 0,
            phase: Phase::Offline { until },
            stale: None,
            requests: Vec::new(),
            generating: None,
            pending: PendingInput::default(),
            heard: 0,
            draining: Vec::new(),
        }
    }

    pub(crate) fn step(&mut self, w: &mut World<'_>) {
        if matches!(self.phase, Phase::Talking { .. } | Phase::Responding { .. })
            && !self.check_draining(w)
        {
            return;
        }
        match self.phase {
            Phase::Offline { until } if w.step >= until => self.open(w),
            Phase::Talking { chunks } => self.talk(w, chunks),
            Phase::Responding { steps } => self.respond(w, steps),
            Phase::Detached { until } if w.step >= until => self.resume(w),
            Phase::Silent { until } if w.step >= until => self.come_back(w),
            _ => {}
        }
    }

    fn unexpected(&self, w: &mut World<'_>, operation: &str, expected: &str, e: &Error) {
        w.violation(&self.name, operation, expected, e);
    }

    /// The session is gone or closing under the client: start over later
    /// with a new incarnation; the old fence goes stale.
    fn start_over(&mut self, w: &mut World<'_>) {
        self.stale = Some(self.fence.clone());
        self.requests.clear();
        // The session's close, expiry or cleanup releases what drained.
        self.draining.clear();
        self.generating = None;
        self.pending = PendingInput::default();
        self.heard = 0;
        self.incarnation += 1;
        let until = w.step + w.range(5, 100);
        self.phase = Phase::Offline { until };
    }

    /// Handles an error of an operation the client expected to succeed.
    fn failed(&mut self, w: &mut World<'_>, operation: &str, e: &Error) {
        if lost(e) {
            self.start_over(w);
        } else {
            self.unexpected(w, operation, "success", e);
            self.start_over(w);
        }
    }

    fn open(&mut self, w: &mut World<'_>) {
        let fence = Fence::new(self.id.clone(), self.incarnation);
        w.op();
        match w.m.open(fence.clone(), World::open_options()) {
            Ok(()) => {
                w.report.sessions += 1;
                w.check_admission(&self.name);
                self.fence = fence;
                self.pending = PendingInput::default();
                self.heard = 0;
                self.generation = 0;
                self.next_seq = 1;
                self.turns_left = w.range(1, 6);
                self.phase = Phase::Talking {
                    chunks: w.range(5, 60),
                };
            }
            Err(e) if e.kind() == ErrorKind::CapacityExhausted => {
                w.report.admission_refused += 1;
                self.phase = Phase::Offline {
                    until: w.step + w.range(10, 100),
                };
            }
            // The previous incarnation is still closing (cleanup pending).
            Err(e) if e.kind() == ErrorKind::SessionExists => {
                self.phase = Phase::Offline {
                    until: w.step + w.range(5, 50),
                };
            }
            Err(e) => {
                self.unexpected(w, "open", "ok, capacity_exhausted or session_exists", &e);
                self.phase = Phase::Done;
            }
        }
    }

    fn talk(&mut self, w: &mut World<'_>, chunks: u64) {
        if w.fault(Fault::LateAppend, 0.02) {
            self.late_append(w);
        }
        if w.chance(0.003) {
            return self.disconnect(w);
        }
        if w.fault(Fault::Takeover, 0.002) {
            self.takeover(w);
        }
        if w.fault(Fault::Vanish, 0.001) {
            let quiet = IDLE_TTL.as_millis() / STEP_MS + w.range(10, 200);
            self.phase = Phase::Silent {
                until: w.step + quiet,
            };
            return;
        }
        if w.fault(Fault::BudgetFlood, 0.01) && !self.flood(w) {
            return;
        }
        match self.reserve_chunk(w) {
            None => return,
            // Backpressure: the client commits what it has said.
            Some(false) => return self.start_response(w),
            Some(true) => {}
        }
        if !self.append_chunk(w) {
            return;
        }
        if chunks > 1 {
            self.phase = Phase::Talking { chunks: chunks - 1 };
        } else {
            self.start_response(w);
        }
    }

    /// Streams one audio chunk with an operation id; returns whether the
    /// session is still there.
    fn append_chunk(&mut self, w: &mut World<'_>) -> bool {
        self.counter += 1;
        let op = format!(
            "{}.{}.{}.{}",
            self.name, self.incarnation, self.fence.epoch, self.counter
        );
        w.op();
        match w.m.completed(&self.fence, &op, AUDIO, Finality::Partial) {
            Ok(None) => {}
            Ok(Some(r)) => {
                w.violation(
                    &self.name,
                    "completed",
                    "none for a fresh operation id",
                    format!("{r:?}"),
                );
            }
            Err(e) => {
                self.failed(w, "completed", &e);
                return false;
            }
        }
        w.op();
        let appended = match w.m.append(&self.fence, AUDIO) {
            Ok(a) => a,
            Err(e) => {
                self.failed(w, "append", &e);
                return false;
            }
        };
        w.report.appends += 1;
        if appended.seq != self.next_seq {
            let expected = format!("seq {}", self.next_seq);
            w.violation(
                &self.name,
                "append",
                &expected,
                format!("seq {}", appended.seq),
            );
        }
        self.next_seq = appended.seq + 1;
        let seq = i64::try_from(appended.seq).unwrap_or(i64::MAX);
        w.op();
        if let Err(e) =
            w.m.record_completed(&self.fence, &op, AUDIO, Finality::Partial, &[seq])
        {
            self.unexpected(w, "record_completed", "ok", &e);
        }
        if w.fault(Fault::Duplicate, 0.03) {
            // The same chunk is delivered again: it must be answered from the
            // completed-append cache, never appended twice.
            w.op();
            match w.m.completed(&self.fence, &op, AUDIO, Finality::Partial) {
                Ok(Some(r)) if r.as_slice() == [seq] => w.report.duplicates += 1,
                other => {
                    let got = format!("{other:?}");
                    w.violation(
                        &self.name,
                        "completed (retry)",
                        &format!("Some([{seq}])"),
                        got,
                    );
                }
            }
        }
        true
    }

    /// A late append with a fence the session has moved past.
    fn late_append(&mut self, w: &mut World<'_>) {
        let Some(stale) = self.stale.clone() else {
            return;
        };
        w.op();
        match w.m.append(&stale, AUDIO) {
            Ok(a) => w.violation(
                &self.name,
                "append (late)",
                "fence_mismatch",
                format!("accepted as seq {}", a.seq),
            ),
            Err(e) if e.kind() == ErrorKind::FenceMismatch => w.report.stale_rejected += 1,
            Err(e) => self.unexpected(w, "append (late)", "fence_mismatch", &e),
        }
    }

    fn start_response(&mut self, w: &mut World<'_>) {
        // The commit takes a turn of the budget (one is always free here:
        // each turn is consumed or dropped before the next is said).
        let expected = PendingInput {
            turns: self.pending.turns + 1,
            ..self.pending
        };
        w.op();
        match w.m.reserve_turn(&self.fence) {
            Ok(p) if p == expected => self.pending = p,
            Err(e) if lost(&e) => return self.start_over(w),
            other => {
                let got = format!("{other:?}");
                w.violation(
                    &self.name,
                    "reserve_turn",
                    &format!("Ok({expected:?})"),
                    got,
                );
                return self.start_over(w);
            }
        }
        // The model answers at the next response of this turn.
        self.fence.response += 1;
        let base = format!(
            "{}.{}.{}.{}",
            self.name, self.incarnation, self.fence.epoch, self.counter
        );
        self.requests = vec![(0, format!("{base}.llm")), (1, format!("{base}.tts"))];
        let voc = w.chance(0.3);
        if voc {
            self.requests.push((2, format!("{base}.voc")));
        }
        let requests = self.requests.clone();
        for (stage, request) in &requests {
            w.op();
            let result = if *stage == 2 {
                w.m.reserve(&self.fence, *stage, request)
            } else {
                w.m.bind(&self.fence, *stage, request)
            };
            if let Err(e) = result {
                return self.failed(w, "bind", &e);
            }
            if let Err(why) = w.ledger.hold(request) {
                w.violation(&self.name, "bind", "a fresh request id", why);
            }
        }
        let op = format!("{base}.gen");
        w.op();
        if let Err(e) = w.m.begin_operation(&self.fence, &op) {
            return self.failed(w, "begin_operation", &e);
        }
        self.generating = Some(op);
        self.phase = Phase::Responding {
            steps: w.range(15, 150),
        };
    }

    fn respond(&mut self, w: &mut World<'_>, steps: u64) {
        if w.fault(Fault::CleanupFailure, 0.0005) {
            if let Some((_, request)) = self.requests.first().cloned() {
                // The engine fails this request: the session closes and the
                // host now owns the cleanup of all its requests.
                w.fail_request(&self.name, &request);
                self.requests.clear();
            }
        }
        if w.chance(0.01) {
            return self.barge_in(w);
        }
        if w.fault(Fault::OverlapBurst, 0.01) && !self.overlap(w) {
            return;
        }
        if steps.is_multiple_of(5) {
            w.op();
            if let Err(e) = w.m.touch(&self.fence, Activity::ModelOutput) {
                return self.failed(w, "touch", &e);
            }
        }
        if steps > 1 {
            self.phase = Phase::Responding { steps: steps - 1 };
            return;
        }
        // The response finished: end the operation, release its requests.
        if let Some(op) = self.generating.take() {
            w.op();
            if let Err(e) = w.m.end_operation(&self.fence, &op) {
                return self.failed(w, "end_operation", &e);
            }
        }
        // The next turn may start while the speaker still plays: its
        // request drains; the others are released.
        let next_turn = self.fence.clone().with_turn(self.fence.turn + 1);
        let drained = w.fault(Fault::Drain, 0.3);
        if drained {
            let cancelled = self.fence.clone();
            if !self.drain_to(w, &cancelled, &next_turn) {
                return;
            }
            self.fence = next_turn.clone();
        } else {
            self.release_requests(w);
        }
        if !self.consume_input(w) || !self.forget_overlap(w) {
            return;
        }
        w.op();
        if let Err(e) = w.m.touch(&self.fence, Activity::PlaybackAck) {
            return self.failed(w, "touch", &e);
        }
        self.turns_left = self.turns_left.saturating_sub(1);
        if self.turns_left == 0 {
            self.close(w);
        } else {
            self.fence = next_turn;
            self.phase = Phase::Talking {
                chunks: w.range(5, 60),
            };
        }
    }

    /// Releases this response's requests that the session still holds.
    fn release_requests(&mut self, w: &mut World<'_>) {
        let ids: Vec<&str> = self.requests.iter().map(|(_, r)| r.as_str()).collect();
        w.op();
        let held = match w.m.resource_request_ids(&self.id, None, None) {
            Ok(held) => held,
            Err(e) => return self.failed(w, "resource_request_ids", &e),
        };
        w.op();
        if let Err(e) = w.m.release(&self.id, &ids) {
            return self.failed(w, "release", &e);
        }
        let released = held.iter().map(Id::as_str).filter(|h| ids.contains(h));
        w.released(&self.name, "release", released);
        self.requests.clear();
    }

    /// The user interrupts the model: cancel to the next epoch.
    fn barge_in(&mut self, w: &mut World<'_>) {
        let cancelled = self.fence.clone();
        let next = cancelled
            .clone()
            .with_epoch(cancelled.epoch + 1)
            .with_turn(cancelled.turn + 1);
        let drains = w.fault(Fault::Drain, 0.5);
        if drains {
            // The speaker flushes: its request stays bound, stale.
            if !self.drain_to(w, &cancelled, &next) {
                return;
            }
        } else {
            w.op();
            let ids = match w.m.cancel(&cancelled, &next) {
                Ok(ids) => ids,
                Err(e) => return self.failed(w, "cancel", &e),
            };
            let mut got: Vec<&str> = ids.iter().map(Id::as_str).collect();
            let mut want: Vec<&str> = self.requests.iter().map(|(_, r)| r.as_str()).collect();
            got.sort_unstable();
            want.sort_unstable();
            if got != want {
                w.violation(
                    &self.name,
                    "cancel",
                    &format!("{want:?}"),
                    format!("{got:?}"),
                );
            }
            w.released(&self.name, "cancel", ids.iter().map(Id::as_str));
            self.requests.clear();
        }
        w.report.barge_ins += 1;
        self.fence = next.clone();
        self.next_seq = 1;
        if let Some(op) = self.generating.take() {
            w.op();
            if let Err(e) = w.m.end_operation(&self.fence, &op) {
                return self.failed(w, "end_operation", &e);
            }
        }
        if w.fault(Fault::ReorderedCancel, 0.5) {
            w.schedule_late_cancel(cancelled.clone(), next, drains);
        }
        // The cancelled turn's input is thrown away with it.
        w.op();
        match w.m.cancel_pending_input(&self.id) {
            Ok(dropped) if dropped == self.pending => self.pending = PendingInput::default(),
            Err(e) if lost(&e) => return self.start_over(w),
            other => {
                let (want, got) = (format!("Ok({:?})", self.pending), format!("{other:?}"));
                w.violation(&self.name, "cancel_pending_input", &want, got);
                return self.start_over(w);
            }
        }
        // The new epoch starts the count of overlapping speech again.
        self.heard = 0;
        self.stale = Some(cancelled);
        self.phase = Phase::Talking {
            chunks: w.range(5, 60),
        };
    }

    fn disconnect(&mut self, w: &mut World<'_>) {
        w.op();
        if let Err(e) = w.m.detach(&self.fence) {
            return self.failed(w, "detach", &e);
        }
        let grace_steps = GRACE.as_millis() / STEP_MS;
        // Most come back within grace; some too late.
        let back = if w.chance(0.75) {
            w.range(1, grace_steps - 5)
        } else {
            w.range(grace_steps + 5, grace_steps * 3)
        };
        self.phase = Phase::Detached {
            until: w.step + back,
        };
    }

    fn resume(&mut self, w: &mut World<'_>) {
        if w.fault(Fault::StaleResume, 0.3) {
            w.op();
            match w.m.resume(&self.fence, self.generation + 1) {
                Err(e) if e.kind() == ErrorKind::GenerationMismatch => w.report.stale_rejected += 1,
                Err(e) if lost(&e) => {}
                other => {
                    let got = format!("{other:?}");
                    w.violation(&self.name, "resume (stale)", "generation_mismatch", got);
                }
            }
        }
        // Each resume is named, so that one whose answer was lost can be
        // asked again.
        let control = format!("{}-resume-{}", self.name, self.generation);
        w.op();
        match w
            .m
            .resume_idempotent(&self.fence, self.generation, &control)
        {
            Ok(g) => {
                w.report.resumed += 1;
                if w.fault(Fault::ReplayedResume, 0.3) {
                    w.op();
                    match w
                        .m
                        .resume_idempotent(&self.fence, self.generation, &control)
                    {
                        Ok(again) if again == g => w.report.replayed_resumes += 1,
                        other => {
                            let got = format!("{other:?}");
                            w.violation(
                                &self.name,
                                "resume (asked again)",
                                &format!("Ok({g})"),
                                got,
                            );
                        }
                    }
                }
                self.generation = g;
                self.phase = Phase::Talking {
                    chunks: w.range(5, 60),
                };
            }
            Err(e) => self.failed(w, "resume", &e),
        }
    }

    /// A second connection takes over; the first one's token is then stale.
    fn takeover(&mut self, w: &mut World<'_>) {
        let old = self.generation;
        w.op();
        match w.m.resume(&self.fence, old) {
            Ok(g) => self.generation = g,
            Err(e) => return self.failed(w, "resume (takeover)", &e),
        }
        w.op();
        match w.m.resume(&self.fence, old) {
            Err(e) if e.kind() == ErrorKind::GenerationMismatch => w.report.stale_rejected += 1,
            other => {
                let got = format!("{other:?}");
                w.violation(
                    &self.name,
                    "resume (old connection)",
                    "generation_mismatch",
                    got,
                );
            }
        }
    }

    /// Back after vanishing: the session has usually idle-expired.
    fn come_back(&mut self, w: &mut World<'_>) {
        w.op();
        match w.m.touch(&self.fence, Activity::Heartbeat) {
            Ok(()) => {
                self.phase = Phase::Talking {
                    chunks: w.range(5, 60),
                };
            }
            Err(e) => self.failed(w, "touch", &e),
        }
    }

    fn close(&mut self, w: &mut World<'_>) {
        w.op();
        match w.m.close(&self.fence, CloseReason::ClientClose) {
            Ok(Some(ids)) => w.released(&self.name, "close", ids.iter().map(Id::as_str)),
            // Closing under us (expiry or request cleanup): the host finalizes.
            Ok(None) => {}
            Err(e) => self.unexpected(w, "close", "closed", &e),
        }
        self.start_over(w);
    }

    /// End of the run: connected clients close; vanished ones stay silent
    /// and are left to the reaper.
    pub(crate) fn finish(&mut self, w: &mut World<'_>) {
        match self.phase {
            Phase::Talking { .. } | Phase::Responding { .. } | Phase::Detached { .. } => {
                self.close(w)
            }
            Phase::Offline { .. } | Phase::Silent { .. } | Phase::Done => {}
        }
        self.phase = Phase::Done;
    }
}
