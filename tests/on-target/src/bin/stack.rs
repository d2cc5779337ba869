//! The deepest stack of each core operation on the device, measured by
//! painting (see `duplex_on_target::stack`): the session lives in a static,
//! so each figure is the operation's own frames. Prints a markdown table;
//! fails on a figure above its ceiling.
#![no_std]
#![no_main]

use duplex_core::profile::Device as DeviceProfile;
use duplex_core::*;
use duplex_on_target::{entry, exit, hprintln, stack};

type Device = duplex_core::AnySession<DeviceProfile>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

/// The stack `op` used.
fn measure(op: impl FnOnce()) -> stack::Depth {
    stack::measure(op).1
}

macro_rules! profile {
    ($regressed:ident, $name:literal, $Any:ty, $L:literal, $buf:expr, $ceilings:expr) => {{
        let slot: &'static mut Option<$Any> =
            cortex_m::singleton!(: Option<$Any> = None).expect("once");
        let image: &mut [u8] = $buf;
        let f = Fence::<Id<$L>>::new(Id::new("mic").expect("id"), 1);
        let req = Id::<$L>::new("tts").expect("id");
        let op = Id::<$L>::new("gen").expect("id");
        let opts = || OpenOptions::default().modes(Modes::only(AUDIO));
        let len = core::cell::Cell::new(0);
        let rows: [(&str, stack::Depth); 19] = [
            ("open", measure(|| *slot = Session::open_with_capacities(f.clone(), opts(), Instant::ZERO).ok().map(<$Any>::from))),
            ("append", measure(|| { let _ = slot.as_mut().map(|s| s.append(&f, AUDIO)); })),
            ("prepare + commit", measure(|| { let _ = slot.as_mut().map(|s| s.prepare_append(&f, AUDIO).and_then(|r| s.commit_append(&r))); })),
            ("bind", measure(|| { let _ = slot.as_mut().map(|s| s.bind(&f, 0, &req)); })),
            ("begin_operation", measure(|| { let _ = slot.as_mut().map(|s| s.begin_operation(&f, &op, Instant::ZERO)); })),
            ("record_completed", measure(|| { let _ = slot.as_mut().map(|s| s.record_completed(&f, &op, AUDIO, Finality::Final, &[1])); })),
            ("completed (hit)", measure(|| { let _ = slot.as_mut().map(|s| s.completed(&f, &op, AUDIO, Finality::Final).map(|r| r.map(<[i64]>::len))); })),
            ("cancel (barge-in)", measure(|| { let _ = slot.as_mut().map(|s| s.cancel(&f, &f.clone().with_epoch(1))); })),
            ("detach", measure(|| { let _ = slot.as_mut().map(|s| s.detach(&f.clone().with_epoch(1), Instant::ZERO)); })),
            ("snapshot", measure(|| len.set(slot.as_ref().and_then(|s| s.snapshot(image).ok()).map_or(0, |b| b.len())))),
            ("restore", measure(|| *slot = <$Any>::restore_with_capacities(&image[..len.get()]).ok())),
            ("resume", measure(|| { let _ = slot.as_mut().map(|s| s.resume(&f.clone().with_epoch(1), 0, Instant::ZERO)); })),
            ("begin_close", measure(|| { let _ = slot.as_mut().map(|s| s.begin_close(&f.clone().with_epoch(1), CloseReason::ClientClose)); })),
            ("finalize", measure(|| { let _ = slot.as_mut().map(|s| s.finalize().map(|ids| ids.len())); })),
            ("open (recycle, from Closed)", measure(|| { let _ = slot.as_mut().map(|s| s.recycle(f.clone(), opts(), Instant::ZERO)); })),
            ("expire", measure(|| { let _ = slot.as_mut().map(|s| s.expire(Instant::from_millis(u64::MAX / 2)).map(|e| e.submitted.len())); })),
            ("finalize (expired)", measure(|| { let _ = slot.as_mut().map(|s| s.finalize().map(|ids| ids.len())); })),
            ("open (recycle, from Closed)", measure(|| { let _ = slot.as_mut().map(|s| s.recycle(f.clone(), opts(), Instant::ZERO).and_then(|()| s.bind(&f, 0, &req))); })),
            ("close (release all)", measure(|| { let _ = slot.as_mut().map(|s| s.close(&f, CloseReason::ClientClose).map(|ids| ids.len())); })),
        ];
        let ceilings: [usize; 19] = $ceilings;
        // The figures mean something only if every step did its work: the
        // session went through detach, snapshot, restore and resume.
        if len.get() == 0 || slot.as_ref().map(AnySession::kind) != Some(StateKind::Closed) {
            hprintln!("FAILED: {} profile: snapshot {} bytes, final state {:?}", $name, len.get(), slot.as_ref().map(AnySession::kind));
            *$regressed = true;
        }
        for ((name, bytes), ceiling) in rows.into_iter().zip(ceilings) {
            hprintln!("| {} | {} | {} | {} |", duplex_on_target::BOARD, $name, name, bytes);
            if bytes.bytes() > ceiling {
                hprintln!("REGRESSION: {} {} uses {} bytes of stack, above its ceiling of {}", $name, name, bytes, ceiling);
                *$regressed = true;
            }
        }
    }};
}

/// Stack ceilings per row (bytes): today's worst board plus about 25%,
/// at least 64 (the painter's resolution).
const DEVICE_CEILINGS: [usize; 19] = [
    768, 64, 64, 224, 80, 240, 64, 448, 112, 224, 1456, 112, 112, 160, 3264, 480, 160, 3264, 160,
];
const DEFAULT_CEILINGS: [usize; 19] = [
    1584, 64, 64, 320, 80, 256, 96, 752, 112, 224, 3072, 112, 112, 64, 6976, 1440, 64, 6976, 64,
];

// One function per profile, so that neither's locals sit in the other's
// frame (or in `main`'s) while it is measured.
#[inline(never)]
fn device(regressed: &mut bool, image: &mut [u8]) {
    profile!(regressed, "device", Device, 16, image, DEVICE_CEILINGS);
}

#[inline(never)]
fn default(regressed: &mut bool, image: &mut [u8]) {
    profile!(
        regressed,
        "default",
        AnySession,
        32,
        image,
        DEFAULT_CEILINGS
    );
}

#[entry]
fn main() -> ! {
    hprintln!("| board | profile | operation | stack (bytes) |");
    hprintln!("|---|---|---|---:|");
    // Ceilings, row by row: today's worst board plus about 25%.
    let mut regressed = false;
    let Some(image) = cortex_m::singleton!(: [u8; Session::<Open>::SNAPSHOT_MAX] = [0; Session::<Open>::SNAPSHOT_MAX])
    else {
        exit(false)
    };
    device(&mut regressed, &mut image[..]);
    default(&mut regressed, image);
    exit(!regressed)
}
