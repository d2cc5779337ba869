//! The lease: idle TTL, disconnect grace, resume generation and the
//! active operations that hold idle expiry off.
//!
//! Whether the client is detached, and why a session is closing, live in the
//! typestate (`Detached { since }`, `Closing { reason }`), not here.

use core::fmt;

use crate::error::{ConfigField, Error, Table};
use crate::profile::Tables;
use crate::storage::{Column, StoredId};
use crate::time::{Duration, Instant};

/// Lease timing. Both spans are positive; the idle TTL may be absent (the
/// session then never idle-expires).
///
/// # Examples
///
/// ```
/// use duplex_core::{Duration, LeaseConfig};
///
/// let c = LeaseConfig::new(Some(Duration::from_secs(60)), Duration::from_secs(5))?;
/// assert_eq!(c.idle_ttl(), Some(Duration::from_secs(60)));
/// assert!(LeaseConfig::new(Some(Duration::ZERO), Duration::from_secs(5)).is_err());
/// // The default is the seed's: 300 s idle TTL, 30 s grace.
/// assert_eq!(LeaseConfig::default().disconnect_grace(), Duration::from_secs(30));
/// # Ok::<(), duplex_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeaseConfig {
    /// The idle TTL; zero means none (a zero TTL is refused by `new`, so
    /// the encoding is lossless and saves the `Option`'s word per session).
    idle_ttl: Duration,
    disconnect_grace: Duration,
}

impl LeaseConfig {
    /// 300 s idle TTL, 30 s disconnect grace.
    pub const DEFAULT: LeaseConfig = LeaseConfig {
        idle_ttl: Duration::from_millis(300_000),
        disconnect_grace: Duration::from_millis(30_000),
    };

    /// Validates and builds a lease configuration.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the idle TTL is zero or the grace is zero.
    ///
    /// ```
    /// # use duplex_core::{Duration, LeaseConfig};
    /// assert!(LeaseConfig::new(None, Duration::from_millis(1)).is_ok());
    /// assert!(LeaseConfig::new(None, Duration::ZERO).is_err());
    /// ```
    pub const fn new(
        idle_ttl: Option<Duration>,
        disconnect_grace: Duration,
    ) -> Result<Self, Error> {
        if let Some(ttl) = idle_ttl {
            if ttl.is_zero() {
                return Err(Error::InvalidConfig {
                    field: ConfigField::IdleTtl,
                    value: 0,
                    expected: "a positive number of milliseconds, or none",
                });
            }
        }
        if disconnect_grace.is_zero() {
            return Err(Error::InvalidConfig {
                field: ConfigField::DisconnectGrace,
                value: 0,
                expected: "a positive number of milliseconds",
            });
        }
        Ok(LeaseConfig {
            idle_ttl: match idle_ttl {
                Some(ttl) => ttl,
                None => Duration::ZERO,
            },
            disconnect_grace,
        })
    }

    /// The idle TTL, if any.
    ///
    /// ```
    /// # use duplex_core::LeaseConfig;
    /// assert!(LeaseConfig::default().idle_ttl().is_some());
    /// ```
    pub const fn idle_ttl(&self) -> Option<Duration> {
        if self.idle_ttl.is_zero() {
            None
        } else {
            Some(self.idle_ttl)
        }
    }

    /// The disconnect grace.
    ///
    /// ```
    /// # use duplex_core::{Duration, LeaseConfig};
    /// assert_eq!(LeaseConfig::default().disconnect_grace(), Duration::from_secs(30));
    /// ```
    pub const fn disconnect_grace(&self) -> Duration {
        self.disconnect_grace
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig::DEFAULT
    }
}

/// What kept the session alive (the activity a `touch` reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Activity {
    /// Client input was appended.
    Append,
    /// A client signal.
    Signal,
    /// The client acknowledged playback.
    PlaybackAck,
    /// A keep-alive.
    Heartbeat,
    /// A connection attached.
    Attach,
    /// A connection detached.
    Detach,
    /// A connection resumed.
    Resume,
    /// The model produced output.
    ModelOutput,
}

impl Activity {
    /// Every activity.
    pub const ALL: [Activity; 8] = [
        Activity::Append,
        Activity::Signal,
        Activity::PlaybackAck,
        Activity::Heartbeat,
        Activity::Attach,
        Activity::Detach,
        Activity::Resume,
        Activity::ModelOutput,
    ];

    /// The stable snake_case name.
    ///
    /// ```
    /// # use duplex_core::Activity;
    /// assert_eq!(Activity::PlaybackAck.as_str(), "playback_ack");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Activity::Append => "append",
            Activity::Signal => "signal",
            Activity::PlaybackAck => "playback_ack",
            Activity::Heartbeat => "heartbeat",
            Activity::Attach => "attach",
            Activity::Detach => "detach",
            Activity::Resume => "resume",
            Activity::ModelOutput => "model_output",
        }
    }

    /// Parses a snake_case name.
    ///
    /// ```
    /// # use duplex_core::Activity;
    /// assert_eq!(Activity::parse("heartbeat"), Some(Activity::Heartbeat));
    /// assert_eq!(Activity::parse("nap"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Activity> {
        Activity::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a session is closing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CloseReason {
    /// The host closed it.
    ExplicitClose,
    /// The client asked to close.
    ClientClose,
    /// A stage request of the session failed and is being cleaned up.
    RequestCleanup,
    /// The client stayed detached past the disconnect grace.
    DisconnectGraceExpired,
    /// No activity for the idle TTL.
    IdleTtlExpired,
}

impl CloseReason {
    /// Every reason.
    pub const ALL: [CloseReason; 5] = [
        CloseReason::ExplicitClose,
        CloseReason::ClientClose,
        CloseReason::RequestCleanup,
        CloseReason::DisconnectGraceExpired,
        CloseReason::IdleTtlExpired,
    ];

    /// The stable snake_case name.
    ///
    /// ```
    /// # use duplex_core::CloseReason;
    /// assert_eq!(CloseReason::IdleTtlExpired.as_str(), "idle_ttl_expired");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            CloseReason::ExplicitClose => "explicit_close",
            CloseReason::ClientClose => "client_close",
            CloseReason::RequestCleanup => "request_cleanup",
            CloseReason::DisconnectGraceExpired => "disconnect_grace_expired",
            CloseReason::IdleTtlExpired => "idle_ttl_expired",
        }
    }

    /// Parses a snake_case name.
    ///
    /// ```
    /// # use duplex_core::CloseReason;
    /// assert_eq!(CloseReason::parse("client_close"), Some(CloseReason::ClientClose));
    /// ```
    pub fn parse(name: &str) -> Option<CloseReason> {
        CloseReason::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lease bookkeeping shared by every live state.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Lease<T: Tables> {
    pub(crate) config: LeaseConfig,
    pub(crate) generation: u64,
    pub(crate) last_activity: Instant,
    pub(crate) active: ActiveOps<T>,
    /// The control id of the resume that produced `generation` (unused:
    /// the open, or a resume without one): a resume asked again with it is
    /// answered with `generation`, unchanged.
    pub(crate) resumed_by: T::StoredId,
}

/// The active operation ids: a set of at most `A`, kept as a prefix of a
/// column followed by unused rows (inline: [`Id::UNUSED`] fillers; heap:
/// none, the column is as long as the set). The count is where the unused
/// rows start, so the set needs no length byte of its own (with `A` inline
/// ids of `L` bytes it is exactly `A * L` bytes, which keeps the lease a
/// whole number of words).
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct ActiveOps<T: Tables> {
    /// The active ids, then unused rows.
    ids: T::Ops<T::StoredId>,
}

impl<T: Tables> ActiveOps<T> {
    pub(crate) fn new() -> Self {
        ActiveOps {
            ids: Column::empty(),
        }
    }

    /// How many operations are active.
    pub(crate) fn len(&self) -> usize {
        self.ids
            .iter()
            .position(StoredId::is_unused)
            .unwrap_or(self.ids.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ids.first().is_none_or(StoredId::is_unused)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len() == T::ACTIVE_OPS
    }

    pub(crate) fn contains(&self, op: &T::Id) -> bool {
        self.iter().any(|a| a.is(op))
    }

    /// The active ids.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T::StoredId> {
        self.ids.iter().take_while(|id| !id.is_unused())
    }

    /// Adds `op`; refused (and handed back) when the set is full.
    pub(crate) fn push(&mut self, op: T::Id) -> Result<(), T::Id> {
        let len = self.len();
        if len >= T::ACTIVE_OPS {
            return Err(op);
        }
        self.ids.grow_to(len + 1);
        match self.ids.get_mut(len) {
            Some(slot) => {
                slot.set(&op);
                Ok(())
            }
            None => Err(op),
        }
    }

    /// Removes the id at `index`, moving the last one into its place.
    pub(crate) fn swap_remove(&mut self, index: usize) {
        let last = self.len().saturating_sub(1);
        if index <= last {
            self.ids.swap(index, last);
            if let Some(slot) = self.ids.get_mut(last) {
                *slot = Default::default();
            }
            self.ids.trim_to(last);
        }
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.ids.heap_bytes()
    }

    pub(crate) fn clear(&mut self) {
        for slot in self.ids.iter_mut() {
            *slot = Default::default();
        }
        self.ids.trim_to(0);
    }
}

impl<T: Tables> Lease<T> {
    pub(crate) fn new(config: LeaseConfig, now: Instant) -> Self {
        Lease {
            config,
            generation: 0,
            last_activity: now,
            active: ActiveOps::new(),
            resumed_by: T::StoredId::default(),
        }
    }

    /// A fresh lease, in place (no new value built and copied).
    #[inline]
    pub(crate) fn reset(&mut self, config: LeaseConfig, now: Instant) {
        self.config = config;
        self.generation = 0;
        self.last_activity = now;
        self.active.clear();
        self.resumed_by = T::StoredId::default();
    }

    /// The generation the resume with `control` produced, if it produced
    /// the current one (a resume asked again).
    pub(crate) fn resumed_by(&self, control: &T::Id) -> Option<u64> {
        self.resumed_by.is(control).then_some(self.generation)
    }

    /// A resume checked against `expected_generation` (a refusal changes
    /// nothing): the generation moves on, `control` (if any) is recorded as
    /// the resume that produced it, and activity is recorded.
    pub(crate) fn resume(
        &mut self,
        expected_generation: u64,
        control: Option<&T::Id>,
        now: Instant,
    ) -> Result<u64, Error> {
        if expected_generation != self.generation {
            return Err(Error::GenerationMismatch {
                expected: self.generation,
                actual: expected_generation,
            });
        }
        self.generation = self.generation.saturating_add(1);
        match control {
            Some(c) => self.resumed_by.set(c),
            None => self.resumed_by = T::StoredId::default(),
        }
        self.last_activity = now;
        Ok(self.generation)
    }

    /// Checks `begin_operation` without changing anything.
    pub(crate) fn check_begin(&self, op: &T::Id) -> Result<(), Error> {
        if self.active.contains(op) {
            return Err(Error::OperationActive);
        }
        if self.active.is_full() {
            return Err(Error::Full {
                table: Table::ActiveOperations,
                capacity: T::ACTIVE_OPS,
            });
        }
        Ok(())
    }

    /// Inserts a checked operation id.
    pub(crate) fn begin(&mut self, op: T::Id, now: Instant) {
        // Checked by `check_begin`: not present, not full.
        let _ = self.active.push(op);
        self.last_activity = now;
    }

    pub(crate) fn active_index(&self, op: &T::Id) -> Result<usize, Error> {
        self.active
            .iter()
            .position(|a| a.is(op))
            .ok_or(Error::OperationNotActive)
    }

    pub(crate) fn end(&mut self, index: usize, now: Instant) {
        self.active.swap_remove(index);
        self.last_activity = now;
    }

    /// When the idle TTL runs out, if it can: never while an operation is active.
    pub(crate) fn idle_deadline(&self) -> Option<Instant> {
        match self.config.idle_ttl() {
            Some(ttl) if self.active.is_empty() => Some(self.last_activity + ttl),
            _ => None,
        }
    }

    /// Marks the lease closing, minus what the typestate carries: the
    /// generation moves on (a resume token of the old connection is dead)
    /// and no operation stays active.
    pub(crate) fn mark_closing(&mut self) {
        self.generation = self.generation.saturating_add(1);
        self.active.clear();
        self.resumed_by = T::StoredId::default();
    }
}
