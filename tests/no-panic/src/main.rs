//! duplex-core cannot panic: this `#![no_std]` binary runs every public
//! operation of the core, in every state, down every error path, on input
//! the optimiser cannot see (`core::hint::black_box`). Its panic handler
//! calls a function that exists nowhere, so if any panic path in the core
//! survives optimisation, the link fails with
//! `undefined reference to duplex_core_panic_path_survived_optimisation`.
//!
//! `cargo build --release --manifest-path tests/no-panic/Cargo.toml`

#![no_std]
#![no_main]
#![deny(unsafe_code)]

use core::hint::black_box;
use core::panic::PanicInfo;

use duplex_core::id::IdText;
use duplex_core::overlap::{
    is_short_ack, Forced, Overlap, OverlapConfig, OverlapPolicy, OverlapRequest,
};
use duplex_core::profile::{device, server, Device, IdOf, Profile, Server};
use duplex_core::storage::StoredId;
use duplex_core::{
    Activity, AnySession, CloseReason, Duration, ErrorKind, Fence, Finality, Id, InputMode,
    Instant, LeaseConfig, Modes, OpenOptions, RequestState, Session, Stamp, StateKind,
};

#[panic_handler]
// The one unsafe block: a call to a symbol that no object defines, so that a
// reachable panic handler is a link error instead of a hidden failure mode.
#[allow(unsafe_code)]
fn panic(_: &PanicInfo) -> ! {
    extern "C" {
        fn duplex_core_panic_path_survived_optimisation() -> !;
    }
    unsafe { duplex_core_panic_path_survived_optimisation() }
}

/// Opaque input: bytes, numbers and text the optimiser cannot predict.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn u64(&mut self) -> u64 {
        let mut v = 0u64;
        for _ in 0..8 {
            let b = self.bytes.get(self.at).copied().unwrap_or(0);
            self.at = self.at.wrapping_add(1);
            v = v.rotate_left(8) ^ u64::from(b);
        }
        black_box(v)
    }
    fn u32(&mut self) -> u32 {
        (self.u64() & 0xFFFF_FFFF) as u32
    }
    fn text(&mut self) -> &str {
        let len = (self.u64() % 48) as usize;
        let start = self.at.min(self.bytes.len());
        let end = start.saturating_add(len).min(self.bytes.len());
        self.at = end;
        let raw = self.bytes.get(start..end).unwrap_or_default();
        black_box(core::str::from_utf8(raw).unwrap_or("x"))
    }
    fn mode(&mut self) -> InputMode {
        let all = InputMode::ALL;
        all.get((self.u64() % 6) as usize)
            .copied()
            .unwrap_or(InputMode::TurnCommitOnly)
    }
    fn finality(&mut self) -> Finality {
        Finality::from(self.u64() & 1 == 1)
    }
    fn reason(&mut self) -> CloseReason {
        let all = CloseReason::ALL;
        all.get((self.u64() % 5) as usize)
            .copied()
            .unwrap_or(CloseReason::ExplicitClose)
    }
    fn activity(&mut self) -> Activity {
        let all = Activity::ALL;
        all.get((self.u64() % 8) as usize)
            .copied()
            .unwrap_or(Activity::Heartbeat)
    }
    fn now(&mut self) -> Instant {
        Instant::from_millis(self.u64())
    }
    fn fence<I: Clone>(&mut self, base: &Fence<I>) -> Fence<I> {
        let mut f = base.clone();
        f.incarnation = f.incarnation.wrapping_add(self.u64() % 2);
        f.epoch = self.u64();
        f.turn = self.u64();
        f.response = self.u64();
        f
    }
}

/// Every operation of a typed session of profile `R, B, D, A, L, K`.
fn session_ops<P: Profile<SessionConfig = (), RuntimeConfig = ()>>(
    mut s: Session<duplex_core::Open, P>,
    inp: &mut Input<'_>,
) -> u64 {
    let mut acc = 0u64;
    let base = s.fence().clone();
    for _ in 0..4 {
        let f = inp.fence(&base);
        let id = IdOf::<P>::new(inp.text()).unwrap_or_else(|_| base.session.clone());
        acc ^= u64::from(s.touch(&f, inp.activity(), inp.now()).is_ok());
        acc ^= u64::from(s.begin_operation(&f, &id, inp.now()).is_ok());
        acc ^= u64::from(s.end_operation(&f, &id, inp.now()).is_ok());
        if let Ok(r) = s.prepare_append(&f, inp.mode()) {
            acc ^= r.on_commit().seq ^ r.fence().epoch ^ (r.mode() as u64);
            if let Err(e) = s.commit_append(&r) {
                acc ^= e.kind() as u64;
            }
        }
        acc ^= s
            .append(&f, inp.mode())
            .map_or(1, |a| a.seq ^ a.turn_seq ^ a.turn_id);
        let results = [inp.u64() as i64, inp.u64() as i64, inp.u64() as i64];
        let n = (inp.u64() % 4) as usize;
        let (mode, finality) = (inp.mode(), inp.finality());
        let record = s.record_completed(
            &f,
            &id,
            mode,
            finality,
            results.get(..n).unwrap_or_default(),
        );
        acc ^= u64::from(record.is_ok());
        acc ^= s
            .completed(&f, &id, mode, finality)
            .map_or(2, |r| r.map_or(3, |r| r.len() as u64));
        acc ^= u64::from(s.reserve(&f, inp.u32(), &id).is_ok());
        acc ^= u64::from(s.bind(&f, inp.u32(), &id).is_ok());
        acc ^= u64::from(s.accept_fence(&f).is_ok());
        let next = inp.fence(&base);
        acc ^= s.cancel(&f, &next).map_or(4, |ids| ids.len() as u64);
        acc ^= s.release_fence(&f).len() as u64;
        s.release(&[id.clone()]);
        s.release_where(|r| r.text().as_bytes().first() == Some(&b'x'));
        acc ^= s.stage_request_ids(Some(&f)).count() as u64;
        acc ^= s
            .resource_request_ids(None, Some(RequestState::Submitted))
            .count() as u64;
        acc ^= s.replace_configs(Some(()), None);
        acc ^= s.deadline().map_or(5, Instant::as_millis);
        acc ^= s.due(inp.now()).map_or(6, |r| r as u64);
        acc ^= s.bindings().count() as u64 ^ s.resources().count() as u64;
        acc ^= s.completed_operations().count() as u64 ^ s.active_operations().count() as u64;
        acc ^= s.input_seq() ^ s.input_turn_seq() ^ s.config_generation() ^ s.lease_generation();
        acc ^= s.last_activity().as_millis() ^ s.completed_limit() as u64;
        acc ^= s.lease_config().idle_ttl().map_or(7, Duration::as_millis);
        acc ^= u64::from(s.modes().contains(inp.mode())) ^ (s.kind() as u64);
    }
    // Detached, back, and every way out.
    let f = inp.fence(&base);
    let s = match s.detach(&f, inp.now()) {
        Ok(mut d) => {
            acc ^= d.state().since().as_millis();
            acc ^= u64::from(d.bind(&f, inp.u32(), &base.session).is_ok());
            match d.resume(&f, inp.u64() % 3, inp.now()) {
                Ok((open, g)) => {
                    acc ^= g;
                    open
                }
                Err(r) => match r.session.expire(inp.now()) {
                    Ok(closing) => return acc ^ finish(closing, inp),
                    Err(d) => {
                        return acc
                            ^ d.close(&f, inp.reason())
                                .map_or(8, |(c, ids)| c.lease_generation() ^ ids.len() as u64)
                    }
                },
            }
        }
        Err(r) => r.session,
    };
    let (s, g) = match s.resume(&f, inp.u64() % 3, inp.now()) {
        Ok(pair) => pair,
        Err(r) => (r.session, 9),
    };
    acc ^= g;
    let s = match s.resume_idempotent(&f, inp.u64() % 3, &base.session, inp.now()) {
        Ok(duplex_core::Resumption::Resumed(s, g) | duplex_core::Resumption::Replayed(s, g)) => {
            acc ^= g;
            s
        }
        Err(r) => r.session,
    };
    acc ^= s.resumed_by().map_or(22, |c| c.len() as u64);
    let mut s = s;
    if s.recycle(
        inp.fence(&base),
        OpenOptions::default().completed_limit((inp.u64() % 12) as usize),
        inp.now(),
    )
    .is_err()
    {
        acc ^= 10;
    }
    match s.begin_close(&f, inp.reason()) {
        Ok(closing) => acc ^ finish(closing, inp),
        Err(r) => acc ^ (r.error.kind() as u64) ^ r.session.input_seq(),
    }
}

/// Closing: still releasable, a second begin_close, then finalize.
fn finish<P: Profile<SessionConfig = (), RuntimeConfig = ()>>(
    closing: Session<duplex_core::Closing, P>,
    inp: &mut Input<'_>,
) -> u64 {
    let f = inp.fence(closing.fence());
    let mut c = match closing.begin_close(&f, inp.reason()) {
        Ok(c) => c,
        Err(r) => r.session,
    };
    let mut acc = c.release_fence(&f).len() as u64 ^ (c.state().reason() as u64);
    let keep = inp.u64();
    c.release_where(|r| r.text().len() as u64 % 2 == keep % 2);
    let (closed, ids) = c.finalize();
    acc ^= ids.len() as u64 ^ (closed.close_reason() as u64) ^ closed.fence().epoch;
    acc
}

/// The dynamic API over the state enum.
fn any_ops(inp: &mut Input<'_>) -> u64 {
    let Ok(id) = Id::new(inp.text()) else {
        return 11;
    };
    let base = Fence::new(id, inp.u64());
    let lease = LeaseConfig::new(
        Some(Duration::from_millis(inp.u64())),
        Duration::from_millis(inp.u64()),
    );
    let policy = OverlapPolicy::ALL[(inp.u32() % 3) as usize];
    let opts = OpenOptions::default()
        .modes(Modes::only(inp.mode()))
        .lease(lease.unwrap_or_default())
        .overlap(OverlapConfig::new(
            policy,
            inp.u32() as u16,
            inp.u32() as u16,
        ));
    let Ok(s) = Session::open(base.clone(), opts, inp.now()) else {
        return 12;
    };
    let mut any = AnySession::from(s);
    let mut acc = 0u64;
    for _ in 0..4 {
        let f = inp.fence(&base);
        let op = Id::new(inp.text()).unwrap_or_else(|_| base.session.clone());
        acc ^= u64::from(any.touch(&f, inp.activity(), inp.now()).is_ok());
        acc ^= u64::from(any.begin_operation(&f, &op, inp.now()).is_ok());
        acc ^= u64::from(any.end_operation(&f, &op, inp.now()).is_ok());
        acc ^= any.append(&f, inp.mode()).map_or(1, |a| a.seq);
        if let Ok(r) = any.prepare_append(&f, inp.mode()) {
            acc ^= any.commit_append(&r).map_or(2, |a| a.seq);
        }
        acc ^= u64::from(
            any.record_completed(&f, &op, inp.mode(), inp.finality(), &[1])
                .is_ok(),
        );
        acc ^= u64::from(any.completed(&f, &op, inp.mode(), inp.finality()).is_ok());
        acc ^= u64::from(any.reserve(&f, inp.u32(), &op).is_ok())
            ^ u64::from(any.bind(&f, inp.u32(), &op).is_ok());
        acc ^= u64::from(any.accept_fence(&f).is_ok());
        acc ^= any
            .cancel(&f, &inp.fence(&base))
            .map_or(3, |ids| ids.len() as u64);
        acc ^= any.release_fence(&f).map_or(4, |ids| ids.len() as u64);
        acc ^= u64::from(any.release_where(|_| true).is_ok());
        acc ^= any
            .stage_request_ids(None)
            .map_or(5, |ids| ids.len() as u64);
        acc ^= any
            .resource_request_ids(Some(&f), None)
            .map_or(6, |ids| ids.len() as u64);
        acc ^= any.replace_configs(None, Some(())).unwrap_or(7);
        acc ^= any
            .reserve_input(&f, inp.u64())
            .map_or(24, |p| u64::from(p.bytes))
            ^ any.reserve_turn(&f).map_or(25, |p| u64::from(p.turns))
            ^ any
                .release_input(inp.u64())
                .map_or(26, |p| u64::from(p.bytes))
            ^ any.release_turn().map_or(27, |p| u64::from(p.turns))
            ^ any.release_all_input().map_or(28, u64::from)
            ^ any
                .cancel_pending_input()
                .map_or(29, |p| u64::from(p.bytes))
            ^ any.input_limits().map_or(30, |l| u64::from(l.bytes()));
        let overlap = Overlap {
            duration_ms: inp.u32(),
            speech: inp.u32() % 2 == 0,
            request: OverlapRequest::parse(inp.text()),
            forced: Forced::from_flags(inp.u32() % 5 == 0, inp.u32() % 5 == 0),
            vad_speech_started: [None, Some(false), Some(true)][(inp.u32() % 3) as usize],
            short_ack_transcript: is_short_ack(inp.text()),
        };
        acc ^= any
            .decide_overlap(&f, &overlap)
            .map_or(31, |d| u64::from(d.overlap_speech_ms) ^ d.action as u64)
            ^ any.reset_overlap_speech().map_or(32, u64::from)
            ^ any.overlap_speech_ms().map_or(33, u64::from)
            ^ any
                .overlap_config()
                .map_or(34, |c| u64::from(c.barge_in_ms));
        let next = f.clone().with_epoch(inp.u64() % 4);
        let keep = inp.u32();
        acc ^= any
            .drain(&f, &next, |stage| stage < 32 && keep & (1 << stage) != 0)
            .map_or(35, |ids| ids.len() as u64)
            ^ any.route_output(inp.text()).map_or(36, |r| {
                r.map_or(37, |r| r.owner as u64 ^ u64::from(r.stage))
            })
            ^ any.draining().map_or(38, |ids| ids.len() as u64)
            ^ any.release_drained().map_or(39, |ids| ids.len() as u64);
        let mut held = duplex_core::RequestIds::new();
        any.held_request_ids(&mut held);
        acc ^= held.len() as u64 ^ any.deadline().map_or(8, Instant::as_millis);
        acc ^= any.due(inp.now()).map_or(9, |r| r as u64)
            ^ (any.kind() as u64)
            ^ any.lease_generation();
        acc ^= any
            .migrate(inp.u64(), inp.now())
            .map_or(10, |f| f.incarnation);
        acc ^= match inp.u64() % 8 {
            0 => any.detach(&f, inp.now()).map_or(11, |()| 12),
            1 => any.resume(&f, inp.u64() % 3, inp.now()).unwrap_or(13),
            6 => any
                .resume_idempotent(&f, inp.u64() % 3, &f.session, inp.now())
                .unwrap_or(23),
            2 => any.begin_close(&f, inp.reason()).map_or(14, |()| 15),
            3 => any.finalize().map_or(16, |ids| ids.len() as u64),
            4 => any.expire(inp.now()).map_or(17, |e| e.lease_generation),
            5 => any.check_generation(inp.u64() % 3).map_or(18, |()| 19),
            _ => any
                .close(&f, inp.reason())
                .map_or(20, |ids| ids.len() as u64),
        };
        acc ^= u64::from(any.as_open().is_some()) ^ any.close_reason().map_or(21, |r| r as u64);
    }
    acc ^ (any.kind() == StateKind::Closed) as u64
}

/// The value types: parsing, names, arithmetic, errors.
fn value_ops(inp: &mut Input<'_>) -> u64 {
    let t = inp.text();
    let mut acc = InputMode::parse(t).map_or(1, |m| m as u64);
    acc ^=
        Activity::parse(t).map_or(2, |a| a as u64) ^ CloseReason::parse(t).map_or(3, |r| r as u64);
    let (a, b) = (
        Instant::from_millis(inp.u64()),
        Duration::from_millis(inp.u64()),
    );
    acc ^= (a + b).as_millis()
        ^ a.saturating_add(b).as_millis()
        ^ a.checked_add(b).map_or(4, Instant::as_millis);
    acc ^= a
        .saturating_duration_since(Instant::from_millis(inp.u64()))
        .as_millis();
    acc ^= Duration::from_secs(inp.u64()).as_millis();
    let modes: Modes = [inp.mode(), inp.mode()].into_iter().collect();
    acc ^= modes.iter().count() as u64;
    for kind in ErrorKind::ALL {
        acc ^= kind.as_str().len() as u64;
    }
    let f: Fence = Fence::new(
        Id::new(inp.text()).unwrap_or_else(|_| fallback_id()),
        inp.u64(),
    );
    let g = inp.fence(&f);
    acc ^= u64::from(f.admits(&g).is_ok()) ^ u64::from(f.same_identity(&g));
    let Stamp {
        incarnation,
        epoch,
        turn,
        response,
    } = g.stamp();
    acc ^ incarnation ^ epoch ^ turn ^ response
}

/// A valid id for inputs that are not one (`"x"` always is; the loop only
/// avoids an `unwrap`).
fn fallback_id() -> Id {
    loop {
        if let Ok(id) = Id::new("x") {
            return id;
        }
    }
}

/// Snapshot every state to a buffer, then restore from the input itself
/// (arbitrary bytes) and from the real image.
fn snapshot_ops(inp: &mut Input<'_>) -> u64 {
    let mut buf = [0u8; Session::<duplex_core::Open>::SNAPSHOT_MAX];
    let mut acc = 0u64;
    let restored = AnySession::restore(inp.bytes);
    acc ^= restored.map_or_else(|e| e.to_string_len(), |s| s.kind() as u64);
    let Ok(id) = Id::new(inp.text()) else {
        return acc;
    };
    let f = Fence::new(id, inp.u64());
    let Ok(s) = Session::open(f.clone(), OpenOptions::default(), inp.now()) else {
        return acc;
    };
    let mut any = AnySession::from(s);
    for _ in 0..3 {
        let written = any.snapshot(&mut buf).map(|image| image.len());
        if let Ok(len) = written {
            if let Some(image) = buf.get(..len) {
                acc ^= AnySession::restore(image).map_or(1, |s| s.lease_generation());
            }
        }
        acc ^= match inp.u64() % 3 {
            0 => any.detach(&f, inp.now()).map_or(2, |()| 3),
            1 => any.begin_close(&f, inp.reason()).map_or(4, |()| 5),
            _ => any.resume(&f, 0, inp.now()).unwrap_or(6),
        };
    }
    acc
}

/// The length of an error's kind name (keeps the error alive without
/// formatting it).
trait KindLen {
    fn to_string_len(&self) -> u64;
}

impl KindLen for duplex_core::SnapshotError {
    fn to_string_len(&self) -> u64 {
        match self {
            duplex_core::SnapshotError::Inconsistent(why) => why.len() as u64,
            duplex_core::SnapshotError::Invalid(e) => e.kind().as_str().len() as u64,
            _ => 1,
        }
    }
}

/// Everything, on `bytes`.
fn exercise(bytes: &[u8]) -> u64 {
    let mut inp = Input { bytes, at: 0 };
    let mut acc = value_ops(&mut inp) ^ any_ops(&mut inp) ^ snapshot_ops(&mut inp);
    if let Ok(id) = Id::new(inp.text()) {
        let opts = OpenOptions::default()
            .modes(Modes::only(inp.mode()))
            .completed_limit((inp.u64() % 10) as usize);
        if let Ok(s) = Session::open(Fence::new(id, inp.u64()), opts, inp.now()) {
            acc ^= session_ops(s, &mut inp);
        }
    }
    if let Ok(id) = Id::<{ device::ID_LEN }>::new(inp.text()) {
        let opts = OpenOptions::default().completed_limit((inp.u64() % 6) as usize);
        if let Ok(s) = Session::<duplex_core::Open, Device>::open_with_capacities(
            Fence::new(id, inp.u64()),
            opts,
            inp.now(),
        ) {
            acc ^= session_ops(s, &mut inp);
        }
    }
    // The server profile: a window of 256, searched through its index.
    if let Ok(id) = Id::<{ server::ID_LEN }>::new(inp.text()) {
        let opts = OpenOptions::default().completed_limit((inp.u64() % 300) as usize);
        if let Ok(s) = Session::<duplex_core::Open, Server>::open_with_capacities(
            Fence::new(id, inp.u64()),
            opts,
            inp.now(),
        ) {
            acc ^= session_ops(s, &mut inp);
        }
    }
    acc
}

#[used]
static KEEP: fn(&[u8]) -> u64 = exercise;
