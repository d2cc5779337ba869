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

// Byte and count arithmetic for a printed report.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap,
    clippy::cast_possible_truncation
)]

use allocation_counter::measure;
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
}
