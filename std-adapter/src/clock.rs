//! [`MonotonicClock`]: the core's [`Clock`] over `std::time::Instant`.

use duplex_core::{Clock, Instant};

/// Milliseconds since the clock was created, from `std::time::Instant`
/// (monotonic; never goes backwards, never fails).
///
/// # Examples
///
/// ```
/// use duplex_core::Clock;
/// use duplex_std::MonotonicClock;
///
/// let clock = MonotonicClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    ///
    /// ```
    /// # use duplex_core::Clock;
    /// assert!(duplex_std::MonotonicClock::new().now().as_millis() < 1_000);
    /// ```
    pub fn new() -> Self {
        MonotonicClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        let ms = self.origin.elapsed().as_millis();
        Instant::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}
