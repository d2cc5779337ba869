//! A million sessions in one process: what a server holding them pays.
//!
//! Opens `--sessions` (1,000,000 by default) sessions in a `SharedManager`
//! (default profile, inline storage, 30 s idle TTL and 5 s grace), then
//! measures, with all of them resident: an append and a touch (each on
//! sessions spread over the whole set), the resident memory (Linux's
//! `VmRSS`), and the reaper's round when 1,000 of them lost their link and
//! their grace ran out (the round visits what is due, not the million).
//!
//! `cargo run --release -p duplex-std --example million [-- SESSIONS]`

// Timing arithmetic for a printed report.
#![allow(clippy::cast_precision_loss)]

use std::time::Instant as WallClock;

use duplex_core::{
    Activity, Duration, Fence, Id, InputMode, LeaseConfig, ManualClock, Modes, OpenOptions,
};
use duplex_std::{ManagerConfig, Sessions, SharedManager};

const AUDIO: InputMode = InputMode::AppendAudioChunk;

/// Resident memory of this process in MiB (Linux), if it can be read.
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

fn fence(i: usize) -> Result<Fence, duplex_core::Error> {
    Ok(Fence::new(Id::new(&format!("call-{i:07}"))?, 0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sessions: usize = match std::env::args().nth(1) {
        Some(n) => n.parse().map_err(|e| format!("SESSIONS: {e}"))?,
        None => 1_000_000,
    };
    let clock = ManualClock::default();
    let m = SharedManager::new(&clock, ManagerConfig::default())?;
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let before = rss_mib();

    let started = WallClock::now();
    for i in 0..sessions {
        m.open(fence(i)?, opts.clone())?;
    }
    let open_ns = started.elapsed().as_nanos() as f64 / sessions as f64;
    println!("sessions          {}", m.len());
    println!("open              {open_ns:.0} ns a session (fence and id built in the loop)");
    if let (Some(before), Some(after)) = (before, rss_mib()) {
        println!(
            "resident          {:.0} MiB, {:.0} bytes a session",
            after - before,
            (after - before) * 1024.0 * 1024.0 / sessions as f64
        );
    }

    // Operations with every session resident, spread over the whole set
    // (a stride coprime to the count visits each shard and slot).
    let fences: Vec<Fence> = (0..100_000)
        .map(|k| fence((k * 7_919) % sessions))
        .collect::<Result<_, _>>()?;
    let started = WallClock::now();
    for f in &fences {
        m.append(f, AUDIO)?;
    }
    let append_ns = started.elapsed().as_nanos() as f64 / fences.len() as f64;
    let started = WallClock::now();
    for f in &fences {
        m.touch(f, Activity::Heartbeat)?;
    }
    let touch_ns = started.elapsed().as_nanos() as f64 / fences.len() as f64;
    println!("append            {append_ns:.0} ns (100,000 sessions spread over the set)");
    println!("touch             {touch_ns:.0} ns");

    // 1,000 clients lose their link; the grace runs out.
    let dropped: Vec<Fence> = (0..1_000)
        .map(|k| fence((k * 997) % sessions))
        .collect::<Result<_, _>>()?;
    for f in &dropped {
        m.detach(f)?;
    }
    clock.advance(Duration::from_secs(6));
    let started = WallClock::now();
    let expired = m.collect_expired([]);
    let reap = started.elapsed();
    println!(
        "reaper round      {} expired of {} in {:.2} ms (what is due, not the set)",
        expired.len(),
        m.len(),
        reap.as_secs_f64() * 1e3
    );
    assert_eq!(expired.len(), dropped.len());
    let finalized = m.finalize_closed(expired.iter().map(|e| &e.session));
    assert_eq!(finalized.len(), dropped.len());
    Ok(())
}
