//! A small test harness for duplex-core on an emulated Cortex-M board.
//!
//! Each file in `tests/` is a `#![no_std] #![no_main]` firmware image
//! (`harness = false`) that lists its tests with [`tests!`]. The image runs
//! under QEMU (the `qemu` runner script), prints one line per test through
//! semihosting and leaves QEMU with exit code 0 only if every test passed:
//!
//! ```text
//! suite lifecycle on microbit: 11 tests
//! test lifecycle::open_detach_resume ... ok (stack 9428 B)
//! test lifecycle::barge_in_cancels_the_old_epoch_and_fences_it_out ... FAILED at tests/lifecycle.rs:160: s.append(&next, AUDIO) is Ok
//! suite lifecycle: 10 passed, 1 failed
//! ```
//!
//! The other images: `replay` (the conformance traces, `replay/traces.py`),
//! `scenario` (defmt golden output), `stack` and `cost` (figures with
//! ceilings), `footprint` (flash and RAM, `measure`) and the example
//! firmware (`examples/firmware`). `run` builds and runs them all.
//!
//! Why not defmt-test: it reports through a debug probe (probe-rs) and stops
//! at the first failure; here QEMU's semihosting is the probe, every test
//! runs, and the host reads plain lines without a decoder. defmt itself is
//! tested by the `scenario` image, whose decoded output is compared with a
//! golden file.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub use cortex_m_rt::entry;
pub use cortex_m_semihosting::hprintln;

#[cfg(feature = "defmt")]
use defmt_semihosting as _;

pub mod icount;
pub mod stack;

#[cfg(feature = "flash")]
pub mod hostflash;

/// The board this image was built for (`microbit` or `netduinoplus2`).
pub const BOARD: &str = env!("DUPLEX_BOARD");

/// The core clock of the board this image was built for, in Hz, as QEMU
/// models it (micro:bit: 16 MHz).
#[cfg(board = "microbit")]
pub const CORE_HZ: u32 = 16_000_000;
/// The core clock of the board this image was built for, in Hz, as QEMU
/// models it (Netduino Plus 2: 168 MHz).
#[cfg(not(board = "microbit"))]
pub const CORE_HZ: u32 = 168_000_000;

/// Where and why a test failed.
#[derive(Debug, Clone, Copy)]
pub struct Failure {
    /// Source file of the failed check.
    pub file: &'static str,
    /// Line of the failed check.
    pub line: u32,
    /// The check, as written.
    pub what: &'static str,
}

/// The result of one test.
pub type Outcome = Result<(), Failure>;

/// One named test.
#[derive(Debug, Clone, Copy)]
pub struct Test {
    /// The test's function name.
    pub name: &'static str,
    /// The test.
    pub run: fn() -> Outcome,
}

/// Runs every test, prints one line each and a summary, and ends the
/// emulation: exit code 0 if all passed, 1 otherwise.
pub fn run(suite: &str, tests: &[Test]) -> ! {
    hprintln!("suite {} on {}: {} tests", suite, BOARD, tests.len());
    let (mut passed, mut failed) = (0u32, 0u32);
    for test in tests {
        let (outcome, used) = stack::measure(test.run);
        match outcome {
            Ok(()) => {
                passed += 1;
                hprintln!("test {}::{} ... ok (stack {} B)", suite, test.name, used);
            }
            Err(f) => {
                failed += 1;
                hprintln!(
                    "test {}::{} ... FAILED at {}:{}: {}",
                    suite,
                    test.name,
                    f.file,
                    f.line,
                    f.what
                );
            }
        }
    }
    hprintln!("suite {}: {} passed, {} failed", suite, passed, failed);
    exit(failed == 0)
}

/// Ends the emulation through semihosting with the given status.
pub fn exit(success: bool) -> ! {
    use cortex_m_semihosting::debug;
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Only reached without a debugger or emulator to take the exit.
    loop {
        cortex_m::asm::nop();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panicked: {}", info);
    exit(false)
}

/// Declares the image's entry point, running the listed test functions:
/// `tests!(suite_name: test_a, test_b);`
#[macro_export]
macro_rules! tests {
    ($suite:ident: $($name:ident),+ $(,)?) => {
        #[$crate::entry]
        fn main() -> ! {
            $crate::run(
                stringify!($suite),
                &[$($crate::Test { name: stringify!($name), run: $name }),+],
            )
        }
    };
}

/// Fails the test unless the condition holds.
#[macro_export]
macro_rules! check {
    ($cond:expr) => {
        if !$cond {
            return Err($crate::Failure {
                file: file!(),
                line: line!(),
                what: stringify!($cond),
            });
        }
    };
}

/// Fails the test unless both sides are equal, printing both.
#[macro_export]
macro_rules! check_eq {
    ($left:expr, $right:expr) => {
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    $crate::hprintln!("  left:  {:?}\n  right: {:?}", left, right);
                    return Err($crate::Failure {
                        file: file!(),
                        line: line!(),
                        what: concat!(stringify!($left), " == ", stringify!($right)),
                    });
                }
            }
        }
    };
}

/// Unwraps an `Ok`, or fails the test printing the error.
#[macro_export]
macro_rules! ok {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(e) => {
                $crate::hprintln!("  error: {:?}", e);
                return Err($crate::Failure {
                    file: file!(),
                    line: line!(),
                    what: concat!(stringify!($result), " is Ok"),
                });
            }
        }
    };
}
