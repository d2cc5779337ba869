//! Counters a host can export (feature `metrics`), through the `metrics`
//! facade: install any recorder (Prometheus, StatsD, ...) and these appear.
//! Without the feature every function here compiles to nothing.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `duplex_sessions` | gauge | `state` | sessions in the manager by state (`open`, `detached`, `closing`) |
//! | `duplex_admissions_refused_total` | counter | | opens refused by `max_sessions` |
//! | `duplex_expired_total` | counter | `reason` | sessions moved to closing by expiry |
//! | `duplex_stale_refused_total` | counter | `kind` | operations refused as stale (`fence_mismatch`, `stale_reservation`, `generation_mismatch`) |

use duplex_core::{CloseReason, ErrorKind, StateKind};

/// A session entered `state` in a manager.
#[inline]
pub(crate) fn entered(state: StateKind) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("duplex_sessions", "state" => state.as_str()).increment(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = state;
}

/// A session left `state` (for another state, or the manager).
#[inline]
pub(crate) fn left(state: StateKind) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("duplex_sessions", "state" => state.as_str()).decrement(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = state;
}

/// A session moved from `from` to `to`.
#[inline]
pub(crate) fn moved(from: StateKind, to: StateKind) {
    if from != to {
        left(from);
        entered(to);
    }
}

/// An open was refused by the admission limit.
#[inline]
pub(crate) fn admission_refused() {
    #[cfg(feature = "metrics")]
    metrics::counter!("duplex_admissions_refused_total").increment(1);
}

/// A session expired for `reason`.
#[inline]
pub(crate) fn expired(reason: CloseReason) {
    #[cfg(feature = "metrics")]
    metrics::counter!("duplex_expired_total", "reason" => reason.as_str()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// An operation was refused with `kind`; counted when that means stale
/// (a late message of a cancelled turn, an old connection or reservation).
#[inline]
pub(crate) fn refused(kind: ErrorKind) {
    let stale = matches!(
        kind,
        ErrorKind::FenceMismatch | ErrorKind::StaleReservation | ErrorKind::GenerationMismatch
    );
    #[cfg(feature = "metrics")]
    if stale {
        metrics::counter!("duplex_stale_refused_total", "kind" => kind.as_str()).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = stale;
}
