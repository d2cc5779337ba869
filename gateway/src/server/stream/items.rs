//! The items a realtime session's conversation made, as far back as a
//! client names them: `conversation.item.truncate` of an item the session
//! never made is `item_not_found`, and `output_audio_buffer.clear` names
//! the last response. A bounded record (the last [`KEPT`] items), not the
//! conversation: the engine keeps what it says.

use std::collections::VecDeque;

use super::Stream;
use crate::protocol::realtime::ResponseIds;

/// How many of a session's most recent items are kept.
pub(crate) const KEPT: usize = 64;

/// A session's recent item ids and its last response.
#[derive(Debug, Default)]
pub(super) struct Items {
    recent: VecDeque<String>,
    last_response: Option<String>,
}

impl Items {
    /// The session made the item `id`.
    pub(super) fn made(&mut self, id: &str) {
        if self.recent.len() == KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(id.to_owned());
    }

    /// A response started: its item, and it is the last response.
    pub(super) fn responded(&mut self, ids: &ResponseIds) {
        self.made(&ids.item);
        self.last_response = Some(ids.response.clone());
    }
}

impl Stream {
    /// The client committed the user item `id`.
    pub(crate) async fn made_item(&self, id: &str) {
        self.state.lock().await.items.made(id);
    }

    /// Whether `id` is one of the session's last [`KEPT`] items.
    pub(crate) async fn knows_item(&self, id: &str) -> bool {
        self.state.lock().await.items.recent.iter().any(|i| i == id)
    }

    /// The response in progress (the first by id, if several), else the
    /// last one the session had.
    pub(crate) async fn current_response(&self) -> Option<String> {
        let state = self.state.lock().await;
        let live = state.live.values().map(|l| &l.ids.response).min();
        live.or(state.items.last_response.as_ref()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_keeps_the_last_items_and_response() {
        let mut items = Items::default();
        for n in 0..=KEPT {
            items.made(&format!("item_user_0_{n}"));
        }
        assert_eq!(items.recent.len(), KEPT);
        assert_eq!(
            items.recent.front().map(String::as_str),
            Some("item_user_0_1")
        );
        items.responded(&ResponseIds::of("r9"));
        assert_eq!(
            items.recent.back().map(String::as_str),
            Some("item_resp_r9")
        );
        assert_eq!(items.last_response.as_deref(), Some("resp_r9"));
    }
}
