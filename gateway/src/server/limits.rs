//! What one client may cost the gateway: the limits (each a flag of
//! `duplex-gateway`, each in PROTOCOL.md) and the connection slots that
//! enforce the connection caps.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The gateway's limits, with defaults for a voice gateway: a client
/// streams a 20 ms chunk 50 times a second and reads its responses as they
/// come.
///
/// ```
/// let l = duplex_gateway::Limits::default();
/// assert_eq!(l.events_per_second.get(), 200);
/// assert_eq!(l.max_outbound_bytes, 1 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time from TCP accept to the end of the WebSocket handshake.
    pub handshake_timeout: Duration,
    /// A connection that sends nothing (not even a pong) for this long is
    /// closed (1008). The server pings at a third of it (or at half the
    /// write timeout, if that is sooner), so a client that reads is never
    /// idle.
    pub idle_timeout: Duration,
    /// A write to a client that does not complete in this long (it stopped
    /// reading) drops the connection.
    pub write_timeout: Duration,
    /// Connections open at once, all clients together.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_connections_per_ip: usize,
    /// Events per second one connection may send, sustained; more are
    /// refused (`rate_limited`) without being read. A message counts one
    /// event for each 64 KiB it begins (a `session.update` with a 700 KB
    /// reference voice is eleven).
    pub events_per_second: NonZeroU32,
    /// Events one connection may send at once, above the sustained rate.
    pub events_burst: NonZeroU32,
    /// Bytes queued for one client and not yet written: a client that lets
    /// more pile up (it does not read) is dropped (1008).
    pub max_outbound_bytes: usize,
    /// After a shutdown signal: how long connections get to end before
    /// they are cut. Every session is closed either way.
    pub shutdown_grace: Duration,
    /// Audio bytes one session may hold that its engine has not taken up
    /// (appended since the last commit, clear or barge-in); an
    /// append past it is refused (`input_backpressure`) and changes
    /// nothing. vllm-omni 0.30's default, 16 MiB: about 8.7 minutes of
    /// 16 kHz 16-bit audio.
    pub max_pending_input_bytes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            max_connections_per_ip: 100,
            events_per_second: NonZeroU32::new(200).unwrap_or(NonZeroU32::MIN),
            events_burst: NonZeroU32::new(400).unwrap_or(NonZeroU32::MIN),
            max_outbound_bytes: 1 << 20,
            shutdown_grace: Duration::from_secs(5),
            max_pending_input_bytes: duplex_core::InputLimits::DEFAULT.bytes(),
        }
    }
}

/// The smallest outbound bound: one full audit page, or one error, fits.
pub const MIN_OUTBOUND_BYTES: usize = 64 * 1024;

impl Limits {
    /// Refuses limits that would stop every client.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self.handshake_timeout.is_zero() {
            return Err("the handshake timeout must be positive");
        }
        if self.idle_timeout < Duration::from_millis(3) {
            return Err("the idle timeout must be at least 3 ms (pings go at a third of it)");
        }
        if self.write_timeout < Duration::from_millis(2) {
            return Err("the write timeout must be at least 2 ms (checked at half of it)");
        }
        if self.max_connections == 0 || self.max_connections_per_ip == 0 {
            return Err("the connection caps must be positive");
        }
        if self.max_outbound_bytes < MIN_OUTBOUND_BYTES {
            return Err("the outbound bound must be at least 64 KiB");
        }
        Ok(())
    }

    /// How often the server pings a connection and checks its idleness
    /// and its write in progress.
    pub(crate) fn tick(&self) -> Duration {
        (self.idle_timeout / 3).min(self.write_timeout / 2)
    }
}

/// Open connections, in all and per IP address.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    open: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection's place under the caps, given back when it ends.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Slots {
    /// A slot for a connection from `ip`, or `None` if a cap is reached.
    pub(crate) fn take(self: &Arc<Self>, ip: IpAddr, limits: &Limits) -> Option<Slot> {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= limits.max_connections_per_ip
            || self.open.load(Ordering::Relaxed) >= limits.max_connections
        {
            return None;
        }
        per_ip.insert(ip, from_ip + 1);
        self.open.fetch_add(1, Ordering::Relaxed);
        Some(Slot {
            slots: Arc::clone(self),
            ip,
        })
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut per_ip = self
            .slots
            .per_ip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
        self.slots.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Bytes a second of messages over 64 KiB the whole gateway reads, in
/// units of 64 KiB: 16 MiB a second (about 23 `session.update`s with a
/// 700 KB reference voice), and 4 MiB at once.
pub(crate) fn large_messages() -> governor::Quota {
    const UNITS_PER_SECOND: std::num::NonZeroU32 = std::num::NonZeroU32::new(256).unwrap();
    const BURST: std::num::NonZeroU32 = std::num::NonZeroU32::new(64).unwrap();
    governor::Quota::per_second(UNITS_PER_SECOND).allow_burst(BURST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cap_connections_per_ip_and_in_all_and_come_back() {
        let limits = Limits {
            max_connections: 3,
            max_connections_per_ip: 2,
            ..Limits::default()
        };
        let slots = Arc::new(Slots::default());
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = slots.take(a, &limits);
        let second = slots.take(a, &limits);
        assert!(first.is_some() && second.is_some());
        assert!(slots.take(a, &limits).is_none(), "per IP");
        let third = slots.take(b, &limits);
        assert!(third.is_some());
        assert!(slots.take(b, &limits).is_none(), "in all");
        drop(first);
        assert_eq!(slots.open(), 2);
        assert!(slots.take(a, &limits).is_some());
        drop((second, third));
        assert!(slots.per_ip.lock().is_ok_and(|m| m.is_empty()));
        assert_eq!(slots.open(), 0);
    }
}
