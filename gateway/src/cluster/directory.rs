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
//! | `dx:{<session>}:rec` | hash | `node` (owner), `inc` (incarnation), `image` (snapshot) |
//! | `dx:{<session>}:applied` | list | the applied input, `epoch:seq:event_id`, in order |
//! | `dx:{<session>}:released` | hash | request id → times released (1 when all is well) |
//! | `dx:node:<node>` | string with a TTL | the node is live while it exists |
//!
//! # Ownership
//!
//! The incarnation is the fencing token. A node writes a session's state
//! only through [`Directory::save`], which Redis applies only if the record
//! still names that node *and* that incarnation; a takeover
//! ([`Directory::take_over`]) is a compare-and-set on the incarnation. So a
//! node that lost a session (its client resumed elsewhere, or it was
//! presumed dead) has its next write refused ([`DirectoryError::Lost`]) and
//! must drop the session: nothing it does afterwards reaches the store.
//! Each step is one Lua script: Redis runs it atomically, with no other
//! command in between.

use std::sync::LazyLock;

use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Script};

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
    /// A takeover found another incarnation than the one it expected:
    /// someone else moved first.
    #[error(
        "session {session} is at incarnation {found}, not {expected}: another node moved first"
    )]
    Raced {
        /// The session.
        session: String,
        /// The incarnation the caller read.
        expected: u64,
        /// The incarnation in the store.
        found: u64,
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

/// A session's record: its owner, incarnation and last saved image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The node that owns the session.
    pub node: String,
    /// The session's incarnation (the fencing token).
    pub incarnation: u64,
    /// The session's snapshot image as last acknowledged.
    pub image: Vec<u8>,
}

/// One save: the new image, with the input it applied and the requests it
/// released since the last save.
#[derive(Debug, Clone, Copy)]
pub struct Save<'a> {
    /// The session's image after the change.
    pub image: &'a [u8],
    /// Applied input entries (`epoch:seq:event_id`), appended to the log.
    pub applied: &'a [String],
    /// Engine requests released by the change, counted per request.
    pub released: &'a [String],
}

/// A connection to the directory, for one node. Cheap to clone: clones
/// share one multiplexed connection, so concurrent calls from many
/// connections' tasks travel pipelined on one socket.
#[derive(Clone)]
pub struct Directory {
    conn: ConnectionManager,
    node: String,
}

impl core::fmt::Debug for Directory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Directory")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

fn rec(session: &str) -> String {
    format!("dx:{{{session}}}:rec")
}

fn applied_key(session: &str) -> String {
    format!("dx:{{{session}}}:applied")
}

fn released_key(session: &str) -> String {
    format!("dx:{{{session}}}:released")
}

fn node_key(node: &str) -> String {
    format!("dx:node:{node}")
}

/// Creates the record if there is none: 1, else 0.
static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[2], 'image', ARGV[3])
return 1
",
    )
});

/// Saves if the record is still ARGV[1]'s at incarnation ARGV[2]:
/// `{1, count per released request}`, or `{0}`.
static SAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return {0} end
redis.call('HSET', KEYS[1], 'image', ARGV[3])
local applied = tonumber(ARGV[4])
for i = 5, 4 + applied do redis.call('RPUSH', KEYS[2], ARGV[i]) end
local out = {1}
for i = 5 + applied, #ARGV do
  out[#out + 1] = redis.call('HINCRBY', KEYS[3], ARGV[i], 1)
end
return out
",
    )
});

/// Takes the record over if it is at incarnation ARGV[2]: `{1}`, else
/// `{0, found}` (`found` -1 if there is no record).
static TAKE_OVER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local inc = redis.call('HGET', KEYS[1], 'inc')
if not inc then return {0, -1} end
if inc ~= ARGV[2] then return {0, tonumber(inc)} end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'inc', ARGV[3], 'image', ARGV[4])
return {1}
",
    )
});

/// Deletes the record if it is still ARGV[1]'s at incarnation ARGV[2].
static REMOVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1
",
    )
});

impl Directory {
    /// Connects to Redis at `url` (`redis://host:port` or
    /// `redis+unix:///path`) as node `node`.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`]: a bad URL or an unreachable server.
    pub async fn connect(url: &str, node: impl Into<String>) -> Result<Self, DirectoryError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        Ok(Directory {
            conn,
            node: node.into(),
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Says this node is live for `ttl` (call well within it).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn heartbeat(&self, ttl: std::time::Duration) -> Result<(), DirectoryError> {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut c = self.conn.clone();
        let () = c.pset_ex(node_key(&self.node), 1u8, ms).await?;
        Ok(())
    }

    /// Whether `node` has announced itself within its TTL.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn is_live(&self, node: &str) -> Result<bool, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.exists(node_key(node)).await?)
    }

    /// Records a new session owned by this node: `false` if the id already
    /// has a record (a live session, here or elsewhere).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn create(
        &self,
        session: &str,
        incarnation: u64,
        image: &[u8],
    ) -> Result<bool, DirectoryError> {
        let mut c = self.conn.clone();
        let created: i64 = CREATE
            .key(rec(session))
            .arg(&self.node)
            .arg(incarnation)
            .arg(image)
            .invoke_async(&mut c)
            .await?;
        Ok(created == 1)
    }

    /// Reads a session's record.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`], or [`DirectoryError::Malformed`] for a
    /// record without its three fields.
    pub async fn load(&self, session: &str) -> Result<Option<Record>, DirectoryError> {
        let mut c = self.conn.clone();
        let (node, inc, image): (Option<String>, Option<u64>, Option<Vec<u8>>) =
            redis::cmd("HMGET")
                .arg(rec(session))
                .arg("node")
                .arg("inc")
                .arg("image")
                .query_async(&mut c)
                .await?;
        match (node, inc, image) {
            (None, None, None) => Ok(None),
            (Some(node), Some(incarnation), Some(image)) => Ok(Some(Record {
                node,
                incarnation,
                image,
            })),
            _ => Err(DirectoryError::Malformed {
                session: session.to_owned(),
                what: "a record without its node, incarnation or image",
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
    /// `incarnation` (nothing was written), or [`DirectoryError::Redis`]
    /// (the change may or may not be stored: the caller must not
    /// acknowledge it).
    pub async fn save(
        &self,
        session: &str,
        incarnation: u64,
        save: Save<'_>,
    ) -> Result<Vec<u64>, DirectoryError> {
        let mut c = self.conn.clone();
        let mut call = SAVE.prepare_invoke();
        call.key(rec(session))
            .key(applied_key(session))
            .key(released_key(session))
            .arg(&self.node)
            .arg(incarnation)
            .arg(save.image)
            .arg(save.applied.len());
        for a in save.applied {
            call.arg(a);
        }
        for r in save.released {
            call.arg(r);
        }
        let out: Vec<i64> = call.invoke_async(&mut c).await?;
        match out.split_first() {
            Some((1, counts)) => Ok(counts
                .iter()
                .map(|&n| u64::try_from(n).unwrap_or(0))
                .collect()),
            _ => Err(DirectoryError::Lost {
                session: session.to_owned(),
                incarnation,
            }),
        }
    }

    /// Takes a session over from whoever owns it at `expected`, as
    /// incarnation `expected + 1`, with the image this node will serve.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Raced`] if the session is at another incarnation
    /// (`found` is `u64::MAX` if it has no record any more), or
    /// [`DirectoryError::Redis`].
    pub async fn take_over(
        &self,
        session: &str,
        expected: u64,
        image: &[u8],
    ) -> Result<u64, DirectoryError> {
        let next = expected.saturating_add(1);
        let mut c = self.conn.clone();
        let out: Vec<i64> = TAKE_OVER
            .key(rec(session))
            .arg(&self.node)
            .arg(expected)
            .arg(next)
            .arg(image)
            .invoke_async(&mut c)
            .await?;
        match out.as_slice() {
            [1] => Ok(next),
            [0, found] => Err(DirectoryError::Raced {
                session: session.to_owned(),
                expected,
                found: u64::try_from(*found).unwrap_or(u64::MAX),
            }),
            _ => Err(DirectoryError::Malformed {
                session: session.to_owned(),
                what: "an answer to a takeover that is not {1} or {0, found}",
            }),
        }
    }

    /// Removes a closed session's record if this node still owns it at
    /// `incarnation` (the applied log and release counts stay, for audit).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Lost`] or [`DirectoryError::Redis`].
    pub async fn remove(&self, session: &str, incarnation: u64) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let removed: i64 = REMOVE
            .key(rec(session))
            .arg(&self.node)
            .arg(incarnation)
            .invoke_async(&mut c)
            .await?;
        if removed == 1 {
            Ok(())
        } else {
            Err(DirectoryError::Lost {
                session: session.to_owned(),
                incarnation,
            })
        }
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
