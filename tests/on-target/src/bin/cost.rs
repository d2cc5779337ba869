//! Executed instructions per hot core operation on the device, counted
//! deterministically: run under `qemu-system-arm -icount shift=0`, where
//! virtual time advances one nanosecond per executed instruction and
//! SysTick (clocked from the core clock QEMU models for the board) advances
//! with it. Each figure is the SysTick ticks of 1,000 repetitions, minus an
//! empty loop's, times nanoseconds per tick, over 1,000. A calibration row
//! (`cortex_m::asm::delay(n)` executes exactly 2n + 2 instructions) checks
//! the method on every run. Prints a markdown table; the image fails on an
//! uncalibrated count or a figure above its ceiling (today's worst board
//! plus about 25%: the count is exact, the margin is for code changes).
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m::peripheral::SYST;
use duplex_core::profile::Device as DeviceProfile;
use duplex_core::*;
use duplex_on_target::{entry, exit, hprintln, icount, BOARD, CORE_HZ};

type Device = duplex_core::AnySession<DeviceProfile>;

const AUDIO: InputMode = InputMode::AppendAudioChunk;
const REPS: u32 = 1_000;

/// Instructions per call of `op`, the loop's own cost subtracted.
fn per_op(syst: &mut SYST, op: impl FnMut(u32)) -> u64 {
    icount::per_op(syst, REPS, op)
}

macro_rules! profile {
    ($syst:expr, $regressed:ident, $name:literal, $Any:ty, $L:literal, $ceilings:expr) => {{
        let syst: &mut SYST = $syst;
        let slot: &'static mut Option<$Any> =
            cortex_m::singleton!(: Option<$Any> = None).expect("once");
        let f = Fence::<Id<$L>>::new(Id::new("mic").expect("id"), 1);
        let req = Id::<$L>::new("tts").expect("id");
        let op = Id::<$L>::new("op").expect("id");
        let opts = || OpenOptions::default().modes(Modes::only(AUDIO));
        *slot = Session::open_with_capacities(f.clone(), opts(), Instant::ZERO).ok().map(<$Any>::from);
        let _ = slot.as_mut().map(|s| s.record_completed(&f, &op, AUDIO, Finality::Final, &[1]));
        let mut epoch = 0u64;
        let rows: [(&str, u64); 7] = [
            ("append", per_op(syst, |_| { let _ = slot.as_mut().map(|s| s.append(&f, AUDIO)); })),
            ("touch", per_op(syst, |i| { let _ = slot.as_mut().map(|s| s.touch(&f, Activity::Heartbeat, Instant::from_millis(u64::from(i)))); })),
            ("prepare + commit", per_op(syst, |_| { let _ = slot.as_mut().map(|s| s.prepare_append(&f, AUDIO).and_then(|r| s.commit_append(&r))); })),
            ("completed (hit)", per_op(syst, |_| { black_box(slot.as_mut().map(|s| s.completed(&f, &op, AUDIO, Finality::Final).map(|r| r.map(<[i64]>::len)))); })),
            ("bind + release", per_op(syst, |_| { let _ = slot.as_mut().map(|s| { let _ = s.bind(&f, 0, &req); s.release_where(|id| *id == req) }); })),
            ("bind + cancel (barge-in)", per_op(syst, |_| {
                let now = f.clone().with_epoch(epoch);
                epoch += 1;
                let _ = slot.as_mut().map(|s| { let _ = s.bind(&now, 0, &req); s.cancel(&now, &f.clone().with_epoch(epoch)).map(|ids| ids.len()) });
            })),
            ("open + close", per_op(syst, |i| {
                let g = Fence::<Id<$L>>::new(Id::new("mic").expect("id"), u64::from(i) + 2);
                let _ = slot.as_mut().map(|s| { let cur = s.fence().clone(); let _ = s.close(&cur, CloseReason::ClientClose); s.recycle(g, opts(), Instant::ZERO) });
            })),
        ];
        for ((name, n), ceiling) in rows.into_iter().zip($ceilings) {
            hprintln!("| {} | {} | {} | {} |", BOARD, $name, name, n);
            if n > ceiling {
                hprintln!("REGRESSION: {} {} {} is {} instructions, above its ceiling of {}", BOARD, $name, name, n, ceiling);
                // A flag rather than an early exit: every row is printed.
                $regressed = true;
            }
        }
    }};
}

#[entry]
fn main() -> ! {
    let Some(mut core) = cortex_m::Peripherals::take() else {
        exit(false)
    };
    let syst = &mut core.SYST;
    icount::start(syst);

    hprintln!("| board | profile | operation | instructions |");
    hprintln!("|---|---|---|---:|");
    // Calibration: delay(n) runs n + 1 iterations of subs + bne.
    syst.clear_current();
    let start = SYST::get_current();
    cortex_m::asm::delay(99_999);
    let end = SYST::get_current();
    let counted =
        u64::from(start.wrapping_sub(end) & 0x00FF_FFFF) * 1_000_000_000 / u64::from(CORE_HZ);
    hprintln!(
        "| {} | calibration | asm::delay(99,999) = 200,000 | {} |",
        BOARD,
        counted
    );
    let calibrated = counted.abs_diff(200_000) < 200;
    let regressed = device_rows(syst) | default_rows(syst);
    exit(calibrated && !regressed)
}

// One function a profile, kept out of `main`: every operation of both
// profiles inlined into one function made LLVM's code generation overflow
// rustc's stack now and then (a SIGSEGV, nondeterministic). Each row's
// operation is still inlined into its own measuring loop.

/// The device profile's rows; whether one is above its ceiling.
#[inline(never)]
fn device_rows(syst: &mut SYST) -> bool {
    let mut regressed = false;
    profile!(
        syst,
        regressed,
        "device",
        Device,
        16,
        [340, 210, 750, 560, 820, 2360, 750]
    );
    regressed
}

/// The default profile's rows; whether one is above its ceiling.
#[inline(never)]
fn default_rows(syst: &mut SYST) -> bool {
    let mut regressed = false;
    profile!(
        syst,
        regressed,
        "default",
        AnySession,
        32,
        [490, 360, 1180, 860, 1120, 3050, 890]
    );
    regressed
}
