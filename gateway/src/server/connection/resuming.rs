//! The realtime dialect's `session.resume`: the native resume, then the
//! session's stream (this node's, or one rebuilt from the journal the
//! cluster stored) replays what the client missed after its cursor, the
//! socket it replaced is told, and a cursor the journal cannot serve is
//! answered `session.resync_required`.

use serde_json::json;

use super::realtime::Rt;
use super::Connection;
use crate::protocol::realtime::RealtimeError;
use crate::protocol::ServerEvent;
use crate::server::stream::{Config, Conversation};

impl Connection {
    /// `session.resume`: the native resume, then the stream replays what
    /// the client missed and the socket it replaced is told.
    pub(super) async fn rt_resume(&mut self, session_id: String, token: String, cursor: u64) {
        if self.rt.is_some() {
            // The contract's code: a resume is a new connection's first
            // message.
            let e = RealtimeError::invalid(
                "unsupported_session_resume",
                "session.resume must be the first message of a new connection; this one holds a session",
                None,
            );
            self.rt_send(vec![e.to_value()]).await;
            return;
        }
        let opened = self.open(Some(session_id), Some(token)).await;
        let ServerEvent::Opened {
            session_id,
            incarnation,
            epoch,
            turn,
            resume_token,
            ..
        } = opened
        else {
            if let Some(e) = Self::rt_error(&opened, None) {
                self.rt_send(vec![e]).await;
            }
            return;
        };
        let Some(held) = self.bound.clone() else {
            return;
        };
        // A session without a stream here was taken over from another
        // node of a cluster (its stream is rebuilt from the journal that
        // node stored) or opened in the native dialect (no journal: a
        // cursor after 0 cannot be served).
        // On a node of a cluster the stored journal is the truth. A stream
        // here is kept only if it is that journal: it has stored every
        // event it numbered, at the incarnation this node holds the
        // session at now (a session that moved away and back has a new
        // one; a stream whose write failed numbered events the store
        // lacks). Any other stream here is stale, and is replaced.
        let known = self.shared.journals.get(&held.session);
        let mut restored = false;
        let stream = match (known, &self.shared.node) {
            (known, Some(node)) => match node.directory.journal(held.session.as_str()).await {
                Ok(stored) => {
                    let stored_last = stored.last().map_or(0, |(seq, _)| *seq);
                    let current = match &known {
                        Some(stream) => {
                            stream.stores_at(held.incarnation).await
                                && (stored.is_empty() || stream.position().await.0 == stored_last)
                        }
                        None => false,
                    };
                    match known {
                        Some(stream) if current => stream,
                        _ => {
                            restored = true;
                            self.shared.journals.remove(&held.session).await;
                            self.shared.journals.restore(&held.session, stored)
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(session = %held.session, "stored journal not read: {e}");
                    known.unwrap_or_else(|| self.shared.journals.stream(&held.session))
                }
            },
            (Some(stream), None) => stream,
            (None, None) => self.shared.journals.stream(&held.session),
        };
        self.store_journal(&stream, &held).await;
        let (last, _) = stream.position().await;
        // The conversation goes on where the last socket left it (a stream
        // restored from another node's journal starts one afresh: the
        // store keeps no conversation).
        let conv = match stream.kept() {
            Some(kept) => kept.resumed((epoch, turn)),
            None => Conversation::at((epoch, turn), false, Config::default()),
        };
        let session = conv.session_object(&session_id, self.shared.config.engine.chunk_period_ms());
        let head = |generation: u64| {
            json!({
                "type": "session.resumed",
                "session_id": session_id,
                "incarnation": incarnation,
                "attachment_generation": generation,
                "resume_token": resume_token,
                "last_server_event_seq": last,
                "session": session,
            })
        };
        match stream
            .attach(self.outbox.clone(), Some(cursor), Some(head))
            .await
        {
            Ok((attachment, replaced)) => {
                if let Some(old) = replaced {
                    use tokio_tungstenite::tungstenite::protocol::{
                        frame::coding::CloseCode, CloseFrame,
                    };
                    use tokio_tungstenite::tungstenite::Message;
                    let note = json!({"type": "session.replaced", "session_id": session_id, "attachment_generation": attachment - 1});
                    old.send(Message::text(note.to_string())).await;
                    // Then the replaced socket closes, as the contract's
                    // server closes it (its clients wait for that).
                    old.offer(Message::Close(Some(CloseFrame {
                        code: CloseCode::Normal,
                        reason: "session_replaced".into(),
                    })));
                }
                // The responses the old node had in progress died with
                // its engine (the takeover released their requests).
                if restored {
                    stream.fail_live("node_lost").await;
                }
                self.rt = Some(Rt::new(stream, &held.client_id, attachment, conv));
            }
            Err(why) => {
                tracing::debug!(
                    session = %held.session,
                    cursor,
                    last,
                    restored,
                    "resume refused: {}",
                    why.reason()
                );
                let note = json!({"type": "session.resync_required", "session_id": session_id, "reason": why.reason()});
                self.unnumbered(&note).await;
                // The socket holds no session then (the one resumed is left
                // detached, to expire): the client opens a new one here.
                self.dropped().await;
                self.bound = None;
            }
        }
    }
}
