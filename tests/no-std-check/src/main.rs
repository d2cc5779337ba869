//! A firmware-shaped binary over duplex-core: `#![no_std]`, `#![no_main]`,
//! its own panic handler. If duplex-core or any of its dependencies linked
//! `std`, this would fail with a duplicate `panic_impl` lang item.
//!
//! The session lifecycle below is kept in the binary by a `#[used]` function
//! pointer, so the linker resolves every core symbol it needs.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::panic::PanicInfo;

use duplex_core::profile::{device, DeviceSession};
use duplex_core::{CloseReason, Duration, Fence, Id, InputMode, Instant, LeaseConfig, Modes, OpenOptions};

#[panic_handler]
fn panic(_: &PanicInfo) -> ! {
    loop {}
}

fn lifecycle() -> u64 {
    let Ok(id) = Id::<{ device::ID_LEN }>::new("mic-0") else { return 0 };
    let fence = Fence::new(id, 1);
    let Ok(lease) = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5)) else {
        return 0;
    };
    let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk)).lease(lease);
    let Ok(mut s) = DeviceSession::open_with_capacities(fence.clone(), opts, Instant::ZERO) else {
        return 0;
    };
    let mut seq = 0;
    for _ in 0..3 {
        if let Ok(a) = s.append(&fence, InputMode::AppendAudioChunk) {
            seq = a.seq;
        }
    }
    if let Ok(req) = Id::new("tts") {
        let _ = s.bind(&fence, 0, &req);
    }
    let next = fence.clone().with_epoch(1);
    let cancelled = s.cancel(&fence, &next).map_or(0, |ids| ids.len() as u64);
    match s.begin_close(&next, CloseReason::ClientClose) {
        Ok(closing) => seq + cancelled + closing.finalize().1.len() as u64,
        Err(rejected) => rejected.session.input_seq(),
    }
}

#[used]
static KEEP: fn() -> u64 = lifecycle;
