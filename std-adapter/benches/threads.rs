//! Many threads: two threads appending to different sessions through the
//! shared manager, against the single-threaded manager behind one `Mutex`
//! (throughput); and one thread through the shared and the plain manager,
//! for the cost of sharing.
//!
//! `cargo bench -p duplex-std --bench threads`

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant as WallInstant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use duplex_core::{Fence, Id, InputMode, Modes, OpenOptions};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, MonotonicClock, SessionManager, SharedManager};

const MODE: InputMode = InputMode::AppendAudioChunk;

fn options() -> OpenOptions {
    OpenOptions::default().modes(Modes::only(MODE))
}

fn fence(name: &str) -> Fence {
    Fence::new(Id::new(name).expect("bench ids are valid"), 0)
}

/// Two sessions that the shared manager keeps on different shards.
fn two_sessions(m: &SharedManager<MonotonicClock>) -> [Fence; 2] {
    let a = fence("call-0");
    // Each id lands on one of the shards; a thousand tries find another.
    let b = (1..1_000)
        .map(|i| fence(&format!("call-{i}")))
        .find(|f| m.shard_of(&f.session) != m.shard_of(&a.session))
        .expect("some id lands on another shard");
    [a, b]
}

/// Runs `iters` appends on each of two threads; the time of the slower.
fn two_threads(iters: u64, append: impl Fn(usize) + Sync) -> Duration {
    let start = WallInstant::now();
    thread::scope(|s| {
        for t in 0..2 {
            let append = &append;
            s.spawn(move || {
                for _ in 0..iters {
                    append(t);
                }
            });
        }
    });
    start.elapsed()
}

fn shared(c: &mut Criterion) {
    let mut g = c.benchmark_group("shared");
    let shared =
        SharedManager::new(MonotonicClock::new(), ManagerConfig::default()).expect("manager");
    let fences = two_sessions(&shared);
    for f in &fences {
        shared.open(f.clone(), options()).expect("open");
    }
    g.throughput(Throughput::Elements(2));
    g.bench_function("append_threads_2", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |t| {
                black_box(shared.append(&fences[t], MODE).expect("append"));
            })
        });
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("append_one_thread", |b| {
        b.iter(|| black_box(shared.append(black_box(&fences[0]), MODE).expect("append")));
    });
    g.finish();
}

fn mutex(c: &mut Criterion) {
    let mut g = c.benchmark_group("mutex");
    let fences = [fence("call-0"), fence("call-1")];
    let locked = Mutex::new(
        SessionManager::new(MonotonicClock::new(), ManagerConfig::default()).expect("manager"),
    );
    for f in &fences {
        locked
            .lock()
            .expect("unpoisoned")
            .open(f.clone(), options())
            .expect("open");
    }
    g.throughput(Throughput::Elements(2));
    g.bench_function("append_threads_2", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |t| {
                let appended = locked.lock().expect("unpoisoned").append(&fences[t], MODE);
                black_box(appended.expect("append"));
            })
        });
    });
    g.finish();
}

fn plain(c: &mut Criterion) {
    let mut g = c.benchmark_group("plain");
    let f = fence("call-0");
    let mut plain =
        SessionManager::new(MonotonicClock::new(), ManagerConfig::default()).expect("manager");
    plain.open(f.clone(), options()).expect("open");
    g.throughput(Throughput::Elements(1));
    g.bench_function("append_one_thread", |b| {
        b.iter(|| black_box(plain.append(black_box(&f), MODE).expect("append")));
    });
    g.finish();
}

criterion_group!(benches, shared, mutex, plain);
criterion_main!(benches);
