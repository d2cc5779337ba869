//! Where the directory is, and the connection of each kind.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, ServerErrorKind, Value};

use super::keys::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use super::topology::{parse_cluster_nodes, terms, url_at, ClusterNode};

/// Where the directory lives: one Redis server, a primary found through
/// Redis Sentinel, or a Redis Cluster given by seed nodes.
///
/// ```
/// use duplex_gateway::cluster::RedisTarget;
/// let t = RedisTarget::parse("redis://10.0.0.1:7000/,redis://10.0.0.2:7000/", true);
/// assert_eq!(t, RedisTarget::Cluster(vec!["redis://10.0.0.1:7000/".into(), "redis://10.0.0.2:7000/".into()]));
/// assert_eq!(RedisTarget::parse("redis://h:6379/", false), RedisTarget::Server("redis://h:6379/".into()));
/// let s = RedisTarget::sentinel("redis://s1:26379/, redis://s2:26379/", "dx");
/// assert_eq!(s, RedisTarget::Sentinel {
///     sentinels: vec!["redis://s1:26379/".into(), "redis://s2:26379/".into()],
///     master: "dx".into(),
/// });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server (`redis://host:port/`).
    Server(String),
    /// The primary that Redis Sentinel names `master` (`sentinel monitor
    /// <master> ...`), asked of these Sentinels. A failover is followed
    /// without a restart: a connection that breaks, or finds its server
    /// demoted (`READONLY`), asks the Sentinels again.
    Sentinel {
        /// The Sentinels' URLs (`redis://host:26379/`).
        sentinels: Vec<String>,
        /// The monitored master's name.
        master: String,
    },
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
            RedisTarget::Cluster(split(urls))
        } else {
            RedisTarget::Server(urls.to_owned())
        }
    }

    /// The primary Sentinel calls `master`, asked of the Sentinels at
    /// `urls` (comma-separated).
    pub fn sentinel(urls: &str, master: &str) -> Self {
        RedisTarget::Sentinel {
            sentinels: split(urls),
            master: master.to_owned(),
        }
    }
}

fn split(urls: &str) -> Vec<String> {
    urls.split(',').map(|u| u.trim().to_owned()).collect()
}

/// The connection: a reconnecting multiplexed connection to one server or
/// to Sentinel's primary, or a cluster connection that routes each command
/// by its key's slot.
#[derive(Clone)]
pub(super) enum Conn {
    /// One server, or the primary the Sentinels name.
    Single(Reconnecting),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects to `target` with the directory's bounded waits.
    pub(super) async fn open(target: &RedisTarget) -> Result<Self, RedisError> {
        use super::keys::RETRIES;
        Ok(match target {
            RedisTarget::Server(url) => Conn::Single(Reconnecting::open_server(url).await?),
            RedisTarget::Sentinel { sentinels, master } => {
                Conn::Single(Reconnecting::open(sentinels, master).await?)
            }
            RedisTarget::Cluster(seeds) => Conn::Cluster(
                redis::cluster::ClusterClient::builder(seeds.iter().map(String::as_str))
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT)
                    .retries(u32::try_from(RETRIES).unwrap_or(2))
                    .build()?
                    .get_async_connection()
                    .await?,
            ),
        })
    }

    /// Clients for every server that holds part of the directory: the one
    /// server, Sentinel's current primary, or the cluster's seeds.
    pub(super) async fn servers(
        &self,
        target: &RedisTarget,
    ) -> Result<Vec<redis::Client>, RedisError> {
        match (self, target) {
            (Conn::Single(s), _) => Ok(vec![s.primary().await?]),
            (Conn::Cluster(c), RedisTarget::Cluster(seeds)) => {
                // The masters now (a failover moved some, a seed may be a
                // replica or gone), as a node of the cluster names them.
                let mut c = c.clone();
                let text: String = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query_async(&mut c)
                    .await?;
                let seed = seeds.first().map_or("redis://", String::as_str);
                let masters: Vec<_> = parse_cluster_nodes(&text)
                    .into_iter()
                    .filter(ClusterNode::holds_slots)
                    .collect();
                if masters.is_empty() {
                    return Err(RedisError::from((
                        ErrorKind::Server(ServerErrorKind::ClusterDown),
                        "no master holds slots",
                    )));
                }
                masters
                    .iter()
                    .map(|m| redis::Client::open(url_at(seed, &m.host, m.port)))
                    .collect()
            }
            (Conn::Cluster(_), _) => Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "a cluster connection to a target that is not a cluster",
            ))),
        }
    }
}

impl Conn {
    /// The term of the servers that hold the directory: with Sentinel, the
    /// replication id of the primary this connection last reached; on a
    /// cluster, every master's, asked now. A promotion, or a restart
    /// without data, draws a new one, so a new term means writes may be
    /// gone. `None` for one server (its generation key tells a restart).
    ///
    /// # Errors
    ///
    /// On a cluster, a master that did not answer.
    pub(super) async fn term(&self) -> Result<Option<String>, RedisError> {
        match self {
            Conn::Single(s) => Ok(s.primary_term()),
            Conn::Cluster(c) => {
                // `INFO` goes to every master; the answer maps each
                // address to its text.
                let mut c = c.clone();
                let answer = c
                    .req_packed_command(redis::cmd("INFO").arg("replication"))
                    .await?;
                terms(answer).map(Some)
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
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
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// How long after a failed ask of the Sentinels the next one waits.
const ASK_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// One multiplexed connection to the server, or to the primary Sentinel
/// names, shared by clones. A command whose connection broke, timed out
/// or reached a server that is no longer the primary fails (the
/// directory's callers treat it as unanswered and send it again) and
/// drops the connection, so the next command connects anew (asking the
/// Sentinels where the primary is now). A timeout drops it too: a
/// connection whose requests went unanswered (a partition that swallowed
/// them) would otherwise pair every later answer with a request given up
/// on, and never answer again. So does a connection that has refused
/// writes with `NOREPLICAS` for [`ISOLATED_FOR`]: a replica a failover
/// promoted and then passed over stays a primary without replicas until
/// the Sentinels demote it, and a node held to it would be refused until
/// then.
#[derive(Clone)]
pub(super) struct Reconnecting {
    inner: Arc<ReconnectingInner>,
}

/// Where a connection goes.
enum Source {
    /// One server.
    Server(redis::Client),
    /// The primary the Sentinels name.
    Sentinel(SentinelClient),
}

struct ReconnectingInner {
    /// Where to connect; one connection attempt at a time.
    source: tokio::sync::Mutex<Source>,
    /// The connection in use, numbered so that a failure drops only the
    /// connection it happened on.
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// Through Sentinel: the replication id of the primary last connected
    /// to (its term); `None` for one server.
    primary: Mutex<Option<String>>,
    /// When asking the Sentinels last failed: the next ask waits
    /// [`ASK_AGAIN_AFTER`], so a failover's outage is not a storm of asks.
    failed_at: Mutex<Option<std::time::Instant>>,
    opened: AtomicU64,
    /// When the connection in use was made.
    connected_at: Mutex<std::time::Instant>,
    config: redis::AsyncConnectionConfig,
}

impl Reconnecting {
    async fn open(sentinels: &[String], master: &str) -> Result<Self, RedisError> {
        let client = SentinelClient::build(
            sentinels.iter().map(String::as_str).collect(),
            master.to_owned(),
            None,
            SentinelServerType::Master,
        )?;
        Self::open_from(Source::Sentinel(client)).await
    }

    async fn open_server(url: &str) -> Result<Self, RedisError> {
        Self::open_from(Source::Server(redis::Client::open(url)?)).await
    }

    async fn open_from(source: Source) -> Result<Self, RedisError> {
        let conn = Reconnecting {
            inner: Arc::new(ReconnectingInner {
                source: tokio::sync::Mutex::new(source),
                current: Mutex::new(None),
                primary: Mutex::new(None),
                failed_at: Mutex::new(None),
                opened: AtomicU64::new(0),
                connected_at: Mutex::new(std::time::Instant::now()),
                config: redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT)),
            }),
        };
        // The first connection is tried a few times, as a server that
        // was just started (or a Sentinel mid-election) may not answer yet.
        let mut tries = 0;
        loop {
            match conn.connection().await {
                Ok(_) => return Ok(conn),
                Err(e) if tries >= super::keys::RETRIES => return Err(e),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(ASK_AGAIN_AFTER + ASK_AGAIN_AFTER / 2).await;
                }
            }
        }
    }

    fn in_use(&self) -> Option<(u64, MultiplexedConnection)> {
        self.inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The connection in use, or a new one to the primary the Sentinels
    /// name now (checked with `ROLE` by the client).
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), RedisError> {
        if let Some(c) = self.in_use() {
            return Ok(c);
        }
        let mut source = self.inner.source.lock().await;
        if let Some(c) = self.in_use() {
            return Ok(c); // another caller connected meanwhile
        }
        let failed_at = *self
            .inner
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failed_at.is_some_and(|at| at.elapsed() < ASK_AGAIN_AFTER) {
            return Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "no server reachable (a connection failed a moment ago)",
            )));
        }
        let asked = async {
            let (client, sentinel) = match &mut *source {
                Source::Server(client) => (client.clone(), false),
                Source::Sentinel(s) => (s.async_get_client().await?, true),
            };
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&self.inner.config)
                .await?;
            // The primary's replication id: a promotion draws a new one,
            // so it names this primary's term (an address can come back).
            let term = if sentinel {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut conn)
                    .await?;
                info.lines()
                    .find_map(|l| l.strip_prefix("master_replid:"))
                    .map(|t| t.trim().to_owned())
            } else {
                None
            };
            Ok::<_, RedisError>((term, conn))
        };
        let answer = tokio::time::timeout(CONNECT_TIMEOUT * 2, asked)
            .await
            .map_err(|_| {
                RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connecting to the server timed out",
                ))
            })
            .and_then(|answer| answer);
        *self
            .inner
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            answer.is_err().then(std::time::Instant::now);
        let (term, conn) = answer?;
        *self
            .inner
            .primary
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = term;
        let number = self.inner.opened.fetch_add(1, Ordering::Relaxed) + 1;
        *self
            .inner
            .connected_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = std::time::Instant::now();
        *self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((number, conn.clone()));
        Ok((number, conn))
    }

    /// Through Sentinel, the replication id of the primary last connected
    /// to.
    fn primary_term(&self) -> Option<String> {
        self.inner
            .primary
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A client for the server, or the current primary (for scans and
    /// subscriptions).
    async fn primary(&self) -> Result<redis::Client, RedisError> {
        match &mut *self.inner.source.lock().await {
            Source::Server(client) => Ok(client.clone()),
            Source::Sentinel(s) => s.async_get_client().await,
        }
    }

    /// Drops connection `number` if it is still the one in use.
    fn broken(&self, number: u64) {
        let mut current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|(n, _)| *n == number) {
            *current = None;
        }
    }

    /// Whether the connection in use has refused writes for want of
    /// replicas for long enough to ask where the primary is again.
    fn isolated_for_long(&self, refused: bool) -> bool {
        refused
            && self
                .inner
                .connected_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .elapsed()
                >= ISOLATED_FOR
    }

    /// Whether `answer` says the connection must be made again.
    fn reconnect_after<T>(answer: &Result<T, RedisError>, values: impl Fn(&T) -> bool) -> bool {
        match answer {
            Err(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || demoted(e.kind())
            }
            Ok(v) => values(v),
        }
    }
}

/// A server that is no longer the primary (a failover moved it).
fn demoted(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
    )
}

/// The code of a primary that refuses writes for want of replicas
/// (`min-replicas-to-write`).
const NOREPLICAS: &str = "NOREPLICAS";

fn demoted_value(value: &Value) -> bool {
    match value {
        Value::ServerError(e) => e.kind().is_some_and(|k| demoted(ErrorKind::Server(k))),
        _ => false,
    }
}

fn isolated_value(value: &Value) -> bool {
    matches!(value, Value::ServerError(e) if e.code() == NOREPLICAS)
}

/// How long a connection is kept through `NOREPLICAS` refusals before it
/// is made again: a primary whose replicas are only catching up refuses
/// for a moment, while one that a failover left behind (promoted, then
/// passed over, and not yet demoted) refuses until the node asks the
/// Sentinels again.
const ISOLATED_FOR: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether `e` is (or, from a pipeline, holds) a `NOREPLICAS` refusal.
fn isolated(e: &RedisError) -> bool {
    e.clone()
        .into_server_errors()
        .is_some_and(|items| items.iter().any(|(_, s)| s.code() == NOREPLICAS))
}

impl ConnectionLike for Reconnecting {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (number, mut conn) = self.connection().await?;
            let answer = conn.req_packed_command(cmd).await;
            let refused = match &answer {
                Err(e) => isolated(e),
                Ok(v) => isolated_value(v),
            };
            if Self::reconnect_after(&answer, demoted_value) || self.isolated_for_long(refused) {
                self.broken(number);
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (number, mut conn) = self.connection().await?;
            let answer = conn.req_packed_commands(pipeline, offset, count).await;
            let refused = match &answer {
                Err(e) => isolated(e),
                Ok(values) => values.iter().any(isolated_value),
            };
            if Self::reconnect_after(&answer, |values| values.iter().any(demoted_value))
                || self.isolated_for_long(refused)
            {
                self.broken(number);
            }
            answer
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use redis::{RedisError, ServerError, Value};

    fn refusal(code: &str) -> ServerError {
        match redis::parse_redis_value(format!("-{code} refused\r\n").as_bytes()) {
            Ok(Value::ServerError(e)) => e,
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn a_noreplicas_refusal_is_told_from_other_errors() {
        assert!(super::isolated_value(&Value::ServerError(refusal(
            "NOREPLICAS"
        ))));
        assert!(!super::isolated_value(&Value::ServerError(refusal("ERR"))));
        assert!(!super::isolated_value(&Value::Okay));
        assert!(super::isolated(&RedisError::from(refusal("NOREPLICAS"))));
        assert!(!super::isolated(&RedisError::from(refusal("READONLY"))));
        assert!(!super::isolated(&RedisError::from(std::io::Error::other(
            "x"
        ))));
    }
}
