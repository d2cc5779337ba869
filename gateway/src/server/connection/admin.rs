//! The admin events on a connection: the counters (`admin.stats`) and the
//! audit of a session's applied input (`session.audit`), both behind the
//! admin token.

use super::Connection;
use crate::cluster::directory::TOMBSTONE_TTL_S;
use crate::protocol::{ServerEvent, AUDIT_PAGE};

impl Connection {
    /// The refusal of an admin event without the admin token; `None` if
    /// `token` is the admin token.
    pub(super) fn not_admin(&self, token: Option<&str>) -> Option<ServerEvent> {
        let keys = &self.shared.keys;
        if keys.is_admin(token) {
            return None;
        }
        let why = if keys.admin_enabled() {
            "admin events need the gateway's admin token in `admin_token`"
        } else {
            "admin events are disabled; start the gateway with --admin-token"
        };
        Some(self.refusal("forbidden", why, None))
    }

    pub(super) async fn audit(&self, session_id: String, from: u64) -> ServerEvent {
        if let Some(node) = &self.shared.node {
            // A cluster's log is the directory's: what every node applied.
            let max = AUDIT_PAGE + 1;
            return match node.directory.applied(&session_id, from, max).await {
                Ok(entries) if entries.is_empty() && from == 0 && self.lost_log(&session_id).await => {
                    self.refusal(
                        "state_lost",
                        "the session store lost its data, and this session's log with it (no record, no tombstone, no node holding it)",
                        None,
                    )
                }
                Ok(mut entries) => {
                    let more = entries.len() > AUDIT_PAGE;
                    entries.truncate(AUDIT_PAGE);
                    let next = more.then(|| from + AUDIT_PAGE as u64);
                    let applied = entries.iter().filter_map(|e| parse_applied(e)).collect();
                    ServerEvent::Audit {
                        applied,
                        next,
                        session_id,
                    }
                }
                Err(e) => self.refusal(
                    "unavailable",
                    format!("the session store did not answer: {e}"),
                    None,
                ),
            };
        }
        match &self.shared.audit {
            Some(audit) => {
                let (applied, next) = audit.page(&session_id, from, AUDIT_PAGE);
                ServerEvent::Audit {
                    applied,
                    next,
                    session_id,
                }
            }
            None => self.refusal(
                "audit_disabled",
                "the gateway keeps no audit log; start it with --audit",
                None,
            ),
        }
    }
}

impl Connection {
    /// Whether a session without a log was lost with the store: no record,
    /// no tombstone, and the store lost its data since the tombstone's time
    /// began (an hour). A session that was never opened looks the same; the
    /// auditor knows which sessions it used.
    async fn lost_log(&self, session: &str) -> bool {
        let Some(node) = &self.shared.node else {
            return false;
        };
        let d = &node.directory;
        matches!(
            (d.load(session).await, d.was_closed(session).await, d.since_loss().await),
            (Ok(None), Ok(false), Ok(Some(since))) if since.as_secs() < TOMBSTONE_TTL_S
        )
    }
}

/// An entry of a cluster's applied log, `epoch:seq:event_id`.
fn parse_applied(entry: &str) -> Option<(u64, u64, String)> {
    let mut parts = entry.splitn(3, ':');
    let epoch = parts.next()?.parse().ok()?;
    let seq = parts.next()?.parse().ok()?;
    Some((epoch, seq, parts.next()?.to_owned()))
}
