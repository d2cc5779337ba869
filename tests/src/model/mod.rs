//! A model-checking harness over the std manager: runs sequences of
//! [`Op`]s and checks the invariants after every step. Shared by the
//! property tests (readable generated scripts) and the fuzzer (arbitrary
//! bytes).
//!
//! Invariants checked:
//! - the current fence never moves backwards;
//! - `input_seq` grows by exactly one per committed append within an epoch
//!   (and restarts at 1 in a new epoch);
//! - a failed operation leaves every session exactly as it was (full
//!   snapshots compared);
//! - no table exceeds its capacity; admission is never exceeded;
//! - closing is irreversible;
//! - every request that leaves a session is reported released by the
//!   operation that released it (cancel, release_fence, close, finalize),
//!   or was named by `release`; nothing is reported that was not held; at
//!   the end every remaining request is released by close or finalize, so
//!   each request is released exactly once;
//! - `next_deadline()` equals the earliest deadline of the sessions;
//! - a migration (export, image, import) changes only the incarnation,
//!   upwards, and the lease clock;
//! - pending input never exceeds the session's limits; a reservation adds
//!   exactly what it asked, a release takes away at most what was held,
//!   a cancel leaves nothing pending.
//! - every held request's output routes as the current response's, a
//!   draining one's or a stale one's, as the fence it was bound under says;
//!   an unknown request's has no route; the draining list is exactly the
//!   requests that are not current, and releasing it leaves none.

use duplex_core::profile::Conformance;
use std::collections::{BTreeMap, BTreeSet};

use duplex_core::overlap::{Overlap, OverlapConfig, OverlapPolicy, OverlapRequest};
use duplex_core::storage::Storage;
use duplex_core::{
    Activity, CloseReason, Duration, Fence, Finality, Id, InputLimits, InputMode, LeaseConfig,
    ManualClock, OpenOptions, Reservation,
};
use duplex_std::{Drains as _, InputBudgets as _, Overlaps as _, Sessions as _};
use duplex_std::{SessionManager, SessionView};

/// The session ids the model uses.
pub const SESSIONS: [&str; 3] = ["a", "b", "c"];
/// The model's admission limit.
pub const MAX_SESSIONS: usize = 2;
/// The model's completed-append limit (below the capacity, so eviction at
/// the limit is exercised).
pub const COMPLETED_LIMIT: usize = 4;
/// The model's input limits (small, so that reservations reach them).
pub const INPUT_LIMITS: InputLimits = InputLimits::new(1_000, 2);
/// Every session's overlap rule: thresholds low enough that a few
/// overlapping chunks reach each decision.
pub const OVERLAP: OverlapConfig = OverlapConfig::new(OverlapPolicy::Thresholds, 300, 900);

/// The client's request an [`Op::DecideOverlap`] names.
pub fn overlap_request(request: u8) -> Option<OverlapRequest> {
    [
        None,
        Some(OverlapRequest::BargeIn),
        Some(OverlapRequest::Listen),
        Some(OverlapRequest::Continue),
        Some(OverlapRequest::Drop),
    ][usize::from(request % 5)]
}
const MODES: [InputMode; 6] = InputMode::ALL;

/// A fence relative to the session's current one (saturating at 0 and at
/// `u64::MAX`).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Rel {
    /// Incarnation delta.
    pub incarnation: i64,
    /// Epoch delta.
    pub epoch: i64,
    /// Turn delta.
    pub turn: i64,
    /// Response delta.
    pub response: i64,
}

impl Rel {
    /// The session's current fence.
    pub const CURRENT: Rel = Rel {
        incarnation: 0,
        epoch: 0,
        turn: 0,
        response: 0,
    };
}

/// One manager operation. Views are indices into [`SESSIONS`] (taken
/// modulo its length); other ids are free text, so any length reaches the
/// manager.
#[allow(missing_docs)]
#[derive(Clone, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Op {
    Open {
        s: usize,
        incarnation: u64,
        modes: u8,
        ttl: Option<u64>,
        grace: u64,
    },
    Advance {
        ms: u64,
    },
    Touch {
        s: usize,
        f: Rel,
        activity: u8,
    },
    Detach {
        s: usize,
        f: Rel,
    },
    Resume {
        s: usize,
        f: Rel,
        generation_delta: i64,
    },
    /// A resume named by a control id (asked again: a replay).
    ResumeBy {
        s: usize,
        f: Rel,
        generation_delta: i64,
        control: String,
    },
    BeginOp {
        s: usize,
        f: Rel,
        op: String,
    },
    EndOp {
        s: usize,
        f: Rel,
        op: String,
    },
    Append {
        s: usize,
        f: Rel,
        mode: u8,
    },
    Prepare {
        s: usize,
        f: Rel,
        mode: u8,
    },
    Commit {
        handle: usize,
    },
    Completed {
        s: usize,
        f: Rel,
        op: String,
        mode: u8,
        final_: bool,
    },
    Record {
        s: usize,
        f: Rel,
        op: String,
        mode: u8,
        final_: bool,
        results: Vec<i64>,
    },
    Reserve {
        s: usize,
        f: Rel,
        stage: u32,
        request: String,
    },
    Bind {
        s: usize,
        f: Rel,
        stage: u32,
        request: String,
    },
    Release {
        s: usize,
        requests: Vec<String>,
    },
    ReleaseFence {
        s: usize,
        f: Rel,
    },
    Accept {
        s: usize,
        f: Rel,
    },
    Cancel {
        s: usize,
        f: Rel,
        next: Rel,
    },
    ReplaceConfigs {
        s: usize,
        session: Option<u8>,
        runtime: Option<u8>,
    },
    BeginClose {
        s: usize,
        f: Rel,
        reason: u8,
    },
    Close {
        s: usize,
        f: Rel,
        reason: u8,
    },
    Finalize {
        s: usize,
    },
    CollectExpired {
        excluded: Option<usize>,
    },
    CloseForRequests {
        requests: Vec<String>,
    },
    FinalizeClosed {
        sessions: Vec<usize>,
    },
    /// Export the session, carry it as its snapshot image, and import it
    /// back under its incarnation + 1 + `skip % 3` (a restart, or a move
    /// to another host and back).
    Migrate {
        s: usize,
        skip: u8,
    },
    /// Reserves input bytes.
    ReserveInput {
        s: usize,
        f: Rel,
        bytes: u16,
    },
    /// Reserves a committed turn.
    ReserveTurn {
        s: usize,
        f: Rel,
    },
    /// Gives back input bytes.
    ReleaseInput {
        s: usize,
        bytes: u16,
    },
    /// Gives back a turn.
    ReleaseTurn {
        s: usize,
    },
    /// Drops pending input: every reservation (`cancel_pending_input`), or
    /// only the bytes (`release_all_input`).
    DropInput {
        s: usize,
        turns_too: bool,
    },
    /// Decides on overlapping input: `ms` of speech or silence, with the
    /// client's request `request % 5` (none, barge in, listen, continue,
    /// drop).
    DecideOverlap {
        s: usize,
        f: Rel,
        ms: u16,
        speech: bool,
        request: u8,
    },
    /// Forgets the overlapping speech heard.
    ResetOverlap {
        s: usize,
    },
    /// A barge-in that keeps the requests of the stages in bit mask `keep`
    /// bound, draining.
    Drain {
        s: usize,
        f: Rel,
        next: Rel,
        keep: u8,
    },
    /// Releases the draining and stale requests.
    ReleaseDrained {
        s: usize,
    },
    /// Through a `SessionKey` taken just before (`apply_at`, `update_at`,
    /// as the Python package calls): `what % 4` picks touch, detach, an
    /// append of `mode(what / 4)`, or ending operation `op`.
    Keyed {
        s: usize,
        f: Rel,
        what: u8,
        op: String,
    },
}

/// The model's manager: the default profile, with storage `M`.
type Manager<'c, M> = SessionManager<&'c ManualClock, Conformance<u8, u8, M>>;
type Views = BTreeMap<String, SessionView>;
/// Request ids released, per session.
type Released = BTreeMap<String, BTreeSet<String>>;

fn id(s: &str) -> Id {
    Id::new(s).expect("model session ids are valid")
}

fn session(s: usize) -> Id {
    id(SESSIONS[s % SESSIONS.len()])
}

fn mode(m: u8) -> InputMode {
    MODES[usize::from(m) % MODES.len()]
}

fn reason(r: u8) -> CloseReason {
    CloseReason::ALL[usize::from(r) % CloseReason::ALL.len()]
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

mod checks;
mod restored;
mod routes;
mod run;
pub use restored::check_restored;
pub use run::run;

struct Harness<'c, M: Storage> {
    m: Manager<'c, M>,
    clock: &'c ManualClock,
    incarnations: [u64; 3],
    handles: Vec<Reservation>,
}

impl<M: Storage> Harness<'_, M> {
    fn fence(&self, s: usize, r: Rel) -> Fence {
        let name = session(s);
        let cur = self.m.get(&name).map_or_else(
            || Fence::new(name.clone(), self.incarnations[s % 3]),
            |x| x.fence().clone(),
        );
        let add = |v: u64, d: i64| v.saturating_add_signed(d);
        Fence {
            session: name,
            incarnation: add(cur.incarnation, r.incarnation),
            epoch: add(cur.epoch, r.epoch),
            turn: add(cur.turn, r.turn),
            response: add(cur.response, r.response),
        }
    }

    fn sessions(&self) -> Views {
        self.m
            .session_ids()
            .map(|s| {
                (
                    s.to_string(),
                    self.m.inspect(s).expect("listed sessions are unfinished"),
                )
            })
            .collect()
    }

    /// Runs one operation; `Ok` carries the ids it reported released.
    fn apply(&mut self, op: &Op) -> Result<Released, duplex_std::Error> {
        let mut released = Released::new();
        let mut report = |s: &Id, ids: &[Id]| {
            if !ids.is_empty() {
                released
                    .entry(s.to_string())
                    .or_default()
                    .extend(ids.iter().map(ToString::to_string));
            }
        };
        match op.clone() {
            Op::Open {
                s,
                incarnation,
                modes,
                ttl,
                grace,
            } => {
                let lease =
                    LeaseConfig::new(ttl.map(Duration::from_millis), Duration::from_millis(grace))?;
                let modes = (0..6)
                    .filter(|i| modes & (1 << i) != 0)
                    .map(|i| MODES[i])
                    .collect();
                self.m.open(
                    Fence::new(session(s), incarnation),
                    OpenOptions::new(0, 0)
                        .modes(modes)
                        .lease(lease)
                        .input_limits(INPUT_LIMITS)
                        .overlap(OVERLAP),
                )?;
                self.incarnations[s % 3] = incarnation;
            }
            Op::Advance { ms } => self.clock.advance(Duration::from_millis(ms)),
            Op::Touch { s, f, activity } => {
                let activity = Activity::ALL[usize::from(activity) % Activity::ALL.len()];
                self.m.touch(&self.fence(s, f), activity)?;
            }
            Op::Detach { s, f } => self.m.detach(&self.fence(s, f))?,
            Op::Resume {
                s,
                f,
                generation_delta,
            } => {
                let generation = self
                    .m
                    .get(&session(s))
                    .map_or(0, duplex_core::AnySession::lease_generation);
                self.m.resume(
                    &self.fence(s, f),
                    generation.saturating_add_signed(generation_delta),
                )?;
            }
            Op::ResumeBy {
                s,
                f,
                generation_delta,
                control,
            } => {
                let generation = self
                    .m
                    .get(&session(s))
                    .map_or(0, duplex_core::AnySession::lease_generation);
                self.m.resume_idempotent(
                    &self.fence(s, f),
                    generation.saturating_add_signed(generation_delta),
                    &control,
                )?;
            }
            Op::ReserveInput { s, f, bytes } => {
                self.m.reserve_input(&self.fence(s, f), u64::from(bytes))?;
            }
            Op::ReserveTurn { s, f } => {
                self.m.reserve_turn(&self.fence(s, f))?;
            }
            Op::ReleaseInput { s, bytes } => {
                self.m.release_input(&session(s), u64::from(bytes))?;
            }
            Op::ReleaseTurn { s } => {
                self.m.release_turn(&session(s))?;
            }
            Op::DropInput { s, turns_too } => {
                if turns_too {
                    self.m.cancel_pending_input(&session(s))?;
                } else {
                    self.m.release_all_input(&session(s))?;
                }
            }
            Op::DecideOverlap {
                s,
                f,
                ms,
                speech,
                request,
            } => {
                let input = Overlap {
                    duration_ms: u32::from(ms),
                    speech,
                    request: overlap_request(request),
                    ..Overlap::default()
                };
                self.m.decide_overlap(&self.fence(s, f), &input)?;
            }
            Op::ResetOverlap { s } => {
                self.m.reset_overlap_speech(&session(s))?;
            }
            Op::Drain { s, f, next, keep } => {
                let (cancelled, next) = (self.fence(s, f), self.fence(s, next));
                let kept = |stage: u32| stage < 8 && keep & (1 << stage) != 0;
                let ids = self.m.drain(&cancelled, &next, kept)?;
                report(&cancelled.session, &ids);
            }
            Op::ReleaseDrained { s } => {
                let ids = self.m.release_drained(&session(s))?;
                report(&session(s), &ids);
            }
            Op::BeginOp { s, f, op } => self.m.begin_operation(&self.fence(s, f), &op)?,
            Op::EndOp { s, f, op } => self.m.end_operation(&self.fence(s, f), &op)?,
            Op::Append { s, f, mode: m } => {
                self.m.append(&self.fence(s, f), mode(m))?;
            }
            Op::Prepare { s, f, mode: m } => {
                let r = self.m.prepare_append(&self.fence(s, f), mode(m))?;
                self.handles.push(r);
            }
            Op::Commit { handle } => {
                if let Some(r) = self
                    .handles
                    .get(handle % self.handles.len().max(1))
                    .cloned()
                {
                    self.m.commit_append(&r)?;
                }
            }
            Op::Completed {
                s,
                f,
                op,
                mode: m,
                final_,
            } => {
                self.m
                    .completed(&self.fence(s, f), &op, mode(m), Finality::from(final_))?;
            }
            Op::Record {
                s,
                f,
                op,
                mode: m,
                final_,
                results,
            } => {
                self.m.record_completed(
                    &self.fence(s, f),
                    &op,
                    mode(m),
                    Finality::from(final_),
                    &results,
                )?;
            }
            Op::Reserve {
                s,
                f,
                stage,
                request,
            } => self.m.reserve(&self.fence(s, f), stage, &request)?,
            Op::Bind {
                s,
                f,
                stage,
                request,
            } => self.m.bind(&self.fence(s, f), stage, &request)?,
            Op::Release { s, requests } => self.m.release(&session(s), &requests)?,
            Op::ReleaseFence { s, f } => {
                let ids = self.m.release_fence(&self.fence(s, f))?;
                report(&session(s), &ids);
            }
            Op::Accept { s, f } => self.m.accept_fence(&self.fence(s, f))?,
            Op::Cancel { s, f, next } => {
                let (cancelled, next) = (self.fence(s, f), self.fence(s, next));
                let ids = self.m.cancel(&cancelled, &next)?;
                report(&cancelled.session, &ids);
            }
            Op::ReplaceConfigs {
                s,
                session: sc,
                runtime,
            } => {
                self.m.replace_configs(&session(s), sc, runtime)?;
            }
            Op::BeginClose { s, f, reason: r } => {
                self.m.begin_close(&self.fence(s, f), reason(r))?
            }
            Op::Close { s, f, reason: r } => {
                let f = self.fence(s, f);
                if let Some(ids) = self.m.close(&f, reason(r))? {
                    report(&f.session, &ids);
                }
            }
            Op::Finalize { s } => {
                let ids = self.m.finalize(&session(s))?;
                report(&session(s), &ids);
            }
            Op::CollectExpired { excluded } => {
                let excluded: Vec<Id> = excluded.map(session).into_iter().collect();
                let expired = self.m.collect_expired(&excluded);
                if let Some(e) = expired.iter().find(|e| excluded.contains(&e.session)) {
                    panic!("excluded session {} expired", e.session);
                }
            }
            Op::CloseForRequests { requests } => {
                // What it reports is checked against what left the sessions.
                let _closing = self.m.close_for_requests(&requests);
            }
            Op::FinalizeClosed { sessions } => {
                let ids: Vec<Id> = sessions.into_iter().map(session).collect();
                for r in self.m.finalize_closed(&ids) {
                    report(&r.session, &r.ids);
                }
            }
            Op::Keyed { s, f, what, op } => {
                let fence = self.fence(s, f);
                let Some(key) = self.m.key(&fence.session) else {
                    return Err(duplex_std::Error::UnknownSession {
                        session: fence.session,
                    });
                };
                let done = match what % 4 {
                    0 => self
                        .m
                        .apply_at(key, |x, now| x.touch(&fence, Activity::Heartbeat, now)),
                    1 => self.m.apply_at(key, |x, now| x.detach(&fence, now)),
                    2 => self
                        .m
                        .update_at(key, |x| x.append(&fence, mode(what / 4)).map(|_| ())),
                    _ => match Id::new(&op) {
                        Ok(op) => self
                            .m
                            .apply_at(key, |x, now| x.end_operation(&fence, &op, now)),
                        Err(e) => Some(Err(e)),
                    },
                };
                done.expect("a key just taken reaches its session")?;
            }
            Op::Migrate { s, skip } => {
                let Some(current) = self.m.get(&session(s)).map(|x| x.fence().incarnation) else {
                    // Absent: the export is refused (unknown session).
                    let _never = self.m.export(session(s))?;
                    return Ok(released);
                };
                // At the top incarnation there is none to move to, so the
                // session is not exported (an import elsewhere would refuse it).
                let Some(incarnation) = current.checked_add(1 + u64::from(skip % 3)) else {
                    return Ok(released);
                };
                let exported = self.m.export(session(s))?;
                let mut buf = [0u8; duplex_core::Session::<duplex_core::Open>::SNAPSHOT_MAX];
                let image = exported
                    .snapshot(&mut buf)
                    .expect("an exported session has an image");
                let restored =
                    duplex_core::AnySession::<Conformance<u8, u8, M>>::restore_with_capacities(
                        image,
                    )
                    .expect("an image restores");
                if let Err(refused) = self.m.import(restored, incarnation) {
                    panic!("the slot it left refused it back: {}", refused.error);
                }
                self.incarnations[s % 3] = incarnation;
            }
        }
        Ok(released)
    }
}
