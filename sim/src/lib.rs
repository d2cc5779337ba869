//! # duplex-sim
//!
//! The load-and-fault simulator of duplex-session, behind the `duplex-sim`
//! binary (its own crate, so hosts that use `duplex-std` never compile its
//! command-line dependencies).
//!
//! Seeded, in virtual time through a [`SimClock`]: many simulated voice
//! clients drive one [`duplex_std::SessionManager`] (or, with
//! [`SimConfig::threads`] above one, one [`duplex_std::SharedManager`] from
//! that many threads) the way a voice host would: open, stream 20 ms audio
//! chunks with operation ids (recording
//! completed appends), bind stage requests per model response, barge in,
//! go quiet, disconnect and resume, close. A host loop reaps expired
//! sessions, cleans their requests up (sometimes failing once and retrying)
//! and finalizes them. Faults are injected on request ([`Faults`]), and a
//! checker verifies every step against the session rules (see [`Report`]).
//!
//! ```
//! use duplex_sim::{run, Faults, SimConfig};
//!
//! let config = SimConfig { sessions: 20, max_sessions: 16, duration_s: 5, faults: Faults::ALL, ..SimConfig::default() };
//! let report = run(&config, |_, _| {});
//! assert_eq!((report.violations, report.leaked), (0, 0));
//! assert!(report.appends > 0);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod backend;
mod client;
mod faults;
mod ledger;
mod threads;

use std::fmt;
use std::time::Instant as WallInstant;

use duplex_core::overlap::{OverlapConfig, OverlapPolicy};
use duplex_core::{Clock, Duration, ErrorKind, Fence, Id, InputLimits, LeaseConfig, OpenOptions};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use backend::Backend;
pub use backend::SimClock;
use client::Client;
use duplex_std::{Drains, Expiry, ManagerConfig, Sessions};
pub use faults::{Fault, Faults};
use ledger::Ledger;

/// Virtual time per simulation step: one 20 ms audio chunk.
pub const STEP_MS: u64 = 20;
/// Idle TTL of simulated sessions.
pub const IDLE_TTL: Duration = Duration::from_millis(8_000);
/// Disconnect grace of simulated sessions.
pub const GRACE: Duration = Duration::from_millis(2_000);
/// Bytes of one 20 ms chunk (16 kHz, 16-bit mono), reserved before its append.
pub const CHUNK_BYTES: u32 = 640;
/// Input limits of simulated sessions: a whole turn fits (at most 60
/// chunks, 38,400 bytes), a turn and most of another held across a
/// disconnect do not; one committed turn and one waiting.
pub const INPUT_LIMITS: InputLimits = InputLimits::new(48_000, 2);
/// The overlap rule of simulated sessions: speech over the model's up to
/// 300 ms is a short acknowledgement, 900 ms of it barges in.
pub const OVERLAP: OverlapConfig = OverlapConfig::new(OverlapPolicy::Thresholds, 300, 900);

/// Simulation settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// RNG seed: the same seed replays the same run.
    pub seed: u64,
    /// Number of simulated clients (each opens many sessions over time).
    pub sessions: usize,
    /// The manager's admission limit.
    pub max_sessions: usize,
    /// Virtual duration in seconds (then every client closes or vanishes
    /// and the host drains).
    pub duration_s: u64,
    /// Injected faults.
    pub faults: Faults,
    /// Worker threads driving the clients: 1 drives a single-threaded
    /// `SessionManager` (deterministic: the same seed gives the same
    /// counts); more drive one `SharedManager` from that many threads (the
    /// rules are checked the same way; the counts vary with scheduling).
    pub threads: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            sessions: 2_000,
            max_sessions: 1_800,
            duration_s: 120,
            faults: Faults::ALL,
            threads: 1,
        }
    }
}

/// The first rule a run broke, with what is needed to replay it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The run's seed.
    pub seed: u64,
    /// The simulation step (20 ms each).
    pub step: u64,
    /// The session id.
    pub session: String,
    /// The operation.
    pub operation: String,
    /// What the rules expect.
    pub expected: String,
    /// What happened.
    pub actual: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} step {} session {} operation {}: expected {}, actual {}",
            self.seed, self.step, self.session, self.operation, self.expected, self.actual
        )
    }
}

/// What a run did and what the checker found.
///
/// The checker verifies, at every step and at the end: no operation with a
/// stale fence is accepted; per session and epoch, `seq` rises by exactly
/// one per accepted append; a retried operation id never applies twice;
/// every reserved or submitted request id is released exactly once by the
/// end (`leaked` counts those never released); admission is never exceeded;
/// every session ends closed and the manager is empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Steps run (including the drain).
    pub steps: u64,
    /// Sessions opened.
    pub sessions: u64,
    /// Appends accepted.
    pub appends: u64,
    /// Retried deliveries answered from the completed-append cache.
    pub duplicates: u64,
    /// Stale operations refused (late appends, stale resumes, late cancels, taken-over connections).
    pub stale_rejected: u64,
    /// Sessions reaped by `collect_expired`.
    pub expired: u64,
    /// Barge-ins (cancels to the next epoch).
    pub barge_ins: u64,
    /// Resumes within grace.
    pub resumed: u64,
    /// Resumes asked again with their control id, answered with the
    /// generation they produced.
    pub replayed_resumes: u64,
    /// Chunks refused at the byte budget's limit (`input_backpressure`),
    /// each predicted by the client (a turn and a half held across a
    /// disconnect); the client then commits what it said.
    pub backpressure: u64,
    /// Floods refused at both budgets' limits, nothing changed.
    pub floods_refused: u64,
    /// Chunks spoken over the model's answer, each decided as predicted.
    pub overlaps: u64,
    /// Answers cut short by the user's overlapping speech.
    pub overlap_barge_ins: u64,
    /// Turns and barge-ins that let the speaker's request drain.
    pub drained: u64,
    /// Late outputs of draining requests, each routed as the client
    /// predicts (to its own response, or stale).
    pub late_outputs: u64,
    /// Opens refused by admission (`capacity_exhausted`).
    pub admission_refused: u64,
    /// Sessions closed through `close_for_requests`.
    pub request_cleanups: u64,
    /// Cleanup attempts that failed and were retried.
    pub cleanup_retries: u64,
    /// Request ids reserved or bound.
    pub requests: u64,
    /// Request ids never released.
    pub leaked: u64,
    /// Rule violations found.
    pub violations: u64,
    /// The first violation, in detail.
    pub first_violation: Option<Violation>,
    /// Manager operations performed.
    pub ops: u64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

impl Report {
    /// Manager operations per wall-clock second.
    ///
    /// ```
    /// # use duplex_sim::Report;
    /// let r = Report { ops: 1_000, wall_s: 0.5, ..Report::default() };
    /// assert_eq!(r.ops_per_s(), 2_000);
    /// ```
    pub fn ops_per_s(&self) -> u64 {
        if self.wall_s > 0.0 {
            // Reporting only: rounding to whole operations is intended.
            #[allow(clippy::cast_precision_loss, clippy::cast_sign_loss)]
            let rate = (self.ops as f64 / self.wall_s).round() as u64;
            rate
        } else {
            0
        }
    }

    /// Whether the run broke no rule and leaked nothing.
    ///
    /// ```
    /// # use duplex_sim::Report;
    /// assert!(Report::default().is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.violations == 0 && self.leaked == 0
    }

    /// Adds the counts of another worker's report (the first violation
    /// stays the earliest one found).
    pub(crate) fn absorb(&mut self, other: &Report) {
        self.sessions += other.sessions;
        self.appends += other.appends;
        self.duplicates += other.duplicates;
        self.stale_rejected += other.stale_rejected;
        self.expired += other.expired;
        self.barge_ins += other.barge_ins;
        self.resumed += other.resumed;
        self.replayed_resumes += other.replayed_resumes;
        self.backpressure += other.backpressure;
        self.floods_refused += other.floods_refused;
        self.overlaps += other.overlaps;
        self.overlap_barge_ins += other.overlap_barge_ins;
        self.drained += other.drained;
        self.late_outputs += other.late_outputs;
        self.admission_refused += other.admission_refused;
        self.request_cleanups += other.request_cleanups;
        self.cleanup_retries += other.cleanup_retries;
        self.requests += other.requests;
        self.leaked += other.leaked;
        self.violations += other.violations;
        self.ops += other.ops;
        let earlier = match (&self.first_violation, &other.first_violation) {
            (None, Some(_)) => true,
            (Some(a), Some(b)) => b.step < a.step,
            _ => false,
        };
        if earlier {
            self.first_violation.clone_from(&other.first_violation);
        }
    }

    /// The one-line summary: `sim: sessions=N appends=N duplicates=N
    /// stale_rejected=N expired=N leaked=N violations=N ops_per_s=N`.
    ///
    /// ```
    /// # use duplex_sim::Report;
    /// assert!(Report::default().summary_line().starts_with("sim: sessions=0 appends=0"));
    /// ```
    pub fn summary_line(&self) -> String {
        format!(
            "sim: sessions={} appends={} duplicates={} stale_rejected={} expired={} leaked={} violations={} ops_per_s={}",
            self.sessions,
            self.appends,
            self.duplicates,
            self.stale_rejected,
            self.expired,
            self.leaked,
            self.violations,
            self.ops_per_s()
        )
    }
}

/// A closing session waiting for its engine cleanup before finalize.
#[derive(Debug)]
pub(crate) struct Pending {
    session: Id,
    fail_once: bool,
}

/// A cancel held back to be delivered late.
#[derive(Debug)]
pub(crate) struct LateCancel {
    due: u64,
    cancelled: Fence,
    next: Fence,
    /// Whether the barge-in let the speaker's request drain: delivered
    /// again, it still does.
    drains: bool,
}

/// Everything but the clients: manager, RNG, checker, counters.
#[derive(Debug)]
pub(crate) struct World<'c> {
    pub(crate) config: SimConfig,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) clock: &'c SimClock,
    pub(crate) m: Backend<'c>,
    pub(crate) ledger: Ledger,
    pub(crate) report: Report,
    pub(crate) step: u64,
    pub(crate) pending: Vec<Pending>,
    pub(crate) late_cancels: Vec<LateCancel>,
}

impl<'c> World<'c> {
    /// A world with an empty ledger and report, drawing from `seed`.
    pub(crate) fn new(config: &SimConfig, seed: u64, clock: &'c SimClock, m: Backend<'c>) -> Self {
        World {
            config: config.clone(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            clock,
            m,
            ledger: Ledger::default(),
            report: Report {
                seed: config.seed,
                ..Report::default()
            },
            step: 0,
            pending: Vec::new(),
            late_cancels: Vec::new(),
        }
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        // 53 random bits, as a uniform f64 in [0, 1).
        #[allow(clippy::cast_precision_loss)]
        let x = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        x < p
    }

    /// A uniform integer in `lo..hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.rng.next_u64() % (hi - lo).max(1)
    }

    pub(crate) fn fault(&mut self, fault: Fault, p: f64) -> bool {
        self.config.faults.has(fault) && self.chance(p)
    }

    /// Records a rule violation (the first one in detail).
    pub(crate) fn violation(
        &mut self,
        session: &str,
        operation: &str,
        expected: &str,
        actual: impl fmt::Display,
    ) {
        self.report.violations += 1;
        if self.report.first_violation.is_none() {
            self.report.first_violation = Some(Violation {
                seed: self.config.seed,
                step: self.step,
                session: session.to_owned(),
                operation: operation.to_owned(),
                expected: expected.to_owned(),
                actual: actual.to_string(),
            });
        }
    }

    /// Counts one manager operation.
    pub(crate) fn op(&mut self) {
        self.report.ops += 1;
    }

    pub(crate) fn open_options() -> OpenOptions {
        let lease = LeaseConfig::new(Some(IDLE_TTL), GRACE).expect("simulation lease is valid");
        OpenOptions::default()
            .modes(duplex_core::Modes::only(client::AUDIO))
            .lease(lease)
            .input_limits(INPUT_LIMITS)
            .overlap(OVERLAP)
    }

    /// Checks admission after anything that can add a session.
    pub(crate) fn check_admission(&mut self, session: &str) {
        if self.m.len() > self.config.max_sessions {
            let len = self.m.len();
            self.violation(
                session,
                "open",
                &format!("at most {} sessions", self.config.max_sessions),
                len,
            );
        }
    }

    pub(crate) fn schedule_late_cancel(&mut self, cancelled: Fence, next: Fence, drains: bool) {
        let due = self.step + self.range(1, 25);
        self.late_cancels.push(LateCancel {
            due,
            cancelled,
            next,
            drains,
        });
    }

    /// A session moved to Closing by the host: clean up, then finalize.
    pub(crate) fn cleanup_later(&mut self, session: Id) {
        let fail_once = self.fault(Fault::CleanupFailure, 0.3);
        self.pending.push(Pending { session, fail_once });
    }

    /// The host's reaper: when the earliest deadline has come, collects
    /// what expired (in every world: the manager is shared).
    pub(crate) fn collect_due(&mut self) -> Vec<Expiry> {
        self.op();
        match self.m.next_deadline() {
            Some(t) if t <= self.clock.now() => {}
            _ => return Vec::new(),
        }
        self.op();
        self.m.collect_expired()
    }

    /// One expired session of this world: check what it held, then clean
    /// it up and finalize it later.
    pub(crate) fn expired(&mut self, record: Expiry) {
        self.report.expired += 1;
        for id in record.submitted.iter().chain(&record.reserved) {
            if !self.ledger.is_held(id.as_str()) {
                let session = record.session.to_string();
                self.violation(
                    &session,
                    "collect_expired",
                    "only held request ids",
                    format!("{id} (not held)"),
                );
            }
        }
        self.cleanup_later(record.session);
    }

    /// The reaper of a single world.
    fn reap(&mut self) {
        for record in self.collect_due() {
            self.expired(record);
        }
    }

    /// Engine failure: a request of a responding client fails, and its
    /// session is closed for cleanup.
    pub(crate) fn fail_request(&mut self, session: &str, request: &str) {
        self.op();
        let closing = self.m.close_for_requests(&[request]);
        match closing.as_slice() {
            [released]
                if released.session.as_str() == session && released.ids.contains(request) =>
            {
                self.report.request_cleanups += 1;
                let id = released.session.clone();
                if !self.pending.iter().any(|p| p.session == id) {
                    self.cleanup_later(id);
                }
            }
            other => {
                let got: Vec<String> = other.iter().map(|r| r.session.to_string()).collect();
                self.violation(
                    session,
                    "close_for_requests",
                    "exactly the owning session",
                    format!("{got:?}"),
                );
            }
        }
    }

    /// Finalizes closing sessions whose cleanup went through.
    pub(crate) fn finalize_pending(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain_mut(|p| {
            if p.fail_once {
                p.fail_once = false;
                self.report.cleanup_retries += 1;
                return true;
            }
            self.op();
            match self.m.finalize(&p.session) {
                Ok(ids) => {
                    self.released(p.session.as_str(), "finalize", ids.iter().map(Id::as_str))
                }
                Err(e) => self.violation(p.session.as_str(), "finalize", "a closing session", e),
            }
            false
        });
        pending.append(&mut self.pending);
        self.pending = pending;
    }

    pub(crate) fn deliver_late_cancels(&mut self, all: bool) {
        let step = self.step;
        let mut due = Vec::new();
        self.late_cancels.retain(|c| {
            let now = all || c.due <= step;
            if now {
                due.push((c.cancelled.clone(), c.next.clone(), c.drains));
            }
            !now
        });
        for (cancelled, next, drains) in due {
            self.op();
            let delivered = if drains {
                self.m
                    .drain(&cancelled, &next, |stage| stage == client::SPEAKER)
            } else {
                self.m.cancel(&cancelled, &next)
            };
            match delivered {
                // Already released by the first delivery: nothing comes back.
                Ok(ids) if ids.is_empty() => self.report.stale_rejected += 1,
                Ok(ids) => self.released(
                    cancelled.session.as_str(),
                    "late cancel",
                    ids.iter().map(Id::as_str),
                ),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::FenceMismatch
                            | ErrorKind::UnknownSession
                            | ErrorKind::WrongState
                    ) =>
                {
                    self.report.stale_rejected += 1;
                }
                Err(e) => self.violation(
                    cancelled.session.as_str(),
                    "late cancel",
                    "ignored or refused",
                    e,
                ),
            }
        }
    }

    /// Marks request ids released; each id exactly once.
    pub(crate) fn released<'a>(
        &mut self,
        session: &str,
        operation: &str,
        ids: impl Iterator<Item = &'a str>,
    ) {
        for id in ids {
            if let Err(why) = self.ledger.release(id) {
                self.violation(
                    session,
                    operation,
                    "each request id released exactly once",
                    why,
                );
            }
        }
    }

    /// Opens above capacity: everything beyond `max_sessions` must be refused.
    pub(crate) fn burst(&mut self) {
        let extra = self.config.max_sessions.saturating_sub(self.m.len()) + 4;
        let mut admitted = Vec::new();
        for k in 0..extra {
            let Ok(id) = Id::new(&format!("burst-{}-{k}", self.step)) else {
                continue;
            };
            let fence = Fence::new(id, 0);
            self.op();
            match self.m.open(fence.clone(), Self::open_options()) {
                Ok(()) => {
                    self.report.sessions += 1;
                    self.check_admission(fence.session.as_str());
                    admitted.push(fence);
                }
                Err(e) if e.kind() == ErrorKind::CapacityExhausted => {
                    self.report.admission_refused += 1
                }
                Err(e) => self.violation(
                    fence.session.as_str(),
                    "open (burst)",
                    "ok or capacity_exhausted",
                    e,
                ),
            }
        }
        for fence in admitted {
            self.op();
            if let Err(e) = self.m.close(&fence, duplex_core::CloseReason::ClientClose) {
                self.violation(fence.session.as_str(), "close (burst)", "closed", e);
            }
        }
    }
}

/// Runs a simulation; `progress(step, total)` is called every 50 steps.
///
/// # Panics
///
/// Only on a manager configuration the simulation itself rejects
/// (`max_sessions` of zero).
pub fn run(config: &SimConfig, mut progress: impl FnMut(u64, u64)) -> Report {
    if config.threads > 1 {
        return threads::run(config, progress);
    }
    let started = WallInstant::now();
    let clock = SimClock::default();
    let backend = Backend::single(&clock, manager_config(config));
    let mut world = World::new(config, config.seed, &clock, backend);
    let mut clients: Vec<Client> = (0..config.sessions)
        .map(|i| Client::new(i, &mut world))
        .collect();
    let total = config.duration_s.saturating_mul(1_000) / STEP_MS;
    while world.step < total {
        world.step += 1;
        clock.advance(Duration::from_millis(STEP_MS));
        for c in &mut clients {
            c.step(&mut world);
        }
        world.reap();
        world.finalize_pending();
        world.deliver_late_cancels(false);
        if world.step.is_multiple_of(500) && world.config.faults.has(Fault::Burst) {
            world.burst();
        }
        if world.step.is_multiple_of(50) {
            progress(world.step, total);
        }
    }
    drain(&mut world, &mut clients);
    world.report.steps = world.step;
    world.report.requests = world.ledger.len() as u64;
    world.report.leaked = world.ledger.unreleased() as u64;
    world.report.wall_s = started.elapsed().as_secs_f64();
    progress(total, total);
    world.report
}

/// The manager of a run: admission at `max_sessions`.
fn manager_config(config: &SimConfig) -> ManagerConfig {
    ManagerConfig {
        max_sessions: Some(config.max_sessions.max(1)),
        completed_append_limit: None,
    }
}

/// The end: clients still connected close; vanished ones are reaped by
/// expiry; the host finalizes everything; the manager must end empty.
fn drain(world: &mut World<'_>, clients: &mut [Client]) {
    for c in clients.iter_mut() {
        c.finish(world);
    }
    world.deliver_late_cancels(true);
    // Let every remaining lease run out, then reap and finalize until done.
    let horizon = IDLE_TTL.as_millis() + GRACE.as_millis();
    for _ in 0..=(horizon / STEP_MS) {
        world.step += 1;
        world.clock.advance(Duration::from_millis(STEP_MS));
        world.reap();
        world.finalize_pending();
    }
    while !world.pending.is_empty() {
        world.step += 1;
        world.finalize_pending();
    }
    if !world.m.is_empty() {
        let left = world.m.session_ids(5);
        let n = world.m.len();
        world.violation(
            &left.join(","),
            "end of run",
            "an empty manager (every session closed)",
            format!("{n} sessions left"),
        );
    }
}
