//! What `GET /metrics` shows, in the Prometheus text format.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `duplex_gateway_<counter>_total` | counter | | each of [`Counters`] (connections, opened, appended, refusals, limits hit, takeovers, adoptions, ...) |
//! | `duplex_gateway_connections_open` | gauge | | connections open now |
//! | `duplex_gateway_sessions` | gauge | | sessions in the manager now |
//! | `duplex_gateway_journal_bytes` | gauge | | bytes held by the realtime sessions' journals |
//! | `duplex_gateway_config_bytes` | gauge | | bytes held by the realtime sessions' configurations (`session.update`), at most 256 MiB together and 1 MiB a session |
//! | `duplex_gateway_events_in_total` | counter | `dialect`, `type` | client events read, by type (`invalid`: undecodable, or of no known type) |
//! | `duplex_gateway_events_out_total` | counter | `dialect`, `type` | server events written to sockets, by type |
//! | `duplex_gateway_refusals_total` | counter | `dialect`, `code` | `error` events written, by code |
//! | `duplex_gateway_append_seconds` | histogram | | an append's time in the gateway: decoded to answered (for a cluster node, stored) |
//! | `duplex_gateway_store_seconds` | histogram | | a cluster node's write of a change to its store |
//! | `duplex_sessions`, `duplex_*_total` | | | duplex-std's own (sessions by state, refused admissions, expiries, stale operations): see `duplex_std::metrics` |
//!
//! The counters and gauges are this gateway's; the histograms and
//! duplex-std's metrics go through the `metrics` facade to the process's
//! Prometheus recorder (`metrics-exporter-prometheus`), which the first
//! gateway of a process installs. A host that installed a recorder of its
//! own gets those there instead, and `/metrics` shows the rest.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::stats::Counters;

/// Bucket bounds of the latency histograms, in seconds: 50 µs to 5 s.
const SECONDS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
];

/// The most distinct label values one tally keeps; more are `other` (a
/// hostile client must not grow the gateway through event types).
const MAX_KINDS: usize = 64;

/// The process's Prometheus recorder: installed by the first gateway, if
/// no other recorder was.
fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
                .ok()?;
            builder.install_recorder().ok()
        })
        .as_ref()
}

/// Counts by a label value that arrives as text (an event's type): a
/// fixed table of [`MAX_KINDS`] slots, found by hash and claimed once, so
/// counting takes no lock and no allocation once a kind has its slot.
/// The kinds come from the gateway's own names (event types, refusal
/// codes), never from a client's text; a full table counts `other`.
#[derive(Debug)]
pub(crate) struct Tally {
    slots: Box<[Slot]>,
    other: AtomicU64,
}

#[derive(Debug, Default)]
struct Slot {
    kind: OnceLock<Box<str>>,
    count: AtomicU64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            slots: (0..MAX_KINDS).map(|_| Slot::default()).collect(),
            other: AtomicU64::new(0),
        }
    }
}

/// FNV-1a: short names, one pass, no state.
fn hash(kind: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in kind.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    // The table's size is far below usize::MAX: the low bits suffice.
    (h as usize) % MAX_KINDS
}

impl Tally {
    /// Adds one to `kind` (to `other` once [`MAX_KINDS`] are kept).
    pub(crate) fn bump(&self, kind: &str) {
        let start = hash(kind);
        for i in 0..MAX_KINDS {
            let slot = &self.slots[(start + i) % MAX_KINDS];
            let held = match slot.kind.get() {
                Some(held) => held,
                // Claimed by this kind, or by another one just now.
                None => slot.kind.get_or_init(|| kind.into()),
            };
            if held.as_ref() == kind {
                slot.count.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        self.other.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = self
            .slots
            .iter()
            .filter_map(|s| Some((s.kind.get()?.to_string(), s.count.load(Ordering::Relaxed))))
            .collect();
        let other = self.other.load(Ordering::Relaxed);
        if other > 0 {
            all.push(("other".into(), other));
        }
        all.sort();
        all
    }
}

/// The tallies of one dialect.
#[derive(Debug, Default)]
pub(crate) struct DialectTallies {
    pub(crate) events_in: Tally,
    pub(crate) events_out: Tally,
    pub(crate) refusals: Tally,
}

/// A gateway's metrics besides its counters.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) native: DialectTallies,
    pub(crate) realtime: DialectTallies,
    append: metrics::Histogram,
    store: metrics::Histogram,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        // Installed before the handles are made, so that they record to it.
        let _ = prometheus();
        Metrics {
            native: DialectTallies::default(),
            realtime: DialectTallies::default(),
            append: metrics::histogram!("duplex_gateway_append_seconds"),
            store: metrics::histogram!("duplex_gateway_store_seconds"),
        }
    }

    /// The tallies of `realtime` or the native dialect.
    pub(crate) fn dialect(&self, realtime: bool) -> &DialectTallies {
        if realtime {
            &self.realtime
        } else {
            &self.native
        }
    }

    /// An append that began at `since` was answered.
    pub(crate) fn appended(&self, since: Instant) {
        self.append.record(since.elapsed().as_secs_f64());
    }

    /// A store write that began at `since` ended.
    pub(crate) fn stored(&self, since: Instant) {
        self.store.record(since.elapsed().as_secs_f64());
    }

    /// Folds the histograms' samples in (the recorder needs it now and
    /// then; a render does it too).
    pub(crate) fn upkeep() {
        if let Some(handle) = prometheus() {
            handle.run_upkeep();
        }
    }

    /// Counts one message written to a client: its type, and an error's
    /// code (the text starts with its `type`, as every event the gateway
    /// renders does).
    pub(crate) fn written(&self, realtime: bool, text: &str) {
        // Every event the gateway renders starts with its type; reading
        // it there costs no search and no allocation.
        let Some(kind) = text
            .strip_prefix(r#"{"type":""#)
            .and_then(|rest| rest.split_once('"'))
            .map(|(kind, _)| kind)
        else {
            return;
        };
        let tallies = self.dialect(realtime);
        tallies.events_out.bump(kind);
        if kind == "error" {
            let code = field(text, "code").or_else(|| field(text, "kind"));
            tallies.refusals.bump(code.unwrap_or("unknown"));
        }
    }

    /// The page: this gateway's counters and gauges, then the recorder's.
    pub(crate) fn render(&self, counters: &Counters, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(8 * 1024);
        for (name, value, help) in counters.described() {
            let _ = write!(
                out,
                "# HELP duplex_gateway_{name}_total {help}\n\
                 # TYPE duplex_gateway_{name}_total counter\n\
                 duplex_gateway_{name}_total {value}\n"
            );
        }
        let gauges = [
            (
                "connections_open",
                "Connections open now.",
                gauges.connections_open,
            ),
            ("sessions", "Sessions in the manager now.", gauges.sessions),
            (
                "journal_bytes",
                "Bytes held by the realtime sessions' journals.",
                gauges.journal_bytes,
            ),
            (
                "config_bytes",
                "Bytes held by the realtime sessions' configurations.",
                gauges.config_bytes,
            ),
        ];
        for (name, help, value) in gauges {
            let _ = write!(
                out,
                "# HELP duplex_gateway_{name} {help}\n\
                 # TYPE duplex_gateway_{name} gauge\n\
                 duplex_gateway_{name} {value}\n"
            );
        }
        let tallies = [
            ("events_in_total", "type", "Client events read, by type."),
            (
                "events_out_total",
                "type",
                "Server events written, by type.",
            ),
            ("refusals_total", "code", "Error events written, by code."),
        ];
        for (name, label, help) in tallies {
            let _ = write!(
                out,
                "# HELP duplex_gateway_{name} {help}\n# TYPE duplex_gateway_{name} counter\n"
            );
            for (dialect, t) in [("native", &self.native), ("realtime", &self.realtime)] {
                let tally = match name {
                    "events_in_total" => &t.events_in,
                    "events_out_total" => &t.events_out,
                    _ => &t.refusals,
                };
                for (kind, n) in tally.snapshot() {
                    let _ = writeln!(
                        out,
                        "duplex_gateway_{name}{{dialect=\"{dialect}\",{label}=\"{}\"}} {n}",
                        escape(&kind)
                    );
                }
            }
        }
        if let Some(handle) = prometheus() {
            handle.run_upkeep();
            out.push_str(&handle.render());
        }
        out
    }
}

/// What `/metrics` shows of the gateway now, beside its counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gauges {
    /// Connections open now.
    pub(crate) connections_open: usize,
    /// Sessions in the manager now.
    pub(crate) sessions: usize,
    /// Bytes held by the realtime sessions' journals.
    pub(crate) journal_bytes: usize,
    /// Bytes held by the realtime sessions' configurations.
    pub(crate) config_bytes: usize,
}

/// The string value of `"name":"..."` in `text`, if it has no escapes.
fn field<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let at = text.find(&format!("\"{name}\":\""))? + name.len() + 4;
    let rest = text.get(at..)?;
    let end = rest.find('"')?;
    let value = rest.get(..end)?;
    (!value.contains('\\')).then_some(value)
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_counts_by_kind_and_caps_its_kinds() {
        let t = Tally::default();
        t.bump("a");
        t.bump("a");
        t.bump("b");
        assert_eq!(t.snapshot(), vec![("a".into(), 2), ("b".into(), 1)]);
        for i in 0..2 * MAX_KINDS {
            t.bump(&format!("k{i}"));
        }
        let all = t.snapshot();
        assert_eq!(all.len(), MAX_KINDS + 1, "the table, and `other`");
        assert!(all.iter().any(|(k, n)| k == "other" && *n > 0));
        t.bump("a");
        assert!(
            t.snapshot().contains(&("a".into(), 3)),
            "kept kinds still count"
        );
    }

    #[test]
    fn fields_are_read_from_rendered_events() {
        let native = r#"{"type":"error","kind":"fence_mismatch","message":"x"}"#;
        assert_eq!(field(native, "type"), Some("error"));
        assert_eq!(field(native, "kind"), Some("fence_mismatch"));
        let realtime = r#"{"type":"error","error":{"type":"invalid_request_error","code":"no_session"},"server_event_seq":3}"#;
        assert_eq!(field(realtime, "code"), Some("no_session"));
        assert_eq!(field(r#"{"type":"a\"b"}"#, "type"), None);
        assert_eq!(field("{}", "type"), None);
    }
}
