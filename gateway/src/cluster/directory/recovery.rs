//! When the store itself fails: its generation, which tells the nodes it
//! lost its data, and the write-back of a session a node holds live.
//!
//! A Redis that restarts without its data, or fails over to a replica that
//! missed writes, still answers; what it answers is older than what the
//! nodes acknowledged. Two signs show it:
//!
//! - **The generation** (`dx:gen`): the first node to ask sets a random
//!   value; a store that lost its data has none, so the next node to ask
//!   sets another, and every node that knew the old one sees the change
//!   (each asks at every heartbeat).
//! - **Each session's writes**: a save finds no record and no tombstone
//!   ([`DirectoryError::Missing`]), or fewer applied entries than the node
//!   knows it stored ([`DirectoryError::Behind`]).
//!
//! Either way, the node writes back every session it holds
//! ([`Directory::write_back`]): the record, the whole applied log and every
//! engine request's release count, as it knows them. The write-back is
//! fenced as a takeover is: a record another node holds at this or a later
//! incarnation, or a session closed meanwhile, is not overwritten.

use futures_util::{Stream, StreamExt};
use redis::AsyncCommands;

use super::keys::{
    applied_key, closed_key, moved_channel, CONNECT_TIMEOUT, GENERATION, TOMBSTONE_TTL_S,
    WRITE_BACK,
};
use super::{session_keys, Directory, DirectoryError};

/// Everything a node holding a session live knows the store should hold
/// for it ([`Directory::write_back`]).
///
/// ```
/// use duplex_gateway::cluster::WriteBack;
/// let applied = ["0:1:c1".to_owned()];
/// let requests = [("r7".to_owned(), 1, true)];
/// let w = WriteBack { image: b"image", version: 9, applied: &applied, requests: &requests };
/// assert_eq!(w.requests[0].1, 1);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteBack<'a> {
    /// The session's image now; empty for a session closed since (it is
    /// written back closed: its log and release counts, and its
    /// tombstone, without a record).
    pub image: &'a [u8],
    /// The image's version (as [`Save::version`](super::Save::version)).
    pub version: u64,
    /// The whole applied log, oldest first.
    pub applied: &'a [String],
    /// Every engine request of the session: its id, how many times it was
    /// released (0: bound), and whether this node released it at the
    /// incarnation it writes back for.
    pub requests: &'a [(String, u64, bool)],
}

impl Directory {
    /// The store's generation: the one in force, or `fresh` if the store
    /// had none (it is new, or lost its data) and this call set it. A node
    /// that knew another has seen the store lose its data. Through
    /// Sentinel it ends `@<primary's replication id>`, on a Redis Cluster
    /// `@<every master's, sorted, joined by +>`: a failover may have
    /// promoted a replica that missed writes, and a master without
    /// replicas may have restarted empty, so each promotion or restart
    /// (which draws a new replication id) is a new generation too.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn generation(&self, fresh: &str) -> Result<String, DirectoryError> {
        let mut c = self.conn.clone();
        let before: Option<String> = redis::cmd("SET")
            .arg(GENERATION)
            .arg(fresh)
            .arg("NX")
            .arg("GET")
            .query_async(&mut c)
            .await?;
        let value = before.unwrap_or_else(|| fresh.to_owned());
        Ok(match self.conn.term().await? {
            Some(term) => format!("{value}@{term}"),
            None => value,
        })
    }

    /// Writes back a session this node holds (or closed) at
    /// `incarnation`, after the store lost it or some of its writes:
    /// `true` if written, `false` if another node holds it at this or a
    /// later incarnation, or it was closed (the caller drops its copy).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn write_back(
        &self,
        session: &str,
        incarnation: u64,
        back: WriteBack<'_>,
    ) -> Result<bool, DirectoryError> {
        let mut call = WRITE_BACK.prepare_invoke();
        session_keys(&mut call, session)
            .arg(&self.node)
            .arg(incarnation)
            .arg(back.image)
            .arg(back.version)
            .arg(back.applied.len());
        for entry in back.applied {
            call.arg(entry);
        }
        call.arg(back.requests.len());
        for (request, count, mine) in back.requests {
            call.arg(request).arg(*count).arg(u8::from(*mine));
        }
        call.arg(TOMBSTONE_TTL_S);
        let written: i64 = self.write(&call).await?;
        Ok(written == 1)
    }

    /// Notes that the store lost its data now (this node saw its
    /// generation change), for the nodes that join after.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn note_loss(&self) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let () = c.set(LOSS, unix_ms()).await?;
        Ok(())
    }

    /// How long ago the store last lost its data, as the node that saw it
    /// noted (`None`: never, as far as it knows).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn since_loss(&self) -> Result<Option<std::time::Duration>, DirectoryError> {
        let mut c = self.conn.clone();
        let at: Option<u64> = c.get(LOSS).await?;
        Ok(at.map(|at| std::time::Duration::from_millis(unix_ms().saturating_sub(at))))
    }

    /// Notes that this node has written back everything it held for the
    /// store's generation `generation` (or had nothing to: it joined
    /// after).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn mark_recovered(&self, generation: &str) -> Result<(), DirectoryError> {
        let key = recovered_key(generation);
        let mut c = self.conn.clone();
        let _: i64 = c.sadd(&key, &self.node).await?;
        let _: bool = c
            .expire(&key, i64::try_from(TOMBSTONE_TTL_S).unwrap_or(i64::MAX))
            .await?;
        Ok(())
    }

    /// The nodes that have written back what they held for the store's
    /// generation `generation`.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn recovered(&self, generation: &str) -> Result<Vec<String>, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.smembers(recovered_key(generation)).await?)
    }

    /// Whether the session was closed within the tombstone's time (an
    /// hour): a session without a record and without a tombstone was lost
    /// by the store, or never existed.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn was_closed(&self, session: &str) -> Result<bool, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.exists(closed_key(session)).await?)
    }

    /// The whole applied log of a session, oldest first.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn applied_log(&self, session: &str) -> Result<Vec<String>, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.lrange(applied_key(session), 0, -1).await?)
    }
}

impl Directory {
    /// The sessions other nodes take over from this one, as they do
    /// (`(session, new incarnation)`), so that this node drops its copies
    /// at once instead of at their next write: a copy left behind would be
    /// written back, stale, if the store lost its data. A subscription on
    /// one of the target's servers (Redis broadcasts it cluster-wide); the
    /// stream ends when that connection breaks (subscribe again). Notices
    /// sent meanwhile are not replayed.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn moved_notices(
        &self,
    ) -> Result<impl Stream<Item = Option<(String, u64)>> + Send + 'static, DirectoryError> {
        let mut last = None;
        for client in self.conn.servers(&self.target).await? {
            let subscribed = async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(moved_channel(&self.node)).await?;
                Ok::<_, redis::RedisError>(pubsub)
            };
            match tokio::time::timeout(CONNECT_TIMEOUT, subscribed).await {
                Ok(Ok(pubsub)) => {
                    return Ok(pubsub.into_on_message().map(|msg| {
                        let payload: String = msg.get_payload().ok()?;
                        parse_moved(&payload)
                    }))
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(redis::RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "subscribing timed out",
                    )))
                }
            }
        }
        Err(last
            .unwrap_or_else(|| {
                redis::RedisError::from(std::io::Error::other("no server to subscribe on"))
            })
            .into())
    }
}

/// When the store last lost its data (Unix milliseconds).
const LOSS: &str = "dx:loss";

fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

fn recovered_key(generation: &str) -> String {
    format!("dx:recovered:{generation}")
}

/// `dx:{<session>}:rec <incarnation>` as `(session, incarnation)`.
fn parse_moved(payload: &str) -> Option<(String, u64)> {
    let (key, inc) = payload.rsplit_once(' ')?;
    let session = key.strip_prefix("dx:{")?.strip_suffix("}:rec")?;
    Some((session.to_owned(), inc.parse().ok()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_moved_notice_names_the_session_and_its_new_incarnation() {
        assert_eq!(
            super::parse_moved("dx:{a b}:rec 7"),
            Some(("a b".to_owned(), 7))
        );
        assert_eq!(super::parse_moved("dx:{s}:rec x"), None);
        assert_eq!(super::parse_moved("other 1"), None);
    }
}
