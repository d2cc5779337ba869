//! A throwaway Redis Cluster: three masters, each with as many replicas
//! as asked, every one a `redis-server` from `PATH` in memory only (no
//! RDB, no AOF; each keeps its `nodes.conf`, as a cluster node must), made
//! into a cluster with `redis-cli --cluster create`. A killed master's
//! replica is promoted by the cluster itself; the killed one comes back,
//! empty, as its replica. For tests and the local cluster command.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::server::{cli, free_port, info_field, start_node, wait_for};
use super::{RedisServer, RedisServerError};
use duplex_gateway::cluster::{parse_cluster_nodes as parse_nodes, ClusterNode};

/// How long a cluster node waits for a silent peer before it counts it
/// failing; a replica of a failed master starts its election after it
/// (about a second more).
const NODE_TIMEOUT_MS: u64 = 1500;

/// The masters of the cluster.
const MASTERS: usize = 3;

/// A Redis Cluster of three masters with `replicas` replicas each, all
/// stopped when dropped.
///
/// ```no_run
/// use duplex_testkit::redis::RedisCluster;
/// let mut cluster = RedisCluster::start_with(1, 0)?;
/// assert_eq!(cluster.urls().len(), 6); // every node is a seed
/// let killed = cluster.kill_master(0)?;      // SIGKILL, as a crash would
/// let took = cluster.await_failover(killed)?; // its replica is promoted;
/// println!("failed over in {took:?}");        // the killed one is its replica now
/// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    servers: Vec<RedisServer>,
    dir: PathBuf,
    replicas: u32,
}

impl RedisCluster {
    /// Three masters without replicas.
    ///
    /// ```no_run
    /// let cluster = duplex_testkit::redis::RedisCluster::start()?;
    /// assert_eq!(cluster.urls().len(), 3);
    /// # Ok::<(), duplex_testkit::redis::RedisServerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    pub fn start() -> Result<Self, RedisServerError> {
        Self::start_with(0, 0)
    }

    /// Starts three masters and `replicas` replicas of each on free
    /// ports (every server refusing writes with fewer than `min_replicas`
    /// replicas in reach: `min-replicas-to-write`), assigns the masters
    /// the 16,384 slots, and waits until every node reports
    /// `cluster_state:ok` and every master has its replicas in sync.
    ///
    /// # Errors
    ///
    /// [`RedisServerError`]: `redis-server` or `redis-cli` missing, or the
    /// cluster not formed within 30 s.
    pub fn start_with(replicas: u32, min_replicas: u32) -> Result<Self, RedisServerError> {
        let dir = std::env::temp_dir().join(format!(
            "duplex-redis-cluster-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&dir).map_err(|e| RedisServerError::Start(e.to_string()))?;
        let mut cluster = RedisCluster {
            servers: Vec::new(),
            dir,
            replicas,
        };
        let count = MASTERS * (1 + usize::try_from(replicas).unwrap_or(0));
        for _ in 0..count {
            let server = start_node(true, |port| cluster.node_args(port, min_replicas))?;
            cluster.servers.push(server);
        }
        let addrs: Vec<String> = cluster
            .servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        // redis-cli makes the first three the masters and gives each of
        // them `replicas` of the rest.
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(RedisServerError::NotFound)?;
        if !created.success() {
            return Err(RedisServerError::Start(format!(
                "redis-cli --cluster create exited with {created}"
            )));
        }
        let ports: Vec<u16> = cluster.servers.iter().map(RedisServer::port).collect();
        wait_for(
            Duration::from_secs(30),
            "cluster_state:ok on every node, every master's replicas in sync",
            || {
                for port in &ports {
                    if !cli(*port, &["CLUSTER", "INFO"])?.contains("cluster_state:ok") {
                        return Ok(false);
                    }
                    let info = cli(*port, &["INFO", "replication"])?;
                    if info_field(&info, "role") == Some("master")
                        && info.matches("state=online").count() != replicas as usize
                    {
                        return Ok(false);
                    }
                }
                Ok(true)
            },
        )?;
        Ok(cluster)
    }

    /// A node's arguments: cluster mode with its `nodes.conf` in the
    /// setup's folder, a short node timeout (a failover within about
    /// 2.5 s of a master's death), replicas that may always stand for
    /// election (however long they were cut off), the rest of the key
    /// space served while one shard fails over, `min-replicas-to-write`,
    /// and a full sync sent and loaded over the socket at once.
    fn node_args(&self, port: u16, min_replicas: u32) -> Vec<String> {
        let conf = self.dir.join(format!("nodes-{port}.conf"));
        [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &conf.to_string_lossy(),
            "--cluster-node-timeout",
            &NODE_TIMEOUT_MS.to_string(),
            "--cluster-replica-validity-factor",
            "0",
            "--cluster-require-full-coverage",
            "no",
            "--min-replicas-to-write",
            &min_replicas.to_string(),
            "--min-replicas-max-lag",
            "3",
            "--repl-diskless-load",
            "swapdb",
            "--repl-diskless-sync-delay",
            "0",
            "--dir",
            &self.dir.to_string_lossy(),
            "--dbfilename",
            &format!("dump-{port}.rdb"),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Every node's URL: the seeds a client needs (any node tells it the
    /// rest; the directory asks the cluster where its masters are now).
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    /// The replicas each master has.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// The servers that hold slots now, as the first node that answers
    /// names them: their indices.
    fn masters(&self) -> Result<Vec<usize>, RedisServerError> {
        for server in &self.servers {
            let Ok(ports) = holders(server.port()) else {
                continue;
            };
            let masters: Vec<usize> = ports
                .iter()
                .filter_map(|p| self.servers.iter().position(|s| s.port() == *p))
                .collect();
            if !masters.is_empty() {
                return Ok(masters);
            }
        }
        Err(RedisServerError::Start("no node names a master".into()))
    }

    /// The port of master `pick` (modulo the masters there are now, in
    /// the order the cluster lists them).
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`] if no node names a master.
    pub fn master_port(&self, pick: usize) -> Result<u16, RedisServerError> {
        let masters = self.masters()?;
        Ok(self.servers[masters[pick % masters.len()]].port())
    }

    /// SIGKILLs master `pick` (modulo the masters there are now, in the
    /// order the cluster lists them); returns its index, for
    /// [`await_failover`](Self::await_failover).
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`] if no node names a master.
    pub fn kill_master(&mut self, pick: usize) -> Result<usize, RedisServerError> {
        let masters = self.masters()?;
        let index = masters[pick % masters.len()];
        self.servers[index].kill();
        Ok(index)
    }

    /// With replicas: waits until one of server `killed`'s replicas
    /// serves its slots and every live node reports `cluster_state:ok`,
    /// then starts `killed` again, empty, with its `nodes.conf` (it
    /// rejoins as the new master's replica), and waits until it is one.
    /// Without: starts it again a second later, empty, as the master of
    /// its slots (a restart without data), and waits until the cluster
    /// is whole. Returns how long the promotion (or the restart) took from
    /// the call.
    ///
    /// # Errors
    ///
    /// [`RedisServerError::Start`]: no promotion within 30 s, or the
    /// killed node did not come back.
    pub fn await_failover(&mut self, killed: usize) -> Result<Duration, RedisServerError> {
        let since = Instant::now();
        let old = self
            .servers
            .get(killed)
            .map(RedisServer::port)
            .ok_or_else(|| RedisServerError::Start(format!("no server {killed}")))?;
        let live: Vec<u16> = self
            .servers
            .iter()
            .map(RedisServer::port)
            .filter(|p| *p != old)
            .collect();
        // Whole: every node in `ports` sees three masters serving slots,
        // none of them failing, and none of them `old` if `without_old`.
        let whole = |ports: &[u16], without_old: bool| -> Result<bool, RedisServerError> {
            for port in ports {
                let holders = holders(*port)?;
                if holders.len() != MASTERS || (without_old && holders.contains(&old)) {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        if self.replicas == 0 {
            std::thread::sleep(Duration::from_secs(1));
            self.servers[killed].restart()?;
            let all: Vec<u16> = self.servers.iter().map(RedisServer::port).collect();
            wait_for(Duration::from_secs(30), "the cluster whole again", || {
                whole(&all, false)
            })?;
            return Ok(since.elapsed());
        }
        wait_for(Duration::from_secs(30), "a replica promoted", || {
            whole(&live, true)
        })?;
        let took = since.elapsed();
        self.servers[killed].restart()?;
        wait_for(
            Duration::from_secs(20),
            "the killed master back as a replica",
            || Ok(cli(old, &["ROLE"])?.starts_with("slave")),
        )?;
        Ok(took)
    }
}

/// The ports of the masters that serve slots and that no node counts
/// failing, as the node on `port` sees them.
fn holders(port: u16) -> Result<Vec<u16>, RedisServerError> {
    Ok(parse_nodes(&cli(port, &["CLUSTER", "NODES"])?)
        .into_iter()
        .filter(ClusterNode::holds_slots)
        .map(|n| n.port)
        .collect())
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.servers.clear(); // each kills its server
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
