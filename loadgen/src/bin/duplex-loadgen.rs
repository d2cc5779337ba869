//! `duplex-loadgen`: N WebSocket clients against a running `duplex-gateway`
//! (started with `--audit` and an admin token, which the load generator
//! needs too for the audit) on loopback, with real disconnects; reconciles
//! every client's ledger with the server's log. Exits 1, saying why, unless
//! every client reconciled (`unreconciled=0`), `lost=0`, `doubled=0` and no
//! reply was unexpected.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use duplex_loadgen::{run, Config};

/// Loopback load test of a duplex-gateway, with faults.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The gateway: ws://HOST:PORT (or wss:// with --tls-ca) on this
    /// machine. Give it several times
    /// for the nodes of one cluster: clients go round them, and resume on
    /// the next when their node dies or hands their session off.
    #[arg(long, default_value = "ws://127.0.0.1:8787")]
    url: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 100)]
    clients: usize,
    /// Seconds of streaming.
    #[arg(long, default_value_t = 10)]
    duration_s: u64,
    /// Milliseconds between a client's 20 ms chunks.
    #[arg(long, default_value_t = 10)]
    chunk_ms: u64,
    /// The gateway's --grace-s: the expiry fault waits past it.
    #[arg(long, default_value_t = 2.0)]
    grace_s: f64,
    /// Stream without injecting faults.
    #[arg(long)]
    no_faults: bool,
    /// Seed of the clients' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The gateway's admin token, to read its audit log (better from the
    /// environment than the command line, which other users can see).
    #[arg(long, env = "DUPLEX_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// The gateway's --auth-secret: each client connects with a bearer
    /// token of its own principal (`loadgen-<n>`).
    #[arg(long, env = "DUPLEX_AUTH_SECRET", hide_env_values = true)]
    auth_secret: Option<String>,
    /// The dialect the clients speak: native (the gateway's own, on `/`)
    /// or realtime (OpenAI Realtime as vllm-omni's duplex API extends it,
    /// on `/v1/realtime`).
    #[arg(long, default_value = "native")]
    dialect: duplex_loadgen::Dialect,
    /// Chunks a client sends before it waits for their acknowledgement (1:
    /// each chunk is waited on).
    #[arg(long, default_value_t = std::num::NonZeroU32::MIN)]
    window: std::num::NonZeroU32,
    /// For a wss:// gateway: the PEM certificate (or CA) to trust.
    #[arg(long)]
    tls_ca: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings by default: the replies counted `unexpected` are logged at
    // that level, and the verdict points at them (`RUST_LOG` overrides).
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::WARN.into())
        .from_env_lossy();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let Ok(grace) = Duration::try_from_secs_f64(args.grace_s) else {
        eprintln!(
            "duplex-loadgen: --grace-s {} is not a duration",
            args.grace_s
        );
        return ExitCode::from(2);
    };
    let mut urls = args.url.into_iter();
    let config = Config {
        url: urls.next().unwrap_or_default(),
        urls: urls.collect(),
        clients: args.clients,
        duration: Duration::from_secs(args.duration_s),
        chunk_interval: Duration::from_millis(args.chunk_ms.max(1)),
        grace,
        faults: !args.no_faults,
        seed: args.seed,
        admin_token: args.admin_token,
        auth_secret: args.auth_secret,
        dialect: args.dialect,
        window: args.window,
        tls_ca: args.tls_ca,
    };
    match run(config).await {
        Ok(report) => {
            println!("{}", report.detail());
            println!("{}", report.line());
            let failures = report.failures();
            for why in &failures {
                eprintln!("duplex-loadgen: FAILED: {why}");
            }
            if failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("duplex-loadgen: {e}");
            ExitCode::from(2)
        }
    }
}
