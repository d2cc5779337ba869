//! A voice device's main loop, on the host: what firmware over the device
//! profile does, with a `Clock` over a tick counter (a timer peripheral on
//! the device; here a counter the loop advances by 1 ms ticks).
//!
//! The device streams 20 ms microphone chunks, the model answers, the user
//! barges in, the link drops and comes back within the grace, and the
//! session is kept as a snapshot image (what a device writes to flash or
//! keeps across a reset) and restored from it.
//!
//! `cargo run -p duplex-core --example device --features serde`

use core::cell::Cell;

use duplex_core::profile::Device;
use duplex_core::{
    AnySession, Clock, CloseReason, Duration, Fence, Id, InputMode, Instant, LeaseConfig, Modes,
    Open, OpenOptions, Session,
};

/// A clock over a free-running millisecond tick counter (SysTick, an RTC):
/// the core never reads time itself, it is handed `now`.
struct TickClock<'a> {
    ticks: &'a Cell<u64>,
}

impl Clock for TickClock<'_> {
    fn now(&self) -> Instant {
        Instant::from_millis(self.ticks.get())
    }
}

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ticks = Cell::new(0);
    let clock = TickClock { ticks: &ticks };
    let wait = |ms: u64| ticks.set(ticks.get() + ms);

    // 30 s idle TTL, 5 s to come back after a dropped link.
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let turn0 = Fence::new(Id::new("kitchen-speaker")?, 0);
    let mut session =
        Session::<Open, Device>::open_with_capacities(turn0.clone(), opts, clock.now())?;
    println!("opened {} at {}", session.id(), clock.now());

    // The user speaks: one chunk each 20 ms.
    for _ in 0..10 {
        let appended = session.append(&turn0, AUDIO)?;
        wait(20);
        if appended.seq % 5 == 0 {
            println!("chunk {} appended", appended.seq);
        }
    }
    // The model answers on stage 0.
    session.bind(&turn0, 0, &Id::new("tts-1")?)?;

    // Barge-in: the user talks over the answer; epoch 1 cancels it, once.
    let turn1 = turn0.clone().with_epoch(1);
    let cancelled = session.cancel(&turn0, &turn1)?;
    println!("barge-in cancelled {} request(s)", cancelled.len());
    if session.append(&turn0, AUDIO).is_err() {
        println!("a late chunk of epoch 0 is refused");
    }
    session.append(&turn1, AUDIO)?;

    // The link drops; the session waits for the grace, not the idle TTL.
    let detached = session.detach(&turn1, clock.now()).map_err(|r| r.error)?;
    if let Some(deadline) = detached.deadline() {
        println!(
            "link lost at {}; expires at {deadline} unless resumed",
            clock.now()
        );
    }
    wait(1_500);
    let (mut session, generation) = detached
        .resume(&turn1, 0, clock.now())
        .map_err(|r| r.error)?;
    println!("resumed after 1.5 s, lease generation {generation}");
    session.append(&turn1, AUDIO)?;

    // Kept across a reset: a snapshot image in a fixed buffer, no heap.
    let mut buf = [0u8; Session::<Open, Device>::SNAPSHOT_MAX];
    let image = session.snapshot(&mut buf)?;
    println!(
        "snapshot: {} bytes (at most {})",
        image.len(),
        Session::<Open, Device>::SNAPSHOT_MAX
    );
    let restored = AnySession::<Device>::restore_with_capacities(image)?;
    let session = restored
        .into_open()
        .map_err(|_| "the image held a session that is not open")?;
    println!(
        "restored {} at input seq {}",
        session.id(),
        session.input_seq()
    );

    // The user says goodbye.
    let (closed, released) = session
        .begin_close(&turn1, CloseReason::ClientClose)
        .map_err(|r| r.error)?
        .finalize();
    println!(
        "closed ({}), {} request(s) released at close",
        closed.close_reason().as_str(),
        released.len()
    );
    Ok(())
}
