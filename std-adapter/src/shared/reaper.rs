//! Reaper drivers: sleep until the next deadline, wake early when an
//! earlier one appears, collect what is due, hand each expiry to the host
//! for engine cleanup, finalize. Neither polls on a fixed tick.
//!
//! - [`ReaperThread`]: a plain thread, for hosts without an async runtime.
//! - `SharedManager::reap` (feature `tokio`): an async task.
//!
//! Early wake: the manager remembers the deadline the reaper sleeps toward
//! (`Wake::target`). An operation that gives a session a deadline before it
//! (an open, a detach, the end of the last active operation) bumps a
//! generation and notifies. The reaper "arms" (target = none, read the
//! generation) before it computes `next_deadline()`, so a deadline that
//! appears while it computes is never missed: it only costs one more turn.

use duplex_core::profile::Profile;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use duplex_core::{Clock, Instant};

use super::{lock, SharedManager};
use duplex_core::Expiry;

/// What a reaper did, for tests and metrics.
///
/// # Examples
///
/// See [`ReaperThread`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaperStats {
    /// Times the reaper woke from sleep (a deadline came, or an earlier one
    /// appeared).
    pub wakes: u64,
    /// Wakes on a deadline that found nothing due (a deadline that moved
    /// later meanwhile: a touch, an append). Never a fixed tick.
    pub idle_wakes: u64,
    /// Sessions collected as expired and handed to the host.
    pub expired: u64,
    /// Of those, finalized after the host's cleanup.
    pub finalized: u64,
}

/// The early-wake signal between the manager's operations and a reaper.
#[derive(Debug)]
pub(crate) struct Wake {
    /// The deadline (ms) the reaper sleeps toward; `u64::MAX` while it has
    /// none or is computing one (every new deadline is then "earlier").
    target: AtomicU64,
    generation: Mutex<u64>,
    changed: Condvar,
    #[cfg(feature = "tokio")]
    notify: tokio::sync::Notify,
}

impl Default for Wake {
    fn default() -> Self {
        Wake {
            target: AtomicU64::new(u64::MAX),
            generation: Mutex::new(0),
            changed: Condvar::new(),
            #[cfg(feature = "tokio")]
            notify: tokio::sync::Notify::new(),
        }
    }
}

impl Wake {
    /// A session now has `deadline`: wake the reaper if that is earlier
    /// than what it sleeps toward (at most once per lowering).
    pub(crate) fn earlier(&self, deadline: Instant) {
        let at = deadline.as_millis();
        // A plain load first: the common case (a later deadline) then
        // shares the cache line instead of writing it.
        if at < self.target.load(Ordering::Acquire)
            && at < self.target.fetch_min(at, Ordering::AcqRel)
        {
            self.interrupt();
        }
    }

    /// Wakes every reaper (a new deadline, or a shutdown).
    fn interrupt(&self) {
        *lock(&self.generation) += 1;
        self.changed.notify_all();
        #[cfg(feature = "tokio")]
        self.notify.notify_one();
    }

    /// Before computing the next deadline: every new deadline counts as
    /// earlier until [`aim`](Self::aim). Returns the generation to wait on.
    fn arm(&self) -> u64 {
        self.target.store(u64::MAX, Ordering::Release);
        *lock(&self.generation)
    }

    /// The reaper now sleeps toward `deadline`.
    fn aim(&self, deadline: Option<Instant>) {
        self.target.fetch_min(
            deadline.map_or(u64::MAX, Instant::as_millis),
            Ordering::AcqRel,
        );
    }
}

impl<C: Clock, P: Profile> SharedManager<C, P> {
    /// Collects what is due at `now` (if anything) and hands it to
    /// `handler`, then finalizes each. Returns whether anything was due.
    fn reap_due(
        &self,
        deadline: Option<Instant>,
        handler: &mut impl FnMut(&Expiry<P::Tables>),
        stats: &mut ReaperStats,
    ) -> bool {
        match deadline {
            Some(d) if d <= self.clock().now() => {}
            _ => return false,
        }
        for expiry in self.collect_expired([]) {
            stats.expired += 1;
            handler(&expiry);
            // The ids were handed to the host in the expiry; what finalize
            // returns is that set minus any released since.
            if self.finalize(&expiry.session).is_ok() {
                stats.finalized += 1;
            }
        }
        true
    }

    /// Starts a reaper on a plain thread: it sleeps until
    /// [`next_deadline`](Self::next_deadline), wakes early when an earlier
    /// deadline appears, hands each expired session to `handler` (cancel its
    /// submitted requests and drop its reserved ones in the engine), then
    /// finalizes it. Stop it with [`ReaperThread::shutdown`].
    ///
    /// # Errors
    ///
    /// The thread could not be spawned.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use duplex_core::*;
    /// use duplex_std::{ManagerConfig, MonotonicClock, SharedManager, Sessions};
    ///
    /// let m = Arc::new(SharedManager::new(MonotonicClock::new(), ManagerConfig::default())?);
    /// let cleaned = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&cleaned);
    /// let reaper = m.spawn_reaper(move |expiry| {
    ///     // engine.cancel(&expiry.submitted); engine.drop(&expiry.reserved);
    ///     log.lock().unwrap().push(expiry.session.clone());
    /// })?;
    ///
    /// let f = Fence::new(Id::new("call-1")?, 0);
    /// let lease = LeaseConfig::new(None, Duration::from_millis(20))?;
    /// m.open(f.clone(), OpenOptions::default().lease(lease))?;
    /// m.detach(&f)?; // the reaper wakes for this new, earlier deadline
    /// while m.len() > 0 {
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    /// }
    /// let stats = reaper.shutdown();
    /// assert_eq!(cleaned.lock().unwrap().as_slice(), [f.session]);
    /// assert_eq!((stats.expired, stats.finalized), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_reaper(
        self: &Arc<Self>,
        mut handler: impl FnMut(&Expiry<P::Tables>) + Send + 'static,
    ) -> std::io::Result<ReaperThread>
    where
        Self: Send + Sync + 'static,
    {
        let manager = Arc::clone(self);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("duplex-reaper".into())
            .spawn(move || {
                let mut stats = ReaperStats::default();
                while !stopping.load(Ordering::Acquire) {
                    let generation = manager.wake.arm();
                    let deadline = manager.next_deadline();
                    manager.wake.aim(deadline);
                    if manager.reap_due(deadline, &mut handler, &mut stats) {
                        continue;
                    }
                    let timed_out = manager.sleep_until(deadline, generation, &stopping);
                    stats.wakes += 1;
                    if timed_out && !stopping.load(Ordering::Acquire) {
                        let next = manager.next_deadline();
                        if next.is_none_or(|d| d > manager.clock().now()) {
                            stats.idle_wakes += 1;
                        }
                    }
                }
                stats
            })?;
        let interrupt: Arc<dyn Fn() + Send + Sync> = {
            let manager = Arc::clone(self);
            Arc::new(move || manager.wake.interrupt())
        };
        Ok(ReaperThread {
            stop,
            interrupt,
            handle: Some(handle),
        })
    }

    /// Sleeps until `deadline` (forever if none), an earlier deadline
    /// (the generation moved), or a stop. Returns whether the deadline came.
    fn sleep_until(&self, deadline: Option<Instant>, generation: u64, stop: &AtomicBool) -> bool {
        let mut current = lock(&self.wake.generation);
        loop {
            if *current != generation || stop.load(Ordering::Acquire) {
                return false;
            }
            match deadline {
                None => {
                    current = self
                        .wake
                        .changed
                        .wait(current)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                Some(d) => {
                    let now = self.clock().now();
                    if now >= d {
                        return true;
                    }
                    let wait = Duration::from_millis(d.saturating_duration_since(now).as_millis());
                    current = self
                        .wake
                        .changed
                        .wait_timeout(current, wait)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            }
        }
    }

    /// The reaper as an async task (feature `tokio`): sleeps until
    /// [`next_deadline`](Self::next_deadline) on the tokio timer, wakes
    /// early when an earlier deadline appears, hands each expired session
    /// to `handler`, then finalizes it; returns when `shutdown` completes.
    /// The manager's clock should be tokio's
    /// ([`TokioClock`](crate::TokioClock)), so paused test time drives both.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use duplex_core::*;
    /// use duplex_std::{ManagerConfig, SharedManager, TokioClock, Sessions};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let m = Arc::new(SharedManager::new(TokioClock::new(), ManagerConfig::default())?);
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let reaper = tokio::spawn(Arc::clone(&m).reap(|_expiry| {}, async { let _ = stopped.await; }));
    ///
    /// let f = Fence::new(Id::new("call-1")?, 0);
    /// m.open(f.clone(), OpenOptions::default().lease(LeaseConfig::new(None, Duration::from_secs(5))?))?;
    /// m.detach(&f)?;
    /// tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    /// assert!(m.is_empty());
    /// stop.send(()).unwrap();
    /// assert_eq!(reaper.await?.finalized, 1);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn reap(
        self: Arc<Self>,
        mut handler: impl FnMut(&Expiry<P::Tables>),
        shutdown: impl std::future::Future<Output = ()>,
    ) -> ReaperStats {
        let mut stats = ReaperStats::default();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            self.wake.arm();
            let deadline = self.next_deadline();
            self.wake.aim(deadline);
            if self.reap_due(deadline, &mut handler, &mut stats) {
                continue;
            }
            let sleep = async {
                match deadline {
                    Some(d) => {
                        let wait = d.saturating_duration_since(self.clock().now());
                        tokio::time::sleep(Duration::from_millis(wait.as_millis())).await;
                        true
                    }
                    None => std::future::pending().await,
                }
            };
            let timed_out = tokio::select! {
                timed_out = sleep => timed_out,
                () = self.wake.notify.notified() => false,
                () = &mut shutdown => break,
            };
            stats.wakes += 1;
            if timed_out && self.next_deadline().is_none_or(|d| d > self.clock().now()) {
                stats.idle_wakes += 1;
            }
        }
        stats
    }
}

/// A reaper running on its own thread (see
/// [`SharedManager::spawn_reaper`]). Dropping it without
/// [`shutdown`](Self::shutdown) stops it too, without waiting.
pub struct ReaperThread {
    stop: Arc<AtomicBool>,
    interrupt: Arc<dyn Fn() + Send + Sync>,
    handle: Option<JoinHandle<ReaperStats>>,
}

impl ReaperThread {
    /// Stops the reaper, waits for it to finish its current round, and
    /// returns what it did.
    ///
    /// See [`SharedManager::spawn_reaper`].
    pub fn shutdown(mut self) -> ReaperStats {
        self.stop.store(true, Ordering::Release);
        (self.interrupt)();
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ReaperThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        (self.interrupt)();
    }
}

impl std::fmt::Debug for ReaperThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaperThread")
            .field("stopping", &self.stop.load(Ordering::Acquire))
            .finish_non_exhaustive()
    }
}
