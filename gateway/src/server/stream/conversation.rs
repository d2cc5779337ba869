//! A realtime session's conversation: where its client's turns stand and
//! how it configured the session. It is the session's, not a socket's: a
//! client that drops and resumes on another socket continues it (its next
//! commit names the next item, and its `extra_body.auto_response` still
//! starts a response).

use std::sync::{Arc, PoisonError};

use super::{Config, Stream};

/// Where a realtime session's conversation stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Conversation {
    /// The session's epoch (advanced by each barge-in).
    pub(crate) epoch: u64,
    /// The turn the next chunk belongs to (advanced by each commit).
    pub(crate) turn: u64,
    /// The highest turn the core has seen (a response answers it).
    pub(crate) core_turn: u64,
    /// Whether audio was appended since the last commit.
    pub(crate) pending: bool,
    /// The last committed user item.
    pub(crate) last_item: Option<String>,
    /// A commit starts a response (`extra_body.auto_response`).
    pub(crate) auto_response: bool,
    /// The effective `session` object, echoed by `session.updated`
    /// (shared: a reference voice in it can be hundreds of kilobytes).
    pub(crate) config: Arc<Config>,
    /// What the turn's chunks said they say (their `transcript` hints,
    /// joined; at most [`MAX_TRANSCRIPT`] bytes).
    pub(crate) transcript: String,
    /// Where the last hint starts in `transcript` (a hint sent again
    /// right after itself, as a retransmitted chunk's, counts once).
    last_hint: usize,
}

/// The most bytes of a turn's transcript: a hint that would take it past
/// this is dropped (a client cannot grow a session without bound).
pub(crate) const MAX_TRANSCRIPT: usize = 16 * 1024;

impl Conversation {
    /// A conversation starting at the core's `(epoch, turn)`.
    pub(crate) fn at((epoch, turn): (u64, u64), auto_response: bool, config: Config) -> Self {
        Conversation {
            epoch,
            turn,
            core_turn: turn,
            auto_response,
            config: Arc::new(config),
            ..Conversation::default()
        }
    }

    /// This conversation, resumed at the core's `(epoch, turn)`: its
    /// configuration always; where its turns stand only if the session is
    /// still at its epoch (a barge-in the stream did not see moved it).
    #[must_use]
    pub(crate) fn resumed(self, (epoch, turn): (u64, u64)) -> Self {
        if self.epoch == epoch {
            return Conversation {
                core_turn: self.core_turn.max(turn),
                turn: self.turn.max(turn),
                ..self
            };
        }
        Conversation::at((epoch, turn), self.auto_response, Config::default())
            .with_config(self.config)
    }

    fn with_config(self, config: Arc<Config>) -> Self {
        Conversation { config, ..self }
    }

    /// The user item of the turn being said: `item_user_<epoch>_<turn>`.
    pub(crate) fn item(&self) -> String {
        format!("item_user_{}_{}", self.epoch, self.turn)
    }

    /// The session object this conversation answers with (`session.created`,
    /// `.updated`, `.resumed`): its configuration where its turns stand,
    /// with the engine's chunk period.
    pub(crate) fn session_object(
        &self,
        id: &str,
        chunk_period_ms: Option<u32>,
    ) -> serde_json::Value {
        crate::protocol::realtime::session_object(
            id,
            self.epoch,
            self.turn,
            &self.config,
            chunk_period_ms,
        )
    }

    /// The pending turn is dropped (cleared, or its input cancelled): its
    /// chunks stay the engine's old turn, and what comes next is a turn
    /// (and an item) of its own.
    pub(crate) fn drop_pending(&mut self) {
        if self.pending {
            self.turn += 1;
        }
        self.pending = false;
        self.take_transcript();
    }

    /// A chunk of the turn said it says `hint`.
    pub(crate) fn heard(&mut self, hint: &str) {
        let repeated = self.transcript.get(self.last_hint..) == Some(hint);
        if hint.is_empty() || repeated || self.transcript.len() + hint.len() > MAX_TRANSCRIPT {
            return;
        }
        self.last_hint = self.transcript.len();
        self.transcript.push_str(hint);
    }

    /// The turn's transcript (trimmed; `None` if it has none), taken at
    /// its commit or dropped with its input.
    pub(crate) fn take_transcript(&mut self) -> Option<String> {
        self.last_hint = 0;
        let taken = std::mem::take(&mut self.transcript);
        let trimmed = taken.trim();
        (!trimmed.is_empty()).then(|| trimmed.to_owned())
    }
}

impl Stream {
    /// Keeps the session's conversation for a resume (a copy of a few
    /// words: the configuration is shared, never compared or copied).
    pub(crate) fn keep(&self, conversation: &Conversation) {
        let mut kept = self
            .conversation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *kept = Some(conversation.clone());
    }

    /// The conversation kept, if a socket held the session here before.
    pub(crate) fn kept(&self) -> Option<Conversation> {
        self.conversation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configured() -> Conversation {
        let mut map = crate::server::stream::SessionConfig::new();
        map.insert("extra_body".into(), json!({"auto_response": true}));
        let config = Config::new(map, &Arc::default()).unwrap();
        Conversation {
            turn: 3,
            core_turn: 2,
            pending: true,
            last_item: Some("item_user_0_2".into()),
            ..Conversation::at((0, 0), true, config)
        }
    }

    #[test]
    fn a_resume_at_the_same_epoch_goes_on_where_the_turns_stood() {
        let resumed = configured().resumed((0, 2));
        assert_eq!(resumed, configured());
        // The core saw a later turn (a chunk applied after the last keep).
        let later = configured().resumed((0, 3));
        assert_eq!((later.turn, later.core_turn), (3, 3));
    }

    #[test]
    fn hints_join_once_each_and_stop_at_the_bound() {
        let mut c = Conversation::default();
        for hint in ["hello", "hello", " wor", "ld ", ""] {
            c.heard(hint);
        }
        assert_eq!(c.take_transcript().as_deref(), Some("hello world"));
        assert_eq!(c.take_transcript(), None);
        c.heard(&"x".repeat(MAX_TRANSCRIPT - 1));
        c.heard("yz");
        assert_eq!(
            c.transcript.len(),
            MAX_TRANSCRIPT - 1,
            "a hint past the bound is dropped"
        );
        c.heard("y");
        assert_eq!(c.transcript.len(), MAX_TRANSCRIPT);
    }

    #[test]
    fn a_resume_past_a_barge_in_keeps_only_the_configuration() {
        let resumed = configured().resumed((1, 2));
        assert_eq!((resumed.epoch, resumed.turn, resumed.core_turn), (1, 2, 2));
        assert!(!resumed.pending && resumed.last_item.is_none());
        assert!(resumed.auto_response);
        assert_eq!(resumed.config, configured().config);
    }
}
