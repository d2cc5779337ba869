//! One client's socket: the read loop that feeds a [`Connection`], the
//! writer that drains its [`Outbox`](crate::server::outbox::Outbox), and the limits on both (rate,
//! idleness with server pings, write deadline, queued bytes), and the
//! close codes of RFC 6455 when a limit or the transport ends it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::{FutureExt, SinkExt, StreamExt};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use crate::protocol::ProtocolError;
use crate::server::connection::{Connection, Dialect};
use crate::server::outbox::Outbox;
use crate::server::state::Shared;
use crate::stats::bump;

/// How long a closing connection waits for the client's close frame.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// How many messages already read are answered after one the select
/// woke for, before the select runs again.
const DRAIN: usize = 16;

/// How a connection's read loop ended.
enum End {
    /// The server is shutting down.
    Shutdown,
    /// The client closed, the socket ended, or the writer gave up on a
    /// client that stopped reading.
    Dropped,
    /// The transport failed or the client broke its rules.
    Broken(WsError),
    /// The client sent nothing for the idle timeout.
    Idle,
    /// More bytes queued for the client than the bound.
    Overflow,
    /// One write took longer than the write deadline.
    Stalled,
}

/// Milliseconds from `epoch` to now.
fn millis_since(epoch: Instant) -> u64 {
    millis(epoch.elapsed())
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A close frame.
fn close(code: CloseCode, reason: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

/// The close frame owed for a transport error, if the socket can still
/// carry one: 1009 for a message or frame over the limit, 1007 for text
/// that is not UTF-8, 1002 for any other protocol violation.
fn broken(e: &WsError) -> Option<Message> {
    match e {
        WsError::Capacity(_) => Some(close(CloseCode::Size, "message over the 1 MiB limit")),
        WsError::Utf8(_) => Some(close(CloseCode::Invalid, "text message is not UTF-8")),
        WsError::Protocol(_) => Some(close(CloseCode::Protocol, "WebSocket protocol violation")),
        _ => None,
    }
}

/// Resolves once the server is shutting down.
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, before any await.
    let _ = stopped.wait_for(|s| *s).await;
}

/// Runs a connection until the client closes or drops it, a limit ends
/// it, or the server shuts down.
pub(crate) async fn run<S>(
    shared: Arc<Shared>,
    ws: WebSocketStream<S>,
    principal: Option<String>,
    dialect: Dialect,
    mut stopped: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let realtime = matches!(dialect, Dialect::Realtime { .. });
    let limits = shared.config.limits;
    let (mut sink, mut source) = ws.split();
    let (outbox, mut rx) = Outbox::new(limits.max_outbound_bytes);
    // When the write in progress started, in ms since `epoch` (0: none).
    // The reader's tick checks it against the write deadline: a timer per
    // message written would cost more than the write.
    let epoch = Instant::now();
    let writing_since = Arc::new(AtomicU64::new(0));
    let mut writer = {
        // Only the count: a sender here would keep the queue open forever.
        let queued = Arc::clone(&outbox.queued);
        let writing_since = Arc::clone(&writing_since);
        let shared = Arc::clone(&shared);
        let count = move |message: &Message| {
            if let Message::Text(text) = message {
                shared.metrics.written(realtime, text.as_str());
            }
        };
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                writing_since.store(millis_since(epoch).max(1), Ordering::Relaxed);
                // Whatever else is queued goes out in the same write: under
                // load one syscall carries several events.
                let mut len = first.len();
                count(&first);
                let mut fed = sink.feed(first).await;
                while fed.is_ok() {
                    let Ok(more) = rx.try_recv() else { break };
                    len += more.len();
                    count(&more);
                    fed = sink.feed(more).await;
                }
                let sent = match fed {
                    Ok(()) => sink.flush().await,
                    Err(e) => Err(e),
                };
                writing_since.store(0, Ordering::Relaxed);
                queued.fetch_sub(len, Ordering::Relaxed);
                if sent.is_err() {
                    return;
                }
            }
            let _ = timeout(limits.write_timeout, sink.close()).await;
        })
    };
    let rate: DefaultDirectRateLimiter = RateLimiter::direct(
        Quota::per_second(limits.events_per_second).allow_burst(limits.events_burst),
    );
    // Idleness and the write deadline are checked at each tick: a silent
    // connection ends between one and one and a third idle timeouts, a
    // stalled write between one and one and a half write deadlines, and a
    // message costs no timer.
    let mut pings = tokio::time::interval(limits.tick());
    pings.reset();
    let mut heard = Instant::now();
    // The futures that outlive one message are made once, not per message
    // (each would register a waiter or a timer every time round).
    let overflow = Arc::clone(&outbox.overflow);
    let overflowed = overflow.notified();
    tokio::pin!(overflowed);
    let stop = until_stopped(&mut stopped);
    tokio::pin!(stop);
    let mut conn = Connection::speaking(Arc::clone(&shared), outbox.clone(), principal, dialect);
    conn.started().await;
    let end = loop {
        tokio::select! {
            () = &mut stop => break End::Shutdown,
            _ = &mut writer => break End::Dropped,
            () = &mut overflowed => break End::Overflow,
            _ = pings.tick() => {
                if heard.elapsed() >= limits.idle_timeout {
                    break End::Idle;
                }
                let since = writing_since.load(Ordering::Relaxed);
                if since != 0 && millis_since(epoch).saturating_sub(since) >= millis(limits.write_timeout) {
                    break End::Stalled;
                }
                outbox.offer(Message::Ping(tokio_tungstenite::tungstenite::Bytes::new()));
            }
            message = source.next() => {
                heard = Instant::now();
                let mut next = Some(message);
                let mut ended = None;
                let mut drained = 0;
                while let Some(message) = next.take() {
                    match message {
                        Some(Ok(Message::Text(text))) => {
                            let events = cost(text.len());
                            // At most the burst: a large message is slow
                            // to come again, never refused for good.
                            let n = events.min(limits.events_burst);
                            if text.len() > crate::protocol::MAX_MESSAGE {
                                // A large message waits for its budget and
                                // the gateway's, and nothing more is read
                                // meanwhile: its sender is held back by TCP
                                // instead of costing the gateway its bytes.
                                // A shutdown does not wait for it.
                                let budgets = async {
                                    let _ = rate.until_n_ready(n).await;
                                    let _ = shared.large_messages.until_n_ready(events).await;
                                };
                                tokio::select! {
                                    () = budgets => conn.on_text(text.as_str()).await,
                                    () = &mut stop => ended = Some(End::Shutdown),
                                }
                            } else if rate.check_n(n).is_ok_and(|r| r.is_ok()) {
                                conn.on_text(text.as_str()).await;
                            } else {
                                conn.rate_limited().await;
                            }
                        }
                        Some(Ok(Message::Binary(_))) => {
                            let refusal = conn.protocol_error(&ProtocolError::Binary);
                            conn.send(refusal).await;
                        }
                        Some(Ok(Message::Close(_))) | None => ended = Some(End::Dropped),
                        Some(Err(e)) => ended = Some(End::Broken(e)),
                        Some(Ok(_)) => {} // ping, pong: tungstenite answers pings
                    }
                    // Messages the last read brought along (a client that
                    // batches its writes sends a chunk and its heartbeat
                    // in one) are answered without a round of the select;
                    // a few at most, so the other arms are never starved.
                    // The poll either finds one ready or leaves the socket
                    // to the select's own poll, which registers the task.
                    if ended.is_none() && drained < DRAIN {
                        drained += 1;
                        next = source.next().now_or_never();
                    }
                }
                if let Some(end) = ended {
                    break end;
                }
            }
        }
    };
    match end {
        End::Shutdown => {
            conn.stop_responses();
            // Else the writer would wait for the stream to let go of the
            // outbox, and the shutdown for the writer, a whole grace.
            conn.leave_stream().await;
            if let Some(moved) = conn.moved() {
                outbox.offer(Message::text(moved.to_json()));
            }
            outbox.offer(close(CloseCode::Away, "server shutting down"));
            drop((conn, outbox));
            // The close frame goes out unless the client stopped reading;
            // the write deadline bounds the wait.
            let _ = timeout(limits.write_timeout, writer).await;
            return;
        }
        End::Dropped => {}
        End::Broken(e) => {
            // The client broke the transport's rules: say which, with the
            // code RFC 6455 gives it, then end as a drop.
            if let Some(frame) = broken(&e) {
                outbox.offer(frame);
            }
            tracing::debug!("connection broken: {e}");
        }
        End::Idle => {
            bump(&shared.stats.idle_closed);
            outbox.offer(close(CloseCode::Policy, "idle timeout"));
            // The closing handshake: the client's last frames (pongs) and
            // its close are read, so that it sees the close frame rather
            // than a reset; a client that does not answer is let go.
            let _ = timeout(LINGER, async {
                while let Some(Ok(message)) = source.next().await {
                    if message.is_close() {
                        break;
                    }
                }
            })
            .await;
        }
        End::Overflow | End::Stalled => {
            // Nothing more can reach a client that does not read: cut it.
            bump(&shared.stats.slow_dropped);
            writer.abort();
        }
    }
    conn.dropped().await;
}

/// What a message of `len` bytes costs of its connection's event budget:
/// one event for each [`MAX_MESSAGE`](crate::protocol::MAX_MESSAGE) begun.
/// A `session.update` carrying a reference voice is read and echoed whole,
/// so a client sending them as fast as its budget of small events allows
/// would take as much of the gateway as many clients do.
fn cost(len: usize) -> std::num::NonZeroU32 {
    let events = len.div_ceil(crate::protocol::MAX_MESSAGE).max(1);
    std::num::NonZeroU32::new(u32::try_from(events).unwrap_or(u32::MAX))
        .unwrap_or(std::num::NonZeroU32::MIN)
}
