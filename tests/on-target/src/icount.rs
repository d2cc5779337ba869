//! Executed instructions, counted by SysTick under `qemu-system-arm
//! -icount shift=0`, where virtual time advances one nanosecond per
//! executed instruction and SysTick (clocked from the core clock QEMU
//! models for the board) advances with it.

use core::hint::black_box;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;

use crate::CORE_HZ;

/// Starts SysTick free-running from the core clock, as the counter.
pub fn start(syst: &mut SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(0x00FF_FFFF);
    syst.disable_interrupt();
    syst.enable_counter();
}

/// Instructions executed by `reps` calls of `op`, from SysTick ticks.
pub fn instructions(syst: &mut SYST, reps: u32, mut op: impl FnMut(u32)) -> u64 {
    syst.clear_current();
    let start = SYST::get_current();
    for i in 0..reps {
        op(black_box(i));
    }
    let end = SYST::get_current();
    u64::from(start.wrapping_sub(end) & 0x00FF_FFFF) * 1_000_000_000 / u64::from(CORE_HZ)
}

/// Instructions per call of `op` over `reps` calls, the loop's own cost
/// subtracted.
pub fn per_op(syst: &mut SYST, reps: u32, op: impl FnMut(u32)) -> u64 {
    let empty = instructions(syst, reps, |i| {
        black_box(i);
    });
    instructions(syst, reps, op).saturating_sub(empty) / u64::from(reps)
}
