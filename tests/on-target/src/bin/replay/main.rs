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
use heapless::String;

mod ext;
mod json;
mod ops;
mod script;

use json::ids;
use script::{Bad, Tokens};

static SCRIPT: &str = include_str!(concat!(env!("OUT_DIR"), "/replay.txt"));

/// Session slots: as many as the board's RAM holds beside the stack. The
/// public traces never hold more than three sessions at once; a trace
/// that needs more fails with "the device's session table is full".
#[cfg(board = "microbit")]
pub(crate) const SLOTS: usize = 3;
#[cfg(not(board = "microbit"))]
pub(crate) const SLOTS: usize = 16;
/// Reservations held at once: traces.py numbers handles to fit, and
/// refuses a trace that needs more (`encode --handles`).
#[cfg(board = "microbit")]
pub(crate) const HANDLES: usize = 8;
#[cfg(not(board = "microbit"))]
pub(crate) const HANDLES: usize = 64;
/// Longest list in a script line (ids, results, modes).
pub(crate) const LIST: usize = 16;

/// One outcome, as JSON: the longest in the public traces is 494 bytes; a
/// longer one would be cut, and fail its comparison rather than pass. On
/// the micro:bit 768 bytes: the sessions' input budgets took the 256 bytes
/// of RAM (three sessions in statics, and the copies a transition makes
/// on the stack) that the 512-byte headroom check needs.
#[cfg(board = "microbit")]
pub(crate) type Line = String<768>;
#[cfg(not(board = "microbit"))]
pub(crate) type Line = String<4096>;

/// An operation's outcome, written as the trace's JSON by `ok` or `err`.
pub(crate) type Outcome = Result<(), ErrorKind>;

pub(crate) struct Runner {
    pub(crate) clock: ManualClock,
    pub(crate) max_sessions: Option<u64>,
    pub(crate) completed_limit: usize,
    pub(crate) slots: [Option<AnySession>; SLOTS],
    pub(crate) handles: [Option<Reservation>; HANDLES],
    pub(crate) out: Line,
    /// What the last `manager` line gives every session it opens.
    pub(crate) extras: ext::Extras,
}

static RUNNER: Mutex<RefCell<Runner>> = Mutex::new(RefCell::new(Runner {
    clock: ManualClock::new(Instant::ZERO),
    max_sessions: None,
    completed_limit: conformance::COMPLETED,
    slots: [const { None }; SLOTS],
    handles: [const { None }; HANDLES],
    out: String::new(),
    extras: ext::Extras::DEFAULT,
}));

impl Runner {
    pub(crate) fn reset(
        &mut self,
        max_sessions: Option<u64>,
        completed_limit: usize,
        start: Instant,
    ) {
        self.clock = ManualClock::new(start);
        self.max_sessions = max_sessions;
        self.completed_limit = completed_limit;
        self.slots.iter_mut().for_each(|s| *s = None);
        self.handles.iter_mut().for_each(|h| *h = None);
        self.extras = ext::Extras::DEFAULT;
    }

    pub(crate) fn find(&self, id: &Id) -> Option<usize> {
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
    pub(crate) fn ok(&mut self, body: impl FnOnce(&mut Line)) -> Outcome {
        self.out.push_str("{\"ok\":").ok();
        body(&mut self.out);
        self.out.push('}').ok();
        Ok(())
    }

    pub(crate) fn null(&mut self) -> Outcome {
        self.ok(|o| {
            o.push_str("null").ok();
        })
    }

    pub(crate) fn ids_result(&mut self, r: Result<RequestIds, ErrorKind>) -> Outcome {
        let r = r?;
        self.ok(|o| {
            o.push_str("{\"ids\":").ok();
            ids(o, &r);
            o.push('}').ok();
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
            "reserve_input"
            | "reserve_turn"
            | "release_input"
            | "release_turn"
            | "release_all_input"
            | "cancel_pending_input"
            | "decide_overlap"
            | "reset_overlap_speech"
            | "resume_by"
            | "route_output"
            | "release_drained" => self.op_extension(&mut t, op)?,
            "drain" => self.op_drain(&mut t)?,
            _ => return Err(Bad("unknown op")),
        })
    }
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
