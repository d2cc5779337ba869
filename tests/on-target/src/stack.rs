//! Stack depth, measured by painting: fill the free stack with a pattern,
//! run, then find the lowest word that no longer holds it.
//!
//! Limits: the figure covers what was written, so a frame reserved but never
//! touched is not counted, and a word that happens to be written with the
//! pattern itself is missed; interrupts that ran meanwhile are included. The
//! painter can not paint its own frame, so a run shallower than that frame
//! (under 100 bytes or so) is reported as "under N". It is the depth of the
//! measured runs, not a bound over all paths (that needs a call-graph
//! analysis such as cargo-call-stack).

use core::fmt;
use core::ptr::addr_of;

const PAINT: u32 = 0x5EED_CAFE;
/// Bytes below the painter's own frame left unpainted (its locals).
const GUARD: usize = 32;

extern "C" {
    // From cortex-m-rt's link.x: the end of .bss/.uninit, where the stack
    // (growing down from the top of RAM) must stop.
    static mut __euninit: u32;
}

/// How deep a measured run went, in bytes below the measuring frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The run touched this many bytes of stack.
    Exact(usize),
    /// The run stayed within the painter's unpainted frame.
    Under(usize),
}

impl Depth {
    /// The depth in bytes, an upper bound for [`Depth::Under`].
    pub fn bytes(self) -> usize {
        match self {
            Depth::Exact(n) | Depth::Under(n) => n,
        }
    }
}

impl fmt::Display for Depth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Depth::Exact(n) => write!(f, "{n}"),
            Depth::Under(n) => write!(f, "< {n}"),
        }
    }
}

fn bottom() -> usize {
    // Only the address of the linker symbol is taken; it is never read.
    let end = addr_of!(__euninit) as usize;
    (end + 3) & !3
}

/// Fills the stack from the end of static memory up to just below this
/// function's frame; returns where the paint stops.
#[inline(never)]
fn paint() -> usize {
    let top = cortex_m::register::msp::read() as usize - GUARD;
    let mut p = bottom();
    while p < top {
        // Word writes into memory nothing live occupies: between the end of
        // the statics and below the current frame. Volatile so the writes
        // are neither elided nor reordered.
        #[allow(unsafe_code)]
        unsafe {
            core::ptr::write_volatile(p as *mut u32, PAINT)
        };
        p += 4;
    }
    top
}

/// The lowest painted word that was overwritten, if any.
#[inline(never)]
fn lowest_touched(top: usize) -> Option<usize> {
    let mut p = bottom();
    while p < top {
        // Reads of the words `paint` wrote; nothing else owns them.
        #[allow(unsafe_code)]
        let word = unsafe { core::ptr::read_volatile(p as *const u32) };
        if word != PAINT {
            return Some(p);
        }
        p += 4;
    }
    None
}

/// Runs `f` on a freshly painted stack; returns its result and how deep
/// it went below this call.
#[inline(never)]
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Depth) {
    let base = cortex_m::register::msp::read() as usize;
    let top = paint();
    let result = f();
    let depth = match lowest_touched(top) {
        Some(low) => Depth::Exact(base - low),
        None => Depth::Under(base - top),
    };
    (result, depth)
}
