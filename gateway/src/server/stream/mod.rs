//! A realtime session's server events: numbered, journaled, and sent to
//! whichever socket holds the session now.
//!
//! Every server event of a session goes through its [`Stream`]: the
//! stream gives it the next `server_event_seq` (contiguous across the
//! session's sockets), keeps its text in the journal, and sends it to the
//! attached socket's outbox. The engine's responses go to the stream, not
//! to a socket, so a response keeps being journaled while the client is
//! away, and reaches the socket that resumes.
//!
//! A resume replays exactly the journaled events after the client's
//! cursor, under the stream's lock (no live event can come between), then
//! attaches the new socket. `session.event_ack` trims the journal. The
//! journal is bounded in bytes per session ([`JOURNAL_BYTES`]) and in
//! total ([`Journals`]); events evicted before the client acknowledged
//! them make a later resume from an older cursor impossible, which is
//! answered `session.resync_required`, never a silent gap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::Id;
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::protocol::realtime::{self, ResponseIds};
use crate::server::outbox::Outbox;
use fences::Fences;
use journal::Journal;

/// The most journal bytes one session keeps (about 3,000 text deltas).
pub const JOURNAL_BYTES: usize = 512 * 1024;

/// The most journal bytes all sessions of a gateway keep together.
pub const TOTAL_JOURNAL_BYTES: usize = 256 * 1024 * 1024;

/// Why a resume cannot be served from the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resync {
    /// The client's cursor is older than the oldest kept event (evicted
    /// unacknowledged).
    Overflow,
    /// The client's cursor is ahead of anything sent.
    Gap,
}

impl Resync {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Resync::Overflow => "journal_overflow",
            Resync::Gap => "journal_gap",
        }
    }
}

/// A response being streamed: its ids and its text so far.
#[derive(Debug)]
struct Live {
    ids: ResponseIds,
    text: String,
}

#[derive(Debug, Default)]
struct State {
    /// The next event's number (the first is 1).
    next: u64,
    /// The journaled events, oldest first.
    events: Journal,
    bytes: usize,
    /// The highest seq evicted before it was acknowledged (0: none).
    lost: u64,
    /// The highest seq the client acknowledged.
    acked: u64,
    /// The socket that holds the session, and its attachment number.
    attached: Option<(u64, Outbox)>,
    attachments: u64,
    /// Responses in progress, by engine request id.
    live: HashMap<String, Live>,
    /// The session's recent items and last response (`items.rs`).
    items: items::Items,
    /// On a node of a cluster: where the journal is stored too.
    store: Option<Store>,
    /// The first event of a batch that was numbered but whose emit was
    /// cancelled before it was sent to the attached socket.
    unsent: Option<u64>,
    /// A store write is in progress (if the emit is cancelled during it,
    /// whether the store holds the batch is unknown).
    storing: bool,
    /// The batch being emitted, kept between emits so that numbering one
    /// costs no allocation (an emit cancelled mid-batch leaves a new one).
    batch: Vec<(u64, Utf8Bytes)>,
}

/// The directory a node stores a session's journal in, and the
/// incarnation it owns the session at (every write is fenced by it).
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub(crate) directory: crate::cluster::Directory,
    pub(crate) session: String,
    pub(crate) incarnation: u64,
}

/// The journals' shared byte budget.
#[derive(Debug, Default)]
pub(crate) struct Journals {
    bytes: AtomicUsize,
    /// Bytes of the sessions' configurations, together (`config.rs`).
    pub(crate) config_bytes: Arc<AtomicUsize>,
    streams: Mutex<HashMap<Id, Arc<Stream>>>,
}

impl Journals {
    /// Bytes journaled now over all sessions.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The stream of `session`, made if it has none.
    pub(crate) fn stream(self: &Arc<Self>, session: &Id) -> Arc<Stream> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(streams.entry(session.clone()).or_insert_with(|| {
            Arc::new(Stream {
                journals: Arc::clone(self),
                state: tokio::sync::Mutex::new(State {
                    next: 1,
                    ..State::default()
                }),
                fences: Mutex::default(),
                conversation: Mutex::default(),
            })
        }))
    }

    /// The stream of a session taken over from another node, rebuilt from
    /// the journal that node stored: the same numbers, and the responses
    /// it had in progress (their engine is gone with that node's
    /// requests; [`Stream::fail_live`] ends them).
    pub(crate) fn restore(
        self: &Arc<Self>,
        session: &Id,
        stored: Vec<(u64, String)>,
    ) -> Arc<Stream> {
        let mut state = State {
            next: stored.last().map_or(1, |(seq, _)| seq + 1),
            ..State::default()
        };
        // Only the contiguous run that ends the stored journal can be
        // replayed: a hole in it (events a node sent but could not store)
        // makes every cursor before the hole unservable, so the events
        // before it are dropped and a resume from there is answered
        // `session.resync_required`, never replayed across the hole.
        let run = contiguous_tail(&stored);
        // Everything before the first kept event is gone (acknowledged,
        // evicted, or behind a hole): a cursor before it cannot be served.
        state.lost = stored.get(run).map_or(0, |(seq, _)| seq.saturating_sub(1));
        state.acked = state.lost;
        for (seq, text) in stored.into_iter().skip(run) {
            if let Ok(Value::Object(event)) = serde_json::from_str::<Value>(&text) {
                let response = event.get("response_id").and_then(Value::as_str);
                let request = response.and_then(|r| r.strip_prefix("resp_"));
                match (event.get("type").and_then(Value::as_str), request) {
                    (Some("response.created"), Some(request)) => {
                        state.items.responded(&ResponseIds::of(request));
                        state.live.insert(
                            request.to_owned(),
                            Live {
                                ids: ResponseIds::of(request),
                                text: String::new(),
                            },
                        );
                    }
                    (Some("response.output_text.delta"), Some(request)) => {
                        if let (Some(live), Some(delta)) = (
                            state.live.get_mut(request),
                            event.get("delta").and_then(Value::as_str),
                        ) {
                            live.text.push_str(delta);
                        }
                    }
                    (Some("response.done"), Some(request)) => {
                        state.live.remove(request);
                    }
                    (Some("input_audio_buffer.committed"), _) => {
                        if let Some(item) = event.get("item_id").and_then(Value::as_str) {
                            state.items.made(item);
                        }
                    }
                    _ => {}
                }
            }
            state.bytes += text.len();
            self.bytes.fetch_add(text.len(), Ordering::Relaxed);
            state.events.push(seq, &text);
        }
        let stream = Arc::new(Stream {
            journals: Arc::clone(self),
            state: tokio::sync::Mutex::new(state),
            fences: Mutex::default(),
            conversation: Mutex::default(),
        });
        // The stored journal is the truth: it replaces whatever stream
        // this node had for the session.
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.insert(session.clone(), Arc::clone(&stream));
        stream
    }

    /// The stream of `session`, if it has one.
    pub(crate) fn get(&self, session: &Id) -> Option<Arc<Stream>> {
        let streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.get(session).cloned()
    }

    /// Forgets the stream of a session that is gone; its bytes return to
    /// the budget.
    pub(crate) async fn remove(&self, session: &Id) {
        let stream = {
            let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
            streams.remove(session)
        };
        if let Some(stream) = stream {
            let mut state = stream.state.lock().await;
            self.bytes.fetch_sub(state.bytes, Ordering::Relaxed);
            state.bytes = 0;
            state.events.clear();
        }
    }
}

/// `event`, the text of a JSON object, with `server_event_seq` added as
/// its last member.
fn with_seq(mut event: String, seq: u64) -> String {
    use std::fmt::Write as _;
    let trimmed = event.trim_end().len();
    event.truncate(trimmed);
    debug_assert!(event.starts_with('{') && event.ends_with('}'));
    event.pop();
    let empty = event.trim_end().ends_with('{');
    let _ = write!(
        event,
        "{}\"server_event_seq\":{seq}}}",
        if empty { "" } else { "," }
    );
    event
}

/// Where the last contiguous run of `stored` starts: the index after the
/// last hole in its numbering (0 if it has none).
fn contiguous_tail(stored: &[(u64, String)]) -> usize {
    stored
        .windows(2)
        .rposition(|pair| pair[1].0 != pair[0].0.saturating_add(1))
        .map_or(0, |at| at + 1)
}

/// One realtime session's event stream.
#[derive(Debug)]
pub(crate) struct Stream {
    journals: Arc<Journals>,
    state: tokio::sync::Mutex<State>,
    fences: Mutex<Fences>,
    /// The realtime conversation, for a resume (`conversation`).
    conversation: Mutex<Option<Conversation>>,
}

impl Stream {
    /// Numbers, journals and sends events, in order.
    pub(crate) async fn emit(&self, events: Vec<Value>) {
        let mut state = self.state.lock().await;
        self.emit_locked(&mut state, events.iter().map(realtime::numberable))
            .await;
    }

    /// A connection's answers to its client's events: numbered and
    /// journaled like every event of the session while that connection is
    /// the session's attached socket (`attachment`); once another socket
    /// has resumed the session, they go to the connection's own socket
    /// unnumbered (they answer what that socket sent, which holds the
    /// session no more) and never to the socket that holds it now.
    pub(crate) async fn answer(
        &self,
        attachment: u64,
        own: &Outbox,
        events: impl IntoIterator<Item = String>,
    ) {
        let mut state = self.state.lock().await;
        if state
            .attached
            .as_ref()
            .is_some_and(|(generation, _)| *generation == attachment)
        {
            self.emit_locked(&mut state, events).await;
        } else {
            drop(state);
            for event in events {
                own.send(Message::text(event)).await;
            }
        }
    }

    async fn emit_locked(&self, state: &mut State, events: impl IntoIterator<Item = String>) {
        self.finish_cancelled(state).await;
        let mut numbered = std::mem::take(&mut state.batch);
        for event in events {
            let seq = state.next;
            state.next += 1;
            let text = with_seq(event, seq);
            self.journal(state, seq, &text);
            numbered.push((seq, Utf8Bytes::from(text)));
        }
        let Some(first) = numbered.first().map(|(seq, _)| *seq) else {
            state.batch = numbered;
            return;
        };
        // From here on the batch is numbered and journaled here: should
        // this future be dropped at one of the awaits below (its task
        // aborted), the next emit finishes the batch (`finish_cancelled`).
        state.unsent = Some(first);
        // A node of a cluster stores the events before it sends them, so
        // whatever a client received can be replayed by the node it
        // resumes on. A node that may no longer write (another owns the
        // session now, as during a drain's adoption, or the store does not
        // answer) stops storing and goes on sending (holding events back
        // would stall the client until its timeout); a resume elsewhere
        // then finds the stored journal short of the client's cursor and
        // says so (`session.resync_required`): announced, never silent.
        if let Some(store) = &state.store {
            let entries: Vec<(u64, &str)> =
                numbered.iter().map(|(s, t)| (*s, t.as_str())).collect();
            state.storing = true;
            let stored = store
                .directory
                .journal_append(&store.session, store.incarnation, &entries)
                .await;
            state.storing = false;
            match stored {
                Ok(()) => {}
                // Expected after a takeover: this node's engine finishes a
                // response for a client that resumed elsewhere.
                Err(e @ crate::cluster::DirectoryError::Lost { .. }) => {
                    tracing::debug!(session = %store.session, "journal not stored: {e}");
                    state.store = None;
                }
                Err(e) => {
                    tracing::warn!(session = %store.session, "journal not stored: {e}");
                    state.store = None;
                }
            }
        }
        // The socket's outbox is borrowed, not cloned (a clone is a channel
        // sender and three counts: ten atomic operations an emit).
        if let Some((_, outbox)) = &state.attached {
            for (seq, text) in numbered.drain(..) {
                outbox.send(Message::Text(text)).await;
                state.unsent = Some(seq + 1);
            }
        }
        numbered.clear();
        state.batch = numbered;
        state.unsent = None;
    }

    /// Finishes a batch whose emit was cancelled (the future dropped at an
    /// await, its task aborted): its events, numbered and journaled here,
    /// go to the attached socket before anything newer, so the socket
    /// never gets a number without the ones before it; and if the store
    /// was being written, whether it holds them is unknown, so this
    /// stream stores no more (a resume elsewhere is answered from what the
    /// store holds, or told `session.resync_required`).
    async fn finish_cancelled(&self, state: &mut State) {
        if state.storing {
            state.storing = false;
            if let Some(store) = state.store.take() {
                tracing::warn!(session = %store.session, "journal write cancelled; not storing any more");
            }
        }
        let Some(from) = state.unsent else { return };
        if let Some((_, outbox)) = &state.attached {
            let pending: Vec<(u64, String)> = state.events.texts_from(from).collect();
            if pending.first().is_some_and(|(seq, _)| *seq != from) {
                // Evicted meanwhile: this socket cannot be made whole. It
                // hears nothing more, and its client resumes.
                state.attached = None;
                state.unsent = None;
                return;
            }
            for (seq, text) in pending {
                outbox.send(Message::text(text)).await;
                state.unsent = Some(seq + 1);
            }
        }
        state.unsent = None;
    }

    /// Stores this stream's events in `store` from now on.
    pub(crate) async fn store_in(&self, store: Store) {
        self.state.lock().await.store = Some(store);
    }

    /// Whether every event of this stream is stored, at `incarnation`:
    /// it stores there and no write of it has failed (a failed write
    /// stops its storing for good, so the stored journal would lack what
    /// it numbered since).
    pub(crate) async fn stores_at(&self, incarnation: u64) -> bool {
        self.state
            .lock()
            .await
            .store
            .as_ref()
            .is_some_and(|s| s.incarnation == incarnation)
    }

    /// Keeps `text` in the journal, evicting the oldest events over the
    /// session's bound or the gateway's.
    fn journal(&self, state: &mut State, seq: u64, text: &str) {
        let len = text.len();
        state.events.push(seq, text);
        state.bytes += len;
        self.journals.bytes.fetch_add(len, Ordering::Relaxed);
        while state.bytes > JOURNAL_BYTES
            || (self.journals.bytes() > TOTAL_JOURNAL_BYTES && state.events.len() > 1)
        {
            let Some((old, len)) = state.events.pop_front() else {
                break;
            };
            state.bytes -= len;
            self.journals.bytes.fetch_sub(len, Ordering::Relaxed);
            if old > state.acked {
                state.lost = state.lost.max(old);
            }
        }
    }

    /// The client has everything up to `seq`: drop it from the journal.
    ///
    /// # Errors
    ///
    /// The number of the last event, if `seq` is past it (nothing is
    /// dropped: a client cannot hold an event that was never sent).
    pub(crate) async fn ack(&self, seq: u64) -> Result<(), u64> {
        let mut state = self.state.lock().await;
        let head = state.next.saturating_sub(1);
        if seq > head {
            return Err(head);
        }
        state.acked = state.acked.max(seq);
        if let Some(store) = &state.store {
            if let Err(e) = store
                .directory
                .journal_trim(&store.session, store.incarnation, seq)
                .await
            {
                tracing::warn!(session = %store.session, "journal not trimmed: {e}");
            }
        }
        while state.events.first().is_some_and(|s| s <= seq) {
            if let Some((_, len)) = state.events.pop_front() {
                state.bytes -= len;
                self.journals.bytes.fetch_sub(len, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Attaches `outbox` as the session's socket, first sending `head`
    /// (if given; not journaled: it describes the attachment) and replaying every
    /// journaled event after `cursor`. Returns the attachment number and
    /// the socket it replaced; `Err` if the journal cannot serve `cursor`
    /// (nothing is attached then).
    pub(crate) async fn attach(
        &self,
        outbox: Outbox,
        cursor: Option<u64>,
        head: Option<impl FnOnce(u64) -> Value>,
    ) -> Result<(u64, Option<Outbox>), Resync> {
        let mut state = self.state.lock().await;
        if let Some(cursor) = cursor {
            let last = state.next.saturating_sub(1);
            if cursor > last {
                return Err(Resync::Gap);
            }
            // Everything after the cursor must still be here.
            let first = state.events.first().unwrap_or(state.next);
            if cursor.saturating_add(1) < first {
                return Err(if state.lost > cursor {
                    Resync::Overflow
                } else {
                    Resync::Gap
                });
            }
            // And in one run, up to the last number given: a replay is
            // the client's events in order or nothing.
            let mut expected = cursor.saturating_add(1);
            for seq in state.events.seqs().filter(|s| *s > cursor) {
                if seq != expected {
                    return Err(Resync::Gap);
                }
                expected += 1;
            }
            if expected != state.next {
                return Err(Resync::Gap);
            }
        }
        // The new socket gets everything after its cursor from the
        // journal: a cancelled emit's batch included.
        state.unsent = None;
        if state.storing {
            state.storing = false;
            state.store = None;
        }
        state.attachments += 1;
        let generation = state.attachments;
        if let Some(head) = head {
            outbox
                .send(Message::text(head(generation).to_string()))
                .await;
        }
        if let Some(cursor) = cursor {
            let replay: Vec<(u64, String)> =
                state.events.texts_from(cursor.saturating_add(1)).collect();
            for (_, text) in replay {
                outbox.send(Message::text(text)).await;
            }
        }
        let previous = state.attached.replace((generation, outbox)).map(|(_, o)| o);
        Ok((generation, previous))
    }

    /// The socket `generation` went away: events are journaled only.
    pub(crate) async fn detach(&self, generation: u64) {
        let mut state = self.state.lock().await;
        if state
            .attached
            .as_ref()
            .is_some_and(|(g, _)| *g == generation)
        {
            state.attached = None;
            state.events.spare();
        }
    }

    /// A response starts: its opening events.
    pub(crate) async fn open_response(&self, request: &str, epoch: u64, turn: u64) {
        let mut state = self.state.lock().await;
        let ids = ResponseIds::of(request);
        let events = realtime::response_opened(&ids, epoch, turn);
        state.items.responded(&ids);
        state.live.insert(
            request.to_owned(),
            Live {
                ids,
                text: String::new(),
            },
        );
        self.emit_locked(&mut state, events).await;
    }

    /// A piece of a response; dropped once the response ended (a barge-in
    /// got there first).
    pub(crate) async fn delta(&self, request: &str, text: &str) {
        let mut state = self.state.lock().await;
        let Some(live) = state.live.get_mut(request) else {
            return;
        };
        live.text.push_str(text);
        let event = realtime::text_delta(&live.ids, text);
        self.emit_locked(&mut state, [event]).await;
    }

    /// A piece of a response's audio, base64; dropped once the response
    /// ended.
    pub(crate) async fn audio(&self, request: &str, base64: &str) {
        let mut state = self.state.lock().await;
        let Some(live) = state.live.get(request) else {
            return;
        };
        let event = realtime::audio_delta(&live.ids, base64);
        self.emit_locked(&mut state, [event]).await;
    }

    /// A response ends (`completed`, or `cancelled` with the reason); once.
    pub(crate) async fn end_response(&self, request: &str, status: &str, reason: Option<&str>) {
        let mut state = self.state.lock().await;
        let Some(live) = state.live.remove(request) else {
            return;
        };
        let events = realtime::response_ended(&live.ids, &live.text, status, reason);
        self.emit_locked(&mut state, events).await;
    }

    /// Ends every response in progress as `failed` (their engine went
    /// with the node that had them).
    pub(crate) async fn fail_live(&self, reason: &str) {
        self.end_all("failed", reason).await;
    }

    /// Ends every response in progress as cancelled (a barge-in or a
    /// close): each gets its `response.done` once.
    pub(crate) async fn cancel_all(&self, reason: &str) {
        self.end_all("cancelled", reason).await;
    }

    /// Ends every response in progress with `status` and `reason`, in
    /// the order of their ids.
    async fn end_all(&self, status: &str, reason: &str) {
        let mut state = self.state.lock().await;
        let mut live: Vec<Live> = state.live.drain().map(|(_, l)| l).collect();
        live.sort_by(|a, b| a.ids.response.cmp(&b.ids.response));
        for l in live {
            let events = realtime::response_ended(&l.ids, &l.text, status, Some(reason));
            self.emit_locked(&mut state, events).await;
        }
    }

    /// The fence the chunk `key` was first appended at, if it is recent.
    /// Apart from the stream's state, under a lock never held across an
    /// await: a chunk takes no turn on the stream's queue for it.
    pub(crate) fn fence_of(&self, key: &Id) -> Option<(u64, u64)> {
        let fences = self.fences.lock().unwrap_or_else(PoisonError::into_inner);
        fences.get(key)
    }

    /// Remembers the fence the chunk `key` was appended at.
    pub(crate) fn remember_fence(&self, key: Id, fence: (u64, u64)) {
        let mut fences = self.fences.lock().unwrap_or_else(PoisonError::into_inner);
        fences.remember(key, fence);
    }

    /// Whether a response is in progress.
    pub(crate) async fn responding(&self) -> bool {
        !self.state.lock().await.live.is_empty()
    }

    /// The number of the last event, and how many bytes are journaled.
    pub(crate) async fn position(&self) -> (u64, usize) {
        let state = self.state.lock().await;
        (state.next.saturating_sub(1), state.bytes)
    }
}

/// A `session.update`'s `session` object, kept to echo.
pub(crate) type SessionConfig = Map<String, Value>;

pub(crate) use config::Config;
pub(crate) use conversation::Conversation;
pub(crate) use items::KEPT as KEPT_ITEMS;

mod config;
mod conversation;
mod fences;
mod items;
mod journal;
#[cfg(test)]
mod tests;
