//! embassy-time's driver on SysTick: one tick a millisecond (embassy-time's
//! `tick-hz-1_000`), counted in the SysTick exception, which also wakes the
//! timers that are due. The QEMU boards' own timers are not all modelled;
//! SysTick is on every Cortex-M, and under `-icount` it is deterministic.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

/// The ticks since start and the timers waiting, behind a critical section.
pub struct SysTickDriver {
    ticks: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            if at <= self.ticks.borrow(cs).get() {
                waker.wake_by_ref();
            } else {
                self.queue.borrow(cs).borrow_mut().schedule_wake(at, waker);
            }
        });
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    ticks: Mutex::new(Cell::new(0)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

/// Starts SysTick at one interrupt a millisecond of a `core_hz` core.
pub fn start(mut syst: SYST, core_hz: u32) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(core_hz / 1_000 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    critical_section::with(|cs| {
        let ticks = DRIVER.ticks.borrow(cs);
        let now = ticks.get() + 1;
        ticks.set(now);
        // Wakes every timer due by now.
        let _ = DRIVER.queue.borrow(cs).borrow_mut().next_expiration(now);
    });
}
