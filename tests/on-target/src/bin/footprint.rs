//! A minimal firmware over duplex-core's device profile, for flash and RAM
//! figures: a session's life (open, stream, answer, barge in, detach,
//! resume, close), with `serde` also a snapshot and a restore. Inputs come
//! through `black_box`, so the code is what firmware would carry. Built
//! without the `core` feature it is the baseline `measure` subtracts.
#![no_std]
#![no_main]

use core::hint::black_box;

use duplex_on_target::{entry, exit};

#[cfg(feature = "core")]
fn life() -> u64 {
    use duplex_core::profile::{device, Device as DeviceProfile};
    use duplex_core::*;
    const AUDIO: InputMode = InputMode::AppendAudioChunk;

    let Ok(id) = Id::<{ device::ID_LEN }>::new(black_box("mic-0")) else {
        return 0;
    };
    let fence = Fence::new(id, black_box(1));
    let Ok(lease) = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_secs(5)) else {
        return 0;
    };
    let opts = OpenOptions::default()
        .modes(Modes::only(AUDIO))
        .lease(lease);
    let Ok(mut s) =
        Session::<Open, DeviceProfile>::open_with_capacities(fence.clone(), opts, Instant::ZERO)
    else {
        return 0;
    };
    let mut seq = 0;
    for _ in 0..black_box(3) {
        if let Ok(a) = s.append(&fence, AUDIO) {
            seq = a.seq;
        }
    }
    if let Ok(req) = Id::new(black_box("tts")) {
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
    #[cfg(feature = "serde")]
    let s = {
        type Device = duplex_core::AnySession<DeviceProfile>;
        let mut buf = [0u8; Session::<Open, DeviceProfile>::SNAPSHOT_MAX];
        let Ok(image) = s.snapshot(black_box(&mut buf)) else {
            return 0;
        };
        match Device::restore_with_capacities(black_box(image)).map(AnySession::into_open) {
            Ok(Ok(open)) => open,
            _ => return 0,
        }
    };
    match s.begin_close(&next, CloseReason::ClientClose) {
        Ok(closing) => seq + cancelled + closing.finalize().1.len() as u64,
        Err(rejected) => rejected.session.input_seq(),
    }
}

#[cfg(not(feature = "core"))]
fn life() -> u64 {
    black_box(0)
}

#[entry]
fn main() -> ! {
    let _ = black_box(life());
    exit(true)
}
