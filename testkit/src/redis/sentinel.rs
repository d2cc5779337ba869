//! A throwaway replicated Redis: a primary and two replicas, each a
//! `redis-server` from `PATH` in memory only, watched by three Sentinels
//! (`redis-server --sentinel`) that promote a replica when the primary
//! dies. For tests and the local cluster command's failovers.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::server::{cli, free_port, info_field, listening, start_node, wait_for};
use super::{RedisServer, RedisServerError};
use duplex_gateway::cluster::RedisTarget;

/// The name the Sentinels monitor the primary under.
pub const SENTINEL_MASTER: &str = "dx";

/// How long the Sentinels wait for a silent primary before they agree it
/// is down and fail over.
const DOWN_AFTER_MS: u64 = 1000;

/// A primary with two replicas under three Sentinels (quorum 2), all
/// stopped when dropped.
///
/// ```no_run
/// use duplex_testkit::redis::RedisSentinel;
/// use duplex_gateway::cluster::RedisTarget;
/// let mut redis = RedisSentinel::start(1)?;
/// assert!(matches!(redis.target(), RedisTarget::Sentinel { .. }));
/// let before = redis.primary_port()?;
/// let killed = redis.kill_primary()?;     // SIGKILL, as a crash would
/// let took = redis.await_failover(killed)?; // a replica is promoted;
/// assert_ne!(redis.primary_port()?, before); // the old one is its replica now
/// println!("failed over in {took:?}");
/// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
/// ```
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<RedisServer>,
    sentinels: Vec<(Child, u16)>,
    dir: PathBuf,
    min_replicas: u32,
}

impl RedisSentinel {
    /// Starts the primary and two replicas on free ports (each refusing
    /// writes with fewer than `min_replicas` replicas in reach:
    /// `min-replicas-to-write`), waits until both replicas are in sync,
    /// then starts three Sentinels and waits until each knows the two
    /// replicas and the other two Sentinels.
    ///
    /// # Errors
    ///
    /// [`RedisServerError`]: `redis-server` or `redis-cli` missing, or the
    /// setup not formed within its time.
    pub fn start(min_replicas: u32) -> Result<Self, RedisServerError> {
        let dir = std::env::temp_dir().join(format!(
            "duplex-redis-sentinel-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&dir).map_err(|e| RedisServerError::Start(e.to_string()))?;
        let mut setup = RedisSentinel {
            servers: Vec::new(),
            sentinels: Vec::new(),
            dir,
            min_replicas,
        };
        let primary = start_node(false, |port| setup.data_args(port, None))?;
        let primary_port = primary.port();
        setup.servers.push(primary);
        for _ in 0..2 {
            let replica = start_node(false, |port| setup.data_args(port, Some(primary_port)))?;
            setup.servers.push(replica);
        }
        wait_for(Duration::from_secs(20), "two replicas in sync", || {
            let info = cli(primary_port, &["INFO", "replication"])?;
            Ok(info_field(&info, "connected_slaves") == Some("2")
                && info.matches("state=online").count() == 2)
        })?;
        for _ in 0..3 {
            let sentinel = setup.start_sentinel(primary_port)?;
            setup.sentinels.push(sentinel);
        }
        let ports: Vec<u16> = setup.sentinels.iter().map(|(_, p)| *p).collect();
        wait_for(
            Duration::from_secs(30),
            "every Sentinel knowing the replicas and the other Sentinels",
            || {
                for port in &ports {
                    let master = cli(*port, &["SENTINEL", "master", SENTINEL_MASTER])?;
                    let fields: Vec<&str> = master.lines().collect();
                    let value = |name: &str| {
                        fields
                            .iter()
                            .position(|f| *f == name)
                            .and_then(|i| fields.get(i + 1))
                            .copied()
                    };
                    if value("num-slaves") != Some("2") || value("num-other-sentinels") != Some("2")
                    {
                        return Ok(false);
                    }
                }
                Ok(true)
            },
        )?;
        Ok(setup)
    }

    /// A data server's arguments: `min-replicas-to-write`, a replica's
    /// full sync sent and loaded at once over the socket (nothing on disk;
    /// any file in the setup's folder), and the primary it copies if it is
    /// a replica.
    fn data_args(&self, port: u16, replica_of: Option<u16>) -> Vec<String> {
        let mut args: Vec<String> = [
            "--min-replicas-to-write",
            &self.min_replicas.to_string(),
            "--min-replicas-max-lag",
            "3",
            "--repl-diskless-load",
            "swapdb",
            // A replica that comes back syncs at once (the default waits
            // 5 s for others to batch with, longer than a primary lives
            // under a kill every few seconds).
            "--repl-diskless-sync-delay",
            "0",
            "--dir",
            &self.dir.to_string_lossy(),
            "--dbfilename",
            &format!("dump-{port}.rdb"),
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(port) = replica_of {
            args.extend(["--replicaof".into(), "127.0.0.1".into(), port.to_string()]);
        }
        args
    }

    fn start_sentinel(&self, primary: u16) -> Result<(Child, u16), RedisServerError> {
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            let conf = self.dir.join(format!("sentinel-{port}.conf"));
            let m = SENTINEL_MASTER;
            let text = format!(
                "sentinel monitor {m} 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds {m} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {m} 3000\n\
                 sentinel parallel-syncs {m} 2\n"
            );
            std::fs::write(&conf, text).map_err(|e| RedisServerError::Start(e.to_string()))?;
            let mut child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--dir", &self.dir.to_string_lossy()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(RedisServerError::NotFound)?;
            match listening(&mut child, port) {
                Ok(()) => return Ok((child, port)),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| RedisServerError::Start("no Sentinel started".into())))
    }

    /// Where a node connects: the Sentinels, and the name they monitor.
    pub fn target(&self) -> RedisTarget {
        RedisTarget::Sentinel {
            sentinels: self
                .sentinels
                .iter()
                .map(|(_, port)| format!("redis://127.0.0.1:{port}/"))
                .collect(),
            master: SENTINEL_MASTER.to_owned(),
        }
    }

    /// The port of the primary, as the first Sentinel that answers names
    /// it.
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`] if no Sentinel names one.
    pub fn primary_port(&self) -> Result<u16, RedisServerError> {
        for (_, port) in &self.sentinels {
            let addr = cli(
                *port,
                &["SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER],
            )?;
            if let Some(p) = addr.lines().nth(1).and_then(|p| p.trim().parse().ok()) {
                return Ok(p);
            }
        }
        Err(RedisServerError::Start(
            "no Sentinel names a primary".into(),
        ))
    }

    /// SIGKILLs the primary; returns its index, for
    /// [`await_failover`](Self::await_failover).
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`] if the primary the Sentinels name is
    /// none of the servers.
    pub fn kill_primary(&mut self) -> Result<usize, RedisServerError> {
        let port = self.primary_port()?;
        let index = self
            .servers
            .iter()
            .position(|s| s.port() == port)
            .ok_or_else(|| RedisServerError::Start(format!("no server on port {port}")))?;
        self.servers[index].kill();
        Ok(index)
    }

    /// Waits until the Sentinels name another primary and it answers as
    /// one, then starts server `killed` again, empty, as its replica (as
    /// an operator's restart of a failed primary would come back).
    /// Returns how long the promotion took from the call.
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`]: no promotion within 30 s, or the old
    /// primary did not come back.
    pub fn await_failover(&mut self, killed: usize) -> Result<Duration, RedisServerError> {
        let since = Instant::now();
        let old = self
            .servers
            .get(killed)
            .map(RedisServer::port)
            .ok_or_else(|| RedisServerError::Start(format!("no server {killed}")))?;
        let mut new = old;
        wait_for(Duration::from_secs(30), "a replica promoted", || {
            new = self.primary_port()?;
            Ok(new != old && cli(new, &["ROLE"])?.starts_with("master"))
        })?;
        let took = since.elapsed();
        let args = self.data_args(old, Some(new));
        self.servers[killed].restart_with(args)?;
        Ok(took)
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for (child, _) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.servers.clear(); // each kills its server
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
