//! A node's membership in the directory: its liveness key (heartbeat,
//! leave), the registered set of nodes, and the per-node set of sessions
//! it holds (the adoption hint the others read when it dies).

use redis::AsyncCommands;

use super::keys::{node_key, owned_key, NODES};
use super::{Directory, DirectoryError};

impl Directory {
    /// Says this node is live for `ttl` (call well within it), and keeps
    /// it registered (a node presumed dead while it was only slow, and
    /// forgotten, comes back).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn heartbeat(&self, ttl: std::time::Duration) -> Result<(), DirectoryError> {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut c = self.conn.clone();
        let () = c.pset_ex(node_key(&self.node), 1u8, ms).await?;
        let _: i64 = c.sadd(NODES, &self.node).await?;
        Ok(())
    }

    /// Withdraws this node's liveness at once (a drain): the others adopt
    /// its sessions without waiting for the TTL.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn leave(&self) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let _: i64 = c.del(node_key(&self.node)).await?;
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

    /// Registers this node in `dx:nodes` (once, at start).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn register(&self) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let _: i64 = c.sadd(NODES, &self.node).await?;
        Ok(())
    }

    /// Every registered node.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn nodes(&self) -> Result<Vec<String>, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.smembers(NODES).await?)
    }

    /// Forgets a dead node whose sessions are all adopted.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn forget(&self, node: &str) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let _: i64 = c.srem(NODES, node).await?;
        let _: i64 = c.del(owned_key(node)).await?;
        Ok(())
    }

    /// Notes that this node holds `session` (the adoption hint).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn own(&self, session: &str) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let _: i64 = c.sadd(owned_key(&self.node), session).await?;
        Ok(())
    }

    /// Drops the note that this node holds `session`.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn disown(&self, session: &str) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let _: i64 = c.srem(owned_key(&self.node), session).await?;
        Ok(())
    }

    /// The sessions `node` noted it holds.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn owned_by(&self, node: &str) -> Result<Vec<String>, DirectoryError> {
        let mut c = self.conn.clone();
        Ok(c.smembers(owned_key(node)).await?)
    }
}
