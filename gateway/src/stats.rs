//! The gateway's counters: atomics updated on the hot path, read as one
//! [`Counters`] value for `admin.stats` and the shutdown line.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident),* $(,)?) => {
        /// The gateway's counters since it started.
        ///
        /// ```
        /// let c = duplex_gateway::stats::Counters::default();
        /// assert_eq!(c.appended, 0);
        /// assert!(c.line().starts_with("gateway: connections=0 "));
        /// ```
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Counters {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        /// The live counters (relaxed atomics: each is a tally, none orders
        /// memory for another).
        #[derive(Debug, Default)]
        pub(crate) struct Stats {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl Stats {
            pub(crate) fn read(&self) -> Counters {
                Counters { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl Counters {
            /// Each counter's name, value and description (its doc
            /// comment, one line), in declaration order.
            ///
            /// ```
            /// let c = duplex_gateway::stats::Counters { appended: 7, ..Default::default() };
            /// let (name, value, help) = c.described().find(|(n, ..)| *n == "appended").unwrap();
            /// assert_eq!((name, value), ("appended", 7));
            /// assert_eq!(help, "Chunks appended.");
            /// ```
            pub fn described(&self) -> impl Iterator<Item = (&'static str, u64, String)> {
                [$((stringify!($name), self.$name, concat!($($doc, " "),*)),)*]
                    .into_iter()
                    .map(|(name, value, doc)| (name, value, help_line(doc)))
            }

            /// The counters as one `gateway: name=value ...` line.
            pub fn line(&self) -> String {
                let mut out = String::from("gateway:");
                $(out.push_str(&format!(" {}={}", stringify!($name), self.$name));)*
                out
            }
        }
    };
}

counters! {
    /// WebSocket connections accepted.
    connections,
    /// Sessions opened.
    opened,
    /// Sessions resumed (after a drop, or taken over by a new connection).
    resumed,
    /// Resumes refused: unknown id, wrong or used-up token (also counted
    /// in `refused`).
    resumes_refused,
    /// Chunks appended.
    appended,
    /// Appends answered from the completed-append cache.
    duplicates,
    /// Operations refused for a stale fence.
    fence_refused,
    /// Other refusals (`error` events sent).
    refused,
    /// Events refused over a connection's rate (also in `refused`).
    rate_limited,
    /// Connections refused at accept: over `max_connections` or
    /// `max_connections_per_ip`.
    connections_refused,
    /// Connections that did not finish the WebSocket handshake in time.
    handshakes_timed_out,
    /// Handshakes refused for a missing or invalid bearer token.
    auth_refused,
    /// Connections closed after the idle timeout.
    idle_closed,
    /// Connections cut for letting more than `max_outbound_bytes` pile up.
    slow_dropped,
    /// Connections that ended without `session.close` while holding a
    /// session (the session was detached).
    detached,
    /// Engine requests bound (one per response).
    requests_bound,
    /// Responses that completed (request released by the engine).
    responses_done,
    /// Requests released by barge-in.
    requests_cancelled,
    /// Requests released by `session.close` or shutdown.
    requests_closed,
    /// Requests released by expiry.
    requests_expired,
    /// Sessions closed by the client.
    closed,
    /// Sessions expired (idle TTL or disconnect grace).
    expired,
    /// Sessions closed at shutdown.
    shutdown_closed,
    /// Cluster: sessions taken over from another node (or from this
    /// node's stored image) by a resume.
    taken_over,
    /// Cluster: sessions of a dead node adopted by this one.
    adopted,
    /// Cluster: sessions dropped here because another node owns them now
    /// (the directory refused this node's write).
    moved_away,
    /// Cluster: sessions handed off at shutdown (stored, clients told
    /// `session.moved`).
    drained,
    /// Cluster: changes not acknowledged because Redis did not answer
    /// (the session is kept here; its next save carries them again).
    store_failed,
    /// Cluster: times this node saw the store lose its data (its
    /// generation changed).
    store_losses,
    /// Cluster: sessions written back after the store lost them or some
    /// of their writes.
    written_back,
    /// Cluster: resumes answered `state_lost` (the store lost its data
    /// and does not have the session).
    state_lost,
    /// Cluster: engine requests the directory counted as released more
    /// than once (must stay 0).
    releases_doubled,
    /// Engine requests of another node's engine released by a takeover or
    /// an adoption.
    requests_taken_over,
    /// Cluster: copies dropped unwritten after the store lost them: held
    /// without their log (an open, takeover or adoption went unanswered),
    /// they are not this node's to write back (the node that holds the
    /// log does, or the session's client is told it was lost).
    unvouched,
}

/// A doc comment as one line: its lines joined by single spaces.
fn help_line(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Adds one.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n`.
pub(crate) fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
}

impl Counters {
    /// Requests bound and not (yet) released by the engine, a barge-in, a
    /// close or an expiry. Zero once every session is gone.
    ///
    /// ```
    /// let c = duplex_gateway::stats::Counters { requests_bound: 3, responses_done: 2, requests_cancelled: 1, ..Default::default() };
    /// assert_eq!(c.requests_outstanding(), 0);
    /// ```
    pub fn requests_outstanding(&self) -> i128 {
        i128::from(self.requests_bound)
            - i128::from(self.responses_done)
            - i128::from(self.requests_cancelled)
            - i128::from(self.requests_closed)
            - i128::from(self.requests_expired)
    }
}
