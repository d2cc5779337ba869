//! One load-generator client: a WebSocket connection, the session it holds,
//! its ledger of acknowledged chunks, and the faults it injects.

mod native;
mod realtime;
mod reconcile;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::SinkExt;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::Config;
use duplex_gateway::protocol::{encode_audio, ServerEvent, READ_BUFFER};

/// How long a client waits for a reply before it counts the connection as
/// broken.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client with several gateways keeps trying to reach one.
pub(super) const FAILOVER_WAIT: Duration = Duration::from_secs(15);

/// The most chunks retransmitted after a reconnect: within the server's
/// completed-append cache (8), so every applied one is recognised.
const RETRANSMIT_MAX: usize = 4;

/// Per-tick fault probabilities, in parts per million.
const P_DROP: u32 = 4_000;
const P_EXPIRE: u32 = 400;
const P_GARBAGE: u32 = 3_000;
/// Per-commit and per-reconnect probabilities, in parts per million.
const P_BARGE_IN: u32 = 300_000;
const P_LATE_CHUNK: u32 = 600_000;
const P_STALE_TOKEN: u32 = 250_000;

/// A 20 ms chunk of 16 kHz 16-bit mono audio.
const CHUNK_BYTES: usize = 640;

/// The connection gave no usable reply: dropped, closed or timed out.
#[derive(Debug)]
pub(super) struct Gone;

/// Why a client could not compare its ledger with the server's log: then
/// nothing can be said about what was lost or applied twice, and the run
/// fails.
#[derive(Debug)]
pub(super) enum Unreconciled {
    /// The gateway went away before the ledger was checked.
    Gone,
    /// The gateway refused the audit (it runs without `--audit`).
    Refused(String),
}

impl From<Gone> for Unreconciled {
    fn from(Gone: Gone) -> Self {
        Unreconciled::Gone
    }
}

impl std::fmt::Display for Unreconciled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreconciled::Gone => {
                f.write_str("the gateway went away before the ledger was checked")
            }
            Unreconciled::Refused(why) => write!(f, "the gateway refused the audit: {why}"),
        }
    }
}

/// The client's transport: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

type Ws = WebSocketStream<Box<dyn Io>>;

/// A client's counts; merged into the run's report.
#[derive(Debug, Default, Clone)]
pub(super) struct Tally {
    pub(super) events: u64,
    pub(super) appended: u64,
    pub(super) duplicates: u64,
    pub(super) stale_refused: u64,
    pub(super) reconnects: u64,
    pub(super) failovers: u64,
    pub(super) expired: u64,
    pub(super) lost: u64,
    pub(super) doubled: u64,
    pub(super) sessions: u64,
    pub(super) resumes_refused: u64,
    pub(super) garbage_refused: u64,
    pub(super) responses: u64,
    pub(super) barge_ins: u64,
    pub(super) unexpected: u64,
    pub(super) resyncs: u64,
    pub(super) state_lost: u64,
    pub(super) unavailable: u64,
    /// The longest a client went between two acknowledged chunks while
    /// streaming (its own pauses left out).
    pub(super) longest_wait: Duration,
    pub(super) unreconciled: u64,
    /// The first reason a client could not reconcile.
    pub(super) unreconciled_why: Option<String>,
}

impl Tally {
    pub(super) fn merge(&mut self, o: &Tally) {
        self.events += o.events;
        self.appended += o.appended;
        self.duplicates += o.duplicates;
        self.stale_refused += o.stale_refused;
        self.reconnects += o.reconnects;
        self.failovers += o.failovers;
        self.expired += o.expired;
        self.lost += o.lost;
        self.doubled += o.doubled;
        self.sessions += o.sessions;
        self.resumes_refused += o.resumes_refused;
        self.garbage_refused += o.garbage_refused;
        self.responses += o.responses;
        self.barge_ins += o.barge_ins;
        self.unexpected += o.unexpected;
        self.resyncs += o.resyncs;
        self.state_lost += o.state_lost;
        self.unavailable += o.unavailable;
        self.longest_wait = self.longest_wait.max(o.longest_wait);
        self.unreconciled += o.unreconciled;
        if self.unreconciled_why.is_none() {
            self.unreconciled_why.clone_from(&o.unreconciled_why);
        }
    }
}

/// Who a client is, on a gateway with `--auth-secret`.
#[derive(Debug, Clone)]
pub(super) struct Identity {
    /// The token's `sub`: what the client's session ids are scoped to.
    pub(super) principal: String,
    /// The bearer token.
    pub(super) bearer: String,
}

/// The session a client holds.
#[derive(Debug, Clone)]
struct Held {
    id: String,
    epoch: u64,
    turn: u64,
    /// The token for the next resume.
    token: String,
    /// The token the last resume used up (refused if sent again).
    spent: Option<String>,
}

/// A chunk as sent, kept for retransmission.
#[derive(Debug, Clone)]
struct Sent {
    event_id: String,
    epoch: u64,
    turn: u64,
}

/// What the server acknowledged for a chunk: in the native dialect its
/// epoch and seq; the realtime dialect acknowledges the chunk only (its
/// fence is the server's).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    session: String,
    epoch: Option<u64>,
    seq: Option<u64>,
}

impl Ack {
    /// Whether the log entry `logged` is this acknowledgement.
    fn is(&self, logged: &Ack) -> bool {
        self.session == logged.session
            && self.epoch.is_none_or(|e| logged.epoch == Some(e))
            && self.seq.is_none_or(|s| logged.seq == Some(s))
    }
}

pub(super) struct Client {
    idx: usize,
    /// The gateways (nodes of one cluster, or one gateway); each connect
    /// goes to the next, so sessions move between nodes.
    addrs: Arc<[SocketAddr]>,
    at: usize,
    /// The connection broke while a session was held: the next step
    /// resumes it (on the next node) and retransmits.
    broken: bool,
    config: Arc<Config>,
    identity: Option<Identity>,
    /// TLS to the gateway (`wss://`).
    pub(crate) tls: Option<Arc<crate::tls::Tls>>,
    rng: ChaCha8Rng,
    ws: Option<Ws>,
    held: Option<Held>,
    counter: u64,
    recent: VecDeque<Sent>,
    /// Chunks sent on this socket and not yet acknowledged, oldest first
    /// (at most the run's window).
    in_flight: Vec<Sent>,
    chunks_left: u32,
    ledger: HashMap<String, Ack>,
    sessions: Vec<String>,
    tally: Tally,
    latencies: Vec<u32>,
    /// When the last chunk was acknowledged (`None` after a pause of the
    /// client's own).
    last_ack: Option<Instant>,
    audio: String,
    /// The realtime dialect: the last `server_event_seq` received, and the
    /// last one acknowledged with `session.event_ack`.
    seq: u64,
    acked: u64,
    /// Events up to this seq are a resume's replay.
    replay_until: u64,
    /// Realtime: a response this client asked for has not ended yet (a
    /// commit then asks for none: the server would refuse a second one).
    responding: bool,
    /// The end of a realtime run: the audit is the native dialect's.
    auditing: bool,
}

impl Client {
    pub(super) fn new(
        idx: usize,
        addrs: Arc<[SocketAddr]>,
        config: Arc<Config>,
        identity: Option<Identity>,
    ) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(
            config.seed ^ (idx as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        Client {
            idx,
            at: idx,
            addrs,
            broken: false,
            config,
            identity,
            tls: None,
            rng,
            ws: None,
            held: None,
            counter: 0,
            recent: VecDeque::new(),
            in_flight: Vec::new(),
            chunks_left: 0,
            ledger: HashMap::new(),
            sessions: Vec::new(),
            tally: Tally::default(),
            latencies: Vec::new(),
            last_ack: None,
            audio: encode_audio(&[0x5a; CHUNK_BYTES]),
            seq: 0,
            acked: 0,
            replay_until: 0,
            responding: false,
            auditing: false,
        }
    }

    /// Whether this client speaks the realtime dialect now.
    fn realtime(&self) -> bool {
        self.config.dialect == crate::Dialect::Realtime && !self.auditing
    }

    fn chance(&mut self, ppm: u32) -> bool {
        self.config.faults && self.rng.next_u32() % 1_000_000 < ppm
    }

    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.rng.next_u32() % (hi - lo + 1)
    }

    fn unexpected(&mut self, what: &str, got: &ServerEvent) {
        tracing::warn!(client = self.idx, "{what}: unexpected {got:?}");
        self.tally.unexpected += 1;
    }

    /// Streams until `deadline`, closes, reconciles; the tally and the
    /// append round trips in microseconds.
    pub(super) async fn run(mut self, deadline: Instant) -> (Tally, Vec<u32>) {
        // Spread the clients' ticks over one interval.
        let offset = self
            .config
            .chunk_interval
            .mul_f64(f64::from(self.range(0, 1000)) / 1000.0);
        tokio::time::sleep(offset).await;
        let mut tick = tokio::time::interval(self.config.chunk_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while Instant::now() < deadline {
            tick.tick().await;
            if let Err(Gone) = self.step(deadline).await {
                tracing::debug!(client = self.idx, "connection lost; reconnecting");
                self.ws = None;
                self.broken = self.held.is_some();
            }
        }
        if let Err(why) = self.finish().await {
            tracing::warn!(client = self.idx, "could not reconcile: {why}");
            self.tally.unreconciled += 1;
            self.tally.unreconciled_why.get_or_insert(why.to_string());
        }
        self.tally.sessions = self.sessions.len() as u64;
        (self.tally, self.latencies)
    }

    async fn step(&mut self, deadline: Instant) -> Result<(), Gone> {
        if self.ws.is_none() {
            self.connect().await?;
        }
        if self.held.is_none() {
            return self.open_new().await;
        }
        if self.broken {
            // A node died or handed the session off: resume elsewhere and
            // send the unacknowledged chunks again.
            self.broken = false;
            self.tally.failovers += 1;
            return self.resume(true).await;
        }
        if self.chance(P_DROP) {
            self.ws = None; // abrupt close: no close frame
            self.tally.reconnects += 1;
            self.connect().await?;
            return self.resume(true).await;
        }
        let wait = self.config.grace + Duration::from_millis(500);
        if Instant::now() + wait < deadline && self.chance(P_EXPIRE) {
            self.ws = None;
            self.last_ack = None;
            tokio::time::sleep(wait).await;
            self.tally.reconnects += 1;
            self.connect().await?;
            return self.resume(false).await;
        }
        if self.chance(P_GARBAGE) {
            // The window is acknowledged first: the refusal is then the
            // only answer outstanding.
            self.settle().await?;
            return self.garbage().await;
        }
        if self.chunks_left == 0 {
            self.chunks_left = self.range(5, 20);
        }
        self.chunks_left -= 1;
        self.append().await?;
        if self.chunks_left == 0 && self.held.is_some() {
            self.commit().await?;
        }
        Ok(())
    }

    /// Connects to the next gateway that accepts; with several, tries
    /// each in turn for up to [`FAILOVER_WAIT`] (a killed node restarts).
    async fn connect(&mut self) -> Result<(), Gone> {
        let give_up = Instant::now() + FAILOVER_WAIT;
        loop {
            self.at = (self.at + 1) % self.addrs.len().max(1);
            let addr = *self.addrs.get(self.at).ok_or(Gone)?;
            match self.connect_to(addr).await {
                Ok(()) => return Ok(()),
                Err(Gone) if self.addrs.len() > 1 && Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(Gone) => return Err(Gone),
            }
        }
    }

    async fn connect_to(&mut self, addr: SocketAddr) -> Result<(), Gone> {
        let tcp = TcpStream::connect(addr).await.map_err(|_| Gone)?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => match tls.connector.connect(tls.name.clone(), tcp).await {
                Ok(stream) => Box::new(stream),
                Err(e) => {
                    // Said once a run: every client would fail the same way.
                    static SAID: std::sync::atomic::AtomicBool =
                        std::sync::atomic::AtomicBool::new(false);
                    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        tracing::warn!("TLS handshake with {addr} failed: {e}");
                    }
                    return Err(Gone);
                }
            },
        };
        let path = if self.realtime() {
            "/v1/realtime?duplex=1&model=loadgen&autostart=0"
        } else {
            "/"
        };
        let mut request = format!("ws://{addr}{path}")
            .into_client_request()
            .map_err(|_| Gone)?;
        if let Some(identity) = &self.identity {
            let value = format!("Bearer {}", identity.bearer)
                .parse()
                .map_err(|_| Gone)?;
            request.headers_mut().insert("authorization", value);
        }
        let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
        let (ws, _) = tokio_tungstenite::client_async_with_config(request, io, Some(config))
            .await
            .map_err(|_| Gone)?;
        self.ws = Some(ws);
        // What the last socket had in flight is not acknowledged now: the
        // resume retransmits some of it, and the rest is never counted.
        self.in_flight.clear();
        Ok(())
    }

    async fn send(&mut self, message: Message) -> Result<(), Gone> {
        let ws = self.ws.as_mut().ok_or(Gone)?;
        self.tally.events += 1;
        ws.send(message).await.map_err(|_| Gone)
    }

    /// Queues `message` without flushing: the next `send` writes both.
    async fn feed(&mut self, message: Message) -> Result<(), Gone> {
        let ws = self.ws.as_mut().ok_or(Gone)?;
        self.tally.events += 1;
        ws.feed(message).await.map_err(|_| Gone)
    }

    async fn send_json(&mut self, value: serde_json::Value) -> Result<(), Gone> {
        self.send(Message::text(value.to_string())).await
    }

    /// A chunk was acknowledged: the wait since the last one counts.
    fn acked(&mut self) {
        let now = Instant::now();
        if let Some(last) = self.last_ack {
            self.tally.longest_wait = self.tally.longest_wait.max(now - last);
        }
        self.last_ack = Some(now);
    }

    /// The server said the store lost session `id`: its acknowledged
    /// chunks are gone and the client was told, so they are not counted
    /// lost (the session is, in `state_lost`).
    fn told_state_lost(&mut self, id: &str) {
        self.tally.state_lost += 1;
        self.ledger.retain(|_, ack| ack.session != id);
        self.sessions.retain(|s| s != id);
        self.held = None;
    }

    /// The last 1 to [`RETRANSMIT_MAX`] chunks, to send again after a
    /// resume.
    fn retransmits(&mut self) -> Vec<Sent> {
        let k = self.range(1, RETRANSMIT_MAX as u32) as usize;
        let from = self.recent.len().saturating_sub(k);
        self.recent.iter().skip(from).cloned().collect()
    }

    async fn append(&mut self) -> Result<(), Gone> {
        let Some(held) = &self.held else {
            return Ok(());
        };
        self.counter += 1;
        let sent = Sent {
            event_id: format!("c{}-{}", self.idx, self.counter),
            epoch: held.epoch,
            turn: held.turn,
        };
        self.recent.push_back(sent.clone());
        if self.recent.len() > RETRANSMIT_MAX {
            self.recent.pop_front();
        }
        // A turn's last chunk is waited on: its commit comes next.
        let last = self.chunks_left == 0;
        self.send_chunk(sent, last).await
    }

    /// Whether the chunk about to be sent closes the window: it is waited
    /// on, with every chunk in flight before it.
    fn closes_window(&self, last: bool) -> bool {
        last || self.in_flight.len() + 1 >= self.config.window.get() as usize
    }

    /// Waits for the acknowledgement of every chunk in flight.
    pub(super) async fn settle(&mut self) -> Result<(), Gone> {
        if self.in_flight.is_empty() {
            return Ok(());
        }
        if self.realtime() {
            self.send(Message::text(realtime::HEARTBEAT)).await?;
            return self.rt_settle(None).await;
        }
        self.settle_native(None).await
    }
}

/// A token that is not `token`: its first character changed (tokens are
/// URL-safe base64).
fn forged(token: &str) -> String {
    let mut chars = token.chars();
    let first = match chars.next() {
        Some('A') => 'B',
        _ => 'A',
    };
    std::iter::once(first).chain(chars).collect()
}
