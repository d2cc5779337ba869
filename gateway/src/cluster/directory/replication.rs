//! When a write counts as stored: in the primary's memory (`ack`), or
//! also on replicas (`replicated`, confirmed by `WAIT`).
//!
//! `WAIT n ms` blocks the connection it is sent on until `n` replicas hold
//! every write that connection made before it. All of a node's writes
//! travel on one multiplexed connection, so one `WAIT` confirms every
//! write whose answer came back before the `WAIT` was sent: a group
//! commit. A write waits for the next `WAIT` sent after its answer (one is
//! sent as soon as the one in flight returns), so a node sends about one
//! `WAIT` per round trip, not one per write. Each write carries `CLIENT
//! ID` in its pipeline and each `WAIT` too: a write is confirmed only by
//! a `WAIT` on the same Redis connection, so a reconnect in between (the
//! old primary gone, a new one reached) is never taken for a
//! confirmation. On a Redis Cluster the writes go to many masters, so
//! each write carries its own `WAIT`, routed with it to its slot's master.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::{ErrorKind, FromRedisValue, ScriptInvocation, ServerErrorKind};

use super::conn::Conn;
use super::DirectoryError;

/// When a node counts a change as stored, and so acknowledges it.
///
/// ```
/// use std::time::Duration;
/// use duplex_gateway::cluster::Durability;
/// let d = Durability::Replicated { replicas: 1, timeout: Duration::from_millis(500) };
/// assert_ne!(d, Durability::Ack);
/// assert_eq!(Durability::default(), Durability::Ack);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The primary answered the write's script: the change is in its
    /// memory. A primary that dies before its replicas copy the change
    /// loses it; the nodes then write back what they hold (see the
    /// module's docs), but a session whose node died too is lost with it.
    #[default]
    Ack,
    /// The primary answered and `WAIT` confirmed that at least `replicas`
    /// replicas hold the change, within `timeout`; otherwise the change is
    /// not acknowledged ([`DirectoryError::Unreplicated`]) and is sent
    /// again with the session's next save. Give the servers
    /// `min-replicas-to-write` too, so that a primary cut off from its
    /// replicas refuses writes.
    Replicated {
        /// Replicas that must hold a change.
        replicas: u32,
        /// How long one `WAIT` may block.
        timeout: Duration,
    },
}

/// The last `WAIT` a node sent: its number, its connection and how many
/// replicas it counted.
#[derive(Debug, Clone, Copy)]
struct Waited {
    number: u64,
    client: i64,
    acked: i64,
}

/// A node's `WAIT`s, for [`Durability::Replicated`].
#[derive(Debug)]
pub(super) struct Replication {
    replicas: u32,
    timeout_ms: u64,
    /// A `WAIT` with every write (a Redis Cluster).
    per_write: bool,
    /// `WAIT`s sent so far.
    sent: AtomicU64,
    /// The last one, answered; held while the next is in flight.
    last: tokio::sync::Mutex<Waited>,
}

impl Replication {
    pub(super) fn new(durability: Durability, per_write: bool) -> Option<Self> {
        match durability {
            Durability::Ack => None,
            Durability::Replicated { replicas, timeout } => Some(Replication {
                replicas,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                per_write,
                sent: AtomicU64::new(0),
                last: tokio::sync::Mutex::new(Waited {
                    number: 0,
                    client: -1,
                    acked: 0,
                }),
            }),
        }
    }

    /// Runs a write script and returns its answer once enough replicas
    /// hold it.
    pub(super) async fn write<T: FromRedisValue>(
        &self,
        conn: &mut Conn,
        call: &ScriptInvocation<'_>,
    ) -> Result<T, DirectoryError> {
        let mut pipe = redis::pipe();
        pipe.invoke_script(call);
        if self.per_write {
            pipe.cmd("WAIT").arg(self.replicas).arg(self.timeout_ms);
        } else {
            pipe.cmd("CLIENT").arg("ID");
        }
        let (out, n): (T, i64) = match pipe.query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                call.load_async(conn).await?;
                pipe.query_async(conn).await?
            }
            answer => answer?,
        };
        if self.per_write {
            self.enough(n)?;
        } else {
            self.confirm(conn, n).await?;
        }
        Ok(out)
    }

    fn enough(&self, acked: i64) -> Result<(), DirectoryError> {
        if acked >= i64::from(self.replicas) {
            Ok(())
        } else {
            Err(DirectoryError::Unreplicated {
                acked: u64::try_from(acked).unwrap_or(0),
                wanted: self.replicas,
            })
        }
    }

    /// Waits for a `WAIT` sent after this write's answer came back on
    /// connection `client`.
    async fn confirm(&self, conn: &mut Conn, client: i64) -> Result<(), DirectoryError> {
        // Every WAIT numbered above `sent` now is sent after this point.
        let need = self.sent.load(Ordering::SeqCst) + 1;
        let mut last = self.last.lock().await;
        if last.number < need {
            let number = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
            let (on, acked): (i64, i64) = redis::pipe()
                .cmd("CLIENT")
                .arg("ID")
                .cmd("WAIT")
                .arg(self.replicas)
                .arg(self.timeout_ms)
                .query_async(conn)
                .await?;
            *last = Waited {
                number,
                client: on,
                acked,
            };
        }
        if last.client != client {
            // The write's connection is gone: nothing can confirm it.
            return Err(DirectoryError::Unreplicated {
                acked: 0,
                wanted: self.replicas,
            });
        }
        self.enough(last.acked)
    }
}
