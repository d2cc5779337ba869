//! What keeping the session in flash costs on the device: for a save of a
//! device-profile image through `duplex-flash` and for a boot's load and
//! restore, the deepest stack (by painting) and the executed instructions
//! (under `qemu-system-arm -icount shift=0`, SysTick counting them, as
//! `cost` does), over an in-RAM NOR flash of 4 pages of 1 KiB (the
//! instructions are the map's and the core's; a real part adds its
//! program and erase times). Prints a markdown table; fails on a figure
//! above its ceiling (today's worst board plus about 25%).
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use core::hint::black_box;

use cortex_m::peripheral::SYST;
use duplex_core::profile::Device;
use duplex_core::{AnySession, Session};
use duplex_core::{Fence, Id, InputMode, Instant, Modes, Open, OpenOptions};
use duplex_flash::{buffer_len, SnapshotFlash};
use duplex_on_target::{entry, exit, hprintln, icount, stack, BOARD};
use embassy_futures::block_on;
use embedded_storage_async::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

const PAGE: usize = 1024;
const PAGES: usize = 4;
const WORD: usize = 4;
const BUF: usize = buffer_len(Session::<Open, Device>::SNAPSHOT_MAX, WORD);
const REPS: u32 = 100;

/// NOR flash in RAM: a write clears bits, an erase sets a page.
struct RamFlash {
    bytes: &'static mut [u8; PAGE * PAGES],
}

#[derive(Debug)]
struct OutOfBounds;

impl NorFlashError for OutOfBounds {
    fn kind(&self) -> NorFlashErrorKind {
        NorFlashErrorKind::OutOfBounds
    }
}

impl ErrorType for RamFlash {
    type Error = OutOfBounds;
}

impl RamFlash {
    fn range(&mut self, offset: u32, len: usize) -> Result<&mut [u8], OutOfBounds> {
        self.bytes
            .get_mut(offset as usize..offset as usize + len)
            .ok_or(OutOfBounds)
    }
}

impl ReadNorFlash for RamFlash {
    const READ_SIZE: usize = 1;

    async fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), OutOfBounds> {
        bytes.copy_from_slice(self.range(offset, bytes.len())?);
        Ok(())
    }

    fn capacity(&self) -> usize {
        PAGE * PAGES
    }
}

impl NorFlash for RamFlash {
    const WRITE_SIZE: usize = WORD;
    const ERASE_SIZE: usize = PAGE;

    async fn erase(&mut self, from: u32, to: u32) -> Result<(), OutOfBounds> {
        self.range(from, (to - from) as usize)?.fill(0xFF);
        Ok(())
    }

    async fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), OutOfBounds> {
        for (cell, b) in self.range(offset, bytes.len())?.iter_mut().zip(bytes) {
            *cell &= b;
        }
        Ok(())
    }
}

type Store = SnapshotFlash<RamFlash, BUF>;

fn per_op(syst: &mut SYST, op: impl FnMut(u32)) -> u64 {
    icount::per_op(syst, REPS, op)
}

#[entry]
fn main() -> ! {
    let Some(mut core) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    let syst = &mut core.SYST;
    icount::start(syst);

    let Some(bytes) = cortex_m::singleton!(: [u8; PAGE * PAGES] = [0xFF; PAGE * PAGES]) else {
        exit(false)
    };
    let Some(store) = cortex_m::singleton!(: Option<Store> = None) else {
        exit(false)
    };
    *store = Store::new(RamFlash { bytes }, 0..(PAGE * PAGES) as u32).ok();
    let Some(store) = store.as_mut() else {
        exit(false)
    };
    let Some(image) = cortex_m::singleton!(: [u8; Session::<Open, Device>::SNAPSHOT_MAX] = [0; Session::<Open, Device>::SNAPSHOT_MAX])
    else {
        exit(false)
    };
    let Ok(id) = Id::new("mic-0") else {
        exit(false)
    };
    let fence = Fence::new(id, 1);
    let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
    let Ok(mut session) =
        Session::<Open, Device>::open_with_capacities(fence.clone(), opts, Instant::ZERO)
    else {
        exit(false)
    };
    for _ in 0..3 {
        let _ = session.append(&fence, InputMode::AppendAudioChunk);
    }
    let len = match session.snapshot(image) {
        Ok(bytes) => bytes.len(),
        Err(_) => exit(false),
    };
    let image = &image[..len];

    let restored = core::cell::Cell::new(false);
    let save_stack = stack::measure(|| {
        let _ = block_on(store.save(image));
    })
    .1;
    let load_stack = stack::measure(|| {
        let ok = match block_on(store.load()) {
            Ok(Some(bytes)) => AnySession::<Device>::restore_with_capacities(bytes).is_ok(),
            _ => false,
        };
        restored.set(ok);
    })
    .1;
    // Saves go round the four pages (an erase every ~19 saves).
    let save_instructions = per_op(syst, |_| {
        let _ = black_box(block_on(store.save(image)));
    });
    let load_instructions = per_op(syst, |_| {
        if let Ok(Some(bytes)) = block_on(store.load()) {
            black_box(AnySession::<Device>::restore_with_capacities(bytes).is_ok());
        }
    });
    hprintln!("| board | image | operation | stack | instructions |");
    hprintln!("|---|---:|---|---:|---:|");
    hprintln!(
        "| {} | {} B | save | {} | {} |",
        BOARD,
        len,
        save_stack,
        save_instructions
    );
    hprintln!(
        "| {} | {} B | load + restore | {} | {} |",
        BOARD,
        len,
        load_stack,
        load_instructions
    );
    // Ceilings: today's worst board plus about 25%.
    let fits = save_stack.bytes() <= 448
        && load_stack.bytes() <= 7_200
        && save_instructions <= 48_400
        && load_instructions <= 97_600;
    if !restored.get() {
        hprintln!("FAILED: the image saved did not load and restore");
    }
    if !fits {
        hprintln!("REGRESSION: a figure is above its ceiling");
    }
    exit(restored.get() && fits)
}
