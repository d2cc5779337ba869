//! Criterion benchmarks, one per workload of `shared/reference/seed_bench.py`
//! (same ids, same work), plus the expiry-scaling series.
//!
//! `cargo bench -p duplex-std --bench runtime`

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use duplex_core::overlap::{Overlap, OverlapConfig, OverlapPolicy};
use duplex_core::profile::{server, Server};
use duplex_core::{
    Activity, CloseReason, Fence, Finality, Id, InputMode, Instant, LeaseConfig, ManualClock,
    Modes, OpenOptions, Session,
};
use duplex_std::{ManagerConfig, SessionManager, Sessions};

const MODE: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Id {
    Id::new(s).expect("bench ids are valid")
}

fn options() -> OpenOptions {
    OpenOptions::default().modes(Modes::only(MODE)).lease(
        LeaseConfig::new(
            Some(duplex_core::Duration::from_millis(300_000)),
            duplex_core::Duration::from_millis(30_000),
        )
        .expect("valid"),
    )
}

fn open_session() -> (Session, Fence) {
    let fence = Fence::new(id("session-0"), 0);
    let session = Session::open(fence.clone(), options(), Instant::ZERO).expect("opens");
    (session, fence)
}

fn session_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("session");

    let (mut s, f) = open_session();
    g.bench_function("append_input", |b| {
        b.iter(|| black_box(s.append(black_box(&f), MODE).expect("append")));
    });

    let (mut s, f) = open_session();
    g.bench_function("touch", |b| {
        b.iter(|| {
            s.touch(black_box(&f), Activity::Heartbeat, Instant::ZERO)
                .expect("touch")
        });
    });

    let (mut s, f) = open_session();
    let (r0, r1) = (id("req-stage0"), id("req-stage1"));
    let both = [r0.clone(), r1.clone()];
    g.bench_function("bind_release", |b| {
        b.iter(|| {
            s.bind(&f, 0, &r0).expect("bind 0");
            s.bind(&f, 1, &r1).expect("bind 1");
            s.release(black_box(&both));
        });
    });

    let (mut s, f) = open_session();
    for i in 0..8 {
        s.record_completed(&f, &id(&format!("op-{i}")), MODE, Finality::Partial, &[i])
            .expect("record");
    }
    let op3 = id("op-3");
    g.bench_function("completed_hit", |b| {
        b.iter(|| {
            black_box(
                s.completed(&f, black_box(&op3), MODE, Finality::Partial)
                    .expect("lookup")
                    .is_some(),
            )
        });
    });

    // A barge-in: two stages bound, cancelled to the next epoch.
    let (mut s, f) = open_session();
    let mut epoch = 0_u64;
    g.bench_function("bind_cancel", |b| {
        b.iter(|| {
            let at = f.clone().with_epoch(epoch);
            epoch += 1;
            s.bind(&at, 0, &r0).expect("bind 0");
            s.bind(&at, 1, &r1).expect("bind 1");
            black_box(s.cancel(&at, &f.clone().with_epoch(epoch)).expect("cancel"))
        });
    });

    // Where a request's output goes, with a resident stage, a speaker
    // draining the previous turn and the current turn's speaker.
    let (mut s, f) = open_session();
    let next = f.clone().with_turn(1);
    s.bind(&f, 2, &id("tts-0")).expect("bind");
    s.bind(&next, 0, &id("resident")).expect("bind");
    s.bind(&next, 2, &id("tts-1")).expect("bind");
    g.bench_function("route_output", |b| {
        b.iter(|| black_box(s.route_output(black_box("tts-0"))));
    });

    // A chunk of speech over the model's answer, under the thresholds
    // rule, with the response's end forgetting it every 4 chunks (the
    // count stays in the listening range).
    let rule = OverlapConfig::new(OverlapPolicy::Thresholds, 700, 1_200);
    let fence = Fence::new(id("session-0"), 0);
    let mut s =
        Session::open(fence.clone(), options().overlap(rule), Instant::ZERO).expect("opens");
    let chunk = Overlap::speech(20);
    let mut chunks = 0_u32;
    g.bench_function("decide_overlap", |b| {
        b.iter(|| {
            chunks = chunks.wrapping_add(1);
            if chunks.is_multiple_of(4) {
                s.reset_overlap_speech();
            }
            black_box(
                s.decide_overlap(black_box(&fence), black_box(&chunk))
                    .expect("decide"),
            )
        });
    });
    g.finish();
}

/// A lookup in a full window of 256 completed appends against one in a
/// window of 8, both with the server profile and vllm-omni-sized op ids
/// (`append:<uuid>`): the cost of the window's size.
fn window_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("completed_window");
    for window in [8_usize, 256] {
        let fence = Fence::new(Id::new("session-0").expect("id"), 0);
        let mut s = Session::<duplex_core::Open, Server>::open_with_capacities(
            fence.clone(),
            options(),
            Instant::ZERO,
        )
        .expect("opens");
        let op = |i: usize| {
            Id::<{ server::ID_LEN }>::new(&format!("append:{i:08x}-6a3b-4f0e-9a57-2d8c1e4b7f30"))
                .expect("op id")
        };
        for i in 0..window {
            let handle = i64::try_from(i).expect("small");
            s.record_completed(&fence, &op(i), MODE, Finality::Partial, &[handle])
                .expect("record");
        }
        let probe = op(window / 2 + 1);
        g.bench_function(format!("lookup_{window}"), |b| {
            b.iter(|| {
                black_box(
                    s.completed(&fence, black_box(&probe), MODE, Finality::Partial)
                        .expect("lookup")
                        .is_some(),
                )
            });
        });
    }
    g.finish();
}

/// The server profile with [`Heap`] storage (the Python package's
/// sessions) against the same with inline storage: append, touch, a lookup
/// in a full window of 256, and open + close through a manager.
fn storage_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage");
    let long = "session-6f1c2a9e-6a3b-4f0e-9a57-2d8c1e4b7f30-control-plane-duplex-00";
    let op = |i: usize| {
        Id::<{ server::ID_LEN }>::new(&format!("append:{i:08x}-6a3b-4f0e-9a57-2d8c1e4b7f30"))
            .expect("op id")
    };
    macro_rules! storage {
        ($name:literal, $m:ty) => {{
            type S = Session<duplex_core::Open, Server<(), (), $m>>;
            let fence = Fence::new(Id::new(long).expect("id"), 0);
            let mut s =
                S::open_with_capacities(fence.clone(), options(), Instant::ZERO).expect("opens");
            g.bench_function(concat!($name, "/append_input"), |b| {
                b.iter(|| black_box(s.append(black_box(&fence), MODE).expect("append")));
            });
            g.bench_function(concat!($name, "/touch"), |b| {
                b.iter(|| {
                    s.touch(black_box(&fence), Activity::Heartbeat, Instant::ZERO)
                        .expect("touch")
                });
            });
            for i in 0..256 {
                let handle = i64::try_from(i).expect("small");
                s.record_completed(&fence, &op(i), MODE, Finality::Partial, &[handle])
                    .expect("record");
            }
            let probe = op(129);
            g.bench_function(concat!($name, "/lookup_256"), |b| {
                b.iter(|| {
                    black_box(
                        s.completed(&fence, black_box(&probe), MODE, Finality::Partial)
                            .expect("lookup")
                            .is_some(),
                    )
                });
            });
            let mut m: SessionManager<ManualClock, Server<(), (), $m>> =
                SessionManager::with_capacities(
                    ManualClock::new(Instant::ZERO),
                    ManagerConfig::default(),
                )
                .expect("manager");
            let mut incarnation = 0u64;
            let churn = Id::new(long).expect("id");
            g.bench_function(concat!($name, "/open_close"), |b| {
                b.iter(|| {
                    incarnation += 1;
                    let f = Fence::new(churn.clone(), incarnation);
                    m.open(f.clone(), options()).expect("open");
                    black_box(m.close(&f, CloseReason::ClientClose).expect("close"));
                });
            });
        }};
    }
    storage!("inline", duplex_core::storage::Inline);
    storage!("heap", duplex_core::storage::Heap);
    g.finish();
}

type Manager = SessionManager<ManualClock>;

fn manager_with(n: usize) -> Manager {
    let mut m =
        Manager::new(ManualClock::new(Instant::ZERO), ManagerConfig::default()).expect("manager");
    for i in 0..n {
        m.open(Fence::new(id(&format!("session-{i}")), 0), options())
            .expect("open");
    }
    m
}

fn manager_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("manager");

    let mut m = manager_with(0);
    let churn = id("churn");
    let mut incarnation = 0u64;
    g.bench_function("open_close", |b| {
        b.iter(|| {
            incarnation += 1;
            let f = Fence::new(churn.clone(), incarnation);
            m.open(f.clone(), options()).expect("open");
            // A host reads the released ids (to cancel them in the engine).
            let released = m.close(&f, CloseReason::ExplicitClose).expect("close");
            black_box(released.as_ref().map(|ids| ids.len()));
        });
    });

    // A host holding a session's id (and a key) among 10,000: the
    // per-call cost of reaching it, by id and by key.
    let mut m = manager_with(10_000);
    let f = Fence::new(id("session-4242"), 0);
    g.bench_function("append_by_id_10k", |b| {
        b.iter(|| {
            black_box(
                (&mut m)
                    .update(&f.session, |s| s.append(&f, InputMode::AppendAudioChunk))
                    .expect("append"),
            )
        });
    });
    let key = m.key(&f.session).expect("key");
    g.bench_function("append_by_key_10k", |b| {
        b.iter(|| {
            black_box(
                m.update_at(key, |s| s.append(&f, InputMode::AppendAudioChunk))
                    .expect("key")
                    .expect("append"),
            )
        });
    });

    for (name, n) in [
        ("collect_idle_1k", 1_000),
        ("collect_idle_10k", 10_000),
        ("collect_idle_100k", 100_000),
    ] {
        let mut m = manager_with(n);
        g.bench_function(name, |b| b.iter(|| black_box(m.collect_expired([]))));
    }

    g.finish();
}

criterion_group!(
    benches,
    session_benches,
    window_benches,
    storage_benches,
    manager_benches
);
criterion_main!(benches);
