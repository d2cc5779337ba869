//! A device main loop to copy: one voice session on a Cortex-M4F.
//!
//! - time comes from SysTick (`clock.rs`), one tick a millisecond;
//! - a simulated link streams a 20 ms audio chunk per tick of the loop,
//!   drops for a while and comes back (detach, then resume with the lease
//!   generation);
//! - the user barges in: the answer's request is cancelled and the old
//!   turn's late chunk is refused;
//! - before a reset the session is snapshotted into a RAM buffer that the
//!   reset does not clear (`.uninit`), the chip really resets
//!   (`SCB::sys_reset`), and the session is restored after it, with the
//!   clock carried over.
//!
//! Run it: `cargo run --release --example firmware --target thumbv7em-none-eabihf`
//! from `tests/on-target` (QEMU, Netduino Plus 2). Under `-icount` the
//! output is deterministic; `run` compares it with `golden/firmware.txt`.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

mod clock;

use core::mem::MaybeUninit;

use clock::SysTickClock;
use duplex_core::profile::{device, DeviceSession};
use duplex_core::*;
use duplex_on_target::{entry, exit, hprintln, CORE_HZ};

type Device = duplex_core::profile::DeviceAnySession;
type DFence = Fence<{ device::ID_LEN }>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;
const CHUNK_MS: u64 = 20;
const MAGIC: u32 = 0xD00B_1E5E;

/// What survives the reset: a session image and the time it was taken.
#[repr(C)]
struct Saved {
    magic: u32,
    len: u32,
    millis: u64,
    image: [u8; DeviceSession::<Open>::SNAPSHOT_MAX],
}

// Not zeroed by cortex-m-rt at start-up and not reloaded by a reset: the
// only memory that carries the snapshot across `sys_reset`.
#[link_section = ".uninit.duplex"]
#[allow(unsafe_code)]
static mut SAVED: MaybeUninit<Saved> = MaybeUninit::uninit();

fn saved() -> &'static mut Saved {
    // SAFETY: single-threaded firmware, called once per boot before any
    // other access; every bit pattern is a valid `Saved` (integers and
    // bytes), and the magic word tells a real image from power-on noise.
    #[allow(unsafe_code)]
    unsafe {
        (*core::ptr::addr_of_mut!(SAVED)).assume_init_mut()
    }
}

/// Streams `chunks` 20 ms chunks, one per 20 ms of SysTick time.
fn stream(s: &mut Device, f: &DFence, clock: &SysTickClock, chunks: u32) -> Result<u64, Error> {
    let mut seq = 0;
    for _ in 0..chunks {
        let due = clock.now() + Duration::from_millis(CHUNK_MS);
        while clock.now() < due {
            cortex_m::asm::wfi();
        }
        s.touch(f, Activity::Append, clock.now())?;
        seq = s.append(f, AUDIO)?.seq;
    }
    Ok(seq)
}

fn before_reset(clock: &SysTickClock) -> Result<(), Error> {
    let turn0: DFence = Fence::new(Id::new("kitchen")?, 1);
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(2))?;
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let mut s = Device::from(DeviceSession::open_with_capacities(
        turn0.clone(),
        opts,
        clock.now(),
    )?);
    hprintln!("[{}] open kitchen", clock.now().as_millis());

    let seq = stream(&mut s, &turn0, clock, 10)?;
    hprintln!(
        "[{}] streamed 10 chunks, seq {}",
        clock.now().as_millis(),
        seq
    );
    s.bind(&turn0, 0, &Id::new("tts-1")?)?;
    hprintln!("[{}] answer on stage 0: tts-1", clock.now().as_millis());

    // Barge-in: the user talks over the answer.
    let turn1 = turn0.clone().with_epoch(1);
    let cancelled = s.cancel(&turn0, &turn1)?;
    hprintln!(
        "[{}] barge-in: cancelled {}",
        clock.now().as_millis(),
        cancelled.as_slice()[0].as_str()
    );
    if let Err(e) = s.append(&turn0, AUDIO) {
        hprintln!(
            "[{}] late chunk of epoch 0 refused: {}",
            clock.now().as_millis(),
            e
        );
    }

    // The link drops for 500 ms (inside the 2 s grace) and comes back.
    s.detach(&turn1, clock.now())?;
    hprintln!(
        "[{}] link down, deadline {}",
        clock.now().as_millis(),
        s.deadline().map_or(0, Instant::as_millis)
    );
    let back = clock.now() + Duration::from_millis(500);
    while clock.now() < back {
        cortex_m::asm::wfi();
    }
    let generation = s.resume(&turn1, 0, clock.now())?;
    hprintln!(
        "[{}] link up, resumed at generation {}",
        clock.now().as_millis(),
        generation
    );
    let seq = stream(&mut s, &turn1, clock, 5)?;
    hprintln!(
        "[{}] streamed 5 chunks, seq {}",
        clock.now().as_millis(),
        seq
    );

    // Snapshot into the reset-proof buffer, then reset the chip.
    let saved = saved();
    let len = s
        .snapshot(&mut saved.image)
        .map_err(|_| Error::Full {
            table: Table::Resources,
            capacity: 0,
        })?
        .len();
    saved.len = len as u32;
    saved.millis = clock.now().as_millis();
    saved.magic = MAGIC;
    hprintln!(
        "[{}] snapshot: {} bytes; resetting",
        clock.now().as_millis(),
        len
    );
    Ok(())
}

fn after_reset(clock: &SysTickClock, saved: &Saved) -> Result<(), Error> {
    let image = saved.image.get(..saved.len as usize).unwrap_or_default();
    let Ok(mut s) = Device::restore_with_capacities(image) else {
        hprintln!(
            "[{}] snapshot unreadable: start a new session",
            clock.now().as_millis()
        );
        return Ok(());
    };
    let f = s.fence().clone();
    hprintln!(
        "[{}] restored {} epoch {}, seq {}, generation {}",
        clock.now().as_millis(),
        f.session.as_str(),
        f.epoch,
        s.as_open().map_or(0, DeviceSession::input_seq),
        s.lease_generation()
    );
    let seq = stream(&mut s, &f, clock, 5)?;
    hprintln!(
        "[{}] streamed 5 chunks, seq {}",
        clock.now().as_millis(),
        seq
    );
    let released = s.close(&f, CloseReason::ClientClose)?;
    hprintln!(
        "[{}] closed, released {} requests",
        clock.now().as_millis(),
        released.len()
    );
    Ok(())
}

#[entry]
fn main() -> ! {
    let Some(core) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    let saved = saved();
    let resumed = saved.magic == MAGIC;
    // After a reset the clock continues from the time of the snapshot.
    let start = if resumed { saved.millis } else { 0 };
    let clock = SysTickClock::start(core.SYST, CORE_HZ, start);
    if resumed {
        saved.magic = 0;
        hprintln!("[{}] boot after reset", clock.now().as_millis());
        let ok = after_reset(&clock, saved);
        if let Err(e) = &ok {
            hprintln!("error: {}", e);
        }
        exit(ok.is_ok())
    }
    hprintln!("[0] boot");
    match before_reset(&clock) {
        Ok(()) => cortex_m::peripheral::SCB::sys_reset(),
        Err(e) => {
            hprintln!("error: {}", e);
            exit(false)
        }
    }
}
