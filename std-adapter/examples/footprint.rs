//! Memory per session and allocations per steady-state operation, measured
//! with a counting global allocator (not estimated).
//!
//! `cargo run --release -p duplex-std --example footprint`
//!
//! Opens 10,000 sessions through the manager, each with 4 stage bindings and
//! 8 completed appends (the seed benchmark's `bytes_per_session` workload),
//! and prints `bytes_per_session` (heap bytes held plus the manager's inline
//! bytes, per session). Then runs the steady-state operations (append,
//! touch, bind/release, completed lookup and record, cancel, collect_expired
//! with nothing due) and prints `allocations_per_op`.
//!
//! Then the server profile at a vllm-omni host's typical load (session and
//! request ids of 46 to 74 bytes, 4 bindings, 8 completed appends), with
//! inline storage and with `Heap` storage: bytes per session (requested
//! bytes held plus the manager's inline bytes) and heap blocks per session
//! (an allocator adds its own header to each).

// Byte and count arithmetic for a printed report.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap,
    clippy::cast_possible_truncation
)]

use allocation_counter::measure;
use duplex_core::profile::server;
use duplex_core::profile::Server;
use duplex_core::storage::{Heap, Inline, Storage};
use duplex_core::{
    Activity, Fence, Finality, Id, InputMode, Instant, ManualClock, Modes, OpenOptions,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, SessionManager};

const SESSIONS: usize = 10_000;
const AUDIO: InputMode = InputMode::AppendAudioChunk;

type Manager = SessionManager<ManualClock>;

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

/// A server-profile manager with storage `M`.
type ServerManager<M> = SessionManager<ManualClock, Server<(), (), M>>;

/// An id of 46 to 74 bytes, as vllm-omni's session and request ids run
/// (the Python bench's `long_id`).
fn long_id(prefix: &str, i: usize) -> Id<{ server::ID_LEN }> {
    let body = format!(
        "{prefix}-{i:08}-6a3b-4f0e-9a57-2d8c1e4b7f30-{}",
        "x".repeat(28)
    );
    Id::new(&body[..body.len().min(46 + i % 29)]).expect("valid id")
}

/// Bytes and heap blocks per session at the typical load, storage `M`.
fn typical<M: Storage>(sessions: usize) -> (f64, f64) {
    let fences: Vec<_> = (0..sessions)
        .map(|i| Fence::new(long_id("session", i), 0))
        .collect();
    let requests: Vec<Vec<_>> = (0..sessions)
        .map(|i| (0..4).map(|st| long_id(&format!("req{st}"), i)).collect())
        .collect();
    let ops: Vec<_> = (0..8)
        .map(|k| Id::new(&format!("op-{k}")).expect("valid id"))
        .collect();
    let mut manager: Option<ServerManager<M>> = None;
    let held = measure(|| {
        let mut m = ServerManager::<M>::with_capacities(
            ManualClock::new(Instant::ZERO),
            ManagerConfig::default(),
        )
        .expect("manager");
        for (f, requests) in fences.iter().zip(&requests) {
            let key = m
                .open_keyed(f.clone(), OpenOptions::default().modes(Modes::only(AUDIO)))
                .expect("open");
            for (stage, request) in requests.iter().enumerate() {
                m.update_at(key, |s| s.bind(f, stage as u32, request))
                    .expect("listed")
                    .expect("bind");
            }
            for (k, op) in ops.iter().enumerate() {
                m.update_at(key, |s| {
                    s.record_completed(f, op, AUDIO, Finality::Partial, &[k as i64])
                })
                .expect("listed")
                .expect("record");
            }
        }
        manager = Some(m);
    });
    let inline = std::mem::size_of::<ServerManager<M>>() as f64;
    let bytes = (held.bytes_current as f64 + inline) / sessions as f64;
    let blocks = held.count_current as f64 / sessions as f64;
    drop(manager);
    (bytes, blocks)
}

fn main() {
    let fences: Vec<Fence> = (0..SESSIONS)
        .map(|i| Fence::new(id(&format!("session-{i}")), 0))
        .collect();
    let requests: Vec<String> = (0..4).map(|st| format!("req-{st}")).collect();
    let ops: Vec<String> = (0..8).map(|i| format!("op-{i}")).collect();

    let mut manager: Option<Manager> = None;
    let held = measure(|| {
        let mut m = Manager::new(ManualClock::new(Instant::ZERO), ManagerConfig::default())
            .expect("manager");
        for f in &fences {
            m.open(f.clone(), OpenOptions::default().modes(Modes::only(AUDIO)))
                .expect("open");
            for (stage, request) in requests.iter().enumerate() {
                m.bind(f, stage as u32, request).expect("bind");
            }
            for (i, op) in ops.iter().enumerate() {
                m.record_completed(f, op, AUDIO, Finality::Partial, &[i as i64])
                    .expect("record");
            }
        }
        manager = Some(m);
    });
    let mut m = manager.expect("built above");
    let inline = std::mem::size_of::<Manager>();
    let heap = u64::try_from(held.bytes_current).unwrap_or(0);
    let per_session = (heap as f64 + inline as f64) / SESSIONS as f64;

    let mut count = 0u64;
    let steady = measure(|| {
        for (i, f0) in fences.iter().enumerate() {
            let f = f0.clone().with_epoch(1);
            let next = f.clone().with_epoch(2);
            m.append(&f, AUDIO).expect("append");
            m.touch(&f, Activity::Heartbeat).expect("touch");
            m.bind(&f, 0, "llm").expect("bind");
            m.release(&f.session, &["llm"]).expect("release");
            m.record_completed(&f, "chunk", AUDIO, Finality::Partial, &[i as i64])
                .expect("record");
            m.completed(&f, "chunk", AUDIO, Finality::Partial)
                .expect("lookup");
            m.bind(&f, 1, "tts").expect("bind");
            let cancelled = m.cancel(&f, &next).expect("cancel");
            m.release(&f.session, &cancelled).expect("release");
            let expired = m.collect_expired([]);
            assert!(expired.is_empty());
            count += 10;
        }
    });

    println!("sessions {SESSIONS} (4 bindings, 8 completed appends each)");
    println!("heap_bytes {heap} inline_bytes {inline}");
    println!("bytes_per_session {per_session:.0}");
    println!(
        "steady_state_ops {count} allocations {}",
        steady.count_total
    );
    println!(
        "allocations_per_op {}",
        steady.count_total as f64 / count as f64
    );

    println!("server profile, typical load (46-74 byte ids, 4 bindings, 8 completed appends):");
    for (name, (bytes, blocks)) in [
        ("inline", typical::<Inline>(SESSIONS)),
        ("heap", typical::<Heap>(SESSIONS)),
    ] {
        println!("{name}_bytes_per_session {bytes:.0} heap_blocks_per_session {blocks:.1}");
    }
}
