//! The load client in the realtime dialect (`--dialect realtime`): the
//! same clients, faults, ledger and reconciliation as the native dialect,
//! over `/v1/realtime?duplex=1&autostart=0`.
//!
//! The realtime dialect acknowledges no append, so the chunks in flight
//! count as acknowledged when the `session.heartbeat` the client sends
//! after the last of them (each chunk, or the last of the run's window) is
//! answered with no refusal of theirs in between (the gateway answers a
//! connection's events in order, and a cluster node answers only once the
//! change is stored). The round trip measured is that last append to the
//! answer. Every numbered server event must follow the one before it, on
//! every socket of the session: a gap or a repeat after a resume is
//! counted `unexpected`. The ledger is reconciled with the native audit,
//! read on a native socket at the end.

use serde_json::{json, Value};
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::Message;

use futures_util::StreamExt;

use super::{forged, Ack, Client, Gone, Held, Sent, REPLY_TIMEOUT};

/// The heartbeat whose answer acknowledges the chunks sent before it.
pub(super) const HEARTBEAT: &str = r#"{"type":"session.heartbeat"}"#;

/// How many numbered events a client lets pass before it acknowledges
/// them (`session.event_ack`), which keeps the session's journal short.
const ACK_EVERY: u64 = 64;

/// What every reply is read for: its type and number.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    server_event_seq: Option<u64>,
    /// An `overlap.decision`'s action.
    #[serde(default, borrow)]
    action: Option<std::borrow::Cow<'a, str>>,
}

impl Peek<'_> {
    /// A streaming event the client only lets pass (numbered, counted by
    /// its number): a response's own events but its `response.done`, a
    /// commit's (speech starting and stopping around it, in the
    /// contract), `session.updated`, and the overlap decision on each
    /// chunk sent while a response streams, which for this client's loud
    /// audio under the session's default rule (`listen_only`) is to listen.
    fn passing(&self) -> bool {
        let k = self.kind.as_ref();
        k != "response.done"
            && (k.starts_with("response.")
                || k.starts_with("conversation.item.")
                || k.starts_with("input_audio_buffer.speech_")
                || k == "rate_limits.updated"
                || k == "input_audio_buffer.committed"
                || k == "session.updated"
                || (k == "overlap.decision" && self.action.as_deref() == Some("listen")))
    }
}

/// An event's type; an event the client reads for nothing else is its
/// type alone (a JSON string).
fn kind(v: &Value) -> &str {
    match v {
        Value::String(kind) => kind,
        _ => v.get("type").and_then(Value::as_str).unwrap_or(""),
    }
}

fn code(v: &Value) -> &str {
    v.pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Client {
    /// The next answer: streaming events (the response's, the commit's)
    /// are counted on the way and the numbering checked.
    async fn rt_reply(&mut self) -> Result<Value, Gone> {
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
            // Most events are read for their type and number alone; the
            // tree is built only for those the client looks into.
            let Ok(peek) = serde_json::from_str::<Peek<'_>>(text.as_str()) else {
                tracing::warn!(client = self.idx, "undecodable reply {text}");
                self.tally.unexpected += 1;
                continue;
            };
            let event = if peek.passing() {
                Value::Null
            } else if peek.kind == "session.heartbeat_ack" {
                // Read for its type alone, and handed over as that.
                Value::String(peek.kind.clone().into_owned())
            } else if let Ok(event) = serde_json::from_str::<Value>(text.as_str()) {
                event
            } else {
                tracing::warn!(client = self.idx, "undecodable reply {text}");
                self.tally.unexpected += 1;
                continue;
            };
            if let Some(seq) = peek.server_event_seq {
                if seq != self.seq + 1 {
                    tracing::warn!(
                        client = self.idx,
                        "server_event_seq {seq} after {}",
                        self.seq
                    );
                    self.tally.unexpected += 1;
                }
                self.seq = seq;
                if seq >= self.acked + ACK_EVERY {
                    self.acked = seq;
                    // Queued, not flushed: it leaves with the client's next
                    // event, in the same write, as a client that batches its
                    // writes sends it (an acknowledgement only trims the
                    // journal, so a late one costs the gateway nothing).
                    let ack = json!({"type": "session.event_ack", "server_event_seq": seq});
                    self.feed(Message::text(ack.to_string())).await?;
                }
            }
            let replayed = peek
                .server_event_seq
                .is_some_and(|seq| seq <= self.replay_until);
            if peek.passing() {
                continue;
            }
            match kind(&event) {
                "response.done" => {
                    self.responding = false;
                    let status = event.pointer("/response/status").and_then(Value::as_str);
                    match status {
                        Some("completed") => self.tally.responses += 1,
                        Some("failed") => {}
                        _ if replayed => {}
                        _ => return Ok(event),
                    }
                }
                "session.moved" | "session.replaced" => return Err(Gone),
                "error" if matches!(code(&event), "session_moved" | "unavailable") => {
                    if code(&event) == "unavailable" {
                        self.tally.unavailable += 1;
                    }
                    return Err(Gone);
                }
                k if k.starts_with("response.")
                    || k.starts_with("conversation.item.")
                    || k == "rate_limits.updated"
                    || k == "input_audio_buffer.committed"
                    || k == "session.updated" => {}
                _ if replayed => {}
                _ => return Ok(event),
            }
        }
    }

    fn rt_unexpected(&mut self, what: &str, got: &Value) {
        tracing::warn!(client = self.idx, "{what}: unexpected {got}");
        self.tally.unexpected += 1;
    }

    pub(super) async fn rt_open_new(&mut self) -> Result<(), Gone> {
        // A new session numbers its events from 1.
        self.seq = 0;
        self.acked = 0;
        self.replay_until = 0;
        self.responding = false;
        self.send_json(json!({"type": "session.update", "session": {"model": "loadgen"}}))
            .await?;
        let created = self.rt_reply().await?;
        if kind(&created) != "session.created" {
            self.rt_unexpected("session.update", &created);
            return Ok(());
        }
        let id = created.pointer("/session/id").and_then(Value::as_str);
        let token = created.get("resume_token").and_then(Value::as_str);
        let (Some(id), Some(token)) = (id, token) else {
            self.rt_unexpected("session.created", &created);
            return Ok(());
        };
        self.sessions.push(id.to_owned());
        self.held = Some(Held {
            id: id.to_owned(),
            epoch: 0,
            turn: 0,
            token: token.to_owned(),
            spent: None,
        });
        self.recent.clear();
        Ok(())
    }

    pub(super) async fn rt_resume(&mut self, within_grace: bool) -> Result<(), Gone> {
        let Some(held) = self.held.clone() else {
            return Ok(());
        };
        if self.chance(super::P_STALE_TOKEN) {
            let stale = held.spent.clone().unwrap_or_else(|| forged(&held.token));
            self.send_json(json!({"type": "session.resume", "session_id": held.id, "resume_token": stale, "last_received_server_event_seq": self.seq}))
                .await?;
            let answer = self.rt_reply().await?;
            if code(&answer) == "session_resume_expired" {
                self.tally.resumes_refused += 1;
            } else if answer.get("reason").and_then(Value::as_str) == Some("state_lost") {
                // The store lost the session: the real token is answered
                // the same.
            } else {
                self.rt_unexpected("stale resume", &answer);
            }
        }
        self.send_json(json!({"type": "session.resume", "session_id": held.id, "resume_token": held.token, "last_received_server_event_seq": self.seq}))
            .await?;
        let answer = self.rt_reply().await?;
        match kind(&answer) {
            "session.resumed" => {
                let token = answer
                    .get("resume_token")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.held = Some(Held {
                    spent: Some(held.token.clone()),
                    token: token.to_owned(),
                    ..held
                });
                // The replay follows: what the last socket missed, with
                // answers to its requests among it (a heartbeat's ack, a
                // cancel's end), which answer nothing asked on this one.
                self.replay_until = answer
                    .get("last_server_event_seq")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            "error" if code(&answer) == "session_resume_expired" => {
                self.tally.expired += 1;
                self.held = None;
                return self.rt_open_new().await;
            }
            // The store lost the session, and said so.
            "session.expired"
                if answer.get("reason").and_then(Value::as_str) == Some("state_lost") =>
            {
                self.told_state_lost(&held.id);
                return self.rt_open_new().await;
            }
            // The journal could not serve the cursor: announced, and the
            // client starts again (counted apart: it must stay 0 where
            // every event sent was stored).
            "session.resync_required" => {
                self.tally.resyncs += 1;
                self.held = None;
                return self.rt_open_new().await;
            }
            _ => {
                self.rt_unexpected("resume", &answer);
                self.held = None;
                return Ok(());
            }
        }
        if within_grace {
            for sent in self.retransmits() {
                self.rt_send_chunk(sent, true).await?;
            }
        }
        Ok(())
    }

    /// One chunk; the one that closes the window (or `last`) leaves with a
    /// heartbeat, and the chunks in flight are acknowledged when it is
    /// answered with no refusal of theirs before it.
    pub(super) async fn rt_send_chunk(&mut self, sent: Sent, last: bool) -> Result<(), Gone> {
        if self.held.is_none() {
            return Ok(());
        }
        let append = format!(
            r#"{{"type":"input_audio_buffer.append","event_id":{},"audio":{}}}"#,
            Value::from(sent.event_id.as_str()),
            Value::from(self.audio.as_str()),
        );
        let closes = self.closes_window(last);
        self.in_flight.push(sent);
        let start = Instant::now();
        if !closes {
            return self.send(Message::text(append)).await;
        }
        // The chunk and its heartbeat leave in one write, as a client that
        // batches its socket writes sends them.
        self.feed(Message::text(append)).await?;
        self.send(Message::text(HEARTBEAT)).await?;
        self.rt_settle(Some(start)).await
    }

    /// Reads up to the answer of the heartbeat just sent: a refusal of a
    /// chunk in flight names it (`event_id`); the others are acknowledged.
    /// The round trip is measured from `start`.
    pub(super) async fn rt_settle(&mut self, start: Option<Instant>) -> Result<(), Gone> {
        let flight = std::mem::take(&mut self.in_flight);
        let Some(session) = self.held.as_ref().map(|h| h.id.clone()) else {
            return Ok(());
        };
        let mut refused: Vec<Option<String>> = vec![None; flight.len()];
        loop {
            let answer = self.rt_reply().await?;
            match kind(&answer) {
                "session.heartbeat_ack" => break,
                "error" => {
                    let about = answer.pointer("/error/event_id").and_then(Value::as_str);
                    if let Some(i) = flight
                        .iter()
                        .position(|s| Some(s.event_id.as_str()) == about)
                    {
                        refused[i] = Some(code(&answer).to_owned());
                    } else if matches!(code(&answer), "unknown_session" | "no_session") {
                        self.tally.expired += 1;
                        self.held = None;
                        return Ok(());
                    } else {
                        self.rt_unexpected("input_audio_buffer.append", &answer);
                    }
                }
                _ => self.rt_unexpected("input_audio_buffer.append", &answer),
            }
        }
        if let Some(start) = start {
            let micros = u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX);
            self.latencies.push(micros);
        }
        for (sent, refused) in flight.into_iter().zip(refused) {
            match refused.as_deref() {
                None => {
                    let ack = Ack {
                        session: session.clone(),
                        epoch: None,
                        seq: None,
                    };
                    if self.ledger.insert(sent.event_id, ack).is_some() {
                        self.tally.duplicates += 1;
                    } else {
                        self.tally.appended += 1;
                    }
                    self.acked();
                }
                // A retransmission of a chunk whose fence the session has
                // moved past (it was applied then, or never: the ledger
                // says which).
                Some("fence_mismatch") => self.tally.stale_refused += 1,
                // Counted once: the chunks in flight behind the first
                // refusal are refused the same.
                Some("unknown_session") => {
                    if self.held.take().is_some() {
                        self.tally.expired += 1;
                    }
                }
                Some(other) => {
                    let got = json!({"refused": other, "event_id": sent.event_id});
                    self.rt_unexpected("input_audio_buffer.append", &got);
                }
            }
        }
        Ok(())
    }

    /// Ends the turn with a response; sometimes barges in on it.
    pub(super) async fn rt_commit(&mut self) -> Result<(), Gone> {
        if self.held.is_none() {
            return Ok(());
        }
        // One response at a time, as the protocol allows: a commit made
        // while the last response still streams asks for none.
        let respond = !self.responding;
        self.responding |= respond;
        self.send_json(json!({"type": "input_audio_buffer.commit", "response_create": respond}))
            .await?;
        self.recent.clear();
        if !self.chance(super::P_BARGE_IN) {
            return Ok(());
        }
        self.send_json(json!({"type": "response.cancel"})).await?;
        let answer = self.rt_reply().await?;
        match (kind(&answer), code(&answer)) {
            ("response.done", _) => self.tally.barge_ins += 1,
            // The response had already ended.
            // (In the contract's words, on the path this client speaks.)
            ("error", "response_not_active") => {}
            ("error", "unknown_session") => {
                self.tally.expired += 1;
                self.held = None;
            }
            _ => self.rt_unexpected("response.cancel", &answer),
        }
        Ok(())
    }

    /// One message the gateway must refuse without dropping the connection.
    pub(super) async fn rt_garbage(&mut self) -> Result<(), Gone> {
        let (message, expected) = match self.range(0, 4) {
            0 => (
                Message::text("{\"type\": \"input_audio_buffer.append\", "),
                "invalid_json",
            ),
            1 => (
                Message::text(r#"{"type":"session.explode"}"#),
                "unknown_event_type",
            ),
            2 => (
                Message::text("x".repeat(duplex_gateway::protocol::MAX_MESSAGE + 1)),
                // The contract's name for it (the client speaks its path).
                "event_too_large",
            ),
            3 => (
                Message::binary(vec![0xde, 0xad, 0xbe, 0xef]),
                "binary_unsupported",
            ),
            _ => {
                let m = json!({"type": "input_audio_buffer.append", "event_id": "bad-audio", "audio": "%%% not base64 %%%"});
                (Message::text(m.to_string()), "invalid_audio")
            }
        };
        self.send(message).await?;
        let answer = self.rt_reply().await?;
        if kind(&answer) == "error" && code(&answer) == expected {
            self.tally.garbage_refused += 1;
        } else {
            self.rt_unexpected(expected, &answer);
        }
        Ok(())
    }

    /// Closes the session; the audit comes after, on a native socket.
    pub(super) async fn rt_close(&mut self) -> Result<(), Gone> {
        if self.held.is_none() {
            return Ok(());
        }
        self.send_json(json!({"type": "session.close"})).await?;
        // A response in progress ends `cancelled` before the session does.
        let mut answer = self.rt_reply().await?;
        while kind(&answer) == "response.done" {
            answer = self.rt_reply().await?;
        }
        match (kind(&answer), code(&answer)) {
            ("session.closed", _) => {}
            ("error", "unknown_session" | "no_session") => self.tally.expired += 1,
            _ => self.rt_unexpected("session.close", &answer),
        }
        self.held = None;
        Ok(())
    }
}
