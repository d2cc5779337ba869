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

/// Milliseconds since the clock was created, from tokio's clock (feature
/// `tokio`): a manager and its reaper task then share one notion of time,
/// including tokio's paused time in tests.
///
/// # Examples
///
/// ```
/// use duplex_core::Clock;
/// use duplex_std::TokioClock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = TokioClock::new();
/// tokio::time::sleep(std::time::Duration::from_millis(250)).await;
/// assert_eq!(clock.now().as_millis(), 250);
/// # }
/// ```
#[cfg(feature = "tokio")]
#[derive(Debug, Clone, Copy)]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

#[cfg(feature = "tokio")]
impl TokioClock {
    /// A clock whose origin is now (tokio's now).
    ///
    /// See the type-level example.
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

#[cfg(feature = "tokio")]
impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    fn now(&self) -> Instant {
        let ms = self.origin.elapsed().as_millis();
        Instant::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}
