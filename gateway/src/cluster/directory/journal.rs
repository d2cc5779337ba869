//! A realtime session's event journal in the directory (the gateway's
//! `server::stream` keeps it in memory and writes it here on a node of a
//! cluster), so that a resume on another node replays what this node
//! sent. Each entry is `<seq> <event json>`, oldest first, under the
//! session's hash tag; appends and trims are fenced by the record's owner
//! and incarnation, as every other write of a session is.

use std::sync::LazyLock;

use redis::{AsyncCommands, Script};

use super::keys::rec;
use super::{Directory, DirectoryError};

/// The most entries one session's stored journal keeps.
pub const JOURNAL_ENTRIES: usize = 4096;

fn journal_key(session: &str) -> String {
    format!("dx:{{{session}}}:journal")
}

/// Appends ARGV[4..] if the record is still ARGV[1]'s at incarnation
/// ARGV[2], keeping the newest ARGV[3]: 1, or 0 (not the owner).
static APPEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return 0 end
for i = 4, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
local n = redis.call('LLEN', KEYS[2])
local keep = tonumber(ARGV[3])
if n > keep then redis.call('LTRIM', KEYS[2], n - keep, -1) end
return 1
",
    )
});

/// Drops the entries up to seq ARGV[3] if the record is still ARGV[1]'s
/// at incarnation ARGV[2]: 1, or 0. The newest entry is always kept: it
/// holds the journal's position (the number the next event follows), which
/// a node that takes the session over continues from.
static TRIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local owner = redis.call('HMGET', KEYS[1], 'node', 'inc')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then return 0 end
local upto = tonumber(ARGV[3])
while redis.call('LLEN', KEYS[2]) > 1 do
  local head = redis.call('LINDEX', KEYS[2], 0)
  if not head then break end
  local seq = tonumber(string.match(head, '^(%d+) '))
  if not seq or seq > upto then break end
  redis.call('LPOP', KEYS[2])
end
return 1
",
    )
});

impl Directory {
    /// Appends journal entries `(seq, event)` of a session this node owns
    /// at `incarnation`.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use duplex_gateway::cluster::{Directory, Save};
    ///
    /// let d = Directory::connect("redis://127.0.0.1:6379/", "node-a").await?;
    /// d.create("call-1", 0, Save { image: b"v1", version: 1, ..Save::default() }).await?;
    /// d.journal_append("call-1", 0, &[(1, r#"{"type":"session.created"}"#)]).await?;
    /// d.journal_append("call-1", 0, &[(2, r#"{"type":"session.updated"}"#)]).await?;
    /// d.journal_trim("call-1", 0, 2).await?;
    /// // The newest entry stays: a takeover continues the numbering from it.
    /// assert_eq!(d.journal("call-1").await?.len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Lost`] if another node owns it now, or
    /// [`DirectoryError::Redis`].
    pub async fn journal_append(
        &self,
        session: &str,
        incarnation: u64,
        entries: &[(u64, &str)],
    ) -> Result<(), DirectoryError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut call = APPEND.prepare_invoke();
        call.key(rec(session))
            .key(journal_key(session))
            .arg(&self.node)
            .arg(incarnation)
            .arg(JOURNAL_ENTRIES);
        for (seq, event) in entries {
            call.arg(format!("{seq} {event}"));
        }
        let stored: i64 = self.write(&call).await?;
        fenced(stored, session, incarnation)
    }

    /// Drops a session's journal entries up to `seq` (the client holds
    /// them), but the newest, which keeps the journal's position.
    ///
    /// # Errors
    ///
    /// As [`journal_append`](Self::journal_append).
    pub async fn journal_trim(
        &self,
        session: &str,
        incarnation: u64,
        seq: u64,
    ) -> Result<(), DirectoryError> {
        let mut call = TRIM.prepare_invoke();
        call.key(rec(session))
            .key(journal_key(session))
            .arg(&self.node)
            .arg(incarnation)
            .arg(seq);
        let mut c = self.conn.clone();
        let trimmed: i64 = call.invoke_async(&mut c).await?;
        fenced(trimmed, session, incarnation)
    }

    /// A session's stored journal, oldest first (a malformed entry ends
    /// it: what follows could not be replayed in order).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn journal(&self, session: &str) -> Result<Vec<(u64, String)>, DirectoryError> {
        let mut c = self.conn.clone();
        let raw: Vec<String> = c.lrange(journal_key(session), 0, -1).await?;
        Ok(raw
            .into_iter()
            .map_while(|entry| {
                let (seq, event) = entry.split_once(' ')?;
                Some((seq.parse().ok()?, event.to_owned()))
            })
            .collect())
    }

    /// Deletes a session's stored journal (the session closed).
    ///
    /// # Errors
    ///
    /// [`DirectoryError::Redis`].
    pub async fn journal_delete(&self, session: &str) -> Result<(), DirectoryError> {
        let mut c = self.conn.clone();
        let _: i64 = c.del(journal_key(session)).await?;
        Ok(())
    }
}

/// A fenced script's answer: 1 done, else the record is another's.
fn fenced(done: i64, session: &str, incarnation: u64) -> Result<(), DirectoryError> {
    if done == 1 {
        Ok(())
    } else {
        Err(DirectoryError::Lost {
            session: session.to_owned(),
            incarnation,
        })
    }
}
