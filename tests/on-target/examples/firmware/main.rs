//! A device main loop to copy: one voice session on a Cortex-M4F.
//!
//! - time comes from SysTick (`clock.rs`), one tick a millisecond;
//! - a simulated link streams a 20 ms audio chunk per tick of the loop,
//!   drops for a while and comes back (detach, then resume with the lease
//!   generation);
//! - the user barges in: the answer's request is cancelled and the old
//!   turn's late chunk is refused;
//! - at each state change (open, barge-in, link down, link up) the session
//!   is saved to flash through `duplex-flash` (here the board's flash is a
//!   host file, `duplex_on_target::hostflash`), never on a 20 ms chunk;
//! - before a reset the session is snapshotted into a RAM buffer that the
//!   reset does not clear (`.uninit`), the chip really resets
//!   (`SCB::sys_reset`), and the session is restored after it, with the
//!   clock carried over;
//! - then the power is cut: RAM is gone, and the next cold boot restores
//!   the session from flash, as of its last state change, and carries on.
//!
//! Run it twice: `cargo run --release --example firmware --features flash
//! --target thumbv7em-none-eabihf` from `tests/on-target` (QEMU, Netduino
//! Plus 2); the first run ends in the power cut, the second boots from the
//! flash file it left. Under `-icount` the output is deterministic; `run`
//! runs it twice and compares both with `golden/firmware.txt`.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

mod clock;

use core::mem::MaybeUninit;

use clock::SysTickClock;
use duplex_core::profile::{device, Device as DeviceProfile};
use duplex_core::*;
use duplex_flash::{buffer_len, SnapshotFlash};
use duplex_on_target::hostflash::{HostFlash, PAGE, PAGES, WORD};
use duplex_on_target::{entry, exit, hprintln, CORE_HZ};
use embassy_futures::block_on;

type Device = duplex_core::AnySession<DeviceProfile>;
type DFence = Fence<Id<{ device::ID_LEN }>>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;
const CHUNK_MS: u64 = 20;
const MAGIC: u32 = 0xD00B_1E5E;
const IMAGE_MAX: usize = Session::<Open, DeviceProfile>::SNAPSHOT_MAX;

/// The session in flash: saved at each state change, loaded at a cold boot.
struct Kept {
    store: SnapshotFlash<HostFlash, { buffer_len(IMAGE_MAX, WORD) }>,
    image: [u8; IMAGE_MAX],
}

impl Kept {
    fn open() -> Option<Self> {
        let store = SnapshotFlash::new(HostFlash::open()?, 0..(PAGE * PAGES) as u32).ok()?;
        Some(Kept {
            store,
            image: [0; IMAGE_MAX],
        })
    }

    /// Saves `s` after the state change `what`.
    fn save(&mut self, s: &Device, clock: &SysTickClock, what: &str) -> Result<(), Error> {
        let image = s.snapshot(&mut self.image).map_err(|_| flash_error())?;
        let saved = block_on(self.store.save(image)).map_err(|_| flash_error())?;
        hprintln!(
            "[{}] {}: saved to flash, {} bytes",
            clock.now().as_millis(),
            what,
            saved.flash_bytes
        );
        Ok(())
    }
}

/// The firmware's one error for a flash that failed (it prints the error
/// and stops).
fn flash_error() -> Error {
    Error::Full {
        table: Table::Resources,
        capacity: 0,
    }
}

/// What survives the reset: a session image and the time it was taken.
#[repr(C)]
struct Saved {
    magic: u32,
    len: u32,
    millis: u64,
    image: [u8; Session::<Open, DeviceProfile>::SNAPSHOT_MAX],
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

fn before_reset(clock: &SysTickClock, kept: &mut Kept) -> Result<(), Error> {
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
    kept.save(&s, clock, "open")?;

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
    kept.save(&s, clock, "barge-in")?;
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
    kept.save(&s, clock, "link down")?;
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
    kept.save(&s, clock, "link up")?;
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
    let (_, seq) = carry_on(&mut s, clock, "")?;
    hprintln!(
        "[{}] streamed 5 chunks, seq {}; the power is cut",
        clock.now().as_millis(),
        seq
    );
    Ok(())
}

/// A restored session, said `how` it came back, streams 5 chunks: its
/// fence, and the last chunk's seq.
fn carry_on(s: &mut Device, clock: &SysTickClock, how: &str) -> Result<(DFence, u64), Error> {
    let f = s.fence().clone();
    hprintln!(
        "[{}] {}restored {} epoch {}, seq {}, generation {}",
        clock.now().as_millis(),
        how,
        f.session.as_str(),
        f.epoch,
        s.as_open()
            .map_or(0, duplex_core::Session::<Open, DeviceProfile>::input_seq),
        s.lease_generation()
    );
    let seq = stream(s, &f, clock, 5)?;
    Ok((f, seq))
}

/// A cold boot that found a session in flash: the power was cut. The
/// session comes back as of its last state change (the chunks since were
/// not saved: the client sends them again), the clock from its last
/// activity; it streams and says goodbye, and the flash is erased.
fn after_power_cut(
    kept: &mut Kept,
    image_len: usize,
    start: &mut Option<SysTickClock>,
    syst: cortex_m::peripheral::SYST,
) -> Result<(), Error> {
    let mut s =
        Device::restore_with_capacities(&kept.image[..image_len]).map_err(|_| flash_error())?;
    let since = s
        .as_open()
        .map(duplex_core::Session::<Open, DeviceProfile>::last_activity)
        .unwrap_or(Instant::ZERO);
    let clock = start.insert(SysTickClock::start(syst, CORE_HZ, since.as_millis()));
    let (f, seq) = carry_on(&mut s, clock, "cold boot, from flash: ")?;
    hprintln!(
        "[{}] streamed 5 chunks, seq {}",
        clock.now().as_millis(),
        seq
    );
    let released = s.close(&f, CloseReason::ClientClose)?;
    block_on(kept.store.erase()).map_err(|_| flash_error())?;
    hprintln!(
        "[{}] closed, released {} requests; flash erased",
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
    let Some(mut kept) = Kept::open() else {
        hprintln!("no flash");
        exit(false)
    };
    let saved = saved();
    let resumed = saved.magic == MAGIC;
    if !resumed {
        // A cold boot: a session in flash means the power was cut.
        let found = match block_on(kept.store.load()) {
            Ok(Some(image)) => {
                kept.image[..image.len()].copy_from_slice(image);
                Some(image.len())
            }
            Ok(None) => None,
            Err(_) => {
                hprintln!("the flash could not be read");
                exit(false)
            }
        };
        if let Some(len) = found {
            let mut clock = None;
            let ok = after_power_cut(&mut kept, len, &mut clock, core.SYST);
            if let Err(e) = &ok {
                hprintln!("error: {}", e);
            }
            exit(ok.is_ok())
        }
    }
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
    match before_reset(&clock, &mut kept) {
        Ok(()) => cortex_m::peripheral::SCB::sys_reset(),
        Err(e) => {
            hprintln!("error: {}", e);
            exit(false)
        }
    }
}
