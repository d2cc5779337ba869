//! A device session kept in flash across power cuts, on the emulated board.
//!
//! The board's flash is a file on the host (`flash.bin` in QEMU's working
//! folder, 4 pages of 1 KiB, written through semihosting with NOR
//! semantics: a write can only clear bits, an erase sets a page to 0xFF),
//! so it outlives the emulator. The image boots, restores the session the
//! flash holds (or opens one), and then streams: each 20 ms chunk appended,
//! the link dropped and resumed every 7th chunk, and the session saved
//! through `duplex-flash` after every change, printing `saving N` before a
//! save and `saved N` after it. `powercut.py` kills QEMU (SIGKILL) at
//! random points and boots it again: each boot must restore the last image
//! saved or the one being saved.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use duplex_core::profile::Device;
use duplex_core::{AnySession, Session};
use duplex_core::{
    Duration, Fence, Id, InputMode, Instant, LeaseConfig, Modes, Open, OpenOptions, StateKind,
};
use duplex_flash::{buffer_len, SnapshotFlash};
use duplex_on_target::hostflash::{HostFlash, PAGE, PAGES, WORD};
use duplex_on_target::{entry, exit, hprintln};
use embassy_futures::block_on;
const IMAGE_MAX: usize = Session::<Open, Device>::SNAPSHOT_MAX;
const BUF: usize = buffer_len(IMAGE_MAX, WORD);
const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn state(kind: StateKind) -> &'static str {
    match kind {
        StateKind::Open => "open",
        StateKind::Detached => "detached",
        StateKind::Closing => "closing",
        StateKind::Closed => "closed",
    }
}

#[entry]
fn main() -> ! {
    let Some(flash) = HostFlash::open() else {
        hprintln!("no flash.bin in the emulator's folder");
        exit(false)
    };
    let Ok(mut store) = SnapshotFlash::<_, BUF>::new(flash, 0..(PAGE * PAGES) as u32) else {
        hprintln!("the flash range cannot hold the map");
        exit(false)
    };
    let Ok(id) = Id::new("mic-0") else {
        exit(false)
    };
    let fence = Fence::new(id, 0);
    let restored = match block_on(store.load()) {
        Ok(Some(image)) => match AnySession::<Device>::restore_with_capacities(image) {
            Ok(s) => Some(s),
            Err(e) => {
                hprintln!("boot: the stored image was refused: {}", e);
                exit(false)
            }
        },
        Ok(None) => None,
        Err(_) => {
            hprintln!("boot: the flash could not be read");
            exit(false)
        }
    };
    let mut session = match restored {
        Some(mut any) => {
            let was = state(any.kind());
            if any.kind() == StateKind::Detached {
                let generation = any.lease_generation();
                if any.resume(&fence, generation, Instant::ZERO).is_err() {
                    hprintln!("boot: the restored session did not resume");
                    exit(false)
                }
            }
            match any.into_open() {
                Ok(open) => {
                    hprintln!("boot: restored {} {}", open.input_seq(), was);
                    open
                }
                Err(_) => {
                    hprintln!("boot: the restored session is not open");
                    exit(false)
                }
            }
        }
        None => {
            hprintln!("boot: fresh");
            let Ok(lease) = LeaseConfig::new(None, Duration::from_secs(3600)) else {
                exit(false)
            };
            let opts = OpenOptions::default()
                .modes(Modes::only(AUDIO))
                .lease(lease);
            match Session::<Open, Device>::open_with_capacities(fence.clone(), opts, Instant::ZERO)
            {
                Ok(s) => s,
                Err(_) => exit(false),
            }
        }
    };
    let mut image = [0u8; IMAGE_MAX];
    for n in 1..=100_000u32 {
        let Ok(appended) = session.append(&fence, AUDIO) else {
            hprintln!("append refused");
            exit(false)
        };
        let seq = appended.seq;
        // Every 7th chunk the link drops: saved detached, then resumed.
        let any = if n % 7 == 0 {
            match session.detach(&fence, Instant::ZERO) {
                Ok(d) => AnySession::<Device>::from(d),
                Err(_) => exit(false),
            }
        } else {
            AnySession::<Device>::from(session)
        };
        let Ok(bytes) = any.snapshot(&mut image) else {
            exit(false)
        };
        hprintln!("saving {} {}", seq, state(any.kind()));
        if block_on(store.save(bytes)).is_err() {
            hprintln!("save failed");
            exit(false)
        }
        hprintln!("saved {}", seq);
        let mut any = any;
        if any.kind() == StateKind::Detached {
            let generation = any.lease_generation();
            if any.resume(&fence, generation, Instant::ZERO).is_err() {
                exit(false)
            }
        }
        session = match any.into_open() {
            Ok(open) => open,
            Err(_) => exit(false),
        };
    }
    exit(true)
}
