//! The device main loop on embassy: one voice session in an async task on
//! embassy's executor, its time from embassy-time (a SysTick driver,
//! `driver.rs`) through `duplex-core`'s `EmbassyClock`, its image saved to
//! flash through `duplex-flash` at each state change (the flash is a host
//! file here: `duplex_on_target::hostflash`, whose async `NorFlash` the
//! task awaits).
//!
//! The session streams a 20 ms chunk per `Timer` tick, gets an answer, is
//! barged in on, loses its link for 500 ms and resumes, streams again, and
//! closes; the flash is erased at the end.
//!
//! Run it: `cargo run --release --example embassy --features embassy
//! --target thumbv7em-none-eabihf` from `tests/on-target`. Under
//! `-icount` the output is deterministic; `run` compares it with
//! `golden/embassy.txt`.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

mod driver;

use duplex_core::profile::{device, Device as DeviceProfile};
use duplex_core::*;
use duplex_flash::{buffer_len, SnapshotFlash};
use duplex_on_target::hostflash::{HostFlash, PAGE, PAGES, WORD};
use duplex_on_target::{exit, hprintln, CORE_HZ};
use embassy_executor::Spawner;
use embassy_time::Timer;

type Device = duplex_core::AnySession<DeviceProfile>;
type DFence = Fence<Id<{ device::ID_LEN }>>;
type Store =
    SnapshotFlash<HostFlash, { buffer_len(Session::<Open, DeviceProfile>::SNAPSHOT_MAX, WORD) }>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn flash_error() -> Error {
    Error::Full {
        table: Table::Resources,
        capacity: 0,
    }
}

/// Saves `s` after the state change `what`.
async fn save(store: &mut Store, s: &Device, what: &str) -> Result<(), Error> {
    let mut image = [0u8; Session::<Open, DeviceProfile>::SNAPSHOT_MAX];
    let image = s.snapshot(&mut image).map_err(|_| flash_error())?;
    let saved = store.save(image).await.map_err(|_| flash_error())?;
    hprintln!(
        "[{}] {}: saved to flash, {} bytes",
        EmbassyClock.now().as_millis(),
        what,
        saved.flash_bytes
    );
    Ok(())
}

/// Streams `chunks` chunks, one each 20 ms of embassy time.
async fn stream(s: &mut Device, f: &DFence, chunks: u32) -> Result<u64, Error> {
    let mut seq = 0;
    for _ in 0..chunks {
        Timer::after_millis(20).await;
        s.touch(f, Activity::Append, EmbassyClock.now())?;
        seq = s.append(f, AUDIO)?.seq;
    }
    Ok(seq)
}

async fn life(store: &mut Store) -> Result<(), Error> {
    let clock = EmbassyClock;
    let turn0: DFence = Fence::new(Id::new("kitchen")?, 1);
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(2))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let mut s = Device::from(Session::<Open, DeviceProfile>::open_with_capacities(
        turn0.clone(),
        opts,
        clock.now(),
    )?);
    hprintln!("[{}] open kitchen", clock.now().as_millis());
    save(store, &s, "open").await?;

    let seq = stream(&mut s, &turn0, 10).await?;
    hprintln!(
        "[{}] streamed 10 chunks, seq {}",
        clock.now().as_millis(),
        seq
    );
    s.bind(&turn0, 0, &Id::new("tts-1")?)?;
    let turn1 = turn0.clone().with_epoch(1);
    let cancelled = s.cancel(&turn0, &turn1)?;
    hprintln!(
        "[{}] barge-in: cancelled {}",
        clock.now().as_millis(),
        cancelled.as_slice()[0].as_str()
    );
    save(store, &s, "barge-in").await?;

    s.detach(&turn1, clock.now())?;
    hprintln!(
        "[{}] link down, deadline {}",
        clock.now().as_millis(),
        s.deadline().map_or(0, Instant::as_millis)
    );
    save(store, &s, "link down").await?;
    Timer::after_millis(500).await;
    let generation = s.resume(&turn1, 0, clock.now())?;
    hprintln!(
        "[{}] link up, resumed at generation {}",
        clock.now().as_millis(),
        generation
    );
    save(store, &s, "link up").await?;
    let seq = stream(&mut s, &turn1, 5).await?;
    hprintln!(
        "[{}] streamed 5 chunks, seq {}",
        clock.now().as_millis(),
        seq
    );

    let released = s.close(&turn1, CloseReason::ClientClose)?;
    store.erase().await.map_err(|_| flash_error())?;
    hprintln!(
        "[{}] closed, released {} requests; flash erased",
        clock.now().as_millis(),
        released.len()
    );
    Ok(())
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    let Some(core) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    driver::start(core.SYST, CORE_HZ);
    let Some(flash) = HostFlash::open() else {
        hprintln!("no flash");
        exit(false)
    };
    let Ok(mut store) = Store::new(flash, 0..(PAGE * PAGES) as u32) else {
        exit(false)
    };
    // A new device: whatever an earlier run left goes.
    if store.erase().await.is_err() {
        exit(false)
    }
    hprintln!("[{}] boot on embassy", EmbassyClock.now().as_millis());
    let ok = life(&mut store).await;
    if let Err(e) = &ok {
        hprintln!("error: {}", e);
    }
    exit(ok.is_ok())
}
