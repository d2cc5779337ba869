//! A scripted barge-in scenario logged through defmt: the core's own
//! transition lines (feature `defmt`, built with `DEFMT_LOG=debug`) and the
//! firmware's, decoded on the host by defmt-print and compared with
//! `tests/on-target/golden/scenario.txt`, so a changed log line is a
//! reviewed change.
#![no_std]
#![no_main]

use duplex_core::profile::Device;
use duplex_core::*;
use duplex_on_target::{entry, exit};

/// The device profile: what a Cortex-M0 with 16 KB of RAM runs (a
/// typed transition moves the session into a new value, and the compiler
/// may keep several of them in one frame).
type DeviceSession<S = Open> = Session<S, Device>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn scenario() -> Result<(), Error> {
    let clock = ManualClock::new(Instant::ZERO);
    let turn0 = Fence::new(profile::IdOf::<Device>::new("kitchen")?, 1);
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let mut session = DeviceSession::open_with_capacities(turn0.clone(), opts, clock.now())?;
    defmt::info!("opened {}", session.fence());
    for _ in 0..3 {
        let appended = session.append(&turn0, AUDIO)?;
        defmt::info!("chunk {}", appended);
        clock.advance(Duration::from_millis(20));
    }
    session.bind(&turn0, 0, &profile::IdOf::<Device>::new("tts-1")?)?;
    defmt::info!("answer bound on stage 0");

    let turn1 = turn0.clone().with_epoch(1);
    let cancelled = session.cancel(&turn0, &turn1)?;
    defmt::info!("barge-in cancelled {}", cancelled.as_slice());
    if let Err(refused) = session.append(&turn0, AUDIO) {
        defmt::warn!("late chunk refused: {}", refused);
    }

    clock.advance(Duration::from_millis(100));
    let detached = session.detach(&turn1, clock.now())?;
    defmt::info!("link lost at {}", detached.state().since());
    clock.advance(Duration::from_secs(1));
    let (mut session, generation) = detached.resume(&turn1, 0, clock.now())?;
    defmt::info!("resumed, generation {=u64}", generation);
    session.append(&turn1, AUDIO)?;
    let (closed, released) = session.close(&turn1, CloseReason::ClientClose)?;
    defmt::info!(
        "closed: {}, released {}",
        closed.close_reason(),
        released.as_slice()
    );
    Ok(())
}

#[entry]
fn main() -> ! {
    match scenario() {
        Ok(()) => {
            defmt::info!("scenario done");
            exit(true)
        }
        Err(e) => {
            defmt::error!("scenario failed: {}", e);
            exit(false)
        }
    }
}
