//! A realtime session's configuration (its merged `session` object), held
//! within bounds: one session's at most [`MAX_CONFIG`] bytes, all sessions'
//! together at most [`TOTAL_CONFIG_BYTES`]. A `session.update` may carry a
//! reference voice or a video frame, so a configuration is the largest
//! thing a client can make the gateway keep; each update is checked before
//! it replaces anything, and a refused one changes nothing.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::SessionConfig;
use crate::protocol::realtime::{RealtimeError, MAX_SESSION_UPDATE};

/// The most bytes of one session's configuration (as JSON text): what one
/// `session.update` may carry.
pub(crate) const MAX_CONFIG: usize = MAX_SESSION_UPDATE;

/// The most configuration bytes all sessions of a gateway keep together.
pub(crate) const TOTAL_CONFIG_BYTES: usize = 256 * 1024 * 1024;

/// A session's configuration and the bytes of the gateway's budget it
/// holds (given back when the last copy goes).
#[derive(Debug, Default)]
pub(crate) struct Config {
    map: SessionConfig,
    bytes: usize,
    budget: Option<Arc<AtomicUsize>>,
}

impl Config {
    /// `map` as a session's configuration, charged to `budget`.
    pub(crate) fn new(
        map: SessionConfig,
        budget: &Arc<AtomicUsize>,
    ) -> Result<Self, RealtimeError> {
        let bytes = json_len(&map);
        if bytes > MAX_CONFIG {
            return Err(RealtimeError::invalid(
                "too_large",
                format!("a session configuration of {bytes} bytes; the limit is {MAX_CONFIG}"),
                None,
            ));
        }
        let held = budget.fetch_add(bytes, Ordering::Relaxed);
        if held + bytes > TOTAL_CONFIG_BYTES {
            budget.fetch_sub(bytes, Ordering::Relaxed);
            return Err(RealtimeError::invalid(
                "duplex_session_busy",
                "the gateway holds all the session configuration it may; try again later",
                None,
            ));
        }
        Ok(Config {
            map,
            bytes,
            budget: Some(Arc::clone(budget)),
        })
    }

    /// This configuration with `update` merged in (its members replace
    /// the ones of the same name), charged anew; `self` is left as it was.
    pub(crate) fn merged(
        &self,
        update: SessionConfig,
        budget: &Arc<AtomicUsize>,
    ) -> Result<Self, RealtimeError> {
        let mut map = self.map.clone();
        for (k, v) in update {
            map.insert(k, v);
        }
        Config::new(map, budget)
    }
}

/// The length of `map` as JSON text, counted as it is written (a
/// configuration may be a megabyte: it is measured, not copied).
fn json_len(map: &SessionConfig) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, map).map_or(0, |()| count.0)
}

impl Deref for Config {
    type Target = SessionConfig;

    fn deref(&self) -> &SessionConfig {
        &self.map
    }
}

impl PartialEq for Config {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn map(value: &Value) -> SessionConfig {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_configuration_is_charged_until_it_goes() {
        let budget = Arc::new(AtomicUsize::new(0));
        let first = Config::new(map(&json!({"model": "m"})), &budget).unwrap();
        let held = budget.load(Ordering::Relaxed);
        assert_eq!(held, r#"{"model":"m"}"#.len());
        let second = first.merged(map(&json!({"voice": "v"})), &budget).unwrap();
        assert_eq!(second.len(), 2);
        drop(first);
        assert_eq!(
            budget.load(Ordering::Relaxed),
            r#"{"model":"m","voice":"v"}"#.len()
        );
        drop(second);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_update_past_the_bound_is_refused_and_changes_nothing() {
        let budget = Arc::new(AtomicUsize::new(0));
        let half = "a".repeat(MAX_CONFIG / 2);
        let config = Config::new(map(&json!({"ref_audio": half})), &budget).unwrap();
        let held = budget.load(Ordering::Relaxed);
        let refused = config
            .merged(map(&json!({"video": half})), &budget)
            .unwrap_err();
        assert_eq!(refused.to_value()["error"]["code"], "too_large");
        assert_eq!((config.len(), budget.load(Ordering::Relaxed)), (1, held));
        // Replacing a member is measured as the result, not the sum.
        assert!(config
            .merged(map(&json!({"ref_audio": half})), &budget)
            .is_ok());
    }

    #[test]
    fn the_gateway_s_budget_holds_across_sessions() {
        let budget = Arc::new(AtomicUsize::new(TOTAL_CONFIG_BYTES - 10));
        let refused = Config::new(map(&json!({"model": "a longer name"})), &budget).unwrap_err();
        assert_eq!(refused.to_value()["error"]["code"], "duplex_session_busy");
        assert_eq!(budget.load(Ordering::Relaxed), TOTAL_CONFIG_BYTES - 10);
    }
}
