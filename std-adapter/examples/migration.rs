//! A session moved between two hosts: exported from one manager, carried
//! as a snapshot image (the bytes a host sends to another, or keeps
//! across a restart), restored and imported into another manager under a
//! new incarnation. Whatever still carries the old incarnation (a late
//! message of the old host's connection) is refused there.
//!
//! `cargo run -p duplex-std --example migration --features serde`

use duplex_core::{AnySession, Fence, Id, InputMode, ManualClock, Modes, OpenOptions, StateKind};
use duplex_std::{ManagerConfig, Sessions, SharedManager};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node_a = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;
    let node_b = SharedManager::new(ManualClock::default(), ManagerConfig::default())?;

    // On node A: a call streams, the engine takes a request.
    let on_a = Fence::new(Id::new("call-7")?, 0);
    let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
    node_a.open(on_a.clone(), opts)?;
    for _ in 0..3 {
        node_a.append(&on_a, InputMode::AppendAudioChunk)?;
    }
    node_a.bind(&on_a, 0, "llm-1")?;

    // Node A hands the session off: out of its manager, into bytes. The
    // image carries the session and the requests it owns; nothing is
    // released on node A.
    let session = node_a.export("call-7")?;
    let mut buf = vec![0u8; 4096];
    let image = session.snapshot(&mut buf)?.to_vec();
    println!(
        "node A exported call-7 ({} bytes) and holds {} session(s)",
        image.len(),
        node_a.len()
    );

    // On node B: the image is validated in full before a session exists,
    // then imported under incarnation 1.
    let restored = AnySession::restore(&image)?;
    assert_eq!(restored.kind(), StateKind::Open);
    let on_b = node_b.import(restored, on_a.incarnation + 1)?;
    println!(
        "node B imported {} at incarnation {}, input seq {}",
        on_b.session,
        on_b.incarnation,
        node_b
            .inspect(&on_b.session)
            .map_or(0, |view| view.input_seq)
    );

    // The old host's fence is refused; the new one continues the turn.
    let late = node_b.append(&on_a, InputMode::AppendAudioChunk);
    println!(
        "a late chunk at incarnation 0: {}",
        late.map_or_else(|e| e.kind().as_str().to_owned(), |_| "applied".into())
    );
    let next = node_b.append(&on_b, InputMode::AppendAudioChunk)?;
    println!("the next chunk at incarnation 1: seq {}", next.seq);

    // The engine request came along and is released once, on node B.
    let released = node_b.close(&on_b, duplex_core::CloseReason::ClientClose)?;
    println!(
        "closed on node B: {} engine request(s) released",
        released.map_or(0, |ids| ids.len())
    );
    Ok(())
}
