//! Time: integer milliseconds from an injected [`Clock`].
//!
//! The core never reads a clock by itself. Operations that move the lease take
//! `now: Instant`; the layer that owns the session (the std manager, or the
//! firmware's main loop) reads its [`Clock`] and passes the value in. All
//! deadline arithmetic saturates: a deadline past `u64::MAX` milliseconds is
//! simply "never", and nothing overflows or panics.

use core::cell::Cell;
use core::fmt;

/// A point in time: milliseconds since an arbitrary, clock-defined origin.
///
/// # Examples
///
/// ```
/// use duplex_core::{Duration, Instant};
///
/// let t = Instant::from_millis(1_000);
/// assert_eq!(t + Duration::from_secs(2), Instant::from_millis(3_000));
/// // Deadline arithmetic saturates instead of overflowing.
/// assert_eq!(Instant::MAX + Duration::from_millis(1), Instant::MAX);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant {
    millis: u64,
}

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant { millis: 0 };
    /// The latest representable instant; saturated deadlines land here.
    pub const MAX: Instant = Instant { millis: u64::MAX };

    /// An instant `millis` milliseconds after the origin.
    ///
    /// ```
    /// # use duplex_core::Instant;
    /// assert_eq!(Instant::from_millis(5).as_millis(), 5);
    /// ```
    pub const fn from_millis(millis: u64) -> Self {
        Instant { millis }
    }

    /// Milliseconds since the origin.
    ///
    /// ```
    /// # use duplex_core::Instant;
    /// assert_eq!(Instant::ZERO.as_millis(), 0);
    /// ```
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// `self + d`, saturating at [`Instant::MAX`].
    ///
    /// ```
    /// # use duplex_core::{Duration, Instant};
    /// assert_eq!(Instant::MAX.saturating_add(Duration::from_millis(7)), Instant::MAX);
    /// ```
    #[must_use]
    pub const fn saturating_add(self, d: Duration) -> Self {
        Instant {
            millis: self.millis.saturating_add(d.millis),
        }
    }

    /// `self + d`, or `None` on overflow.
    ///
    /// ```
    /// # use duplex_core::{Duration, Instant};
    /// assert_eq!(Instant::MAX.checked_add(Duration::from_millis(1)), None);
    /// ```
    pub const fn checked_add(self, d: Duration) -> Option<Self> {
        match self.millis.checked_add(d.millis) {
            Some(millis) => Some(Instant { millis }),
            None => None,
        }
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    ///
    /// ```
    /// # use duplex_core::{Duration, Instant};
    /// let (a, b) = (Instant::from_millis(10), Instant::from_millis(25));
    /// assert_eq!(b.saturating_duration_since(a), Duration::from_millis(15));
    /// assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    /// ```
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration {
            millis: self.millis.saturating_sub(earlier.millis),
        }
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    /// Saturating addition (see [`Instant::saturating_add`]).
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.millis)
    }
}

/// A span of time in whole milliseconds.
///
/// # Examples
///
/// ```
/// use duplex_core::Duration;
///
/// assert_eq!(Duration::from_secs(30).as_millis(), 30_000);
/// assert!(Duration::ZERO.is_zero());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Duration {
    millis: u64,
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration { millis: 0 };

    /// `millis` milliseconds.
    ///
    /// ```
    /// # use duplex_core::Duration;
    /// assert_eq!(Duration::from_millis(20).as_millis(), 20);
    /// ```
    pub const fn from_millis(millis: u64) -> Self {
        Duration { millis }
    }

    /// `secs` seconds, saturating at `u64::MAX` milliseconds.
    ///
    /// ```
    /// # use duplex_core::Duration;
    /// assert_eq!(Duration::from_secs(2), Duration::from_millis(2_000));
    /// ```
    pub const fn from_secs(secs: u64) -> Self {
        Duration {
            millis: secs.saturating_mul(1_000),
        }
    }

    /// The span in milliseconds.
    ///
    /// ```
    /// # use duplex_core::Duration;
    /// assert_eq!(Duration::from_secs(1).as_millis(), 1_000);
    /// ```
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// Whether the span is zero.
    ///
    /// ```
    /// # use duplex_core::Duration;
    /// assert!(!Duration::from_millis(1).is_zero());
    /// ```
    pub const fn is_zero(self) -> bool {
        self.millis == 0
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.millis)
    }
}

/// The injection point for time.
///
/// Contract: `now()` is monotonic (never returns an instant earlier than a
/// previous call on the same clock), never fails and never panics. The origin
/// is the clock's own; only differences and comparisons are meaningful.
///
/// # Examples
///
/// ```
/// use duplex_core::{Clock, Instant};
///
/// /// A clock over a hardware millisecond tick counter.
/// struct Ticks(fn() -> u64);
///
/// impl Clock for Ticks {
///     fn now(&self) -> Instant {
///         Instant::from_millis((self.0)())
///     }
/// }
///
/// let clock = Ticks(|| 42);
/// assert_eq!(clock.now(), Instant::from_millis(42));
/// ```
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// The clock of firmware on embassy: `embassy_time::Instant::now()`, whose
/// ticks come from the board's time driver (feature `embassy-time`).
///
/// Milliseconds since the driver started, whatever its tick rate.
///
/// ```
/// use duplex_core::{Clock, EmbassyClock};
///
/// // Firmware links its board's time driver; this example embassy-time's
/// // mock driver, which stands still until advanced.
/// let before = EmbassyClock.now();
/// embassy_time::MockDriver::get().advance(embassy_time::Duration::from_millis(20));
/// assert_eq!(EmbassyClock.now().as_millis() - before.as_millis(), 20);
/// ```
#[cfg(feature = "embassy-time")]
#[cfg_attr(docsrs, doc(cfg(feature = "embassy-time")))]
#[derive(Debug, Default, Clone, Copy)]
pub struct EmbassyClock;

#[cfg(feature = "embassy-time")]
impl Clock for EmbassyClock {
    fn now(&self) -> Instant {
        Instant::from_millis(embassy_time::Instant::now().as_millis())
    }
}

/// A clock advanced by hand: for tests, simulations and replaying traces.
///
/// # Examples
///
/// ```
/// use duplex_core::{Clock, Duration, Instant, ManualClock};
///
/// let clock = ManualClock::new(Instant::from_millis(1_000));
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now(), Instant::from_millis(1_250));
/// ```
#[derive(Debug, Default, Clone)]
pub struct ManualClock {
    now: Cell<Instant>,
}

impl ManualClock {
    /// A clock that reads `start` until advanced.
    ///
    /// ```
    /// # use duplex_core::{Clock, Instant, ManualClock};
    /// assert_eq!(ManualClock::new(Instant::ZERO).now(), Instant::ZERO);
    /// ```
    pub const fn new(start: Instant) -> Self {
        ManualClock {
            now: Cell::new(start),
        }
    }

    /// Moves time forward by `d` (saturating).
    ///
    /// ```
    /// # use duplex_core::{Clock, Duration, Instant, ManualClock};
    /// let c = ManualClock::new(Instant::MAX);
    /// c.advance(Duration::from_secs(1));
    /// assert_eq!(c.now(), Instant::MAX);
    /// ```
    pub fn advance(&self, d: Duration) {
        self.now.set(self.now.get().saturating_add(d));
    }

    /// Moves time to `t` if it is later than the current reading; the clock
    /// never goes backwards.
    ///
    /// ```
    /// # use duplex_core::{Clock, Instant, ManualClock};
    /// let c = ManualClock::new(Instant::from_millis(10));
    /// c.advance_to(Instant::from_millis(5));
    /// assert_eq!(c.now(), Instant::from_millis(10));
    /// c.advance_to(Instant::from_millis(50));
    /// assert_eq!(c.now(), Instant::from_millis(50));
    /// ```
    pub fn advance_to(&self, t: Instant) {
        if t > self.now.get() {
            self.now.set(t);
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.now.get()
    }
}
