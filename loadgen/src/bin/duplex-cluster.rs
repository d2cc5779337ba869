//! `duplex-cluster`: a local cluster under load, with faults. Starts
//! `redis-server` from PATH on a free port (in memory, nothing on disk; or,
//! with `--redis-cluster`, a three-master Redis Cluster),
//! N `duplex-gateway` nodes sharing it, and the load generator against all
//! of them; kills a random node with SIGKILL every `--kill-every-s` seconds
//! and drains one with SIGTERM every `--drain-every-s`, restarting each;
//! with `--kill-redis-every-s`, kills the redis-server itself and starts it
//! again, empty, on the same port (it outlives the store's death: every
//! read of the directory is retried while the store comes back), and with
//! `--with-a-node` a node at the same moment; with `--pause-redis-every-s`,
//! stalls it (Sentinel's primary, a cluster's master) for 3 s (`CLIENT
//! PAUSE`). With `--redis-sentinel` the store
//! is a primary with two replicas under three Sentinels, and
//! `--kill-redis-every-s` SIGKILLs the primary: a replica is promoted and
//! the old primary comes back, empty, as a replica; with `--redis-cluster
//! --replicas 1` it SIGKILLs a master, whose replica the cluster promotes
//! (without replicas the master comes back empty). `--durability
//! replicated` has the nodes acknowledge a change only once a replica
//! holds it (`WAIT`).
//! Then it waits for every session left behind to be closed or to expire,
//! and counts every engine request's releases in the directory.
//!
//! Prints the load generator's lines, then `cluster: nodes=N kills=K
//! drains=D redis_kills=R redis_pauses=P released_once=true|false`, and exits 1 unless `lost=0
//! doubled=0 unreconciled=0`, no reply was unexpected, and every engine
//! request was released exactly once.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use clap::Parser;
use duplex_gateway::cluster::{Directory, RedisTarget};
use duplex_loadgen as loadgen;
use duplex_testkit::redis::LocalRedis;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A local cluster of gateway nodes over one Redis, under load, with node
/// kills and drains.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Gateway nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Load-generator clients.
    #[arg(long, default_value_t = 300)]
    clients: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 30)]
    duration_s: u64,
    /// Kill a random node with SIGKILL this often, then restart it (0:
    /// never).
    #[arg(long, default_value_t = 10)]
    kill_every_s: u64,
    /// Drain a random node with SIGTERM this often, then restart it (0:
    /// never).
    #[arg(long, default_value_t = 15)]
    drain_every_s: u64,
    /// Kill the redis-server with SIGKILL this often and start it again,
    /// empty, on the same port a second later (0: never). The store's
    /// death: what a node held live survives, what only the store held
    /// is gone. With --redis-sentinel it kills the primary; with
    /// --redis-cluster a master (with --replicas its replica is
    /// promoted; without, it comes back empty).
    #[arg(long, default_value_t = 0)]
    kill_redis_every_s: u64,
    /// Keep the directory in a primary with two replicas watched by three
    /// Sentinels; --kill-redis-every-s then kills the primary (a replica
    /// is promoted; the old primary comes back as a replica).
    #[arg(long, conflicts_with = "redis_cluster")]
    redis_sentinel: bool,
    /// When the nodes acknowledge a change: `ack` (the primary holds it)
    /// or `replicated` (a replica holds it too: WAIT; with
    /// --redis-sentinel the servers also refuse writes without a replica).
    #[arg(long, default_value = "ack", value_parser = ["ack", "replicated"])]
    durability: String,
    /// With --kill-redis-every-s: SIGKILL a random node at the same moment
    /// (started again once the store is back). What only that node and
    /// the store held is gone: its clients are told (`state_lost`).
    #[arg(long, requires = "kill_redis_every_s")]
    with_a_node: bool,
    /// Stall the store this often: `CLIENT PAUSE 3000` through
    /// `redis-cli` on the redis-server, Sentinel's primary (its Sentinels
    /// see it down and promote a replica while it stalls), or a random
    /// master of the cluster (0: never). Writes time out and are sent
    /// again once it answers, while the first ones still run.
    #[arg(long, default_value_t = 0)]
    pause_redis_every_s: u64,
    /// Milliseconds between a client's 20 ms chunks.
    #[arg(long, default_value_t = 20)]
    chunk_ms: u64,
    /// The nodes' disconnect grace, seconds.
    #[arg(long, default_value_t = 2)]
    grace_s: u64,
    /// Seed of the clients' and the faults' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep the directory in a three-master Redis Cluster (made with
    /// `redis-cli --cluster create`) instead of one redis-server.
    #[arg(long)]
    redis_cluster: bool,
    /// With --redis-cluster: replicas of each master (a killed master's
    /// replica is promoted by the cluster; the killed one comes back as
    /// its replica).
    #[arg(long, default_value_t = 0, requires = "redis_cluster")]
    replicas: u32,
    /// The dialect the load clients speak: native or realtime.
    #[arg(long, default_value = "native")]
    dialect: loadgen::Dialect,
    /// Chunks a load client sends before it waits for their
    /// acknowledgement (1: each chunk is waited on).
    #[arg(long, default_value_t = std::num::NonZeroU32::MIN)]
    window: std::num::NonZeroU32,
    /// Directory for the nodes' logs, kept (default: a fresh one under
    /// the system's temporary directory, removed after a run that passed).
    #[arg(long)]
    logs: Option<PathBuf>,
    /// The nodes' `--auth-secret`, given to the clients too (each signs a
    /// bearer token of its own principal). Unset, the nodes run without
    /// auth whatever their environment holds.
    #[arg(long, env = "DUPLEX_AUTH_SECRET", hide_env_values = true)]
    auth_secret: Option<String>,
}

/// A running node.
struct Node {
    index: usize,
    port: u16,
    child: Child,
}

/// Everything the nodes are started with.
struct Setup {
    gateway: PathBuf,
    redis: RedisTarget,
    durability: String,
    grace_s: u64,
    admin_token: String,
    resume_key: String,
    auth_secret: Option<String>,
    logs: PathBuf,
    starts: usize,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// A secret of `bytes` random bytes from the OS, as hex.
fn secret(bytes: usize) -> Result<String, String> {
    use std::fmt::Write as _;
    let mut raw = vec![0u8; bytes];
    getrandom::fill(&mut raw).map_err(|e| format!("the OS random source failed: {e}"))?;
    Ok(raw.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    }))
}

impl Setup {
    /// Starts node `index` on `port` and waits until it listens.
    fn start(&mut self, index: usize, port: u16) -> Result<Node, String> {
        self.starts += 1;
        let log = self.logs.join(format!("node{index}.{}.log", self.starts));
        let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(&self.gateway);
        // The nodes and the clients share one auth setting: a secret in
        // this process's environment would otherwise reach the nodes only.
        match &self.auth_secret {
            Some(secret) => command.env("DUPLEX_AUTH_SECRET", secret),
            None => command.env_remove("DUPLEX_AUTH_SECRET"),
        };
        let child = command
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(redis_args(&self.redis))
            .args(["--durability", &self.durability])
            .args(["--node", &format!("n{index}")])
            .args([
                "--grace-s",
                &self.grace_s.to_string(),
                "--liveness-ttl-s",
                "1",
            ])
            .args([
                "--max-connections-per-ip",
                "100000",
                "--max-connections",
                "100000",
            ])
            .env("DUPLEX_ADMIN_TOKEN", &self.admin_token)
            .env("DUPLEX_RESUME_KEY", &self.resume_key)
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.gateway.display()))?;
        let mut node = Node { index, port, child };
        for _ in 0..200 {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(node);
            }
            if let Ok(Some(status)) = node.child.try_wait() {
                return Err(format!(
                    "node {index} exited with {status}; see {}",
                    log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = node.child.kill();
        Err(format!(
            "node {index} is not listening on {port}; see {}",
            log.display()
        ))
    }
}

/// The gateway's arguments naming the directory.
fn redis_args(target: &RedisTarget) -> Vec<String> {
    match target {
        RedisTarget::Server(url) => vec!["--redis".into(), url.clone()],
        RedisTarget::Sentinel { sentinels, master } => vec![
            "--redis".into(),
            sentinels.join(","),
            "--redis-sentinel".into(),
            master.clone(),
        ],
        RedisTarget::Cluster(urls) => {
            vec!["--redis".into(), urls.join(","), "--redis-cluster".into()]
        }
    }
}

/// ` redis_per_append=<all>` and the commands above 0.05 per append
/// (`evalsha`, `wait`, `client|id`, ...), from `INFO commandstats` of the
/// server on `port`; empty if it cannot be read.
fn commands_per_append(port: u16, appended: u64) -> String {
    let Ok(out) = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "INFO", "commandstats"])
        .output()
    else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut total = 0u64;
    let mut named = Vec::new();
    for line in text.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(":calls="))
        else {
            continue;
        };
        let calls: u64 = rest
            .split(',')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        total += calls;
        #[allow(clippy::cast_precision_loss)]
        let per = calls as f64 / appended as f64;
        if per >= 0.05 {
            named.push(format!("{name}:{per:.2}"));
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let all = total as f64 / appended as f64;
    format!(" redis_per_append={all:.2} ({})", named.join(","))
}

/// SIGTERM, then up to 10 s for the drain, then SIGKILL.
async fn drain(node: &mut Node) {
    let _ = Command::new("kill")
        .args(["-TERM", &node.child.id().to_string()])
        .status();
    for _ in 0..200 {
        if let Ok(Some(_)) = node.child.try_wait() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "duplex-cluster: node {} did not drain within 10 s; killing it",
        node.index
    );
    let _ = node.child.kill();
    let _ = node.child.wait();
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
    let logs = args.logs.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("duplex-cluster-{}", std::process::id()))
    });
    match run(&args, logs.clone()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("duplex-cluster: {e}");
            if logs.exists() {
                eprintln!("duplex-cluster: node logs in {}", logs.display());
            }
            ExitCode::from(2)
        }
    }
}

/// `op` until it succeeds, for up to 15 s (the store restarting).
async fn retried<T, E: std::fmt::Display, F: std::future::Future<Output = Result<T, E>>>(
    what: &str,
    mut op: impl FnMut() -> F,
) -> Result<T, String> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() >= give_up => {
                return Err(format!("cannot {what}: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn run(args: &Args, logs: PathBuf) -> Result<bool, String> {
    if args.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    // Kept running for the whole run (killed and restarted with
    // --kill-redis-every-s).
    let min_replicas = u32::from(args.durability == "replicated");
    if min_replicas > 0 && !args.redis_sentinel && args.replicas == 0 {
        return Err(
            "--durability replicated needs replicas: --redis-sentinel, or --redis-cluster --replicas 1"
                .into(),
        );
    }
    let mut store = if args.redis_sentinel {
        LocalRedis::start_sentinel(min_replicas)
    } else if args.redis_cluster {
        LocalRedis::start_cluster(args.replicas, min_replicas)
    } else {
        LocalRedis::start(false)
    }
    .map_err(|e| e.to_string())?;
    let target = store.target();
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let gateway = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .with_file_name("duplex-gateway");
    let mut setup = Setup {
        gateway,
        redis: target.clone(),
        durability: args.durability.clone(),
        grace_s: args.grace_s,
        admin_token: secret(16)?,
        resume_key: secret(32)?,
        auth_secret: args.auth_secret.clone(),
        logs,
        starts: 0,
    };
    let mut nodes = Vec::with_capacity(args.nodes);
    for index in 0..args.nodes {
        let port = free_port().map_err(|e| format!("no free port: {e}"))?;
        nodes.push(setup.start(index, port)?);
    }
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("ws://127.0.0.1:{}", n.port))
        .collect();
    let config = loadgen::Config {
        url: urls[0].clone(),
        urls: urls[1..].to_vec(),
        chunk_interval: Duration::from_millis(args.chunk_ms.max(1)),
        grace: Duration::from_secs(args.grace_s),
        seed: args.seed,
        admin_token: Some(setup.admin_token.clone()),
        auth_secret: setup.auth_secret.clone(),
        dialect: args.dialect,
        window: args.window,
        ..loadgen::Config::new("", args.clients, Duration::from_secs(args.duration_s))
    };
    let load = tokio::spawn(loadgen::run(config));

    // The faults, while the clients stream.
    let (mut kills, mut drains, mut redis_kills, mut pauses) = (0usize, 0usize, 0usize, 0usize);
    // With Sentinel or a cluster: how long each promotion (or a
    // replica-less master's restart) took after its kill.
    let mut promotions: Vec<u128> = Vec::new();
    let start = tokio::time::Instant::now();
    let end = start + Duration::from_secs(args.duration_s);
    let every = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let (kill_every, drain_every) = (every(args.kill_every_s), every(args.drain_every_s));
    let redis_every = every(args.kill_redis_every_s);
    let mut next_kill = kill_every.map(|d| start + d);
    let mut next_drain = drain_every.map(|d| start + d);
    let mut next_redis = redis_every.map(|d| start + d);
    let pause_every = every(args.pause_redis_every_s);
    let mut next_pause = pause_every.map(|d| start + d);
    loop {
        let next = [next_kill, next_drain, next_redis, next_pause]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next.filter(|&at| at + Duration::from_secs(2) < end) else {
            break;
        };
        tokio::time::sleep_until(at).await;
        if Some(at) == next_pause {
            // The one server, Sentinel's primary (whose Sentinels then
            // see it down and promote a replica while it still holds the
            // nodes' writes), or a master of the cluster (whose bus is not
            // paused: no failover, its clients wait).
            let port = store
                .writer_port(rng.next_u32() as usize)
                .map_err(|e| e.to_string())?;
            let paused = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "CLIENT", "PAUSE", "3000", "ALL"])
                .output()
                .map_err(|e| format!("redis-cli: {e}"))?;
            if !paused.status.success() {
                return Err(format!(
                    "CLIENT PAUSE failed: {}",
                    String::from_utf8_lossy(&paused.stderr)
                ));
            }
            pauses += 1;
            next_pause = pause_every.map(|d| at + d);
            continue;
        }
        if Some(at) == next_redis {
            // With Sentinel the primary dies and a replica takes over; on
            // a cluster a master dies (and its replica takes over, if it
            // has one); alone, the one server dies and comes back empty.
            let killed_primary = match &mut store {
                LocalRedis::Sentinel(sentinel) => {
                    Some(sentinel.kill_primary().map_err(|e| e.to_string())?)
                }
                LocalRedis::Server(server) => {
                    server.kill();
                    None
                }
                LocalRedis::Cluster(cluster) => {
                    let pick = rng.next_u32() as usize;
                    Some(cluster.kill_master(pick).map_err(|e| e.to_string())?)
                }
            };
            let killed_at = std::time::Instant::now();
            redis_kills += 1;
            let victim = args.with_a_node.then(|| {
                let victim = (rng.next_u32() as usize) % nodes.len();
                let node = &mut nodes[victim];
                let _ = node.child.kill(); // SIGKILL
                let _ = node.child.wait();
                kills += 1;
                (node.index, node.port)
            });
            match (killed_primary, &mut store) {
                (Some(index), LocalRedis::Sentinel(sentinel)) => {
                    tokio::task::block_in_place(|| sentinel.await_failover(index))
                        .map_err(|e| format!("the Sentinels did not fail over: {e}"))?;
                    promotions.push(killed_at.elapsed().as_millis());
                }
                (Some(index), LocalRedis::Cluster(cluster)) => {
                    tokio::task::block_in_place(|| cluster.await_failover(index))
                        .map_err(|e| format!("the cluster did not fail over: {e}"))?;
                    promotions.push(killed_at.elapsed().as_millis());
                }
                (_, LocalRedis::Server(server)) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    tokio::task::block_in_place(|| server.restart())
                        .map_err(|e| format!("redis-server did not come back: {e}"))?;
                }
                _ => return Err("the killed store is of no kind that comes back".into()),
            }
            if let Some((index, port)) = victim {
                nodes[index] = setup.start(index, port)?;
            }
            next_redis = redis_every.map(|d| at + d);
            continue;
        }
        let victim = (rng.next_u32() as usize) % nodes.len();
        let node = &mut nodes[victim];
        if Some(at) == next_kill {
            let _ = node.child.kill(); // SIGKILL
            let _ = node.child.wait();
            kills += 1;
            next_kill = kill_every.map(|d| at + d);
        } else {
            drain(node).await;
            drains += 1;
            next_drain = drain_every.map(|d| at + d);
        }
        let (index, port) = (node.index, node.port);
        *node = setup.start(index, port)?;
    }
    let report = load
        .await
        .map_err(|e| format!("the load generator failed: {e}"))?
        .map_err(|e| e.to_string())?;

    // Sessions nobody resumed (adopted from a killed node, handed off by a
    // drain) expire after the grace; then every request must be released.
    // The store may have just come back: each read is tried again for a
    // while before the run gives up on it.
    let directory = retried("connect to the directory", || {
        Directory::connect_to(&target, "duplex-cluster")
    })
    .await?;
    let settle = tokio::time::Instant::now() + Duration::from_secs(args.grace_s * 3 + 10);
    while retried("count records", || directory.records()).await? > 0
        && tokio::time::Instant::now() < settle
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let left = retried("count records", || directory.records()).await?;
    let tally = retried("read the release counts", || directory.release_tally()).await?;
    for mut node in nodes {
        let _ = Command::new("kill")
            .args(["-INT", &node.child.id().to_string()])
            .status();
        let _ = node.child.wait();
    }

    println!("{}", report.detail());
    println!("{}", report.line());
    let released_once = tally.exactly_once() && left == 0;
    let redis = store.name();
    // What the store ran per acknowledged chunk (only where one server
    // took every write of the run: after a kill the dead primary's counts
    // are gone).
    let per_append = match store.primary_port() {
        Some(port) if redis_kills == 0 && report.appended > 0 => {
            commands_per_append(port, report.appended)
        }
        _ => String::new(),
    };
    let promoted = if promotions.is_empty() {
        String::new()
    } else {
        let ms: Vec<String> = promotions.iter().map(u128::to_string).collect();
        format!(" promoted_after_ms={}", ms.join(","))
    };
    println!(
        "cluster: nodes={} redis={redis} durability={} kills={kills} drains={drains} redis_kills={redis_kills}{promoted} redis_pauses={pauses}{per_append} requests={} sessions_left={left} released_once={released_once}",
        args.nodes, args.durability, tally.bound
    );
    let mut failures = report.failures();
    if !tally.never.is_empty() {
        failures.push(format!(
            "{} engine requests were never released (e.g. {:?})",
            tally.never.len(),
            tally.never.iter().take(3).collect::<Vec<_>>()
        ));
    }
    if !tally.twice.is_empty() {
        failures.push(format!(
            "{} engine requests were released more than once (e.g. {:?})",
            tally.twice.len(),
            tally.twice.iter().take(3).collect::<Vec<_>>()
        ));
    }
    if left > 0 {
        let named = match directory.records_left().await {
            Ok(records) => records
                .iter()
                .take(3)
                .map(|(s, r)| format!("{s} (node {}, incarnation {})", r.node, r.incarnation))
                .collect::<Vec<_>>()
                .join(", "),
            Err(e) => e.to_string(),
        };
        failures.push(format!(
            "{left} sessions still have a record after the settling time: {named}"
        ));
    }
    for why in &failures {
        eprintln!("duplex-cluster: FAILED: {why}");
    }
    if !failures.is_empty() || args.logs.is_some() {
        eprintln!("duplex-cluster: node logs in {}", setup.logs.display());
    } else if let Err(e) = std::fs::remove_dir_all(&setup.logs) {
        eprintln!(
            "duplex-cluster: cannot remove the node logs in {}: {e}",
            setup.logs.display()
        );
    }
    Ok(failures.is_empty())
}
