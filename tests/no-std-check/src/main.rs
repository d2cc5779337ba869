//! A firmware-shaped binary over duplex-core: `#![no_std]`, `#![no_main]`,
//! its own panic handler. If duplex-core or any of its dependencies linked
//! `std`, this would fail with a duplicate `panic_impl` lang item.
//!
//! The session lifecycle below is kept in the binary by a `#[used]` function
//! pointer, so the linker resolves every core symbol it needs. Features pick
//! the profile (`default-profile`) or build the baseline without the core
//! (`without-core`); `measure.sh` turns the three builds into the flash and
//! RAM figures.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use core::panic::PanicInfo;

#[cfg(not(feature = "without-core"))]
use duplex_core::id::IdText;
#[cfg(not(feature = "without-core"))]
use duplex_core::profile::{IdOf, Profile};
#[cfg(not(feature = "without-core"))]
use duplex_core::{
    CloseReason, Duration, Fence, InputMode, Instant, LeaseConfig, Modes, OpenOptions, Session,
};

#[panic_handler]
fn panic(_: &PanicInfo) -> ! {
    loop {}
}

#[cfg(not(feature = "without-core"))]
/// A session's life on a device: open, stream, answer, barge in, detach,
/// resume, close. Its inputs come from `black_box`, so the code is what
/// firmware would carry.
fn lifecycle<P: Profile<SessionConfig = (), RuntimeConfig = ()>>() -> u64 {
    let Ok(id) = IdOf::<P>::new(core::hint::black_box("mic-0")) else {
        return 0;
    };
    let fence = Fence::new(id, core::hint::black_box(1));
    let Ok(lease) = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5)) else {
        return 0;
    };
    let opts = OpenOptions::default()
        .modes(Modes::only(InputMode::AppendAudioChunk))
        .lease(lease);
    let Ok(mut s) =
        Session::<duplex_core::Open, P>::open_with_capacities(fence.clone(), opts, Instant::ZERO)
    else {
        return 0;
    };
    let mut seq = 0;
    for _ in 0..core::hint::black_box(3) {
        if let Ok(a) = s.append(&fence, InputMode::AppendAudioChunk) {
            seq = a.seq;
        }
    }
    if let Ok(req) = IdOf::<P>::new("tts") {
        let _ = s.bind(&fence, 0, &req);
    }
    let next = fence.clone().with_epoch(1);
    let cancelled = s.cancel(&fence, &next).map_or(0, |ids| ids.len() as u64);
    let s = match s.detach(&next, Instant::from_millis(40)) {
        Ok(d) => match d.resume(&next, 0, Instant::from_millis(80)) {
            Ok((open, _)) => open,
            Err(rejected) => return rejected.session.input_seq(),
        },
        Err(rejected) => rejected.session,
    };
    match s.begin_close(&next, CloseReason::ClientClose) {
        Ok(closing) => seq + cancelled + closing.finalize().1.len() as u64,
        Err(rejected) => rejected.session.input_seq(),
    }
}

#[cfg(all(not(feature = "without-core"), not(feature = "default-profile")))]
fn run() -> u64 {
    lifecycle::<duplex_core::profile::Device>()
}

#[cfg(all(not(feature = "without-core"), feature = "default-profile"))]
fn run() -> u64 {
    lifecycle::<duplex_core::profile::Conformance>()
}

#[cfg(feature = "without-core")]
fn run() -> u64 {
    core::hint::black_box(0)
}

#[used]
static KEEP: fn() -> u64 = run;
