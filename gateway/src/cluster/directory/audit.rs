//! Scans of the whole directory, for a test's or a load run's end (not
//! for serving: each visits every key of a pattern).

use redis::AsyncCommands;

use super::{Directory, DirectoryError, Record};

/// Engine requests over the whole directory, by how often each was
/// released.
///
/// ```
/// use duplex_gateway::cluster::ReleaseTally;
/// let mut t = ReleaseTally { bound: 2, ..ReleaseTally::default() };
/// assert!(t.exactly_once());
/// t.twice.push("r7".into());
/// assert!(!t.exactly_once());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseTally {
    /// Requests recorded as bound.
    pub bound: u64,
    /// Bound and never released.
    pub never: Vec<String>,
    /// Released more than once.
    pub twice: Vec<String>,
}

impl ReleaseTally {
    /// Every bound request was released exactly once.
    pub fn exactly_once(&self) -> bool {
        self.never.is_empty() && self.twice.is_empty()
    }
}

impl Directory {
    /// Over every session the directory has seen: how many engine requests
    /// were bound, how many were never released, and how many released
    /// more than once. A scan of the whole keyspace: for a test's end, not
    /// for serving.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn release_tally(&self) -> Result<ReleaseTally, DirectoryError> {
        let keys = self.scan("dx:*:released").await?;
        let mut c = self.conn.clone();
        let mut tally = ReleaseTally::default();
        for key in keys {
            let counts: Vec<(String, u64)> = c.hgetall(&key).await?;
            for (request, n) in counts {
                tally.bound += 1;
                match n {
                    0 => tally.never.push(request),
                    1 => {}
                    _ => tally.twice.push(request),
                }
            }
        }
        Ok(tally)
    }

    /// Sessions that still have a record.
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn records(&self) -> Result<usize, DirectoryError> {
        Ok(self.scan("dx:*:rec").await?.len())
    }

    /// The sessions that still have a record, with their owners (a scan of
    /// the whole keyspace, for a test's end).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`], [`DirectoryError::Malformed`].
    pub async fn records_left(&self) -> Result<Vec<(String, Record)>, DirectoryError> {
        let mut left = Vec::new();
        for key in self.scan("dx:*:rec").await? {
            let Some(session) = key
                .strip_prefix("dx:{")
                .and_then(|k| k.strip_suffix("}:rec"))
            else {
                continue;
            };
            if let Some(record) = self.load(session).await? {
                left.push((session.to_owned(), record));
            }
        }
        Ok(left)
    }
}
