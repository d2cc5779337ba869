//! The load client's exchanges in the native dialect: open, resume,
//! chunk, commit, and a message the gateway must refuse. Each hands over
//! to its realtime twin (`realtime.rs`) when the client speaks that
//! dialect, so the run loop (`mod.rs`) is the same for both.

use futures_util::StreamExt;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::Message;

use duplex_gateway::protocol::{ServerEvent, MAX_MESSAGE};

use super::{
    forged, Ack, Client, Gone, Held, Sent, P_BARGE_IN, P_LATE_CHUNK, P_STALE_TOKEN, REPLY_TIMEOUT,
};

impl Client {
    /// The next reply, handling the response stream's events on the way.
    pub(super) async fn reply(&mut self) -> Result<ServerEvent, Gone> {
        loop {
            let ws = self.ws.as_mut().ok_or(Gone)?;
            let Ok(Some(Ok(message))) = timeout(REPLY_TIMEOUT, ws.next()).await else {
                return Err(Gone);
            };
            let text = match message {
                Message::Text(t) => t,
                Message::Close(_) => return Err(Gone),
                _ => continue,
            };
            let event: ServerEvent = match serde_json::from_str(text.as_str()) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(client = self.idx, "undecodable reply {text}: {e}");
                    self.tally.unexpected += 1;
                    continue;
                }
            };
            match event {
                ServerEvent::Delta { .. } => {}
                ServerEvent::Done { .. } => self.tally.responses += 1,
                // The node hands the session off, or lost it to another:
                // resume elsewhere.
                ServerEvent::Moved { .. } => return Err(Gone),
                ServerEvent::Error { kind, .. }
                    if kind == "session_moved" || kind == "unavailable" =>
                {
                    if kind == "unavailable" {
                        self.tally.unavailable += 1;
                    }
                    return Err(Gone);
                }
                other => return Ok(other),
            }
        }
    }

    pub(super) async fn open_new(&mut self) -> Result<(), Gone> {
        if self.realtime() {
            return self.rt_open_new().await;
        }
        self.send_json(serde_json::json!({"type": "session.open"}))
            .await?;
        match self.reply().await? {
            ServerEvent::Opened {
                session_id,
                epoch,
                turn,
                resume_token,
                resumed: false,
                ..
            } => {
                self.sessions.push(session_id.clone());
                self.held = Some(Held {
                    id: session_id,
                    epoch,
                    turn,
                    token: resume_token,
                    spent: None,
                });
                self.recent.clear();
            }
            other => self.unexpected("session.open", &other),
        }
        Ok(())
    }

    /// Resumes after a reconnect: first, sometimes, with a token that
    /// must be refused (the one the last resume used up, or a forged one);
    /// then with the real one. Within grace the last chunks are
    /// retransmitted; after grace the session is gone (the real token is
    /// refused too) and a new one opens.
    pub(super) async fn resume(&mut self, within_grace: bool) -> Result<(), Gone> {
        if self.realtime() {
            return self.rt_resume(within_grace).await;
        }
        let Some(held) = self.held.clone() else {
            return Ok(());
        };
        if self.chance(P_STALE_TOKEN) {
            let stale = held.spent.clone().unwrap_or_else(|| forged(&held.token));
            self.send_json(serde_json::json!({"type": "session.open", "session_id": held.id, "resume_token": stale}))
                .await?;
            match self.reply().await? {
                ServerEvent::Error { kind, .. } if kind == "resume_refused" => {
                    self.tally.resumes_refused += 1;
                }
                // The store lost the session: no token can be told from
                // another then; the real one is answered the same.
                ServerEvent::Error { kind, .. } if kind == "state_lost" => {}
                other => {
                    // A session this socket may now hold: the next open
                    // goes on a fresh connection.
                    self.unexpected("stale resume", &other);
                    self.ws = None;
                    self.held = None;
                    return Ok(());
                }
            }
        }
        self.send_json(serde_json::json!({"type": "session.open", "session_id": held.id, "resume_token": held.token}))
            .await?;
        match self.reply().await? {
            ServerEvent::Opened {
                epoch,
                turn,
                resume_token,
                resumed: true,
                ..
            } => {
                self.held = Some(Held {
                    epoch: held.epoch.max(epoch),
                    turn: held.turn.max(turn),
                    spent: Some(held.token.clone()),
                    token: resume_token,
                    ..held
                });
            }
            // The owner's own token refused: the session expired.
            ServerEvent::Error { kind, .. } if kind == "resume_refused" => {
                self.tally.expired += 1;
                self.held = None;
                return self.open_new().await;
            }
            // The store lost the session, and said so: what was
            // acknowledged in it is gone, told; a new session starts.
            ServerEvent::Error { kind, .. } if kind == "state_lost" => {
                self.told_state_lost(&held.id);
                return self.open_new().await;
            }
            other => {
                self.unexpected("resume", &other);
                self.ws = None;
                self.held = None;
                return Ok(());
            }
        }
        if within_grace {
            for sent in self.retransmits() {
                self.send_chunk(sent, true).await?;
            }
        }
        Ok(())
    }

    /// Sends one chunk; the one that closes the window (or `last`) is
    /// waited on, and every answer in flight checked against the ledger.
    pub(super) async fn send_chunk(&mut self, sent: Sent, last: bool) -> Result<(), Gone> {
        if self.realtime() {
            return self.rt_send_chunk(sent, last).await;
        }
        if self.held.is_none() {
            return Ok(());
        }
        let message = serde_json::json!({
            "type": "input.append", "event_id": sent.event_id,
            "epoch": sent.epoch, "turn": sent.turn, "audio": self.audio,
        });
        let closes = self.closes_window(last);
        self.in_flight.push(sent);
        let start = Instant::now();
        self.send_json(message).await?;
        if closes {
            self.settle_native(Some(start)).await?;
        }
        Ok(())
    }

    /// Reads the answer of every chunk in flight, in order (the gateway
    /// answers a connection's events in order, one answer an append). The
    /// round trip of the last is measured from `start`.
    pub(super) async fn settle_native(&mut self, start: Option<Instant>) -> Result<(), Gone> {
        let flight = std::mem::take(&mut self.in_flight);
        let n = flight.len();
        for (i, sent) in flight.into_iter().enumerate() {
            let reply = self.reply().await?;
            if let (Some(start), true) = (start, i + 1 == n) {
                let micros = u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX);
                self.latencies.push(micros);
            }
            self.check_answer(&sent, reply);
        }
        Ok(())
    }

    /// Checks an append's answer against the ledger.
    fn check_answer(&mut self, sent: &Sent, reply: ServerEvent) {
        match reply {
            ServerEvent::Appended {
                event_id,
                seq,
                duplicate,
                ..
            } if event_id == sent.event_id && self.held.is_some() => {
                let session = self.held.as_ref().map(|h| h.id.clone()).unwrap_or_default();
                let ack = Ack {
                    session,
                    epoch: Some(sent.epoch),
                    seq: Some(seq),
                };
                match self.ledger.get(&event_id) {
                    Some(before) if *before != ack || !duplicate => {
                        tracing::warn!(client = self.idx, "{event_id}: acknowledged as {before:?}, now {ack:?} (duplicate: {duplicate})");
                        self.tally.doubled += 1;
                    }
                    _ => {}
                }
                if duplicate {
                    self.tally.duplicates += 1;
                } else {
                    self.tally.appended += 1;
                }
                self.ledger.insert(event_id, ack);
                self.acked();
            }
            // Counted once: the chunks in flight behind the first refusal
            // are refused the same.
            ServerEvent::Error { kind, .. } if kind == "unknown_session" => {
                if self.held.take().is_some() {
                    self.tally.expired += 1;
                }
            }
            // A retransmission of a turn the session has moved past.
            ServerEvent::Error { kind, .. }
                if kind == "fence_mismatch"
                    && sent.turn < self.held.as_ref().map_or(0, |h| h.turn) =>
            {
                self.tally.stale_refused += 1;
            }
            other => self.unexpected("input.append", &other),
        }
    }

    /// Ends the turn; sometimes barges in on the response, then sends a
    /// late chunk of the cancelled epoch.
    pub(super) async fn commit(&mut self) -> Result<(), Gone> {
        if self.realtime() {
            return self.rt_commit().await;
        }
        let Some(held) = self.held.clone() else {
            return Ok(());
        };
        self.send_json(
            serde_json::json!({"type": "input.commit", "epoch": held.epoch, "turn": held.turn}),
        )
        .await?;
        if let Some(h) = &mut self.held {
            h.turn += 1;
        }
        self.recent.clear();
        if !self.chance(P_BARGE_IN) {
            return Ok(());
        }
        self.send_json(
            serde_json::json!({"type": "response.cancel", "epoch": held.epoch, "turn": held.turn}),
        )
        .await?;
        match self.reply().await? {
            ServerEvent::Cancelled { epoch, .. } if epoch == held.epoch + 1 => {
                self.tally.barge_ins += 1;
                if let Some(h) = &mut self.held {
                    h.epoch = epoch;
                }
            }
            ServerEvent::Error { kind, .. } if kind == "unknown_session" => {
                self.tally.expired += 1;
                self.held = None;
                return Ok(());
            }
            other => {
                self.unexpected("response.cancel", &other);
                return Ok(());
            }
        }
        if self.chance(P_LATE_CHUNK) {
            self.counter += 1;
            let late = serde_json::json!({
                "type": "input.append", "event_id": format!("c{}-{}", self.idx, self.counter),
                "epoch": held.epoch, "turn": held.turn + 1, "audio": self.audio,
            });
            self.send_json(late).await?;
            match self.reply().await? {
                ServerEvent::Error { kind, .. } if kind == "fence_mismatch" => {
                    self.tally.stale_refused += 1;
                }
                other => self.unexpected("late chunk of a cancelled epoch", &other),
            }
        }
        Ok(())
    }

    /// One message the server must refuse without dropping the connection.
    pub(super) async fn garbage(&mut self) -> Result<(), Gone> {
        if self.realtime() {
            return self.rt_garbage().await;
        }
        let (message, kind) = match self.range(0, 5) {
            0 => (Message::text("{\"type\": \"input.append\", "), "malformed"),
            1 => (
                Message::text(r#"{"type":"session.explode"}"#),
                "unknown_type",
            ),
            2 => (Message::text("x".repeat(MAX_MESSAGE + 1)), "too_large"),
            3 => (
                Message::binary(vec![0xde, 0xad, 0xbe, 0xef]),
                "binary_unsupported",
            ),
            4 => {
                let held = self
                    .held
                    .clone()
                    .map(|h| (h.epoch, h.turn))
                    .unwrap_or_default();
                let m = serde_json::json!({"type": "input.append", "event_id": "bad-audio",
                    "epoch": held.0, "turn": held.1, "audio": "%%% not base64 %%%"});
                (Message::text(m.to_string()), "invalid_audio")
            }
            _ => {
                let held = self
                    .held
                    .clone()
                    .map(|h| (h.epoch, h.turn))
                    .unwrap_or_default();
                // One byte over the gateway's ids.
                let long = "e".repeat(duplex_gateway::profile::ID_LEN + 1);
                let m = serde_json::json!({"type": "input.append", "event_id": long,
                    "epoch": held.0, "turn": held.1, "audio": ""});
                (Message::text(m.to_string()), "invalid_id")
            }
        };
        self.send(message).await?;
        match self.reply().await? {
            ServerEvent::Error { kind: got, .. } if got == kind => self.tally.garbage_refused += 1,
            other => self.unexpected(kind, &other),
        }
        Ok(())
    }
}
