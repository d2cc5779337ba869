//! The loopback load generator: N WebSocket clients stream chunks at an
//! accelerated pace and inject every fault a real network and a real user
//! produce. Each client keeps a ledger of what the server acknowledged and,
//! at the end, reconciles it with the server's audit log of what was
//! applied.
//!
//! Faults, each at a per-tick probability:
//! - abrupt close (the socket dropped, no close frame), then a reconnect and
//!   resume within grace, retransmitting the last 1–4 chunks sent (the
//!   chunks in flight on the dropped socket are acknowledged only if
//!   retransmitted);
//! - a reconnect after grace: the session expired, a new one is opened;
//! - a resume with a used-up or forged token (refused), before the real one;
//! - barge-in after a commit, then a late chunk of the cancelled epoch;
//! - garbage: broken JSON, an unknown type, an oversize message, a binary
//!   frame, bad base64, an oversize event id.
//!
//! `lost` counts acknowledged chunks missing from the server's log (or
//! there at another position); `doubled` counts chunks the log holds more
//! than once; `unreconciled` counts clients that could not read the log at
//! all (the gateway went away, or runs without `--audit`), for whom the
//! other two say nothing. All three must be zero, and so must `unexpected`.

mod client;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use client::{Client, Identity, Tally};

/// How a load run goes.
///
/// ```
/// let c = duplex_loadgen::Config::new("ws://127.0.0.1:8787", 10, std::time::Duration::from_secs(5));
/// assert_eq!(c.chunk_interval, std::time::Duration::from_millis(10));
/// // Every chunk waited on, unless a window is set.
/// assert_eq!(c.window.get(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// The gateway, `ws://HOST:PORT`; the host must resolve to loopback.
    pub url: String,
    /// Further gateways, nodes of one cluster with `url`: each client's
    /// connects go round all of them, and a client whose node dies or
    /// hands its session off resumes on the next one.
    pub urls: Vec<String>,
    /// Concurrent clients.
    pub clients: usize,
    /// How long the clients stream (the reconciliation comes after).
    pub duration: Duration,
    /// Time between a client's chunks (20 ms audio sent every 10 ms: twice
    /// real time).
    pub chunk_interval: Duration,
    /// The gateway's disconnect grace: the expiry fault waits past it.
    pub grace: Duration,
    /// Inject faults.
    pub faults: bool,
    /// Seed of the clients' random choices.
    pub seed: u64,
    /// The gateway's admin token, for the audit that reconciles each
    /// client's ledger (without it the run cannot reconcile, and fails).
    pub admin_token: Option<String>,
    /// The gateway's `--auth-secret`: each client then connects with a
    /// bearer token of its own principal, `loadgen-<n>`.
    pub auth_secret: Option<String>,
    /// The dialect the clients speak.
    pub dialect: Dialect,
    /// How many chunks a client sends before it waits for their
    /// acknowledgement: 1 waits on each chunk; 4 streams as a client that
    /// keeps its retransmission window (4 chunks) in flight. The native
    /// dialect answers every chunk, and the client reads the answers in
    /// order; the realtime client sends its heartbeat after the window's
    /// last chunk only. A turn's last chunk always waits (its commit comes
    /// next), and so does the last before a message the gateway refuses.
    /// The round trip measured is the waited-on chunk's.
    pub window: std::num::NonZeroU32,
    /// For `wss://` gateways: the PEM certificate (or CA) to trust, the
    /// only one the clients accept.
    pub tls_ca: Option<std::path::PathBuf>,
}

/// The dialect a run's clients speak.
///
/// ```
/// use duplex_loadgen::Dialect;
/// assert_eq!("realtime".parse::<Dialect>(), Ok(Dialect::Realtime));
/// assert!("grpc".parse::<Dialect>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The gateway's own (`input.append` acknowledged with its seq).
    #[default]
    Native,
    /// The realtime dialect on `/v1/realtime` (the chunks in flight
    /// acknowledged by the heartbeat answered after them).
    Realtime,
}

impl std::str::FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(Dialect::Native),
            "realtime" => Ok(Dialect::Realtime),
            other => Err(format!("expected native or realtime, got {other:?}")),
        }
    }
}

impl Config {
    /// A run with every fault, 10 ms between chunks and a 2 s grace.
    pub fn new(url: impl Into<String>, clients: usize, duration: Duration) -> Self {
        Config {
            url: url.into(),
            urls: Vec::new(),
            clients,
            duration,
            chunk_interval: Duration::from_millis(10),
            grace: Duration::from_secs(2),
            faults: true,
            seed: 1,
            admin_token: None,
            auth_secret: None,
            dialect: Dialect::Native,
            window: std::num::NonZeroU32::MIN,
            tls_ca: None,
        }
    }
}

/// What a run saw.
///
/// ```
/// let mut r = duplex_loadgen::Report::default();
/// assert!(r.ok() && r.failures().is_empty());
/// assert!(r.line().starts_with("loadgen: clients=0 events=0 "));
/// // A client that could not check its ledger fails the run, and says why.
/// r.unreconciled = 1;
/// assert!(!r.ok());
/// assert!(r.line().contains(" unreconciled=1 "));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Clients run.
    pub clients: usize,
    /// Messages the clients sent (every kind, garbage included).
    pub events: u64,
    /// Chunks acknowledged as newly appended.
    pub appended: u64,
    /// Chunks acknowledged as duplicates (retransmissions already applied).
    pub duplicates: u64,
    /// Late chunks of a cancelled epoch, refused with `fence_mismatch`.
    pub stale_refused: u64,
    /// Reconnections after an abrupt close.
    pub reconnects: u64,
    /// Resumes on another node after a connection broke (a node killed or
    /// draining).
    pub failovers: u64,
    /// Sessions found expired on reconnect (or while idle).
    pub expired: u64,
    /// Acknowledged chunks missing from the server's log.
    pub lost: u64,
    /// Chunks the server applied more than once.
    pub doubled: u64,
    /// Median append round trip, microseconds.
    pub p50_us: u64,
    /// 99th percentile append round trip, microseconds.
    pub p99_us: u64,
    /// Sessions the clients used.
    pub sessions: u64,
    /// Resumes with a used-up or forged token, refused.
    pub resumes_refused: u64,
    /// Garbage messages answered with the expected `error`.
    pub garbage_refused: u64,
    /// Responses completed (`response.done`).
    pub responses: u64,
    /// Barge-ins answered with `response.cancelled`.
    pub barge_ins: u64,
    /// Replies the protocol does not allow at that point (each is logged).
    pub unexpected: u64,
    /// Realtime dialect: resumes answered `session.resync_required` (the
    /// journal could not replay what the client missed: on a cluster, a
    /// node sent events after it could no longer store them, as during a
    /// drain). Each is announced to the client, which starts a new
    /// session; counted, not a failure.
    pub resyncs: u64,
    /// Sessions the server said the store lost (`state_lost`, or
    /// `session.expired` with reason `state_lost`): the store died with
    /// state no live node held. What was acknowledged in them is gone and
    /// the client was told, so it is not counted in `lost`; counted, not a
    /// failure.
    pub state_lost: u64,
    /// Refusals `unavailable` the clients saw (the session store did not
    /// answer; each was retried).
    pub unavailable: u64,
    /// The longest any client streamed without an acknowledgement, in
    /// milliseconds (from one acknowledged chunk to the next; its own
    /// pauses left out): how long a fault kept clients waiting.
    pub longest_wait_ms: u64,
    /// Clients that could not compare their ledger with the server's log
    /// (the gateway went away, or runs without `--audit`): for them `lost`
    /// and `doubled` say nothing, so the run fails.
    pub unreconciled: u64,
    /// Why the first of them could not.
    pub unreconciled_why: Option<String>,
}

impl Report {
    /// Every client reconciled its ledger with the server's log, nothing
    /// acknowledged was lost, nothing was applied twice, and every reply was
    /// one the protocol allows.
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.doubled == 0 && self.unreconciled == 0 && self.unexpected == 0
    }

    /// Why the run failed, one reason a line; empty if it passed.
    pub fn failures(&self) -> Vec<String> {
        let mut why = Vec::new();
        if self.unreconciled > 0 {
            why.push(format!(
                "{} of {} clients could not reconcile their ledger with the server: {}",
                self.unreconciled,
                self.clients,
                self.unreconciled_why.as_deref().unwrap_or("unknown")
            ));
        }
        if self.lost > 0 {
            why.push(format!(
                "{} acknowledged chunks are missing from the server's log",
                self.lost
            ));
        }
        if self.doubled > 0 {
            why.push(format!(
                "{} chunks were applied more than once",
                self.doubled
            ));
        }
        if self.unexpected > 0 {
            why.push(format!(
                "{} replies the protocol does not allow at that point (logged as warnings)",
                self.unexpected
            ));
        }
        why
    }

    /// The last line of a run.
    pub fn line(&self) -> String {
        format!(
            "loadgen: clients={} events={} appended={} duplicates={} stale_refused={} reconnects={} expired={} lost={} doubled={} unreconciled={} p50_us={} p99_us={}",
            self.clients, self.events, self.appended, self.duplicates, self.stale_refused,
            self.reconnects, self.expired, self.lost, self.doubled, self.unreconciled, self.p50_us, self.p99_us
        )
    }

    /// The other counts, for the line before the last.
    pub fn detail(&self) -> String {
        format!(
            "loadgen: sessions={} failovers={} resumes_refused={} garbage_refused={} responses={} barge_ins={} unexpected={} resyncs={} state_lost={} unavailable={} longest_wait_ms={}",
            self.sessions, self.failovers, self.resumes_refused, self.garbage_refused, self.responses,
            self.barge_ins, self.unexpected, self.resyncs, self.state_lost, self.unavailable, self.longest_wait_ms
        )
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not `ws://HOST:PORT[/...]` or `wss://HOST:PORT[/...]`.
    #[error("expected a URL ws://HOST:PORT or wss://HOST:PORT, got {0:?}")]
    Url(String),
    /// A `wss://` gateway without a certificate to trust, or one that
    /// cannot be read.
    #[error("TLS: {0}")]
    Tls(String),
    /// The host resolves to an address off this machine.
    #[error("{0} is not a loopback address; the load generator only targets this machine")]
    NotLoopback(SocketAddr),
    /// The host does not resolve.
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, std::io::Error),
    /// A bearer token could not be made from `auth_secret`.
    #[error("cannot make a bearer token: {0}")]
    Token(String),
}

/// A client's principal (`loadgen-<idx>`) and a bearer token for it,
/// valid for the run and an hour after.
fn identity(secret: &str, idx: usize, run: Duration) -> Result<Identity, LoadError> {
    let principal = format!("loadgen-{idx}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let exp = now + run.as_secs() + 3_600;
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes())
        .map_err(|e| LoadError::Token(e.to_string()))?;
    let bearer = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": principal, "exp": exp}),
        &key,
    )
    .map_err(|e| LoadError::Token(e.to_string()))?;
    Ok(Identity { principal, bearer })
}

/// Resolves `ws://HOST:PORT` and refuses anything but loopback.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use duplex_loadgen::loopback;
/// assert!(loopback("ws://127.0.0.1:9/").await.is_ok());
/// assert!(loopback("ws://[::1]:9").await.is_ok());
/// assert!(loopback("ws://192.0.2.1:9").await.is_err());
/// assert!(loopback("wss://localhost:9").await.is_ok());
/// assert!(loopback("http://127.0.0.1:9").await.is_err());
/// # }
/// ```
///
/// # Errors
///
/// [`LoadError`].
pub async fn loopback(url: &str) -> Result<SocketAddr, LoadError> {
    let rest = url
        .strip_prefix("ws://")
        .or_else(|| url.strip_prefix("wss://"))
        .ok_or_else(|| LoadError::Url(url.to_owned()))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(LoadError::Url(url.to_owned()));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(authority)
        .await
        .map_err(|e| LoadError::Resolve(authority.to_owned(), e))?
        .collect();
    if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(LoadError::NotLoopback(*bad));
    }
    addrs
        .first()
        .copied()
        .ok_or_else(|| LoadError::Url(url.to_owned()))
}

/// Runs the clients to the end of `config.duration`, then reconciles.
///
/// # Errors
///
/// [`LoadError`] if the URL is not a loopback WebSocket address.
pub async fn run(config: Config) -> Result<Report, LoadError> {
    let mut addrs = vec![loopback(&config.url).await?];
    for url in &config.urls {
        addrs.push(loopback(url).await?);
    }
    let addrs: Arc<[std::net::SocketAddr]> = addrs.into();
    let tls = tls::for_url(&config.url, config.tls_ca.as_deref())?.map(Arc::new);
    let config = Arc::new(config);
    let deadline = tokio::time::Instant::now() + config.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for idx in 0..config.clients {
        let identity = match &config.auth_secret {
            Some(secret) => Some(identity(secret, idx, config.duration)?),
            None => None,
        };
        let mut client = Client::new(idx, Arc::clone(&addrs), Arc::clone(&config), identity);
        client.tls.clone_from(&tls);
        tasks.spawn(client.run(deadline));
    }
    let mut tally = Tally::default();
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((t, mut l)) => {
                tally.merge(&t);
                latencies.append(&mut l);
            }
            Err(e) => {
                tracing::error!("client task failed: {e}");
                tally.unreconciled += 1;
                tally
                    .unreconciled_why
                    .get_or_insert(format!("a client task failed: {e}"));
            }
        }
    }
    latencies.sort_unstable();
    let percentile = |p: usize| {
        latencies
            .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
            .map_or(0, |&us| u64::from(us))
    };
    Ok(Report {
        clients: config.clients,
        events: tally.events,
        appended: tally.appended,
        duplicates: tally.duplicates,
        stale_refused: tally.stale_refused,
        reconnects: tally.reconnects,
        failovers: tally.failovers,
        expired: tally.expired,
        lost: tally.lost,
        doubled: tally.doubled,
        p50_us: percentile(50),
        p99_us: percentile(99),
        sessions: tally.sessions,
        resumes_refused: tally.resumes_refused,
        garbage_refused: tally.garbage_refused,
        responses: tally.responses,
        barge_ins: tally.barge_ins,
        unexpected: tally.unexpected,
        resyncs: tally.resyncs,
        state_lost: tally.state_lost,
        unavailable: tally.unavailable,
        longest_wait_ms: u64::try_from(tally.longest_wait.as_millis()).unwrap_or(u64::MAX),
        unreconciled: tally.unreconciled,
        unreconciled_why: tally.unreconciled_why,
    })
}
