//! `--threads N`: N worker threads drive one [`SharedManager`] with the
//! same clients, faults and checks as the single-threaded run.
//!
//! The clients are split over N worlds (client `i` lives in world
//! `i % N`), each with its own RNG, request ledger, counters and pending
//! cleanups. Every 20 ms step, the workers step their clients in parallel
//! (their operations interleave in the shared manager), then, between two
//! barriers, the coordinator does the host's work: it reaps once for the
//! whole table and hands each expired session to the world that owns it,
//! and each world finalizes its cleaned-up sessions and delivers its late
//! cancels. Admission is global, so a world checks the shared count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Instant as WallInstant;

use duplex_core::Duration;
use duplex_std::{Expiry, SharedManager};

use crate::backend::{Backend, SimClock};
use crate::client::Client;
use crate::{manager_config, Fault, Report, SimConfig, World, GRACE, IDLE_TTL, STEP_MS};

fn lock<'a, 'c>(world: &'a Mutex<World<'c>>) -> MutexGuard<'a, World<'c>> {
    world.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The world that owns a session: `c{i}` is client `i`'s; bursts are
/// world 0's.
fn owner(session: &str, worlds: usize) -> usize {
    session
        .strip_prefix('c')
        .and_then(|i| i.parse::<usize>().ok())
        .map_or(0, |i| i % worlds)
}

/// The host's reaper for the whole table: collects once, routes each
/// expired session to its world.
fn reap(worlds: &[Mutex<World<'_>>]) {
    let records: Vec<Expiry> = lock(&worlds[0]).collect_due();
    for record in records {
        let t = owner(record.session.as_str(), worlds.len());
        lock(&worlds[t]).expired(record);
    }
}

fn set_step(worlds: &[Mutex<World<'_>>], step: u64) {
    for w in worlds {
        lock(w).step = step;
    }
}

/// Runs the simulation on `config.threads` worker threads.
pub(crate) fn run(config: &SimConfig, mut progress: impl FnMut(u64, u64)) -> Report {
    let started = WallInstant::now();
    let n = config.threads.max(1);
    let clock = SimClock::default();
    let shared = SharedManager::with_shards(&clock, manager_config(config), n * 4)
        .expect("simulation manager config is valid");
    let worlds: Vec<Mutex<World<'_>>> = (0..n)
        .map(|t| {
            let seed = config
                .seed
                .wrapping_add((t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            Mutex::new(World::new(config, seed, &clock, Backend::Shared(&shared)))
        })
        .collect();
    let mut clients: Vec<Vec<Client>> = (0..n).map(|_| Vec::new()).collect();
    for i in 0..config.sessions {
        let t = i % n;
        let client = Client::new(i, &mut lock(&worlds[t]));
        clients[t].push(client);
    }
    let total = config.duration_s.saturating_mul(1_000) / STEP_MS;
    let (start, end) = (Barrier::new(n + 1), Barrier::new(n + 1));
    let done = AtomicBool::new(false);
    let mut clients: Vec<Vec<Client>> = thread::scope(|s| {
        let workers: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(t, mut mine)| {
                let (worlds, start, end, done) = (&worlds, &start, &end, &done);
                s.spawn(move || loop {
                    start.wait();
                    if done.load(Ordering::Acquire) {
                        return mine;
                    }
                    {
                        let mut w = lock(&worlds[t]);
                        for c in &mut mine {
                            c.step(&mut w);
                        }
                    }
                    end.wait();
                })
            })
            .collect();
        let mut step = 0;
        while step < total {
            step += 1;
            clock.advance(Duration::from_millis(STEP_MS));
            set_step(&worlds, step);
            start.wait(); // the workers step their clients
            end.wait(); // all clients stepped
            reap(&worlds);
            for w in &worlds {
                let mut w = lock(w);
                w.finalize_pending();
                w.deliver_late_cancels(false);
            }
            if step % 500 == 0 && config.faults.has(Fault::Burst) {
                lock(&worlds[0]).burst();
            }
            if step % 50 == 0 {
                progress(step, total);
            }
        }
        done.store(true, Ordering::Release);
        start.wait();
        workers
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });

    // The drain, as in the single-threaded run, world by world.
    for (w, mine) in worlds.iter().zip(&mut clients) {
        let mut w = lock(w);
        for c in mine.iter_mut() {
            c.finish(&mut w);
        }
        w.deliver_late_cancels(true);
    }
    let mut step = total;
    let horizon = IDLE_TTL.as_millis() + GRACE.as_millis();
    for _ in 0..=(horizon / STEP_MS) {
        step += 1;
        clock.advance(Duration::from_millis(STEP_MS));
        set_step(&worlds, step);
        reap(&worlds);
        for w in &worlds {
            lock(w).finalize_pending();
        }
    }
    while worlds.iter().any(|w| !lock(w).pending.is_empty()) {
        step += 1;
        set_step(&worlds, step);
        for w in &worlds {
            lock(w).finalize_pending();
        }
    }
    {
        let mut w = lock(&worlds[0]);
        if !w.m.is_empty() {
            let (n, left) = (w.m.len(), w.m.session_ids(5).join(","));
            w.violation(
                &left,
                "end of run",
                "an empty manager (every session closed)",
                format!("{n} sessions left"),
            );
        }
    }

    let mut report = Report {
        seed: config.seed,
        steps: step,
        ..Report::default()
    };
    for w in &worlds {
        let mut w = lock(w);
        w.report.requests = w.ledger.len() as u64;
        w.report.leaked = w.ledger.unreleased() as u64;
        report.absorb(&w.report);
    }
    report.wall_s = started.elapsed().as_secs_f64();
    progress(total, total);
    report
}
