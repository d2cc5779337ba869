//! `duplex-gateway`: the reference WebSocket voice gateway (see
//! `PROTOCOL.md`). Serves until Ctrl-C or SIGTERM, then closes every
//! session (a node of a cluster hands them off instead), releases every
//! engine request and prints its counters. On SIGHUP it reads its TLS
//! certificate and key again.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use duplex_gateway::cluster::{self, ClusterConfig, RedisTarget};
use duplex_gateway::engine::StandIn;
use duplex_gateway::{Config, Gateway, Limits, TlsFiles};

/// When a change is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Durability {
    /// Once the primary of the directory in Redis holds it: a node killed
    /// at any instant loses nothing it acknowledged; a primary that dies
    /// loses what its replicas had not copied (the nodes write back what
    /// they hold).
    Ack,
    /// Once `WAIT` confirms that --replicas replicas hold it too: a
    /// failover to one of them loses nothing acknowledged. Give the
    /// servers `min-replicas-to-write` as well.
    Replicated,
}

/// A WebSocket voice gateway over duplex-std's shared session manager.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Also serve /healthz, /readyz and /metrics on this address, with no
    /// admin token and no sessions (on --listen, /metrics needs the admin
    /// token).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Serve TLS (wss://, https://) with this PEM certificate chain;
    /// reread on SIGHUP.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert; reread on SIGHUP.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Be a node of a cluster whose session directory is this Redis
    /// (`redis://host:port/`): clients can resume on any node, and a
    /// node's death or shutdown loses no acknowledged change. Give every
    /// node the same --resume-key.
    #[arg(long, env = "DUPLEX_REDIS_URL")]
    redis: Option<String>,
    /// --redis names the seed nodes of a Redis Cluster (comma-separated
    /// URLs) rather than one server.
    #[arg(long, requires = "redis", conflicts_with = "redis_sentinel")]
    redis_cluster: bool,
    /// --redis names Redis Sentinels (comma-separated URLs); the directory
    /// is the primary they monitor under this name, followed through
    /// failovers.
    #[arg(long, value_name = "MASTER", requires = "redis")]
    redis_sentinel: Option<String>,
    /// The node's name in the cluster (it registers as NAME-<boot id>).
    #[arg(long, default_value = "node", requires = "redis")]
    node: String,
    /// When a change is acknowledged (with --redis).
    #[arg(long, value_enum, default_value_t = Durability::Ack, requires = "redis")]
    durability: Durability,
    /// With --durability replicated: replicas that must hold a change.
    #[arg(long, default_value_t = 1, requires = "redis")]
    replicas: u32,
    /// With --durability replicated: how long one WAIT may block, in
    /// milliseconds (a change not confirmed by then is answered
    /// `unavailable` and stored again with the next save).
    #[arg(long, default_value_t = 500, requires = "redis")]
    replication_timeout_ms: u64,
    /// Seconds a node counts as live after each announcement; a node
    /// silent for longer is presumed dead and its sessions are adopted.
    #[arg(long, default_value_t = 2.0, requires = "redis")]
    liveness_ttl_s: f64,
    /// Seconds a node keeps the log of a session it closed, to write it
    /// back if the store loses its data meanwhile (about 60 bytes per
    /// applied chunk of every session closed within it).
    #[arg(long, default_value_t = 60.0, requires = "redis")]
    closed_retention_s: f64,
    /// Admission limit.
    #[arg(long, default_value_t = 10_000)]
    max_sessions: usize,
    /// Idle TTL of a session's lease, in seconds (0: never idles out).
    #[arg(long, default_value_t = 300.0)]
    idle_ttl_s: f64,
    /// Disconnect grace: how long a dropped session waits for a resume, in
    /// seconds.
    #[arg(long, default_value_t = 30.0)]
    grace_s: f64,
    /// Keep every session's applied input for `session.audit` (load tests).
    #[arg(long)]
    audit: bool,
    /// The token `admin.stats` and `session.audit` must carry; without one
    /// they are refused (better from the environment than the command
    /// line, which other users can see).
    #[arg(long, env = "DUPLEX_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Require every connection to present an HS256 JWT (its `sub` is the
    /// connection's principal; session ids are scoped to it), verified
    /// with this secret. Without it connections are anonymous.
    #[arg(long, env = "DUPLEX_AUTH_SECRET", hide_env_values = true)]
    auth_secret: Option<String>,
    /// The key resume tokens are made with, at least 32 bytes. Give every
    /// node of a cluster the same one, so a client can resume on any node.
    /// Without it a key is drawn at start, and tokens die with the process.
    #[arg(long, env = "DUPLEX_RESUME_KEY", hide_env_values = true)]
    resume_key: Option<String>,
    /// The stand-in engine's `response.delta` events per response.
    #[arg(long, default_value_t = 3)]
    deltas: u32,
    /// Milliseconds the stand-in engine takes per delta.
    #[arg(long, default_value_t = 5)]
    delta_ms: u64,
    /// Seconds from TCP accept to the end of the WebSocket handshake.
    #[arg(long, default_value_t = 5.0)]
    handshake_timeout_s: f64,
    /// Seconds a connection may send nothing (the server pings at a third
    /// of it) before it is closed.
    #[arg(long, default_value_t = 60.0)]
    idle_timeout_s: f64,
    /// Seconds one write to a client may take before the connection is
    /// dropped (the client stopped reading).
    #[arg(long, default_value_t = 10.0)]
    write_timeout_s: f64,
    /// Connections open at once.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Connections open at once from one IP address.
    #[arg(long, default_value_t = 100)]
    max_connections_per_ip: usize,
    /// Events per second one connection may send, sustained.
    #[arg(long, default_value_t = NonZeroU32::new(200).unwrap_or(NonZeroU32::MIN))]
    events_per_second: NonZeroU32,
    /// Events one connection may send at once above that rate.
    #[arg(long, default_value_t = NonZeroU32::new(400).unwrap_or(NonZeroU32::MIN))]
    events_burst: NonZeroU32,
    /// KiB queued for one client before it is dropped as not reading.
    #[arg(long, default_value_t = 1024)]
    max_outbound_kib: usize,
    /// Seconds connections get to end after Ctrl-C before they are cut.
    #[arg(long, default_value_t = 5.0)]
    shutdown_grace_s: f64,
    /// KiB of audio one session may hold that its engine has not taken up
    /// (appended since the last commit, clear or barge-in); more
    /// is refused `input_backpressure`.
    #[arg(long, default_value_t = 16 * 1024, value_parser = clap::value_parser!(u32).range(0..=4_194_303))]
    max_pending_input_kib: u32,
}

fn seconds(name: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|e| format!("--{name} {s}: {e}"))
}

fn config(args: &Args) -> Result<Config, String> {
    let idle_ttl = seconds("idle-ttl-s", args.idle_ttl_s)?;
    let limits = Limits {
        handshake_timeout: seconds("handshake-timeout-s", args.handshake_timeout_s)?,
        idle_timeout: seconds("idle-timeout-s", args.idle_timeout_s)?,
        write_timeout: seconds("write-timeout-s", args.write_timeout_s)?,
        max_connections: args.max_connections,
        max_connections_per_ip: args.max_connections_per_ip,
        events_per_second: args.events_per_second,
        events_burst: args.events_burst,
        max_outbound_bytes: args.max_outbound_kib.saturating_mul(1024),
        shutdown_grace: seconds("shutdown-grace-s", args.shutdown_grace_s)?,
        max_pending_input_bytes: args.max_pending_input_kib.saturating_mul(1024),
    };
    Ok(Config {
        max_sessions: args.max_sessions,
        idle_ttl: (!idle_ttl.is_zero()).then_some(idle_ttl),
        grace: seconds("grace-s", args.grace_s)?,
        audit: args.audit,
        engine: std::sync::Arc::new(StandIn {
            deltas: args.deltas,
            interval: Duration::from_millis(args.delta_ms),
        }),
        admin_token: args.admin_token.clone(),
        auth_secret: args.auth_secret.clone(),
        resume_key: args.resume_key.as_ref().map(|k| k.as_bytes().to_vec()),
        tls: args
            .tls_cert
            .as_ref()
            .zip(args.tls_key.as_ref())
            .map(|(cert, key)| TlsFiles::new(cert, key)),
        limits,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings (a failing accept, connections cut at shutdown) show by
    // default; RUST_LOG sets another filter.
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::WARN.into())
        .from_env_lossy();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let gateway = match config(&args) {
        Ok(c) => match &args.redis {
            None => Gateway::new(c).map_err(|e| e.to_string()),
            Some(url) => match seconds("liveness-ttl-s", args.liveness_ttl_s).and_then(|ttl| {
                let keep = seconds("closed-retention-s", args.closed_retention_s)?;
                Ok((ttl, keep))
            }) {
                Ok((ttl, keep)) => {
                    let durability = match args.durability {
                        Durability::Ack => cluster::Durability::Ack,
                        Durability::Replicated => cluster::Durability::Replicated {
                            replicas: args.replicas,
                            timeout: Duration::from_millis(args.replication_timeout_ms),
                        },
                    };
                    let redis = match &args.redis_sentinel {
                        Some(master) => RedisTarget::sentinel(url, master),
                        None => RedisTarget::parse(url, args.redis_cluster),
                    };
                    let cluster = ClusterConfig {
                        liveness_ttl: ttl,
                        closed_retention: keep,
                        durability,
                        redis,
                        ..ClusterConfig::new(url.clone(), args.node.clone())
                    };
                    Gateway::join(c, cluster).await.map_err(|e| e.to_string())
                }
                Err(e) => Err(e),
            },
        },
        Err(e) => Err(e),
    };
    let gateway = match gateway {
        Ok(gw) => gw,
        Err(e) => {
            eprintln!("duplex-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("duplex-gateway: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(2);
        }
    };
    let scheme = if gateway.tls() { "wss" } else { "ws" };
    match listener.local_addr() {
        Ok(addr) => println!("gateway: listening on {scheme}://{addr}"),
        Err(e) => eprintln!("duplex-gateway: {e}"),
    }
    let (stop_metrics, metrics_stopped) = tokio::sync::watch::channel(false);
    if let Some(at) = args.metrics_listen {
        let metrics = match tokio::net::TcpListener::bind(at).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("duplex-gateway: cannot listen on {at} for metrics: {e}");
                return ExitCode::from(2);
            }
        };
        if let Ok(addr) = metrics.local_addr() {
            let scheme = if gateway.tls() { "https" } else { "http" };
            println!("gateway: metrics on {scheme}://{addr}/metrics");
        }
        let mut stopped = metrics_stopped;
        let until = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        tokio::spawn(std::sync::Arc::clone(&gateway).serve_metrics(metrics, until));
    }
    if gateway.tls() {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(mut hup) => {
                let gateway = std::sync::Arc::clone(&gateway);
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        match gateway.reload_tls() {
                            Ok(()) => println!("gateway: TLS certificate reloaded"),
                            Err(e) => eprintln!("duplex-gateway: TLS reload refused, the certificate in use stays: {e}"),
                        }
                    }
                });
            }
            Err(e) => eprintln!("duplex-gateway: cannot wait for SIGHUP: {e}"),
        }
    }
    if let Some(node) = gateway.node_name() {
        println!("gateway: cluster node {node}");
    }
    let shutdown = async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => Some(term),
                Err(e) => {
                    eprintln!("duplex-gateway: cannot wait for SIGTERM: {e}");
                    None
                }
            };
        let term = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => {
                if let Err(e) = r {
                    eprintln!("duplex-gateway: cannot wait for Ctrl-C: {e}");
                    std::future::pending::<()>().await;
                }
            }
            () = term => {}
        }
        println!("gateway: shutting down");
    };
    let counters = std::sync::Arc::clone(&gateway)
        .serve(listener, shutdown)
        .await;
    let _ = stop_metrics.send(true);
    println!("{}", counters.line());
    println!(
        "gateway: requests_outstanding={} sessions_left={}",
        counters.requests_outstanding(),
        gateway.sessions()
    );
    ExitCode::SUCCESS
}
