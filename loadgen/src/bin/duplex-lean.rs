//! `duplex-lean`: the lean client the gateway and the bare server
//! (`duplex-bare`) are measured with. Each client sends one ~860-character
//! audio append every `--chunk-ms` and waits for its one answer: one
//! message in, one out, nothing else (no faults, no ledger, no audit), so
//! the server's CPU a message and the round trip's percentiles are the
//! server's, and this client costs as little as a client can.
//!
//! - `--target bare`: the append in the realtime shape
//!   (`input_audio_buffer.append`), answered by `duplex-bare`'s ack.
//! - `--target native`: a `session.open`, then the gateway's native
//!   `input.append`, answered by `input.appended`.
//! - `--hold`: opens the connections (and sessions), holds them idle, and
//!   reports the server's resident memory a connection; with `--target
//!   realtime`, each connection's session is the one the gateway opens at
//!   the handshake of `/v1/realtime`.
//!
//! With `--server-pid`, the server's CPU (user and system, from
//! `/proc/PID/stat`) is read at the start and the end of the steady window
//! (after `--warmup-s`) and divided by the answers in it; this client's own
//! CPU is reported the same way.
//!
//! ```text
//! duplex-lean --url ws://127.0.0.1:8790 --target bare --clients 1000 --server-pid 4242
//! lean: target=bare clients=1000 answered=600123 rate=49995/s server_us_per_msg=9.9 client_us_per_msg=8.1 p50_us=412 p99_us=2301
//! ```

// Counts and microseconds here stay far below 2^52: their ratios as f64
// are exact enough to print.
#![allow(clippy::cast_precision_loss)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use duplex_gateway::protocol::{encode_audio, READ_BUFFER};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What the clients talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    /// `duplex-bare`: realtime-shaped appends, each acknowledged.
    Bare,
    /// `duplex-gateway`, native dialect: a session, then appends.
    Native,
    /// `duplex-gateway`, realtime dialect (`--hold` only: the realtime
    /// contract answers no append).
    Realtime,
}

/// A lean load: one append in, one answer out.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The server: ws://HOST:PORT (a realtime target's path is added).
    #[arg(long, default_value = "ws://127.0.0.1:8790")]
    url: String,
    /// What the server is.
    #[arg(long, value_enum, default_value_t = Target::Bare)]
    target: Target,
    /// Concurrent clients.
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Milliseconds between a client's appends.
    #[arg(long, default_value_t = 20)]
    chunk_ms: u64,
    /// Seconds of streaming in all.
    #[arg(long, default_value_t = 20)]
    duration_s: u64,
    /// Seconds before the steady window (connections, warm-up); at most
    /// a fifth of the run.
    #[arg(long, default_value_t = 4)]
    warmup_s: u64,
    /// Seconds of the steady window the figures are read over; at most
    /// three fifths of the run.
    #[arg(long, default_value_t = 12)]
    window_s: u64,
    /// The server's process id, for its CPU and memory (Linux `/proc`).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Hold the connections idle instead of streaming: report the server's
    /// resident memory a connection.
    #[arg(long)]
    hold: bool,
}

/// Counts shared by the clients.
#[derive(Default)]
struct Shared {
    /// Answers read inside the steady window.
    answered: AtomicU64,
    /// Set while the steady window is open.
    measuring: AtomicBool,
    /// Clients that are connected (and hold a session, if any).
    ready: AtomicU64,
    /// Clients that failed (connect, handshake, refusal, time-out).
    failed: AtomicU64,
}

/// The user and system CPU time of `pid` (`self` for this process), in
/// microseconds.
fn cpu_us(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces).
    let rest = stat.rsplit_once(") ")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // Linux reports them in USER_HZ, 100 a second on every architecture.
    Some(ticks * 10_000)
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

async fn connect(url: &str) -> Option<Ws> {
    for _ in 0..50 {
        // The gateway's read buffer: tungstenite's default (128 KiB) is
        // zeroed at every read, most of a small message's cost.
        let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
        let connecting = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
        if let Ok(Ok((ws, _))) = timeout(Duration::from_secs(10), connecting).await {
            if let MaybeTlsStream::Plain(s) = ws.get_ref() {
                let _ = s.set_nodelay(true);
            }
            return Some(ws);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The next text message, within 10 s.
async fn answer(ws: &mut Ws) -> Option<String> {
    loop {
        match timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return Some(t.as_str().to_owned()),
            Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) | Err(_) => return None,
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// Whether the next message is a text one (what a streaming client waits
/// for: no copy, no timer; a server that stops answering ends the run's
/// own deadline instead).
async fn answered(ws: &mut Ws) -> bool {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(_))) => return true,
            Some(Ok(Message::Close(_)) | Err(_)) | None => return false,
            Some(Ok(_)) => {}
        }
    }
}

/// Connects (and opens a session for the native target): the socket and,
/// native, the fence's epoch and turn.
async fn start(url: &str, target: Target) -> Option<(Ws, u64, u64)> {
    let mut ws = connect(url).await?;
    match target {
        Target::Bare => Some((ws, 0, 0)),
        Target::Native => {
            ws.send(Message::text(r#"{"type":"session.open"}"#))
                .await
                .ok()?;
            let opened: serde_json::Value = serde_json::from_str(&answer(&mut ws).await?).ok()?;
            let epoch = opened.get("epoch")?.as_u64()?;
            let turn = opened.get("turn")?.as_u64()?;
            Some((ws, epoch, turn))
        }
        Target::Realtime => {
            // The gateway opens the session at the handshake and says so.
            let created = answer(&mut ws).await?;
            created.contains("session.created").then_some((ws, 0, 0))
        }
    }
}

/// One streaming client: an append every `period`, each answer awaited;
/// the round trips of the steady window, in microseconds.
async fn stream(
    idx: usize,
    args: Arc<Args>,
    shared: Arc<Shared>,
    audio: Arc<str>,
    until: Instant,
) -> Vec<u32> {
    let Some((mut ws, epoch, turn)) = start(&args.url, args.target).await else {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return Vec::new();
    };
    shared.ready.fetch_add(1, Ordering::Relaxed);
    let period = Duration::from_millis(args.chunk_ms);
    // Clients spread over the period, as real ones are.
    let offset = period * u32::try_from(idx % 1000).unwrap_or(0) / 1000;
    let mut tick = tokio::time::interval_at(Instant::now() + offset, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut rtts = Vec::with_capacity(1024);
    let mut n: u64 = 0;
    loop {
        if tick.tick().await >= until {
            break;
        }
        n += 1;
        let text = match args.target {
            Target::Native => format!(
                r#"{{"type":"input.append","event_id":"c{idx}-{n}","epoch":{epoch},"turn":{turn},"audio":"{audio}"}}"#
            ),
            Target::Bare | Target::Realtime => format!(
                r#"{{"type":"input_audio_buffer.append","event_id":"c{idx}-{n}","audio":"{audio}"}}"#
            ),
        };
        let sent = Instant::now();
        if ws.send(Message::text(text)).await.is_err() || !answered(&mut ws).await {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            return rtts;
        }
        if shared.measuring.load(Ordering::Relaxed) {
            shared.answered.fetch_add(1, Ordering::Relaxed);
            rtts.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
    }
    let _ = ws.close(None).await;
    rtts
}

/// One idle client: connected (with its session) until `until`.
async fn hold(args: Arc<Args>, shared: Arc<Shared>, until: Instant) {
    let Some((mut ws, ..)) = start(&args.url, args.target).await else {
        shared.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    shared.ready.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep_until(until).await;
    let _ = ws.close(None).await;
}

/// The `pct`-th percentile of `sorted` (nearest rank below).
fn percentile(sorted: &[u32], pct: usize) -> u32 {
    let at = sorted.len().saturating_sub(1) * pct / 100;
    sorted.get(at).copied().unwrap_or(0)
}

// One thread: the client takes at most one of the machine's cores, and
// the server being measured keeps the rest.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.target == Target::Realtime {
        if !args.hold {
            eprintln!(
                "lean: the realtime target is for --hold only (the contract answers no append)"
            );
            return ExitCode::from(2);
        }
        args.url = format!("{}/v1/realtime?duplex=1", args.url.trim_end_matches('/'));
    }
    let args = Arc::new(args);
    let shared = Arc::new(Shared::default());
    let pid = args.server_pid;
    if args.hold {
        let before = pid.and_then(rss_kib);
        let until = Instant::now() + Duration::from_secs(args.duration_s);
        let tasks: Vec<_> = (0..args.clients)
            .map(|_| tokio::spawn(hold(Arc::clone(&args), Arc::clone(&shared), until)))
            .collect();
        while shared.ready.load(Ordering::Relaxed) + shared.failed.load(Ordering::Relaxed)
            < args.clients as u64
            && Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = pid.and_then(rss_kib);
        let ready = shared.ready.load(Ordering::Relaxed);
        let per = match (before, after) {
            (Some(b), Some(a)) if ready > 0 => {
                format!("{:.1}", (a.saturating_sub(b)) as f64 / ready as f64)
            }
            _ => "-".to_owned(),
        };
        println!(
            "lean: target={:?} held={ready} failed={} server_rss_kib_before={} server_rss_kib_after={} kib_per_connection={per}",
            args.target,
            shared.failed.load(Ordering::Relaxed),
            before.map_or("-".into(), |v| v.to_string()),
            after.map_or("-".into(), |v| v.to_string()),
        );
        // Returning drops the runtime: every held socket closes now.
        drop(tasks);
        return if shared.failed.load(Ordering::Relaxed) == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let audio: Arc<str> = encode_audio(&[0x5a; 640]).into();
    let began = Instant::now();
    let until = began + Duration::from_secs(args.duration_s);
    let tasks: Vec<_> = (0..args.clients)
        .map(|idx| {
            tokio::spawn(stream(
                idx,
                Arc::clone(&args),
                Arc::clone(&shared),
                Arc::clone(&audio),
                until,
            ))
        })
        .collect();
    // A run shorter than the warm-up and the window together keeps their
    // shares of it: a fifth to warm up, three fifths measured.
    let run_ms = args.duration_s * 1000;
    let warmup = Duration::from_millis((args.warmup_s * 1000).min(run_ms / 5));
    let window = Duration::from_millis((args.window_s * 1000).min(run_ms * 3 / 5));
    tokio::time::sleep_until(began + warmup).await;
    let server = pid.map(|p| p.to_string());
    let (s0, c0) = (server.as_deref().and_then(cpu_us), cpu_us("self"));
    let w0 = Instant::now();
    shared.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(window).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let measured = w0.elapsed().as_secs_f64();
    let (s1, c1) = (server.as_deref().and_then(cpu_us), cpu_us("self"));
    let answered = shared.answered.load(Ordering::Relaxed);
    let mut rtts = Vec::new();
    let deadline = until + Duration::from_secs(15);
    for t in tasks {
        match tokio::time::timeout_at(deadline, t).await {
            Ok(Ok(r)) => rtts.extend(r),
            _ => {
                shared.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    rtts.sort_unstable();
    let per_msg = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if answered > 0 => {
            format!("{:.1}", (b.saturating_sub(a)) as f64 / answered as f64)
        }
        _ => "-".to_owned(),
    };
    let failed = shared.failed.load(Ordering::Relaxed);
    println!(
        "lean: target={:?} clients={} answered={answered} rate={:.0}/s server_us_per_msg={} client_us_per_msg={} p50_us={} p99_us={} failed={failed}",
        args.target,
        args.clients,
        answered as f64 / measured,
        per_msg(s0, s1),
        per_msg(c0, c1),
        percentile(&rtts, 50),
        percentile(&rtts, 99),
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
