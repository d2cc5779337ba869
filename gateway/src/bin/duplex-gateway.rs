//! `duplex-gateway`: the reference WebSocket voice gateway (see
//! `PROTOCOL.md`). Serves until Ctrl-C, then closes every session, releases
//! every engine request and prints its counters.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use duplex_gateway::{Config, Gateway};

/// A WebSocket voice gateway over duplex-std's shared session manager.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
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
    /// `response.delta` events per response.
    #[arg(long, default_value_t = 3)]
    deltas: u32,
    /// Milliseconds the stand-in engine takes per delta.
    #[arg(long, default_value_t = 5)]
    delta_ms: u64,
}

fn seconds(name: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|e| format!("--{name} {s}: {e}"))
}

fn config(args: &Args) -> Result<Config, String> {
    let idle_ttl = seconds("idle-ttl-s", args.idle_ttl_s)?;
    Ok(Config {
        max_sessions: args.max_sessions,
        idle_ttl: (!idle_ttl.is_zero()).then_some(idle_ttl),
        grace: seconds("grace-s", args.grace_s)?,
        audit: args.audit,
        deltas: args.deltas,
        delta_interval: Duration::from_millis(args.delta_ms),
        admin_token: args.admin_token.clone(),
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let gateway = match config(&args).and_then(|c| Gateway::new(c).map_err(|e| e.to_string())) {
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
    match listener.local_addr() {
        Ok(addr) => println!("gateway: listening on ws://{addr}"),
        Err(e) => eprintln!("duplex-gateway: {e}"),
    }
    let shutdown = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            eprintln!("duplex-gateway: cannot wait for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
        println!("gateway: shutting down");
    };
    let counters = std::sync::Arc::clone(&gateway)
        .serve(listener, shutdown)
        .await;
    println!("{}", counters.line());
    println!(
        "gateway: requests_outstanding={} sessions_left={}",
        counters.requests_outstanding(),
        gateway.sessions()
    );
    ExitCode::SUCCESS
}
