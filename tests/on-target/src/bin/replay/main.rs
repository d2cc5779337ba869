//! The conformance traces, replayed on the device.
//!
//! `replay/traces.py encode` turns trace files into a compact script
//! (one operation a line) that this image embeds (`DUPLEX_REPLAY_SCRIPT` at
//! build time; see build.rs). The image runs each operation against a
//! table of `AnySession`s driven by a `ManualClock` and prints
//! `<line> <outcome as JSON>`; `traces.py compare` checks every outcome
//! against the trace's `expect`. Nothing is compared here: the device
//! reports, the host judges.
//!
//! The table is a host of the core like duplex-std's manager: it finds a
//! session by id (`unknown_session`), admits a new one (`session_exists`,
//! then `capacity_exhausted`) and frees a slot when a session is closed or
//! finalized; every lifecycle rule is the core's `AnySession` operation.
#![no_std]
#![no_main]

use core::cell::RefCell;
use core::fmt::Write as _;

use cortex_m::interrupt::Mutex;
use duplex_core::profile::conformance;
use duplex_core::*;
use duplex_on_target::{entry, exit};
use heapless::{String, Vec};

static SCRIPT: &str = include_str!(concat!(env!("OUT_DIR"), "/replay.txt"));

/// Session slots: as many as the board's RAM holds beside the stack. The
/// public traces never hold more than three sessions at once; a trace
/// that needs more fails with "the device's session table is full".
#[cfg(board = "microbit")]
const SLOTS: usize = 3;
#[cfg(not(board = "microbit"))]
const SLOTS: usize = 16;
/// Reservations held at once: traces.py numbers handles to fit, and
/// refuses a trace that needs more (`encode --handles`).
#[cfg(board = "microbit")]
const HANDLES: usize = 8;
#[cfg(not(board = "microbit"))]
const HANDLES: usize = 64;
const LIST: usize = 16;

/// One outcome, as JSON: the longest in the public traces is 494 bytes; a
/// longer one would be cut, and fail its comparison rather than pass.
#[cfg(board = "microbit")]
type Line = String<1024>;
#[cfg(not(board = "microbit"))]
type Line = String<4096>;

/// A line of the script that does not parse: the firmware reports it, the
/// host counts it as a failure.
#[derive(Debug)]
struct Bad(&'static str);

struct Tokens<'a>(core::str::SplitAsciiWhitespace<'a>);

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Result<&'a str, Bad> {
        self.0.next().ok_or(Bad("missing field"))
    }
    fn text(&mut self) -> Result<&'a str, Bad> {
        Ok(match self.next()? {
            "~" => "",
            t => t,
        })
    }
    fn num(&mut self) -> Result<u64, Bad> {
        self.next()?.parse().map_err(|_| Bad("not a number"))
    }
    fn opt_num(&mut self) -> Result<Option<u64>, Bad> {
        match self.next()? {
            "-" => Ok(None),
            t => t.parse().map(Some).map_err(|_| Bad("not a number")),
        }
    }
    fn flag(&mut self) -> Result<bool, Bad> {
        Ok(self.next()? == "1")
    }
    /// A fence: `None` if its session id can not name a session.
    fn fence(&mut self) -> Result<Option<Fence>, Bad> {
        let session = self.text()?;
        let (incarnation, epoch, turn, response) =
            (self.num()?, self.num()?, self.num()?, self.num()?);
        Ok(Id::new(session).ok().map(|session| Fence {
            session,
            incarnation,
            epoch,
            turn,
            response,
        }))
    }
    /// An optional fence: `None` when absent, `Some(None)` when its id is
    /// invalid.
    fn opt_fence(&mut self) -> Result<Option<Option<Fence>>, Bad> {
        let session = self.text()?;
        if session == "-" {
            return Ok(None);
        }
        let (incarnation, epoch, turn, response) =
            (self.num()?, self.num()?, self.num()?, self.num()?);
        Ok(Some(Id::new(session).ok().map(|session| Fence {
            session,
            incarnation,
            epoch,
            turn,
            response,
        })))
    }
    fn strings(&mut self) -> Result<Vec<&'a str, LIST>, Bad> {
        let count = self.num()?;
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(self.text()?).map_err(|_| Bad("list too long"))?;
        }
        Ok(out)
    }
    fn ints(&mut self) -> Result<Vec<i64, LIST>, Bad> {
        let count = self.num()?;
        let mut out = Vec::new();
        for _ in 0..count {
            let v = self.next()?.parse().map_err(|_| Bad("not an integer"))?;
            out.push(v).map_err(|_| Bad("list too long"))?;
        }
        Ok(out)
    }
    fn mode(&mut self) -> Result<InputMode, Bad> {
        InputMode::parse(self.next()?).ok_or(Bad("unknown mode"))
    }
    fn finality(&mut self) -> Result<Finality, Bad> {
        Ok(Finality::from(self.flag()?))
    }
    fn reason(&mut self) -> Result<CloseReason, Bad> {
        CloseReason::parse(self.next()?).ok_or(Bad("unknown close reason"))
    }
}

/// An operation's outcome, written as the trace's JSON by `ok` or `err`.
type Outcome = Result<(), ErrorKind>;

struct Runner {
    clock: ManualClock,
    max_sessions: Option<u64>,
    completed_limit: usize,
    slots: [Option<AnySession>; SLOTS],
    handles: [Option<Reservation>; HANDLES],
    out: Line,
}

static RUNNER: Mutex<RefCell<Runner>> = Mutex::new(RefCell::new(Runner {
    clock: ManualClock::new(Instant::ZERO),
    max_sessions: None,
    completed_limit: conformance::COMPLETED,
    slots: [const { None }; SLOTS],
    handles: [const { None }; HANDLES],
    out: String::new(),
}));

fn quoted(out: &mut Line, s: &str) {
    let _ = write!(out, "\"{s}\"");
}

fn ids<'a>(out: &mut Line, ids: impl IntoIterator<Item = &'a Id>) {
    out.push('[').ok();
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            out.push(',').ok();
        }
        quoted(out, id.as_str());
    }
    out.push(']').ok();
}

fn fence_json(out: &mut Line, f: &Fence) {
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

fn appended(out: &mut Line, a: Appended) {
    let _ = write!(
        out,
        "{{\"seq\":{},\"turn_seq\":{},\"turn_id\":{}}}",
        a.seq, a.turn_seq, a.turn_id
    );
}

impl Runner {
    fn reset(&mut self, max_sessions: Option<u64>, completed_limit: usize, start: Instant) {
        self.clock = ManualClock::new(start);
        self.max_sessions = max_sessions;
        self.completed_limit = completed_limit;
        self.slots.iter_mut().for_each(|s| *s = None);
        self.handles.iter_mut().for_each(|h| *h = None);
    }

    fn find(&self, id: &Id) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.id() == id))
    }

    /// Runs `op` on the session `id` names, or `unknown_session`.
    fn with<T>(
        &mut self,
        id: Option<&Id>,
        op: impl FnOnce(&mut AnySession, Instant) -> Result<T, Error>,
    ) -> Result<T, ErrorKind> {
        let now = self.clock.now();
        let slot = id
            .and_then(|id| self.find(id))
            .ok_or(ErrorKind::UnknownSession)?;
        let s = self.slots[slot].as_mut().ok_or(ErrorKind::UnknownSession)?;
        op(s, now).map_err(|e| e.kind())
    }

    /// Writes `{"ok":...}` with `body` (or `null`) into the line.
    fn ok(&mut self, body: impl FnOnce(&mut Line)) -> Outcome {
        self.out.push_str("{\"ok\":").ok();
        body(&mut self.out);
        self.out.push('}').ok();
        Ok(())
    }

    fn null(&mut self) -> Outcome {
        self.ok(|o| {
            o.push_str("null").ok();
        })
    }

    fn ids_result(&mut self, r: Result<RequestIds, ErrorKind>) -> Outcome {
        let r = r?;
        self.ok(|o| {
            o.push_str("{\"ids\":").ok();
            ids(o, &r);
            o.push('}').ok();
        })
    }

    #[inline(never)]
    fn op_profile(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let want = [
                conformance::RESOURCES,
                conformance::BINDINGS,
                conformance::COMPLETED,
                conformance::ACTIVE_OPS,
                conformance::ID_LEN,
                conformance::STAGE_RESULTS,
            ];
            for w in want {
                if usize::try_from(t.num()?).ok() != Some(w) {
                    return Err(Bad(
                        "profile mismatch: the trace needs another capacity profile",
                    ));
                }
            }
            self.null()
        })
    }

    #[inline(never)]
    fn op_manager(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let (max, limit, start) = (t.opt_num()?, t.num()?, t.num()?);
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            if max == Some(0) {
                return Ok(Err(ErrorKind::InvalidConfig));
            }
            // The completed-append limit is checked by the core, as at open.
            let probe = Fence::new(Id::new("probe").map_err(|_| Bad("probe id"))?, 0);
            if let Err(e) = Session::open(
                probe,
                OpenOptions::default().completed_limit(limit),
                Instant::ZERO,
            ) {
                return Ok(Err(e.kind()));
            }
            self.reset(max, limit, Instant::from_millis(start));
            self.null()
        })
    }

    #[inline(never)]
    fn op_advance(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            self.clock.advance(Duration::from_millis(t.num()?));
            self.null()
        })
    }

    #[inline(never)]
    fn op_open(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let fence = t.fence()?;
            let modes = match t.next()? {
                "-" => Modes::default(),
                count => {
                    let count: u64 = count.parse().map_err(|_| Bad("mode count"))?;
                    let mut modes: Vec<InputMode, LIST> = Vec::new();
                    for _ in 0..count {
                        modes.push(t.mode()?).map_err(|_| Bad("too many modes"))?;
                    }
                    modes.into_iter().collect()
                }
            };
            let ttl = t.opt_num()?.map(Duration::from_millis);
            let grace = Duration::from_millis(t.num()?);
            let Some(fence) = fence else {
                return Ok(Err(ErrorKind::InvalidId));
            };
            let lease = match LeaseConfig::new(ttl, grace) {
                Ok(l) => l,
                Err(e) => return Ok(Err(e.kind())),
            };
            if self.find(&fence.session).is_some() {
                return Ok(Err(ErrorKind::SessionExists));
            }
            let live = self.slots.iter().flatten().count() as u64;
            if self.max_sessions.is_some_and(|max| live >= max) {
                return Ok(Err(ErrorKind::CapacityExhausted));
            }
            let Some(free) = self.slots.iter().position(Option::is_none) else {
                return Err(Bad("the device's session table is full"));
            };
            let opts = OpenOptions::default()
                .modes(modes)
                .lease(lease)
                .completed_limit(self.completed_limit);
            match Session::open(fence, opts, self.clock.now()) {
                Ok(s) => {
                    self.slots[free] = Some(AnySession::from(s));
                    self.null()
                }
                Err(e) => Err(e.kind()),
            }
        })
    }

    #[inline(never)]
    fn op_touch(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let activity = Activity::parse(t.next()?).ok_or(Bad("unknown activity"))?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, now| {
                s.touch(f.as_ref().expect("found"), activity, now)
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    fn op_fence_only(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let id = f.as_ref().map(|f| &f.session);
            match op {
                "detach" => self
                    .with(id, |s, now| s.detach(f.as_ref().expect("found"), now))
                    .and_then(|()| self.null()),
                "accept_fence" => self
                    .with(id, |s, _| s.accept_fence(f.as_ref().expect("found")))
                    .and_then(|()| self.null()),
                _ => {
                    let r = self.with(id, |s, _| s.release_fence(f.as_ref().expect("found")));
                    self.ids_result(r)
                }
            }
        })
    }

    #[inline(never)]
    fn op_resume(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let expected = t.num()?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, now| {
                s.resume(f.as_ref().expect("found"), expected, now)
            });
            r.and_then(|g| {
                self.ok(|o| {
                    let _ = write!(o, "{{\"generation\":{g}}}");
                })
            })
        })
    }

    #[inline(never)]
    fn op_operation(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let operation = t.text()?;
            let begin = op == "begin_op";
            let r = self.with(f.as_ref().map(|f| &f.session), |s, now| {
                let f = f.as_ref().expect("found");
                let operation = Id::new(operation)?;
                if begin {
                    s.begin_operation(f, &operation, now)
                } else {
                    s.end_operation(f, &operation, now)
                }
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    fn op_append(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let mode = t.mode()?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.append(f.as_ref().expect("found"), mode)
            });
            r.and_then(|a| self.ok(|o| appended(o, a)))
        })
    }

    #[inline(never)]
    fn op_prepare_append(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let mode = t.mode()?;
            let handle = usize::try_from(t.num()?)
                .ok()
                .filter(|h| *h < HANDLES)
                .ok_or(Bad("handle"))?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.prepare_append(f.as_ref().expect("found"), mode)
            });
            match r {
                Ok(reservation) => {
                    let a = reservation.on_commit();
                    self.handles[handle] = Some(reservation);
                    self.ok(|o| appended(o, a))
                }
                Err(e) => {
                    // A refused prepare keeps nothing under its handle.
                    self.handles[handle] = None;
                    Err(e)
                }
            }
        })
    }

    #[inline(never)]
    fn op_commit_append(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let handle = usize::try_from(t.num()?)
                .ok()
                .filter(|h| *h < HANDLES)
                .ok_or(Bad("handle"))?;
            let r = self.handles[handle].clone().ok_or(Bad("unknown handle"))?;
            let result = self.with(Some(&r.fence().session), |s, _| s.commit_append(&r));
            result.and_then(|a| self.ok(|o| appended(o, a)))
        })
    }

    #[inline(never)]
    fn op_completed(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let (operation, mode, finality) = (t.text()?, t.mode()?, t.finality()?);
            let mut results: Vec<i64, LIST> = Vec::new();
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                let hit = s.completed(
                    f.as_ref().expect("found"),
                    &Id::new(operation)?,
                    mode,
                    finality,
                )?;
                Ok(hit.map(|r| results.extend_from_slice(r).is_ok()))
            });
            r.and_then(|hit| {
                self.ok(|o| {
                    o.push_str("{\"results\":").ok();
                    if hit.is_some() {
                        o.push('[').ok();
                        for (i, v) in results.iter().enumerate() {
                            let _ = write!(o, "{}{v}", if i > 0 { "," } else { "" });
                        }
                        o.push(']').ok();
                    } else {
                        o.push_str("null").ok();
                    }
                    o.push('}').ok();
                })
            })
        })
    }

    #[inline(never)]
    fn op_record_completed(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let (operation, mode, finality, results) =
                (t.text()?, t.mode()?, t.finality()?, t.ints()?);
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.record_completed(
                    f.as_ref().expect("found"),
                    &Id::new(operation)?,
                    mode,
                    finality,
                    &results,
                )
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    fn op_request(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let stage = u32::try_from(t.num()?).map_err(|_| Bad("stage"))?;
            let request = t.text()?;
            let reserve = op == "reserve";
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                let f = f.as_ref().expect("found");
                let request = Id::new(request)?;
                if reserve {
                    s.reserve(f, stage, &request)
                } else {
                    s.bind(f, stage, &request)
                }
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    fn op_request_ids(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let filter = t.opt_fence()?;
            let state = if op == "resource_ids" {
                match t.next()? {
                    "-" => None,
                    "1" => Some(RequestState::Submitted),
                    _ => Some(RequestState::Reserved),
                }
            } else {
                None
            };
            let stage = op == "stage_ids";
            let r = self.with(session.as_ref(), |s, _| match &filter {
                // A filter fence whose id names no session matches nothing.
                Some(None) => Ok(RequestIds::new()),
                filter => {
                    let filter = filter.as_ref().and_then(Option::as_ref);
                    if stage {
                        s.stage_request_ids(filter)
                    } else {
                        s.resource_request_ids(filter, state)
                    }
                }
            });
            self.ids_result(r)
        })
    }

    #[inline(never)]
    fn op_release(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let requests = t.strings()?;
            let r = self.with(session.as_ref(), |s, _| {
                s.release_where(|held| requests.iter().any(|r| r.as_bytes() == held.as_bytes()))
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    fn op_cancel(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let (cancelled, next) = (t.fence()?, t.fence()?);
            let Some(cancelled) = cancelled else {
                return Ok(Err(ErrorKind::UnknownSession));
            };
            match next {
                Some(next) => {
                    let r = self.with(Some(&cancelled.session), |s, _| s.cancel(&cancelled, &next));
                    self.ids_result(r)
                }
                // An unnameable next session can never match.
                None => self.with(Some(&cancelled.session), |s, _| {
                    Err(if s.kind() == StateKind::Closing {
                        Error::WrongState {
                            operation: "cancel",
                            state: StateKind::Closing,
                        }
                    } else {
                        Error::FenceMismatch {
                            rule: FenceRule::Identity,
                            expected: s.fence().stamp(),
                            actual: cancelled.stamp(),
                        }
                    })
                }),
            }
        })
    }

    #[inline(never)]
    fn op_replace_configs(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let (sc, rc) = (t.flag()?, t.flag()?);
            let r = self.with(session.as_ref(), |s, _| {
                s.replace_configs(sc.then_some(()), rc.then_some(()))
            });
            r.and_then(|g| {
                self.ok(|o| {
                    let _ = write!(o, "{{\"config_generation\":{g}}}");
                })
            })
        })
    }

    #[inline(never)]
    fn op_begin_close(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let reason = t.reason()?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.begin_close(f.as_ref().expect("found"), reason)
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    fn op_close(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let reason = t.reason()?;
            let slot = f.as_ref().and_then(|f| self.find(&f.session));
            let open = slot
                .and_then(|i| self.slots[i].as_ref())
                .is_some_and(|s| matches!(s.kind(), StateKind::Open | StateKind::Detached));
            match (f, slot) {
                (Some(f), Some(i)) if open => {
                    let mut released = RequestIds::new();
                    let r = self.slots[i]
                        .as_mut()
                        .map_or(Ok(()), |s| s.close_into(&f, reason, &mut released));
                    match r {
                        Ok(()) => {
                            self.slots[i] = None;
                            self.ok(|o| {
                                o.push_str("{\"closed\":true,\"ids\":").ok();
                                ids(o, &released);
                                o.push('}').ok();
                            })
                        }
                        Err(e) => Err(e.kind()),
                    }
                }
                _ => self.ok(|o| {
                    o.push_str("{\"closed\":false,\"ids\":[]}").ok();
                }),
            }
        })
    }

    #[inline(never)]
    fn op_finalize(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let r = self.with(session.as_ref(), |s, _| s.finalize());
            if r.is_ok() {
                if let Some(i) = session.as_ref().and_then(|id| self.find(id)) {
                    self.slots[i] = None;
                }
            }
            self.ids_result(r)
        })
    }

    #[inline(never)]
    fn op_collect_expired(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let excluded = t.strings()?;
            let now = self.clock.now();
            // Records sorted by session, as the trace writes them.
            let mut order: Vec<usize, SLOTS> =
                (0..SLOTS).filter(|i| self.slots[*i].is_some()).collect();
            order.sort_unstable_by(|a, b| {
                let id = |i: &usize| self.slots[*i].as_ref().map(|s| s.id().as_str());
                id(a).cmp(&id(b))
            });
            self.out.push_str("{\"ok\":{\"expired\":[").ok();
            let mut first = true;
            for i in order {
                let Some(s) = self.slots[i].as_mut() else {
                    continue;
                };
                if excluded.iter().any(|e| *e == s.id().as_str()) {
                    continue;
                }
                let Some(e) = s.expire(now) else { continue };
                let o = &mut self.out;
                if !first {
                    o.push(',').ok();
                }
                first = false;
                let _ = write!(
                    o,
                    "{{\"session\":\"{}\",\"reason\":\"{}\",\"lease_generation\":{},\"fence\":",
                    e.session.as_str(),
                    e.reason.as_str(),
                    e.lease_generation
                );
                fence_json(o, &e.fence);
                o.push_str(",\"submitted\":").ok();
                ids(o, &e.submitted);
                o.push_str(",\"reserved\":").ok();
                ids(o, &e.reserved);
                o.push('}').ok();
            }
            self.out.push_str("]}}").ok();
            Ok(())
        })
    }

    #[inline(never)]
    fn op_close_for_requests(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let requests = t.strings()?;
            self.out.push_str("{\"ok\":{\"closing\":{").ok();
            let mut first = true;
            for slot in &mut self.slots {
                let Some(s) = slot.as_mut() else { continue };
                let Ok(held) = s.resource_request_ids(None, None) else {
                    continue;
                };
                if !held
                    .iter()
                    .any(|own| requests.iter().any(|r| r.as_bytes() == own.as_bytes()))
                {
                    continue;
                }
                if s.kind() != StateKind::Closing {
                    // The session's own fence: accepted by construction.
                    let fence = s.fence().clone();
                    let _ = s.begin_close(&fence, CloseReason::RequestCleanup);
                }
                let o = &mut self.out;
                if !first {
                    o.push(',').ok();
                }
                first = false;
                let _ = write!(o, "\"{}\":", s.id().as_str());
                ids(o, &held);
            }
            self.out.push_str("}}}").ok();
            Ok(())
        })
    }

    #[inline(never)]
    fn op_finalize_closed(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let sessions = t.strings()?;
            let mut done: Vec<Id, LIST> = Vec::new();
            for session in sessions {
                let Some(i) = Id::new(session).ok().and_then(|id| self.find(&id)) else {
                    continue;
                };
                let closing = self.slots[i]
                    .as_ref()
                    .is_some_and(|s| s.kind() == StateKind::Closing);
                if closing && self.slots[i].as_mut().is_some_and(|s| s.finalize().is_ok()) {
                    if let Some(s) = self.slots[i].take() {
                        let _ = done.push(s.id().clone());
                    }
                }
            }
            done.sort_unstable();
            self.ok(|o| {
                o.push_str("{\"finalized\":").ok();
                ids(o, &done);
                o.push('}').ok();
            })
        })
    }

    #[inline(never)]
    fn op_sessions(&mut self) -> Result<Outcome, Bad> {
        Ok({
            let Runner { slots, out, .. } = self;
            let mut all: Vec<&Id, SLOTS> = slots.iter().flatten().map(AnySession::id).collect();
            all.sort_unstable();
            out.push_str("{\"ok\":{\"sessions\":").ok();
            ids(out, all.iter().copied());
            out.push_str("}}").ok();
            Ok(())
        })
    }

    #[inline(never)]
    fn op_inspect(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let slot = session.as_ref().and_then(|id| self.find(id));
            let Runner { slots, out, .. } = self;
            match slot.and_then(|i| slots[i].as_ref()) {
                None => {
                    out.push_str("{\"ok\":{\"absent\":true}}").ok();
                }
                Some(s) => {
                    out.push_str("{\"ok\":").ok();
                    view(out, s);
                    out.push('}').ok();
                }
            }
            Ok(())
        })
    }

    // Out of line, and each heavy operation in a function of its own: one
    // frame holding every operation's temporaries at once overflowed the
    // micro:bit's 16 KiB.
    #[inline(never)]
    fn run(&mut self, line: &str) -> Result<Outcome, Bad> {
        let mut t = Tokens(line.split_ascii_whitespace());
        let op = t.next()?;
        Ok(match op {
            "profile" => self.op_profile(&mut t)?,
            "manager" => self.op_manager(&mut t)?,
            "advance" => self.op_advance(&mut t)?,
            "open" => self.op_open(&mut t)?,
            "touch" => self.op_touch(&mut t)?,
            "detach" | "release_fence" | "accept_fence" => self.op_fence_only(&mut t, op)?,
            "resume" => self.op_resume(&mut t)?,
            "begin_op" | "end_op" => self.op_operation(&mut t, op)?,
            "append" => self.op_append(&mut t)?,
            "prepare_append" => self.op_prepare_append(&mut t)?,
            "commit_append" => self.op_commit_append(&mut t)?,
            "completed" => self.op_completed(&mut t)?,
            "record_completed" => self.op_record_completed(&mut t)?,
            "reserve" | "bind" => self.op_request(&mut t, op)?,
            "stage_ids" | "resource_ids" => self.op_request_ids(&mut t, op)?,
            "release" => self.op_release(&mut t)?,
            "cancel" => self.op_cancel(&mut t)?,
            "replace_configs" => self.op_replace_configs(&mut t)?,
            "begin_close" => self.op_begin_close(&mut t)?,
            "close" => self.op_close(&mut t)?,
            "finalize" => self.op_finalize(&mut t)?,
            "collect_expired" => self.op_collect_expired(&mut t)?,
            "close_for_requests" => self.op_close_for_requests(&mut t)?,
            "finalize_closed" => self.op_finalize_closed(&mut t)?,
            "sessions" => self.op_sessions()?,
            "inspect" => self.op_inspect(&mut t)?,
            _ => return Err(Bad("unknown op")),
        })
    }
}

/// The session as the trace's `inspect` writes it.
fn view(o: &mut Line, s: &AnySession) {
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

fn typed<S: Unfinished>(
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

#[entry]
fn main() -> ! {
    cortex_m::interrupt::free(|cs| {
        let mut runner = RUNNER.borrow(cs).borrow_mut();
        let mut deepest = (0, "");
        for (n, line) in SCRIPT.lines().enumerate() {
            if line == "trace" {
                runner.reset(None, conformance::COMPLETED, Instant::ZERO);
                continue;
            }
            runner.out.clear();
            let (outcome, depth) = duplex_on_target::stack::measure(|| runner.run(line));
            if depth.bytes() > deepest.0 {
                deepest = (depth.bytes(), line.split(' ').next().unwrap_or(""));
            }
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(Bad(why)) => {
                    runner.out.clear();
                    let _ = write!(runner.out, "{{\"script_error\":\"{why}\"}}");
                    Ok(())
                }
            };
            if let Err(kind) = outcome {
                runner.out.clear();
                let _ = write!(runner.out, "{{\"error\":\"{}\"}}", kind.as_str());
            }
            duplex_on_target::hprintln!("{} {}", n, runner.out.as_str());
        }
        duplex_on_target::hprintln!(
            "deepest operation: {} bytes of stack ({})",
            deepest.0,
            deepest.1
        );
    });
    exit(true)
}
