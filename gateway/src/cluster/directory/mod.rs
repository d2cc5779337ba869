//! The session directory in Redis: who owns each session, under which
//! incarnation, and the session's last acknowledged image.
//!
//! # Layout
//!
//! Every key of one session carries the session id as its hash tag, so a
//! session's keys live in one Redis Cluster slot and every script below
//! touches one slot only:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `dx:{<session>}:rec` | hash | `node` (owner), `inc` (incarnation), `ver` (image order), `image` (snapshot) |
//! | `dx:{<session>}:applied` | list | the applied input, `epoch:seq:event_id`, in order |
//! | `dx:{<session>}:released` | hash | engine request id → times released (0 while bound, 1 once released) |
//! | `dx:{<session>}:relby` | hash | `request\|node:incarnation` for each release (a release sent again is not counted twice) |
//! | `dx:{<session>}:closed` | string with a TTL | the session was closed, by `node:incarnation` (a record missing without it was lost by the store) |
//! | `dx:gen` | string | the store's generation (a store that lost its data has none) |
//! | `dx:node:<node>` | string with a TTL | the node is live while it exists |
//! | `dx:nodes` | set | every node that has run (a dead one leaves once its sessions are adopted) |
//! | `dx:owned:<node>` | set | the sessions a node took (a hint for adoption; the record decides) |
//!
//! Sessions spread over Redis Cluster slots by their id; the per-node keys
//! are few and small. No script touches two sessions or a per-node key,
//! so nothing needs a cross-slot transaction.
//!
//! # Ownership
//!
//! The incarnation is the fencing token. A node writes a session's state
//! only through [`Directory::save`], which Redis applies only if the record
//! still names that node *and* that incarnation; a takeover
//! ([`Directory::take_over`]) is a compare-and-set on the incarnation and
//! the image version the taker read (so it acts on the image it read, not
//! an older one: the engine requests it releases are exactly those that
//! image still holds). So a
//! node that lost a session (its client resumed elsewhere, or it was
//! presumed dead) has its next write refused ([`DirectoryError::Lost`]) and
//! must drop the session: nothing it does afterwards reaches the store.
//! Each step is one Lua script: Redis runs it atomically, with no other
//! command in between.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use duplex_gateway::cluster::{Directory, DirectoryError, Save};
//!
//! let a = Directory::connect("redis://127.0.0.1:6379/", "node-a").await?;
//! let b = Directory::connect("redis://127.0.0.1:6379/", "node-b").await?;
//! // A opens the session and stores an acknowledged change.
//! assert!(a.create("call-1", 0, Save { image: b"v1", version: 1, ..Save::default() }).await?);
//! let applied = ["0:1:chunk-1".to_owned()];
//! a.save("call-1", 0, Save { image: b"v2", version: 2, applied: &applied, ..Save::default() }).await?;
//! // The client resumes on B: B takes the session over from what it read.
//! let read = b.load("call-1").await?.expect("a record");
//! let taken = b.take_over("call-1", &read, Save { image: b"v2", version: 1, ..Save::default() }).await?;
//! assert_eq!(taken.incarnation, 1);
//! // B holds what the store held of it, read in the same script.
//! assert_eq!(taken.applied, applied);
//! // A's next write is refused: it drops its copy.
//! let late = a.save("call-1", 0, Save { image: b"v3", version: 3, ..Save::default() }).await;
//! assert!(matches!(late, Err(DirectoryError::Lost { .. })));
//! # Ok(())
//! # }
//! ```

mod audit;
pub use audit::ReleaseTally;
mod conn;
mod journal;
mod keys;
mod nodes;
mod replication;
pub(crate) mod topology;

use std::sync::Arc;

use redis::{AsyncCommands, FromRedisValue, Script, ScriptInvocation};

use conn::Conn;
pub use conn::RedisTarget;
pub use journal::JOURNAL_ENTRIES;
use keys::{
    applied_key, closed_key, counts, rec, relby_key, released_key, CLOSE, CREATE, SAVE, TAKE_OVER,
};
pub use replication::Durability;
use replication::Replication;

mod recovery;
pub use keys::TOMBSTONE_TTL_S;
pub use recovery::WriteBack;

/// Why a directory call failed.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// Redis could not be reached or answered with an error.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The session is no longer this node's at this incarnation: another
    /// node took it over, or it was removed. The caller drops its copy.
    #[error("session {session} is no longer owned by this node at incarnation {incarnation}")]
    Lost {
        /// The session.
        session: String,
        /// The incarnation the caller acted for.
        incarnation: u64,
    },
    /// The session's record is gone and was not closed: the store lost it
    /// (restarted without its data, or failed over to a replica that never
    /// had it). The caller writes back what it holds
    /// ([`Directory::write_back`]).
    #[error("session {session}: the store has no record and no tombstone: it lost the session")]
    Missing {
        /// The session.
        session: String,
    },
    /// The store holds fewer applied entries of the session than the
    /// caller knows it stored: it lost writes (a failover to a replica
    /// that missed them). The caller writes back what it holds.
    #[error("session {session}: the store holds {holds} applied entries, {expected} were stored")]
    Behind {
        /// The session.
        session: String,
        /// Entries the store holds.
        holds: u64,
        /// Entries the caller knows it stored.
        expected: u64,
    },
    /// A takeover found another incarnation or image than the one it read:
    /// someone else moved first, or the owner stored a change since.
    #[error("session {session} is at incarnation {found}, the taker read {expected} (or the image changed since): read it again")]
    Raced {
        /// The session.
        session: String,
        /// The incarnation the caller read.
        expected: u64,
        /// The incarnation in the store.
        found: u64,
    },
    /// The primary applied the write, but `WAIT` did not confirm that
    /// enough replicas hold it ([`Durability::Replicated`]), or the
    /// connection it was written on broke before a `WAIT` could: the
    /// change is not acknowledged and may or may not survive a failover.
    /// The caller sends it again with its next save (the scripts count a
    /// change sent twice once).
    #[error(
        "a change reached {acked} of the {wanted} replicas it must reach before it is acknowledged"
    )]
    Unreplicated {
        /// Replicas that confirmed it.
        acked: u64,
        /// Replicas it must reach.
        wanted: u32,
    },
    /// A record that does not have the directory's shape.
    #[error("malformed directory record for session {session}: {what}")]
    Malformed {
        /// The session.
        session: String,
        /// What was wrong.
        what: &'static str,
    },
}

/// A session's record: its owner, incarnation and last saved image
/// ([`Directory::load`]; a takeover names the one it read).
///
/// ```
/// use duplex_gateway::cluster::Record;
/// let r = Record { node: "n1-3f2a9c1d".into(), incarnation: 2, version: 41, image: vec![1, 2] };
/// assert_eq!(Record { incarnation: 3, ..r.clone() }.node, r.node);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The node that owns the session.
    pub node: String,
    /// The session's incarnation (the fencing token).
    pub incarnation: u64,
    /// The stored image's version (a takeover names it).
    pub version: u64,
    /// The session's snapshot image as last acknowledged.
    pub image: Vec<u8>,
}

/// A takeover done ([`Directory::take_over`]): the new incarnation, and
/// what the store held of the session at that instant.
///
/// ```
/// use duplex_gateway::cluster::Taken;
/// let t = Taken { incarnation: 3, counts: vec![1], applied: vec!["0:1:e1".into()], releases: vec![("r1".into(), 1)] };
/// assert_eq!(t.counts.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Taken {
    /// The session's incarnation now (the one read, plus one).
    pub incarnation: u64,
    /// Per request the takeover released, how many times it has been
    /// released in all (1: exactly once).
    pub counts: Vec<u64>,
    /// The session's whole applied log, oldest first.
    pub applied: Vec<String>,
    /// Every engine request of the session with its release count.
    pub releases: Vec<(String, u64)>,
}

/// One save: the new image, with the input it applied, the engine
/// requests it bound and those it released since the last save.
#[derive(Debug, Clone, Copy, Default)]
pub struct Save<'a> {
    /// The session's image after the change (empty: a close, no image).
    pub image: &'a [u8],
    /// The image's order among this node's images of the session: an
    /// image older than the stored one is not written (two saves of one
    /// session may arrive out of order).
    pub version: u64,
    /// Applied input entries (`epoch:seq:event_id`), appended to the log.
    pub applied: &'a [String],
    /// Engine requests bound by the change: recorded as bound, so a
    /// request that is never released shows.
    pub bound: &'a [String],
    /// Engine requests released by the change, counted per request (once
    /// per releaser: sent again, not counted again).
    pub released: &'a [String],
    /// How many applied entries the caller knows the store already holds
    /// (`None`: it does not know). `applied` then continues the log from
    /// there: entries the log already holds past `base` (a save sent again
    /// after one that went unanswered) are not added twice, and a log
    /// shorter than `base` is refused as [`DirectoryError::Behind`].
    pub base: Option<u64>,
}

impl Save<'_> {
    /// The script's arguments after its leading ones: image, version,
    /// then the three lists, each preceded by its length.
    fn args(&self, call: &mut redis::ScriptInvocation<'_>) {
        let base = self
            .base
            .map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX));
        call.arg(self.image).arg(self.version).arg(base);
        for list in [self.applied, self.bound, self.released] {
            call.arg(list.len());
            for item in list {
                call.arg(item);
            }
        }
    }
}

/// The five keys of one session's scripts, in their order.
fn session_keys<'c, 'a>(
    call: &'c mut redis::ScriptInvocation<'a>,
    session: &str,
) -> &'c mut redis::ScriptInvocation<'a> {
    call.key(rec(session))
        .key(applied_key(session))
        .key(released_key(session))
        .key(relby_key(session))
        .key(closed_key(session))
}

/// A connection to the directory, for one node. Cheap to clone: clones
/// share one multiplexed connection, so concurrent calls from many
/// connections' tasks travel pipelined on one socket (one per cluster
/// node with a Redis Cluster).
#[derive(Clone)]
pub struct Directory {
    conn: Conn,
    target: RedisTarget,
    node: String,
    /// With [`Durability::Replicated`]: the node's `WAIT`s.
    replication: Option<Arc<Replication>>,
}

impl core::fmt::Debug for Directory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Directory")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Directory {
    /// Connects to Redis at `url` (`redis://host:port` or
    /// `redis+unix:///path`) as node `node`.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`]: a bad URL or an unreachable server.
    pub async fn connect(url: &str, node: impl Into<String>) -> Result<Self, DirectoryError> {
        Self::connect_to(&RedisTarget::Server(url.to_owned()), node).await
    }

    /// Connects to a server, a Sentinel's primary or a cluster as node
    /// `node`, acknowledging what the primary answered
    /// ([`Durability::Ack`]).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`]: a bad URL or an unreachable server.
    pub async fn connect_to(
        target: &RedisTarget,
        node: impl Into<String>,
    ) -> Result<Self, DirectoryError> {
        Self::connect_with(target, node, Durability::Ack).await
    }

    /// Connects as [`connect_to`](Self::connect_to) does, with the
    /// durability its writes wait for.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use duplex_gateway::cluster::{Directory, Durability, RedisTarget, Save};
    ///
    /// let sentinels = RedisTarget::sentinel("redis://127.0.0.1:26379/", "dx");
    /// let durability = Durability::Replicated { replicas: 1, timeout: Duration::from_millis(500) };
    /// let d = Directory::connect_with(&sentinels, "node-a", durability).await?;
    /// // Returns once a replica holds the record too.
    /// d.create("call-1", 0, Save { image: b"v1", version: 1, ..Save::default() }).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`]: a bad URL or an unreachable server.
    pub async fn connect_with(
        target: &RedisTarget,
        node: impl Into<String>,
        durability: Durability,
    ) -> Result<Self, DirectoryError> {
        // Bounded waits: a store that went away is answered `unavailable`
        // within seconds, never hung on.
        let conn = Conn::open(target).await?;
        let per_write = matches!(target, RedisTarget::Cluster(_));
        Ok(Directory {
            conn,
            target: target.clone(),
            node: node.into(),
            replication: Replication::new(durability, per_write).map(Arc::new),
        })
    }

    /// Runs a script that changes the directory: its answer, once the
    /// change is as durable as the node's [`Durability`] asks.
    async fn write<T: FromRedisValue>(
        &self,
        call: &ScriptInvocation<'_>,
    ) -> Result<T, DirectoryError> {
        let mut c = self.conn.clone();
        match &self.replication {
            None => Ok(call.invoke_async(&mut c).await?),
            Some(replication) => replication.write(&mut c, call).await,
        }
    }

    /// Every key matching `pattern` on the servers that hold the directory
    /// (on a cluster, each master holds its own slots' keys).
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, DirectoryError> {
        let mut keys = Vec::new();
        for client in self.conn.servers(&self.target).await? {
            let mut c = client.get_multiplexed_async_connection().await?;
            let mut iter: redis::AsyncIter<'_, String> = c.scan_match(pattern).await?;
            while let Some(key) = iter.next_item().await {
                keys.push(key?);
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Records a new session owned by this node at `incarnation`, with
    /// the image and lists of `save`: `false` (nothing written) if the id
    /// already has a record (a live session, here or elsewhere).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn create(
        &self,
        session: &str,
        incarnation: u64,
        save: Save<'_>,
    ) -> Result<bool, DirectoryError> {
        Ok(self.create_at(session, incarnation, save).await?.is_some())
    }

    /// As [`create`](Self::create), with the length of the applied log an
    /// earlier session of the same id left (`None`: not created).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn create_at(
        &self,
        session: &str,
        incarnation: u64,
        save: Save<'_>,
    ) -> Result<Option<u64>, DirectoryError> {
        let out: Vec<i64> = self
            .invoke(&CREATE, session, &[incarnation], save, &[])
            .await?;
        Ok(counts(&out).map(|n| n.first().copied().unwrap_or(0)))
    }

    /// Reads a session's record.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`], or [`DirectoryError::Malformed`] for a
    /// record without its node, incarnation or image.
    pub async fn load(&self, session: &str) -> Result<Option<Record>, DirectoryError> {
        type Fields = (Option<String>, Option<u64>, Option<u64>, Option<Vec<u8>>);
        let mut c = self.conn.clone();
        let (node, inc, ver, image): Fields = redis::cmd("HMGET")
            .arg(rec(session))
            .arg("node")
            .arg("inc")
            .arg("ver")
            .arg("image")
            .query_async(&mut c)
            .await?;
        match (node, inc, ver, image) {
            (None, None, None, None) => Ok(None),
            (Some(node), Some(incarnation), Some(version), Some(image)) => Ok(Some(Record {
                node,
                incarnation,
                version,
                image,
            })),
            _ => Err(DirectoryError::Malformed {
                session: session.to_owned(),
                what: "a record without its node, incarnation, version or image",
            }),
        }
    }

    /// Saves a change of a session this node owns at `incarnation`; the
    /// change is durable when this returns. Returns, per released request,
    /// how many times it has been released in all (1: exactly once).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Lost`] if the session is no longer this node's at
    /// `incarnation` or was closed (nothing was written);
    /// [`DirectoryError::Missing`] or [`DirectoryError::Behind`] if the
    /// store lost the session or some of its writes (nothing was written);
    /// [`DirectoryError::Redis`] (the change may or may not be stored: the
    /// caller must not acknowledge it, and may send it again).
    pub async fn save(
        &self,
        session: &str,
        incarnation: u64,
        save: Save<'_>,
    ) -> Result<Vec<u64>, DirectoryError> {
        self.owned_call(&SAVE, session, incarnation, save, &[])
            .await
    }

    /// Closes a session this node owns at `incarnation`: its record is
    /// deleted, a tombstone says it was closed (for an hour), and the
    /// requests the close released are counted (the applied log and the
    /// release counts stay, for audit).
    ///
    /// # Errors
    ///
    /// As [`save`](Self::save).
    pub async fn close(
        &self,
        session: &str,
        incarnation: u64,
        save: Save<'_>,
    ) -> Result<Vec<u64>, DirectoryError> {
        let ttl = [TOMBSTONE_TTL_S];
        let counts = self
            .owned_call(&CLOSE, session, incarnation, save, &ttl)
            .await?;
        // A closed session's journal goes with it (a realtime session's;
        // nothing to delete for a native one).
        self.journal_delete(session).await?;
        Ok(counts)
    }

    /// Runs one of the session scripts: the session's five keys, this
    /// node, the script's own leading numbers, `save`'s image, version,
    /// base and counted lists, then `tail`.
    async fn invoke<T: FromRedisValue>(
        &self,
        script: &Script,
        session: &str,
        head: &[u64],
        save: Save<'_>,
        tail: &[u64],
    ) -> Result<T, DirectoryError> {
        let mut call = script.prepare_invoke();
        session_keys(&mut call, session).arg(&self.node);
        for n in head {
            call.arg(*n);
        }
        save.args(&mut call);
        for n in tail {
            call.arg(*n);
        }
        self.write(&call).await
    }

    async fn owned_call(
        &self,
        script: &Script,
        session: &str,
        incarnation: u64,
        save: Save<'_>,
        tail: &[u64],
    ) -> Result<Vec<u64>, DirectoryError> {
        let out: Vec<i64> = self
            .invoke(script, session, &[incarnation], save, tail)
            .await?;
        let session = session.to_owned();
        match out.as_slice() {
            [-1] => Err(DirectoryError::Missing { session }),
            [-2, holds] => Err(DirectoryError::Behind {
                session,
                holds: u64::try_from(*holds).unwrap_or(0),
                expected: save.base.unwrap_or(0),
            }),
            _ => counts(&out).ok_or(DirectoryError::Lost {
                session,
                incarnation,
            }),
        }
    }

    /// Takes a session over from whoever owns it, as `read` found it (its
    /// incarnation and image version), as incarnation `read.incarnation +
    /// 1`, with the image this node will serve and the requests of the
    /// previous owner's engine it released. Returns the new incarnation,
    /// the release counts, and what the store holds of the session (read
    /// in the same script: a store that dies a moment later has not taken
    /// the session's log with it).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Raced`] if the record changed since `read` (read
    /// it again), or [`DirectoryError::Redis`].
    pub async fn take_over(
        &self,
        session: &str,
        read: &Record,
        save: Save<'_>,
    ) -> Result<Taken, DirectoryError> {
        let expected = read.incarnation;
        let next = expected.saturating_add(1);
        let head = [next, expected, read.version];
        let (out, applied, releases): (Vec<i64>, Vec<String>, Vec<(String, u64)>) =
            self.invoke(&TAKE_OVER, session, &head, save, &[]).await?;
        if let Some(counts) = counts(&out) {
            return Ok(Taken {
                incarnation: next,
                counts,
                applied,
                releases,
            });
        }
        match out.as_slice() {
            [0, found] => Err(DirectoryError::Raced {
                session: session.to_owned(),
                expected,
                found: u64::try_from(*found).unwrap_or(u64::MAX),
            }),
            _ => Err(DirectoryError::Malformed {
                session: session.to_owned(),
                what: "an answer to a takeover that is neither {{1, ..}, log, counts} nor {{0, found}, {}, {}}",
            }),
        }
    }

    /// Release counts of every engine request of `session` (0: bound, not
    /// released).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn releases(&self, session: &str) -> Result<Vec<(String, u64)>, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.hgetall(released_key(session)).await?)
    }

    /// The applied input of a session, from entry `from`, at most `max`.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn applied(
        &self,
        session: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<String>, DirectoryError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let start = isize::try_from(from).unwrap_or(isize::MAX);
        let stop = start.saturating_add(isize::try_from(max).unwrap_or(isize::MAX) - 1);
        let mut c = self.conn.clone();
        Ok(c.lrange(applied_key(session), start, stop).await?)
    }
}
