//! The end of a client's run: close its session, read the server's log of
//! every session it used, and compare it with the ledger.

use std::collections::HashMap;

use tokio::time::Instant;

use super::{Ack, Client, Unreconciled, FAILOVER_WAIT};
use duplex_gateway::protocol::ServerEvent;

impl Client {
    /// Closes the session and reconciles the ledger with the server's log
    /// of every session this client used. The store may still be failing
    /// over as the run ends: a finish cut off (the node went away, or
    /// answered `unavailable`) is taken up again where it stopped, as a
    /// client would, for as long as a failover may take.
    pub(super) async fn finish(&mut self) -> Result<(), Unreconciled> {
        let give_up = Instant::now() + FAILOVER_WAIT;
        loop {
            match self.finish_once().await {
                Err(Unreconciled::Gone) if Instant::now() < give_up => {
                    self.ws = None;
                    self.broken = self.held.is_some();
                    tokio::time::sleep(self.config.chunk_interval).await;
                }
                other => return other,
            }
        }
    }

    async fn finish_once(&mut self) -> Result<(), Unreconciled> {
        if self.ws.is_none() {
            self.connect().await?;
            if self.held.is_some() {
                self.resume(false).await?;
            }
        }
        self.settle().await?;
        if self.realtime() {
            // The realtime session closes in its dialect; the audit is
            // read on a native socket.
            self.rt_close().await?;
            if let Some(mut ws) = self.ws.take() {
                let _ = ws.close(None).await;
            }
            self.auditing = true;
            self.connect().await?;
        }
        if self.held.is_some() {
            self.send_json(serde_json::json!({"type": "session.close"}))
                .await?;
            match self.reply().await? {
                ServerEvent::Closed { .. } => {}
                ServerEvent::Error { kind, .. } if kind == "unknown_session" => {
                    self.tally.expired += 1
                }
                other => self.unexpected("session.close", &other),
            }
            self.held = None;
        }
        let mut applied: HashMap<String, Vec<Ack>> = HashMap::new();
        for session in self.sessions.clone() {
            let mut from = Some(0);
            while let Some(at) = from {
                let principal = self.identity.as_ref().map(|i| i.principal.clone());
                self.send_json(serde_json::json!({"type": "session.audit", "session_id": session, "admin_token": self.config.admin_token, "from": at, "principal": principal}))
                    .await?;
                match self.reply().await? {
                    ServerEvent::Audit {
                        applied: log, next, ..
                    } => {
                        for (epoch, seq, event_id) in log {
                            applied.entry(event_id).or_default().push(Ack {
                                session: session.clone(),
                                epoch: Some(epoch),
                                seq: Some(seq),
                            });
                        }
                        from = next;
                    }
                    // The store lost the session's log, and says so: its
                    // chunks are told lost, not lost silently.
                    ServerEvent::Error { kind, .. } if kind == "state_lost" && at == 0 => {
                        self.tally.state_lost += 1;
                        self.ledger.retain(|_, ack| ack.session != session);
                        from = None;
                    }
                    ServerEvent::Error { kind, message, .. } => {
                        return Err(Unreconciled::Refused(format!("{kind}: {message}")));
                    }
                    other => {
                        self.unexpected("session.audit", &other);
                        return Err(Unreconciled::Refused(format!("{other:?}")));
                    }
                }
            }
        }
        for (event_id, times) in &applied {
            if times.len() > 1 {
                tracing::warn!(
                    client = self.idx,
                    "{event_id} applied {} times: {times:?}",
                    times.len()
                );
                self.tally.doubled += times.len() as u64 - 1;
            }
        }
        for (event_id, ack) in &self.ledger {
            if !applied
                .get(event_id)
                .is_some_and(|t| t.iter().any(|logged| ack.is(logged)))
            {
                tracing::warn!(
                    client = self.idx,
                    "{event_id} acknowledged as {ack:?}, not in the log"
                );
                self.tally.lost += 1;
            }
        }
        if let Some(mut ws) = self.ws.take() {
            let _ = ws.close(None).await;
        }
        Ok(())
    }
}
