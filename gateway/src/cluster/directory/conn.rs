//! Where the directory is, and the connection of either kind.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// Where the directory lives: one Redis server, or a Redis Cluster given
/// by seed nodes.
///
/// ```
/// use duplex_gateway::cluster::RedisTarget;
/// let t = RedisTarget::parse("redis://10.0.0.1:7000/,redis://10.0.0.2:7000/", true);
/// assert_eq!(t, RedisTarget::Cluster(vec!["redis://10.0.0.1:7000/".into(), "redis://10.0.0.2:7000/".into()]));
/// assert_eq!(RedisTarget::parse("redis://h:6379/", false), RedisTarget::Server("redis://h:6379/".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server (`redis://host:port/`).
    Server(String),
    /// A Redis Cluster: its seed nodes. The whole-directory scans of a
    /// test's end ([`Directory::release_tally`](super::Directory::release_tally), [`Directory::records`](super::Directory::records))
    /// visit the seeds, so name every master.
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// `urls` (comma-separated) as one server, or as the seed nodes of a
    /// cluster.
    pub fn parse(urls: &str, cluster: bool) -> Self {
        if cluster {
            RedisTarget::Cluster(urls.split(',').map(|u| u.trim().to_owned()).collect())
        } else {
            RedisTarget::Server(urls.to_owned())
        }
    }

    pub(super) fn seeds(&self) -> Vec<String> {
        match self {
            RedisTarget::Server(url) => vec![url.clone()],
            RedisTarget::Cluster(urls) => urls.clone(),
        }
    }
}

/// The connection: a reconnecting multiplexed connection to one server,
/// or a cluster connection that routes each command by its key's slot.
#[derive(Clone)]
pub(super) enum Conn {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Server(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Server(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
