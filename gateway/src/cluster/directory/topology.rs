//! A Redis Cluster's shape as its nodes describe it (`CLUSTER NODES`), and
//! the replication ids of its masters: the term of each shard, which a
//! promotion or a restart without data draws anew.

use redis::{RedisError, Value};

/// One line of `CLUSTER NODES`: a node's address and role.
///
/// ```text
/// <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> [slot ...]
/// ```
///
/// ```
/// use duplex_gateway::cluster::parse_cluster_nodes;
///
/// let text = "07c3 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460\n\
///             9a1f 127.0.0.1:7004@17004 slave,fail 07c3 0 0 1 connected\n";
/// let nodes = parse_cluster_nodes(text);
/// assert_eq!((nodes[0].port, nodes[0].holds_slots()), (7001, true));
/// assert!(!nodes[1].master && nodes[1].failing);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The address clients reach it at.
    pub host: String,
    /// Its client port.
    pub port: u16,
    /// It is a master (not a replica).
    pub master: bool,
    /// Some node counts it failing (`fail` or `fail?`), or it has no
    /// address.
    pub failing: bool,
    /// It serves slots.
    pub slots: bool,
}

impl ClusterNode {
    /// A master that serves slots and that no node counts failing: one
    /// that holds a part of the directory now.
    ///
    /// ```
    /// let text = "07c3 10.0.0.1:7001@17001 master - 0 0 1 connected 0-5460";
    /// let node = &duplex_gateway::cluster::parse_cluster_nodes(text)[0];
    /// assert!(node.holds_slots());
    /// ```
    pub fn holds_slots(&self) -> bool {
        self.master && !self.failing && self.slots
    }
}

/// Every node `CLUSTER NODES` names, skipping lines it cannot read.
///
/// ```
/// let nodes = duplex_gateway::cluster::parse_cluster_nodes("not a node line\n");
/// assert!(nodes.is_empty());
/// ```
pub fn parse_cluster_nodes(text: &str) -> Vec<ClusterNode> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let addr = fields.get(1)?;
    let addr = addr.split(['@', ',']).next()?;
    let (host, port) = addr.rsplit_once(':')?;
    let flags: Vec<&str> = fields.get(2)?.split(',').collect();
    Some(ClusterNode {
        host: host.to_owned(),
        port: port.parse().ok()?,
        master: flags.contains(&"master"),
        failing: flags
            .iter()
            .any(|f| matches!(*f, "fail" | "fail?" | "noaddr" | "handshake")),
        slots: fields.len() > 8,
    })
}

/// The masters' terms from the answer of `INFO replication` sent to every
/// master (a map of address to `INFO` text): their `master_replid`s,
/// sorted, joined with `+`. A master that did not answer fails the whole.
pub(crate) fn terms(answer: Value) -> Result<String, RedisError> {
    let Value::Map(entries) = answer else {
        return Err(not_terms("not a map of masters"));
    };
    let mut ids = Vec::with_capacity(entries.len());
    for (_, info) in entries {
        let text = match info {
            Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Value::VerbatimString { text, .. } | Value::SimpleString(text) => text,
            Value::ServerError(e) => return Err(e.into()),
            _ => return Err(not_terms("a master answered no INFO text")),
        };
        let id = text
            .lines()
            .find_map(|l| l.strip_prefix("master_replid:"))
            .map(|id| id.trim().to_owned())
            .ok_or_else(|| not_terms("a master's INFO has no master_replid"))?;
        ids.push(id);
    }
    if ids.is_empty() {
        return Err(not_terms("no master answered"));
    }
    ids.sort();
    Ok(ids.join("+"))
}

fn not_terms(why: &'static str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Client,
        "the cluster's replication ids",
        why.to_owned(),
    ))
}

/// `seed` (a `redis://` or `rediss://` URL, with any user and password) with
/// its host and port replaced: how this node reaches another node of the
/// cluster with the seed's credentials.
pub(crate) fn url_at(seed: &str, host: &str, port: u16) -> String {
    let (scheme, rest) = seed.split_once("://").unwrap_or(("redis", seed));
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((auth, rest)) => (Some(auth), rest),
        None => (None, rest),
    };
    let path = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    match auth {
        Some(auth) => format!("{scheme}://{auth}@{host}:{port}{path}"),
        None => format!("{scheme}://{host}:{port}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,h4 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail - 0 1426238318243 3 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master,fail? - 0 1426238316232 5 connected 10923-16383
garbage
";

    #[test]
    fn the_masters_that_hold_slots_are_those_serving_slots_and_not_failing() {
        let nodes = parse_cluster_nodes(NODES);
        assert_eq!(nodes.len(), 5, "the garbage line is skipped");
        let holding: Vec<u16> = nodes
            .iter()
            .filter(|n| n.holds_slots())
            .map(|n| n.port)
            .collect();
        assert_eq!(holding, [30002, 30001]);
        assert_eq!(nodes[0].host, "127.0.0.1");
        assert!(!nodes[0].master && !nodes[0].failing);
        assert!(nodes[2].failing && !nodes[2].slots);
        assert!(nodes[4].failing && nodes[4].slots);
    }

    #[test]
    fn the_terms_are_every_masters_replication_id_in_order() {
        let info = |id: &str| {
            Value::BulkString(
                format!("# Replication\r\nrole:master\r\nmaster_replid:{id}\r\n").into_bytes(),
            )
        };
        let answer = Value::Map(vec![
            (Value::BulkString(b"127.0.0.1:2".to_vec()), info("bbb")),
            (Value::BulkString(b"127.0.0.1:1".to_vec()), info("aaa")),
        ]);
        assert_eq!(terms(answer).unwrap(), "aaa+bbb");
        let refused = Value::Map(vec![(
            Value::BulkString(b"127.0.0.1:1".to_vec()),
            Value::BulkString(b"role:master\r\n".to_vec()),
        )]);
        assert!(terms(refused).is_err());
        assert!(terms(Value::Map(Vec::new())).is_err());
        assert!(terms(Value::Nil).is_err());
    }

    #[test]
    fn another_node_is_reached_with_the_seeds_scheme_and_credentials() {
        assert_eq!(
            url_at("redis://127.0.0.1:7000/", "10.0.0.2", 7001),
            "redis://10.0.0.2:7001/"
        );
        assert_eq!(
            url_at(
                "rediss://user:p@ss@h:7000/0?protocol=resp3",
                "10.0.0.3",
                7002
            ),
            "rediss://user:p@ss@10.0.0.3:7002/0?protocol=resp3"
        );
        assert_eq!(url_at("h:7000", "::1", 7003), "redis://[::1]:7003");
    }
}
