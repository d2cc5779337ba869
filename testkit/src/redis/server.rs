//! A throwaway `redis-server`, started from `PATH` on a free local port,
//! in memory only (no RDB, no AOF), stopped when dropped; the helpers the
//! Sentinel and Redis Cluster setups share; and [`LocalRedis`], a store
//! of any of the three kinds.

use super::RedisCluster;
use duplex_gateway::cluster::RedisTarget;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a `redis-server` could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RedisServerError {
    /// `redis-server` is not on `PATH` (Debian: `apt-get install redis-server`).
    #[error("redis-server is not on PATH (install it: apt-get install redis-server): {0}")]
    NotFound(std::io::Error),
    /// No free port, or the server did not start listening in time.
    #[error("redis-server did not start: {0}")]
    Start(String),
}

/// A running `redis-server`, killed when dropped.
///
/// ```no_run
/// let redis = duplex_testkit::redis::RedisServer::start()?;
/// println!("{}", redis.url());
/// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    /// The arguments it was started with beyond the port (a restart keeps
    /// them).
    args: Vec<String>,
}

/// Spawns `redis-server` on `port` with `extra` arguments.
fn spawn(port: u16, extra: &[String]) -> Result<Child, RedisServerError> {
    Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(RedisServerError::NotFound)
}

pub(super) fn free_port() -> Result<u16, RedisServerError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| RedisServerError::Start(format!("no free port: {e}")))
}

/// A free port whose cluster bus port (port + 10,000) is free too.
pub(super) fn free_cluster_port() -> Result<u16, RedisServerError> {
    for _ in 0..64 {
        let port = free_port()?;
        let bus = port.checked_add(10_000);
        if bus.is_some_and(|bus| TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_ok()) {
            return Ok(port);
        }
    }
    Err(RedisServerError::Start(
        "no free port with a free cluster bus port".to_owned(),
    ))
}

/// Starts a `redis-server` on a free port (with its cluster bus port free
/// too if `cluster`), with the arguments `extra` gives for the port, and
/// waits until it listens. A port found free can be taken by another
/// process before the server binds it, and the server then exits at
/// start: it is tried again on another port, up to five times.
pub(super) fn start_node(
    cluster: bool,
    extra: impl Fn(u16) -> Vec<String>,
) -> Result<RedisServer, RedisServerError> {
    let mut last = None;
    for _ in 0..5 {
        let port = if cluster {
            free_cluster_port()?
        } else {
            free_port()?
        };
        let args = extra(port);
        let mut server = RedisServer {
            child: spawn(port, &args)?,
            port,
            args,
        };
        match listening(&mut server.child, port) {
            Ok(()) => return Ok(server),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| RedisServerError::Start("not started".to_owned())))
}

/// Waits until `port` accepts connections, or `child` exits, or 10 s pass.
pub(super) fn listening(child: &mut Child, port: u16) -> Result<(), RedisServerError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(RedisServerError::Start(format!("exited with {status}")));
        }
        if Instant::now() > deadline {
            return Err(RedisServerError::Start(format!(
                "not listening on port {port} after 10 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `redis-cli -p port args…` and returns what it printed.
pub(super) fn cli(port: u16, args: &[&str]) -> Result<String, RedisServerError> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .map_err(RedisServerError::NotFound)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `field:value` of an `INFO` answer.
pub(super) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// Waits up to `limit` for `ready`, polling every 50 ms.
pub(super) fn wait_for(
    limit: Duration,
    what: &str,
    mut ready: impl FnMut() -> Result<bool, RedisServerError>,
) -> Result<(), RedisServerError> {
    let deadline = Instant::now() + limit;
    while !ready()? {
        if Instant::now() > deadline {
            return Err(RedisServerError::Start(format!(
                "{what} not within {limit:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

impl RedisServer {
    /// Whether `redis-server` can be run from `PATH`.
    pub fn available() -> bool {
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Starts one on a free port of 127.0.0.1 and waits until it accepts
    /// connections.
    ///
    /// # Errors
    ///
    /// [`RedisServerError`]: not installed, or not listening within 10 s.
    pub fn start() -> Result<Self, RedisServerError> {
        start_node(false, |_| Vec::new())
    }

    /// Its URL, `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills it with SIGKILL, as a crash would: whatever it held in
    /// memory is gone.
    ///
    /// ```no_run
    /// let mut redis = duplex_testkit::redis::RedisServer::start()?;
    /// redis.kill();
    /// redis.restart()?; // the same port, empty
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port, empty (nothing is persisted), and
    /// waits until it listens. Blocks for up to 10 s.
    ///
    /// ```no_run
    /// let mut redis = duplex_testkit::redis::RedisServer::start()?;
    /// let port = redis.port();
    /// redis.restart()?;
    /// assert_eq!(redis.port(), port);
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`RedisServerError`]: the port was taken meanwhile, or the server
    /// did not listen in time.
    pub fn restart(&mut self) -> Result<(), RedisServerError> {
        self.kill();
        self.child = spawn(self.port, &self.args)?;
        listening(&mut self.child, self.port)
    }

    /// As [`restart`](Self::restart), with other arguments from now on (a
    /// primary that comes back as a replica: `--replicaof`).
    pub(super) fn restart_with(&mut self, args: Vec<String>) -> Result<(), RedisServerError> {
        self.args = args;
        self.restart()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A throwaway store of any kind: one server, a primary under Sentinels,
/// or a three-master cluster. What the local cluster command and the tests start.
///
/// ```no_run
/// let store = duplex_testkit::redis::LocalRedis::start(true)?;
/// assert!(matches!(store.target(), duplex_gateway::cluster::RedisTarget::Cluster(_)));
/// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
/// ```
#[derive(Debug)]
pub enum LocalRedis {
    /// One `redis-server`.
    Server(RedisServer),
    /// A primary with two replicas, watched by three Sentinels.
    Sentinel(super::RedisSentinel),
    /// A three-master Redis Cluster (with replicas if asked).
    Cluster(RedisCluster),
}

impl LocalRedis {
    /// A cluster if `cluster`, else one server.
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start`] and [`RedisCluster::start`].
    pub fn start(cluster: bool) -> Result<Self, RedisServerError> {
        Ok(if cluster {
            LocalRedis::Cluster(RedisCluster::start()?)
        } else {
            LocalRedis::Server(RedisServer::start()?)
        })
    }

    /// A primary with two replicas under three Sentinels; each server
    /// refuses writes with fewer than `min_replicas` replicas in reach.
    ///
    /// ```no_run
    /// let store = duplex_testkit::redis::LocalRedis::start_sentinel(1)?;
    /// assert_eq!(store.name(), "sentinel");
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`RedisSentinel::start`](super::RedisSentinel::start).
    pub fn start_sentinel(min_replicas: u32) -> Result<Self, RedisServerError> {
        Ok(LocalRedis::Sentinel(super::RedisSentinel::start(
            min_replicas,
        )?))
    }

    /// A Redis Cluster of three masters with `replicas` replicas each;
    /// each server refuses writes with fewer than `min_replicas` replicas
    /// in reach.
    ///
    /// ```no_run
    /// let store = duplex_testkit::redis::LocalRedis::start_cluster(1, 0)?;
    /// assert_eq!(store.name(), "cluster3x2");
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`RedisCluster::start_with`].
    pub fn start_cluster(replicas: u32, min_replicas: u32) -> Result<Self, RedisServerError> {
        Ok(LocalRedis::Cluster(RedisCluster::start_with(
            replicas,
            min_replicas,
        )?))
    }

    /// Where it is, as a node connects to it.
    pub fn target(&self) -> RedisTarget {
        match self {
            LocalRedis::Server(s) => RedisTarget::Server(s.url()),
            LocalRedis::Sentinel(s) => s.target(),
            LocalRedis::Cluster(c) => RedisTarget::Cluster(c.urls()),
        }
    }

    /// The port of the server that takes the writes now: the one server,
    /// or Sentinel's primary (`None` for a cluster, whose writes spread
    /// over three masters).
    ///
    /// ```no_run
    /// let store = duplex_testkit::redis::LocalRedis::start(false)?;
    /// assert!(store.primary_port().is_some());
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    pub fn primary_port(&self) -> Option<u16> {
        match self {
            LocalRedis::Server(s) => Some(s.port()),
            LocalRedis::Sentinel(s) => s.primary_port().ok(),
            LocalRedis::Cluster(_) => None,
        }
    }

    /// The port of the server a stall hits: the one server, Sentinel's
    /// primary, or master `pick` of a cluster (modulo its masters).
    ///
    /// ```no_run
    /// let store = duplex_testkit::redis::LocalRedis::start_cluster(1, 0)?;
    /// let port = store.writer_port(2)?;
    /// assert_ne!(port, 0);
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`] if no Sentinel names a primary, or no
    /// node of the cluster names a master.
    pub fn writer_port(&self, pick: usize) -> Result<u16, RedisServerError> {
        match self {
            LocalRedis::Server(s) => Ok(s.port()),
            LocalRedis::Sentinel(s) => s.primary_port(),
            LocalRedis::Cluster(c) => c.master_port(pick),
        }
    }

    /// The one server, if it is one (not a cluster).
    ///
    /// ```no_run
    /// let mut store = duplex_testkit::redis::LocalRedis::start(false)?;
    /// if let Some(server) = store.server_mut() {
    ///     server.kill();
    /// }
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    pub fn server_mut(&mut self) -> Option<&mut RedisServer> {
        match self {
            LocalRedis::Server(s) => Some(s),
            LocalRedis::Sentinel(_) | LocalRedis::Cluster(_) => None,
        }
    }

    /// The Sentinel setup, if it is one.
    ///
    /// ```no_run
    /// let mut store = duplex_testkit::redis::LocalRedis::start_sentinel(0)?;
    /// if let Some(sentinel) = store.sentinel_mut() {
    ///     let killed = sentinel.kill_primary()?;
    ///     sentinel.await_failover(killed)?;
    /// }
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    pub fn sentinel_mut(&mut self) -> Option<&mut super::RedisSentinel> {
        match self {
            LocalRedis::Sentinel(s) => Some(s),
            LocalRedis::Server(_) | LocalRedis::Cluster(_) => None,
        }
    }

    /// What it is, in a word or two (`server`, `sentinel`, `cluster3`, or
    /// `cluster3x2` with replicas).
    pub fn name(&self) -> &'static str {
        match self {
            LocalRedis::Server(_) => "server",
            LocalRedis::Sentinel(_) => "sentinel",
            LocalRedis::Cluster(c) if c.replicas() > 0 => "cluster3x2",
            LocalRedis::Cluster(_) => "cluster3",
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_info_field_is_read_by_its_name() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n";
        assert_eq!(super::info_field(info, "connected_slaves"), Some("2"));
        assert_eq!(super::info_field(info, "role"), Some("master"));
        assert_eq!(super::info_field(info, "connected"), None);
    }
}
