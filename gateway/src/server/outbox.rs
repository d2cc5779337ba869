//! What a connection sends to its client: the outbox its writer drains
//! (`transport`), bounded in messages and in bytes. The connection, the
//! engine seam and the transport all hold one; it depends on none of them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Message;

/// Messages queued per connection before a sender waits (the bytes are
/// bounded separately, by `Limits::max_outbound_bytes`).
const QUEUE: usize = 256;

/// What a connection sends to its client: a queue bounded in messages and
/// in bytes. A client that lets more than the byte bound pile up is cut
/// off (it is not reading), instead of growing the gateway.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<Message>,
    pub(super) queued: Arc<AtomicUsize>,
    limit: usize,
    pub(super) overflow: Arc<Notify>,
    /// Set by the first message dropped; never cleared.
    overflowed: Arc<AtomicBool>,
}

impl Outbox {
    /// An outbox of at most `limit` queued bytes, and the receiving end
    /// its writer drains.
    pub(crate) fn new(limit: usize) -> (Self, mpsc::Receiver<Message>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let outbox = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            limit,
            overflow: Arc::new(Notify::new()),
            overflowed: Arc::new(AtomicBool::new(false)),
        };
        (outbox, rx)
    }

    /// Queues `message`; drops it, and flags the connection to be cut, if
    /// it would take the queue over its byte bound. Waits only while the
    /// queue is full of messages.
    pub(crate) async fn send(&self, message: Message) {
        // Once one message was dropped, every later one is too: the
        // client must never receive a stream with a hole in it (it is cut
        // off, and resumes from the last event it did receive).
        if self.overflowed.load(Ordering::Relaxed) {
            return;
        }
        let len = message.len();
        if self.queued.fetch_add(len, Ordering::Relaxed) + len > self.limit {
            self.queued.fetch_sub(len, Ordering::Relaxed);
            self.overflowed.store(true, Ordering::Relaxed);
            self.overflow.notify_one();
            return;
        }
        if self.tx.send(message).await.is_err() {
            // The writer is gone: the socket is, too.
            self.queued.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// Queues `message` if there is room now (a close frame on the way
    /// out: never waits).
    pub(super) fn offer(&self, message: Message) {
        let len = message.len();
        if self.tx.try_send(message).is_ok() {
            self.queued.fetch_add(len, Ordering::Relaxed);
        }
    }
}
