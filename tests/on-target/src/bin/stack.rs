//! The deepest stack of each core operation on the device, measured by
//! painting (see `duplex_on_target::stack`): the session lives in a static,
//! so each figure is the operation's own frames. Prints a markdown table.
#![no_std]
#![no_main]

use duplex_core::profile::device;
use duplex_core::*;
use duplex_on_target::{entry, exit, hprintln, stack};

type Device = AnySession<
    (),
    (),
    { device::RESOURCES },
    { device::BINDINGS },
    { device::COMPLETED },
    { device::ACTIVE_OPS },
    { device::ID_LEN },
    { device::STAGE_RESULTS },
>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;

/// The stack `op` used.
fn measure(op: impl FnOnce()) -> stack::Depth {
    stack::measure(op).1
}

macro_rules! profile {
    ($name:literal, $Any:ty, $L:literal, $buf:expr) => {{
        let slot: &'static mut Option<$Any> =
            cortex_m::singleton!(: Option<$Any> = None).expect("once");
        let image: &'static mut [u8] = $buf;
        let f = Fence::<$L>::new(Id::new("mic").expect("id"), 1);
        let req = Id::<$L>::new("tts").expect("id");
        let op = Id::<$L>::new("gen").expect("id");
        let opts = || OpenOptions::default().modes(Modes::only(AUDIO));
        let len = core::cell::Cell::new(0);
        let rows: [(&str, stack::Depth); 13] = [
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
            ("close (release all)", measure(|| { let _ = slot.as_mut().map(|s| s.close(&f.clone().with_epoch(1), CloseReason::ClientClose).map(|ids| ids.len())); })),
        ];
        for (name, bytes) in rows {
            hprintln!("| {} | {} | {} | {} |", duplex_on_target::BOARD, $name, name, bytes);
        }
    }};
}

#[entry]
fn main() -> ! {
    hprintln!("| board | profile | operation | stack (bytes) |");
    hprintln!("|---|---|---|---:|");
    profile!(
        "device",
        Device,
        16,
        cortex_m::singleton!(: [u8; 1024] = [0; 1024]).expect("once")
    );
    profile!(
        "default",
        AnySession,
        32,
        cortex_m::singleton!(: [u8; 4096] = [0; 4096]).expect("once")
    );
    exit(true)
}
