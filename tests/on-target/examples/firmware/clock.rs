//! A [`Clock`] for firmware: milliseconds counted by the SysTick exception.
//!
//! [`SysTickClock::start`] programs SysTick to fire once a millisecond from
//! the core clock; the `SysTick` handler (defined here) adds one to a
//! counter kept in a critical-section cell, so it works on Cortex-M0
//! (thumbv6m has no atomic read-modify-write).

use core::cell::Cell;

use cortex_m::interrupt::Mutex;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use duplex_core::{Clock, Instant};

static MILLIS: Mutex<Cell<u64>> = Mutex::new(Cell::new(0));

/// Milliseconds since [`SysTickClock::start`], from the SysTick exception.
#[derive(Debug, Clone, Copy)]
pub struct SysTickClock(());

impl SysTickClock {
    /// Starts SysTick at one exception a millisecond of a `core_hz` core
    /// clock, counting on from `millis`, and returns the clock that reads it.
    pub fn start(mut syst: SYST, core_hz: u32, millis: u64) -> Self {
        cortex_m::interrupt::free(|cs| MILLIS.borrow(cs).set(millis));
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(core_hz / 1_000 - 1);
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
        SysTickClock(())
    }
}

impl Clock for SysTickClock {
    fn now(&self) -> Instant {
        Instant::from_millis(cortex_m::interrupt::free(|cs| MILLIS.borrow(cs).get()))
    }
}

#[exception]
fn SysTick() {
    cortex_m::interrupt::free(|cs| {
        let millis = MILLIS.borrow(cs);
        millis.set(millis.get() + 1);
    });
}
