//! The shared manager under threads: random operations from 8 threads over
//! a few shared sessions, checked after joining; small concurrent histories
//! checked for linearizability against the single-threaded manager;
//! admission permits dropped at every await point of a host's open; and
//! sessions migrating between two shared managers under threads.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;

use duplex_core::{
    CloseReason, Duration, ErrorKind, Fence, Id, InputMode, Instant, LeaseConfig, ManualClock,
    Modes, OpenOptions,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, MonotonicClock, SessionManager, SharedManager};

const AUDIO: InputMode = InputMode::AppendAudioChunk;
const SESSIONS: [&str; 6] = ["s0", "s1", "s2", "s3", "s4", "s5"];

fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

fn options() -> OpenOptions {
    OpenOptions::default().modes(Modes::only(AUDIO))
}

/// xorshift64*: a tiny deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// What one thread saw.
#[derive(Default)]
struct Seen {
    /// `(session, incarnation, epoch) -> seqs` of successful appends.
    seqs: BTreeMap<(String, u64, u64), Vec<u64>>,
    /// Request ids this thread reserved or bound successfully.
    owned: BTreeSet<String>,
    /// Request ids reported released to this thread.
    released: Vec<String>,
    /// Fences read through snapshots, in this thread's order.
    fences: Vec<(String, u64, u64, u64, u64)>,
    admission_over: usize,
}

#[test]
fn eight_threads_keep_every_rule() {
    const THREADS: u64 = 8;
    const OPS: u64 = 4_000;
    const MAX: usize = 4;
    let config = ManagerConfig {
        max_sessions: Some(MAX),
        ..ManagerConfig::default()
    };
    let m = Arc::new(SharedManager::with_shards(MonotonicClock::new(), config, 3).unwrap());
    let start = Arc::new(Barrier::new(THREADS as usize));
    // Every open gets a new incarnation, so (session, incarnation) names
    // one lifetime of a session.
    let incarnations = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (m, start) = (Arc::clone(&m), Arc::clone(&start));
            let incarnations = Arc::clone(&incarnations);
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let mut seen = Seen::default();
                start.wait();
                for n in 0..OPS {
                    let name = SESSIONS[rng.below(SESSIONS.len() as u64) as usize];
                    let session = id(name);
                    let Some(snap) = m.inspect(&session) else {
                        let incarnation = incarnations.fetch_add(1, Ordering::Relaxed);
                        let _ = m.open(Fence::new(session, incarnation), options());
                        continue;
                    };
                    let f = snap.fence.clone();
                    seen.fences
                        .push((name.into(), f.incarnation, f.epoch, f.turn, f.response));
                    let request = format!("t{t}-r{n}");
                    let mut report = |ids: &[Id]| {
                        seen.released.extend(ids.iter().map(ToString::to_string));
                    };
                    match rng.below(10) {
                        0..=3 => {
                            if let Ok(a) = m.append(&f, AUDIO) {
                                seen.seqs
                                    .entry((name.into(), f.incarnation, f.epoch))
                                    .or_default()
                                    .push(a.seq);
                            }
                        }
                        4 => {
                            if m.bind(&f, u32::try_from(rng.below(3)).unwrap(), &request)
                                .is_ok()
                            {
                                seen.owned.insert(request);
                            }
                        }
                        5 => {
                            if m.reserve(&f, 3, &request).is_ok() {
                                seen.owned.insert(request);
                            }
                        }
                        6 => {
                            let next = f.clone().with_epoch(f.epoch + 1);
                            if let Ok(ids) = m.cancel(&f, &next) {
                                report(&ids);
                            }
                        }
                        7 => {
                            if let Ok(ids) = m.release_fence(&f) {
                                report(&ids);
                            }
                        }
                        8 => {
                            if let Ok(Some(ids)) = m.close(&f, CloseReason::ClientClose) {
                                report(&ids);
                            }
                        }
                        _ => {
                            if m.begin_close(&f, CloseReason::ExplicitClose).is_ok() {
                                if let Ok(ids) = m.finalize(&f.session) {
                                    report(&ids);
                                }
                            }
                        }
                    }
                    if m.reserved() > MAX || m.len() > MAX {
                        seen.admission_over += 1;
                    }
                }
                seen
            })
        })
        .collect();
    let seen: Vec<Seen> = workers.into_iter().map(|w| w.join().unwrap()).collect();

    // Close what is left; what that releases counts too.
    let mut released: Vec<String> = seen.iter().flat_map(|s| s.released.clone()).collect();
    for name in SESSIONS {
        let session = id(name);
        if let Some(snap) = m.inspect(&session) {
            let ids = if snap.close_reason.is_some() {
                m.finalize(&session).unwrap()
            } else {
                m.close(&snap.fence, CloseReason::ExplicitClose)
                    .unwrap()
                    .unwrap()
            };
            released.extend(ids.iter().map(ToString::to_string));
        }
    }
    assert!(m.is_empty() && m.reserved() == 0, "every slot given back");
    assert_eq!(
        seen.iter().map(|s| s.admission_over).sum::<usize>(),
        0,
        "admission exceeded"
    );

    // Each request released exactly once: every owned id once, nothing else.
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for r in &released {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    let owned: BTreeSet<&str> = seen
        .iter()
        .flat_map(|s| s.owned.iter().map(String::as_str))
        .collect();
    for r in &owned {
        assert_eq!(
            counts.get(r),
            Some(&1),
            "request {r} released {:?} times",
            counts.get(r)
        );
    }
    assert!(
        counts.keys().all(|r| owned.contains(r)),
        "released a request nobody held"
    );

    // Within an epoch of an incarnation, appends got 1, 2, 3, ... once each.
    let mut seqs: BTreeMap<(String, u64, u64), Vec<u64>> = BTreeMap::new();
    for s in &seen {
        for (k, v) in &s.seqs {
            seqs.entry(k.clone()).or_default().extend(v);
        }
    }
    let mut appends = 0;
    for (key, mut v) in seqs {
        v.sort_unstable();
        appends += v.len();
        let expected: Vec<u64> = (1..=v.len() as u64).collect();
        assert_eq!(v, expected, "seqs of {key:?}");
    }
    assert!(appends > 1_000, "the run appended ({appends})");

    // No thread ever saw a fence move backwards within an incarnation.
    for s in &seen {
        let mut last: HashMap<(&str, u64), (u64, u64, u64)> = HashMap::new();
        for (name, inc, e, t, r) in &s.fences {
            if let Some(&(pe, pt, pr)) = last.get(&(name.as_str(), *inc)) {
                let forward = *e > pe || (*e == pe && *t >= pt && *r >= pr);
                assert!(forward, "{name}@{inc}: ({pe},{pt},{pr}) -> ({e},{t},{r})");
            }
            last.insert((name.as_str(), *inc), (*e, *t, *r));
        }
    }
}

#[test]
fn admission_is_exact_under_a_race() {
    const THREADS: usize = 8;
    const MAX: usize = 5;
    let config = ManagerConfig {
        max_sessions: Some(MAX),
        ..ManagerConfig::default()
    };
    let m = Arc::new(SharedManager::with_shards(MonotonicClock::new(), config, 4).unwrap());
    for round in 0..50 {
        let start = Arc::new(Barrier::new(THREADS));
        let opened: usize = (0..THREADS)
            .map(|t| {
                let (m, start) = (Arc::clone(&m), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    let mut opened = 0;
                    for i in 0..3 {
                        let f = Fence::new(id(&format!("r{round}-t{t}-{i}")), 0);
                        match m.open(f, options()) {
                            Ok(()) => opened += 1,
                            Err(e) => assert_eq!(e.kind(), ErrorKind::CapacityExhausted),
                        }
                        assert!(m.reserved() <= MAX);
                    }
                    opened
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|w| w.join().unwrap())
            .sum();
        assert_eq!((opened, m.len(), m.reserved()), (MAX, MAX, MAX));
        for t in 0..THREADS {
            for i in 0..3 {
                let f = Fence::new(id(&format!("r{round}-t{t}-{i}")), 0);
                let _ = m.close(&f, CloseReason::ExplicitClose).unwrap();
            }
        }
        assert_eq!((m.len(), m.reserved()), (0, 0));
    }
}

/// A future that is pending once, like an await on an engine warm-up.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

/// A host's open: admit, await a warm-up, await a handshake, open.
async fn host_open(
    m: Arc<SharedManager<MonotonicClock>>,
    name: String,
) -> Result<(), duplex_std::Error> {
    let permit = m.admit()?;
    YieldOnce(false).await; // engine warm-up
    YieldOnce(false).await; // handshake
    permit.open(Fence::new(id(&name), 0), options())
}

#[test]
fn a_cancelled_open_never_leaks_its_admission_slot() {
    let config = ManagerConfig {
        max_sessions: Some(2),
        ..ManagerConfig::default()
    };
    let m = Arc::new(SharedManager::new(MonotonicClock::new(), config).unwrap());
    let mut cx = Context::from_waker(Waker::noop());
    // Cancel (drop) the task after 0, 1 and 2 polls: before admission,
    // while waiting for the warm-up, while waiting for the handshake.
    for polls in 0..3 {
        let mut task = Box::pin(host_open(Arc::clone(&m), format!("call-{polls}")));
        for _ in 0..polls {
            assert!(task.as_mut().poll(&mut cx).is_pending());
        }
        let held = m.reserved();
        assert_eq!(
            held,
            usize::from(polls > 0),
            "a started task holds one slot"
        );
        drop(task);
        assert_eq!(
            (m.reserved(), m.len()),
            (0, 0),
            "cancelled after {polls} polls"
        );
    }
    // Run to completion: the slot becomes the session's.
    let mut task = Box::pin(host_open(Arc::clone(&m), "call-done".into()));
    let done = loop {
        if let Poll::Ready(r) = task.as_mut().poll(&mut cx) {
            break r;
        }
    };
    done.unwrap();
    assert_eq!((m.reserved(), m.len()), (1, 1));
    // A failing open (the id exists) gives its slot back.
    let mut task = Box::pin(host_open(Arc::clone(&m), "call-done".into()));
    let failed = loop {
        if let Poll::Ready(r) = task.as_mut().poll(&mut cx) {
            break r;
        }
    };
    assert_eq!(failed.unwrap_err().kind(), ErrorKind::SessionExists);
    assert_eq!((m.reserved(), m.len()), (1, 1));
}

/// One call in a concurrent history.
#[derive(Clone, Debug)]
struct Call {
    thread: usize,
    op: Op,
    start: u64,
    end: u64,
    result: String,
}

#[derive(Clone, Debug)]
enum Op {
    Open(&'static str, u64),
    Append(&'static str, u64, u64),
    Bind(&'static str, u64, u64, String),
    Cancel(&'static str, u64, u64),
    Detach(&'static str, u64, u64),
    Resume(&'static str, u64, u64, u64),
    Close(&'static str, u64, u64),
}

fn fence(name: &str, incarnation: u64, epoch: u64) -> Fence {
    Fence::new(id(name), incarnation).with_epoch(epoch)
}

/// Runs `op` and renders its outcome. Generic over the two managers.
macro_rules! apply {
    ($m:expr, $op:expr) => {
        match $op {
            Op::Open(s, inc) => format!(
                "{:?}",
                $m.open(Fence::new(id(s), *inc), options())
                    .map_err(|e| e.kind())
            ),
            Op::Append(s, inc, e) => format!(
                "{:?}",
                $m.append(&fence(s, *inc, *e), AUDIO)
                    .map(|a| a.seq)
                    .map_err(|e| e.kind())
            ),
            Op::Bind(s, inc, e, r) => format!(
                "{:?}",
                $m.bind(&fence(s, *inc, *e), 0, r).map_err(|e| e.kind())
            ),
            Op::Cancel(s, inc, e) => format!(
                "{:?}",
                $m.cancel(&fence(s, *inc, *e), &fence(s, *inc, e + 1))
                    .map(|ids| ids.len())
                    .map_err(|e| e.kind())
            ),
            Op::Detach(s, inc, e) => {
                format!("{:?}", $m.detach(&fence(s, *inc, *e)).map_err(|e| e.kind()))
            }
            Op::Resume(s, inc, e, g) => format!(
                "{:?}",
                $m.resume(&fence(s, *inc, *e), *g).map_err(|e| e.kind())
            ),
            Op::Close(s, inc, e) => format!(
                "{:?}",
                $m.close(&fence(s, *inc, *e), CloseReason::ClientClose)
                    .map(|ids| ids.map(|i| i.len()))
                    .map_err(|e| e.kind())
            ),
        }
    };
}

fn random_op(rng: &mut Rng, thread: usize, n: usize) -> Op {
    let s = ["a", "b"][rng.below(2) as usize];
    let (inc, e) = (rng.below(2), rng.below(3));
    match rng.below(8) {
        0 => Op::Open(s, inc),
        1 | 2 => Op::Append(s, inc, e),
        3 => Op::Bind(s, inc, e, format!("t{thread}-{n}")),
        4 => Op::Cancel(s, inc, e),
        5 => Op::Detach(s, inc, e),
        6 => Op::Resume(s, inc, e, rng.below(2)),
        _ => Op::Close(s, inc, e),
    }
}

/// Whether some order of `calls` that respects real time (a call that
/// ended before another started comes first) gives every call its observed
/// result on a fresh single-threaded manager.
fn linearizable(calls: &[Call]) -> bool {
    fn search(calls: &[Call], done: &mut Vec<usize>) -> bool {
        if done.len() == calls.len() {
            return true;
        }
        for (i, c) in calls.iter().enumerate() {
            if done.contains(&i) {
                continue;
            }
            // `c` may go next only if no pending call ended before it started.
            let blocked = calls
                .iter()
                .enumerate()
                .any(|(j, d)| j != i && !done.contains(&j) && d.end < c.start);
            if blocked {
                continue;
            }
            done.push(i);
            let clock = ManualClock::new(Instant::ZERO);
            let mut m = SessionManager::new(&clock, ManagerConfig::default()).unwrap();
            let consistent = done
                .iter()
                .all(|&k| apply!(m, &calls[k].op) == calls[k].result);
            if consistent && search(calls, done) {
                return true;
            }
            done.pop();
        }
        false
    }
    search(calls, &mut Vec::new())
}

#[test]
fn small_concurrent_histories_are_linearizable() {
    const THREADS: usize = 3;
    const OPS: usize = 5;
    for seed in 0..150u64 {
        // No recorded result depends on time, so the threads may use the
        // real clock while the replay uses a manual one.
        let m =
            Arc::new(SharedManager::new(MonotonicClock::new(), ManagerConfig::default()).unwrap());
        let clock = Arc::new(AtomicU64::new(0));
        let history = Arc::new(Mutex::new(Vec::new()));
        let start = Arc::new(Barrier::new(THREADS));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (m, clock, history, start) = (
                    Arc::clone(&m),
                    Arc::clone(&clock),
                    Arc::clone(&history),
                    Arc::clone(&start),
                );
                thread::spawn(move || {
                    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9) ^ (t as u64 + 1) << 17 | 1);
                    start.wait();
                    for n in 0..OPS {
                        let op = random_op(&mut rng, t, n);
                        let begin = clock.fetch_add(1, Ordering::SeqCst);
                        let result = apply!(m, &op);
                        let end = clock.fetch_add(1, Ordering::SeqCst);
                        history.lock().unwrap().push(Call {
                            thread: t,
                            op,
                            start: begin,
                            end,
                            result,
                        });
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let calls = history.lock().unwrap().clone();
        assert!(
            linearizable(&calls),
            "seed {seed}: no linearization of {calls:#?}"
        );
        assert!(calls.iter().all(|c| c.thread < THREADS));
    }
}

#[test]
fn expiry_and_deadlines_span_every_shard() {
    let clock = ManualClock::new(Instant::ZERO);
    let m = SharedManager::with_shards(&clock, ManagerConfig::default(), 4).unwrap();
    let lease = LeaseConfig::new(None, Duration::from_millis(100)).unwrap();
    let fences: Vec<Fence> = (0..40)
        .map(|i| Fence::new(id(&format!("d{i}")), 0))
        .collect();
    for (i, f) in fences.iter().enumerate() {
        m.open(f.clone(), options().lease(lease)).unwrap();
        clock.advance_to(Instant::from_millis(i as u64 * 10));
        m.detach(f).unwrap();
    }
    // The earliest deadline over all shards is the first detach + grace.
    assert_eq!(m.next_deadline(), Some(Instant::from_millis(100)));
    // Now 390 ms: d0..=d29 are due (detached at 0..=290 ms); d0 is excluded.
    let mut expired: Vec<String> = m
        .collect_expired([&fences[0].session])
        .iter()
        .map(|e| e.session.to_string())
        .collect();
    expired.sort();
    let mut want: Vec<String> = (1..=29).map(|i| format!("d{i}")).collect();
    want.sort();
    assert_eq!(expired, want);
    assert_eq!(
        m.next_deadline(),
        Some(Instant::from_millis(100)),
        "d0 is still due"
    );
    assert_eq!(m.len(), 40, "closing sessions count until finalized");
    let done = m.finalize_closed(fences.iter().map(|f| &f.session));
    assert_eq!((done.len(), m.len()), (29, 11));
}

/// Two threads move sessions back and forth between two shared managers
/// (each admitting at most 3) while a third appends to whatever it finds:
/// no session is lost or duplicated, admission is never exceeded, every
/// refused import hands the session back, and each bound request is
/// released exactly once at the end.
#[test]
fn sessions_migrating_between_shared_managers_stay_whole() {
    let config = ManagerConfig {
        max_sessions: Some(3),
        ..ManagerConfig::default()
    };
    let hosts = Arc::new([
        SharedManager::new(MonotonicClock::new(), config).unwrap(),
        SharedManager::new(MonotonicClock::new(), config).unwrap(),
    ]);
    let names = ["m0", "m1", "m2", "m3"];
    for (i, name) in names.iter().enumerate() {
        let f = Fence::new(id(name), 0);
        let host = &hosts[i % 2];
        host.open(f.clone(), options()).unwrap();
        host.bind(&f, 0, format!("req-{name}")).unwrap();
    }
    let barrier = Arc::new(Barrier::new(3));
    let movers: Vec<_> = (0..2)
        .map(|t| {
            let (hosts, barrier) = (Arc::clone(&hosts), Arc::clone(&barrier));
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9 + t);
                let mut moved = 0u32;
                barrier.wait();
                for _ in 0..2_000 {
                    let name = names[rng.below(4) as usize];
                    let from = rng.below(2) as usize;
                    let Ok(session) = hosts[from].export(name) else {
                        continue;
                    };
                    let next = session.fence().incarnation + 1;
                    // Try the other host; when it is full, go back home
                    // (the home slot this session left is still free unless
                    // another thread took it: then keep trying both).
                    let mut session = session;
                    let mut to = 1 - from;
                    loop {
                        match hosts[to].import(session, next) {
                            Ok(fence) => {
                                assert_eq!(fence.incarnation, next);
                                moved += 1;
                                break;
                            }
                            Err(refused) => {
                                assert_eq!(refused.error.kind(), ErrorKind::CapacityExhausted);
                                assert_eq!(refused.session.fence().incarnation, next - 1);
                                session = refused.session;
                                to = 1 - to;
                                thread::yield_now();
                            }
                        }
                    }
                    for host in hosts.iter() {
                        assert!(host.len() <= 3 && host.reserved() <= 3);
                    }
                }
                moved
            })
        })
        .collect();
    let appender = {
        let (hosts, barrier) = (Arc::clone(&hosts), Arc::clone(&barrier));
        thread::spawn(move || {
            barrier.wait();
            let mut appended = 0u64;
            for i in 0..4_000 {
                let name = id(names[i % 4]);
                for host in hosts.iter() {
                    let Some(fence) = host.inspect(&name).map(|s| s.fence) else {
                        continue;
                    };
                    // The fence read may be stale by now (the session moved
                    // on): then the append is refused, never misapplied.
                    match host.append(&fence, AUDIO) {
                        Ok(_) => appended += 1,
                        Err(e) => assert!(matches!(
                            e.kind(),
                            ErrorKind::UnknownSession | ErrorKind::FenceMismatch
                        )),
                    }
                }
            }
            appended
        })
    };
    let moved: u32 = movers.into_iter().map(|m| m.join().unwrap()).sum();
    let appended = appender.join().unwrap();
    assert!(
        moved > 0 && appended > 0,
        "moved {moved}, appended {appended}"
    );

    // Every session is in exactly one host; their sequences add up.
    let mut seqs = 0;
    let mut released = Vec::new();
    for name in names {
        let held: Vec<usize> = (0..2)
            .filter(|&h| hosts[h].inspect(&id(name)).is_some())
            .collect();
        assert_eq!(held.len(), 1, "{name} is in exactly one host");
        let host = &hosts[held[0]];
        let snap = host.inspect(&id(name)).unwrap();
        seqs += snap.input_seq;
        let ids = host
            .close(&snap.fence, CloseReason::ClientClose)
            .unwrap()
            .unwrap();
        released.extend(ids.iter().map(ToString::to_string));
    }
    assert_eq!(
        seqs, appended,
        "every acknowledged append is in a sequence, once"
    );
    released.sort();
    assert_eq!(released, ["req-m0", "req-m1", "req-m2", "req-m3"]);
    assert!(hosts.iter().all(|h| h.is_empty() && h.reserved() == 0));
}
