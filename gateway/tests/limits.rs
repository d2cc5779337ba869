//! What one hostile client may cost the gateway, over real sockets: each
//! test is one way of holding on to the server (too many connections, a
//! flood, silence, never reading, hanging at shutdown), the limit that
//! ends it, and another client served throughout.

use duplex_testkit::socket as common;

use std::time::Duration;

use common::{audit_config, chunk, connect, kind, reply, send, start, Ws, ADMIN};
use duplex_gateway::protocol::ServerEvent;
use duplex_gateway::{Config, Limits};
use futures_util::StreamExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

fn with_limits(limits: Limits) -> Config {
    Config {
        limits,
        ..audit_config()
    }
}

/// Opens a session and appends one chunk: the client the attacks must not
/// disturb.
async fn victim(url: &str) -> Ws {
    let mut ws = connect(url).await;
    send(&mut ws, json!({"type": "session.open"})).await;
    assert!(matches!(reply(&mut ws).await, ServerEvent::Opened { .. }));
    send(&mut ws, chunk("v1", 0, 0)).await;
    assert!(matches!(
        reply(&mut ws).await,
        ServerEvent::Appended { seq: 1, .. }
    ));
    ws
}

/// The victim appends its next chunk, as if nothing happened.
async fn still_served(ws: &mut Ws, event_id: &str, seq: u64) {
    send(ws, chunk(event_id, 0, 0)).await;
    let reply = reply(ws).await;
    assert!(
        matches!(reply, ServerEvent::Appended { seq: s, duplicate: false, .. } if s == seq),
        "{reply:?}"
    );
}

/// The gateway's counters and open connections, read as admin.
async fn stats(url: &str) -> (u64, duplex_gateway::stats::Counters) {
    let mut admin = connect(url).await;
    send(
        &mut admin,
        json!({"type": "admin.stats", "admin_token": ADMIN}),
    )
    .await;
    match reply(&mut admin).await {
        ServerEvent::Stats {
            connections,
            counters,
            ..
        } => (connections, *counters),
        other => panic!("expected admin.stats, got {other:?}"),
    }
}

/// Polls `check` every 50 ms for up to 10 s.
async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_ip_cap_are_refused_and_slots_come_back() {
    let (_gw, url, stop, server) = start(with_limits(Limits {
        max_connections_per_ip: 2,
        ..Limits::default()
    }))
    .await;
    let mut first = victim(&url).await;
    let second = connect(&url).await;
    assert!(
        tokio_tungstenite::connect_async(&url).await.is_err(),
        "a third connection from one address is refused"
    );
    still_served(&mut first, "v2", 2).await;
    drop(second);
    // The slot comes back once the server has seen the drop.
    assert!(eventually(|| async { tokio_tungstenite::connect_async(&url).await.is_ok() }).await);
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert!(counters.connections_refused >= 1, "{}", counters.line());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_refused_over_the_rate_and_applies_nothing() {
    let per_second = std::num::NonZeroU32::new(5).expect("nonzero");
    let (_gw, url, stop, server) = start(with_limits(Limits {
        events_per_second: per_second,
        events_burst: per_second,
        ..Limits::default()
    }))
    .await;
    let mut v = victim(&url).await;
    let mut flood = connect(&url).await;
    send(&mut flood, json!({"type": "session.open"})).await;
    assert!(matches!(
        reply(&mut flood).await,
        ServerEvent::Opened { .. }
    ));
    for i in 0..40 {
        send(&mut flood, chunk(&format!("f{i}"), 0, 0)).await;
    }
    let (mut applied, mut limited) = (0, 0);
    for _ in 0..40 {
        match reply(&mut flood).await {
            ServerEvent::Appended { .. } => applied += 1,
            e if kind(&e) == "rate_limited" => limited += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    // The burst (4 left after the open, plus what a second refills) goes
    // through; the rest is refused unread.
    assert!(applied <= 10, "{applied} applied");
    assert_eq!(applied + limited, 40);
    still_served(&mut v, "v2", 2).await;
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.rate_limited, limited);
    assert_eq!(counters.appended, 2 + applied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_closed_and_a_listening_one_is_not() {
    let (_gw, url, stop, server) = start(with_limits(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    }))
    .await;
    let mut silent = connect(&url).await;
    let mut listening = victim(&url).await;
    // The listening client reads (and so answers the server's pings) for
    // four idle timeouts; the silent one neither reads nor sends.
    let read_for = tokio::time::timeout(Duration::from_millis(1_200), async {
        while let Some(Ok(m)) = listening.next().await {
            assert!(!matches!(m, Message::Close(_)), "closed while listening");
        }
    })
    .await;
    assert!(read_for.is_err(), "the listening client's connection ended");
    still_served(&mut listening, "v2", 2).await;
    let code = loop {
        match silent.next().await {
            Some(Ok(Message::Close(frame))) => break frame.map(|f| f.code),
            Some(Ok(_)) => {}
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    assert_eq!(code, Some(CloseCode::Policy));
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert!(counters.idle_closed >= 1, "{}", counters.line());
}

/// A client that asks for large replies and never reads them: the bytes
/// queued for it are bounded, and the connection is cut once the bound or
/// the write deadline is reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_cut() {
    let unlimited = std::num::NonZeroU32::new(1_000_000).expect("nonzero");
    let (_gw, url, stop, server) = start(with_limits(Limits {
        max_outbound_bytes: 64 * 1024,
        write_timeout: Duration::from_millis(500),
        events_per_second: unlimited,
        events_burst: unlimited,
        ..Limits::default()
    }))
    .await;
    let mut v = victim(&url).await;
    // A session with a long audit log, so that each page is large (a full
    // page of 1,000 entries is about 45 KB: 400 of them are more than
    // loopback's socket buffers hold).
    let mut writer = connect(&url).await;
    send(
        &mut writer,
        json!({"type": "session.open", "session_id": "big"}),
    )
    .await;
    assert!(matches!(
        reply(&mut writer).await,
        ServerEvent::Opened { .. }
    ));
    for i in 0..1_000 {
        send(
            &mut writer,
            chunk(&format!("a-fairly-long-event-id-{i:08}"), 0, 0),
        )
        .await;
        assert!(matches!(
            reply(&mut writer).await,
            ServerEvent::Appended { .. }
        ));
    }
    drop(writer);
    let mut hog = connect(&url).await;
    let ask = json!({"type": "session.audit", "session_id": "big", "admin_token": ADMIN});
    for _ in 0..400 {
        // The server may cut the connection before all are sent.
        if futures_util::SinkExt::send(&mut hog, Message::text(ask.to_string()))
            .await
            .is_err()
        {
            break;
        }
    }
    assert!(
        // Open: the victim and the admin asking.
        eventually(|| async { stats(&url).await.0 == 2 }).await,
        "the hog's connection is still open"
    );
    still_served(&mut v, "v2", 2).await;
    drop(hog);
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert!(counters.requests_outstanding() == 0, "{}", counters.line());
}

/// Shutdown ends within its grace however clients behave (one never
/// finishes its handshake, one never reads), and still closes every
/// session and releases every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_its_grace_whatever_clients_do() {
    let (gw, url, stop, server) = start(Config {
        engine: std::sync::Arc::new(duplex_gateway::engine::StandIn {
            interval: Duration::from_millis(1),
            deltas: 1_000_000,
        }),
        ..with_limits(Limits {
            handshake_timeout: Duration::from_secs(600),
            write_timeout: Duration::from_secs(600),
            shutdown_grace: Duration::from_millis(300),
            ..Limits::default()
        })
    })
    .await;
    let half = half_open(&url).await;
    // Stops reading while a response of a million deltas streams at it.
    let mut deaf = victim(&url).await;
    send(
        &mut deaf,
        json!({"type": "input.commit", "epoch": 0, "turn": 0}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    stop.send(()).expect("server running");
    let counters = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("shutdown finished")
        .expect("server task");
    assert_eq!(counters.shutdown_closed, 1, "{}", counters.line());
    assert_eq!(counters.requests_outstanding(), 0, "{}", counters.line());
    assert_eq!(gw.sessions(), 0);
    drop((half, deaf));
}

/// A plain TCP connection to the gateway at `url`.
async fn tcp(url: &str) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(url.trim_start_matches("ws://"))
        .await
        .expect("connect")
}

/// A connection that sends half a handshake and stops.
async fn half_open(url: &str) -> tokio::net::TcpStream {
    let mut half = tcp(url).await;
    half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    half
}

/// Reads from `stream` until the server closes it (or 10 s pass):
/// whether it did.
async fn closed_by_server(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    waited.is_ok()
}

/// A connection that never finishes its handshake is dropped at the
/// handshake timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_open_handshake_is_dropped() {
    let (_gw, url, stop, server) = start(with_limits(Limits {
        handshake_timeout: Duration::from_millis(200),
        ..Limits::default()
    }))
    .await;
    let mut v = victim(&url).await;
    let mut half = half_open(&url).await;
    assert!(closed_by_server(&mut half).await);
    still_served(&mut v, "v2", 2).await;
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.handshakes_timed_out, 1, "{}", counters.line());
}

/// A large frame announced and never finished holds the
/// connection only until the idle timeout: an unfinished message is not
/// activity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_frame_is_dropped_at_the_idle_timeout() {
    let (_gw, url, stop, server) = start(with_limits(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    }))
    .await;
    let mut raw = tcp(&url).await;
    raw.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .expect("handshake");
    // The server's 101 first: a client may send frames only after it
    // (tungstenite refuses data that arrives with the request).
    let mut response = [0u8; 1024];
    let n = tokio::io::AsyncReadExt::read(&mut raw, &mut response)
        .await
        .expect("101");
    assert!(response[..n].starts_with(b"HTTP/1.1 101"));
    // A masked text frame announcing 512 KiB (64-bit length), then 1 KiB
    // of it.
    let mut frame = vec![0x81, 0xff];
    frame.extend_from_slice(&(512u64 << 10).to_be_bytes());
    frame.extend_from_slice(&[1, 2, 3, 4]);
    frame.extend_from_slice(&[b'x'; 1024]);
    raw.write_all(&frame).await.expect("partial frame");
    assert!(closed_by_server(&mut raw).await);
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.idle_closed, 1, "{}", counters.line());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_gateway_names_an_existing_id_first_and_refused_opens_keep_no_slot() {
    let (_gw, url, stop, server) = start(Config {
        max_sessions: 1,
        ..audit_config()
    })
    .await;
    let open = |id: &'static str| json!({"type": "session.open", "session_id": id});
    let mut owner = connect(&url).await;
    send(&mut owner, open("shared")).await;
    assert!(matches!(
        reply(&mut owner).await,
        ServerEvent::Opened { .. }
    ));

    // Full, and the id is taken: the manager's order names the session.
    let mut other = connect(&url).await;
    send(&mut other, open("shared")).await;
    assert_eq!(kind(&reply(&mut other).await), "session_exists");
    send(&mut other, open("another")).await;
    assert_eq!(kind(&reply(&mut other).await), "capacity_exhausted");
    // Refused ten more times: no admission slot is kept by a refusal.
    for _ in 0..10 {
        send(&mut other, open("another")).await;
        assert_eq!(kind(&reply(&mut other).await), "capacity_exhausted");
    }

    // The owner leaves; its one slot is the next open's.
    send(&mut owner, json!({"type": "session.close"})).await;
    assert!(matches!(
        reply(&mut owner).await,
        ServerEvent::Closed { .. }
    ));
    send(&mut other, open("another")).await;
    assert!(matches!(
        reply(&mut other).await,
        ServerEvent::Opened { .. }
    ));
    let _ = stop.send(());
    let _ = server.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_never_committed_is_bounded_and_a_commit_gives_it_back() {
    // Three 640-byte chunks fit, a fourth does not: a client that streams
    // and never commits makes the engine hold at most this much.
    let (_gw, url, stop, server) = start(with_limits(Limits {
        max_pending_input_bytes: 3 * 640,
        ..Limits::default()
    }))
    .await;
    let mut v = victim(&url).await;
    let mut hoarder = connect(&url).await;
    send(&mut hoarder, json!({"type": "session.open"})).await;
    assert!(matches!(
        reply(&mut hoarder).await,
        ServerEvent::Opened { .. }
    ));
    for i in 0..3 {
        send(&mut hoarder, chunk(&format!("h{i}"), 0, 0)).await;
        assert!(matches!(
            reply(&mut hoarder).await,
            ServerEvent::Appended { .. }
        ));
    }
    send(&mut hoarder, chunk("h3", 0, 0)).await;
    let refused = reply(&mut hoarder).await;
    assert_eq!(kind(&refused), "input_backpressure", "{refused:?}");
    // Refused changes nothing: the same chunk is not in the cache, and a
    // retry of an applied one is still answered from it.
    send(&mut hoarder, chunk("h2", 0, 0)).await;
    assert!(matches!(
        reply(&mut hoarder).await,
        ServerEvent::Appended {
            seq: 3,
            duplicate: true,
            ..
        }
    ));
    // The commit hands the turn's audio to the engine: the budget is back.
    send(
        &mut hoarder,
        json!({"type": "input.commit", "epoch": 0, "turn": 0}),
    )
    .await;
    for i in 0..3 {
        send(&mut hoarder, chunk(&format!("n{i}"), 0, 1)).await;
        let r = reply(&mut hoarder).await;
        assert!(
            matches!(
                r,
                ServerEvent::Appended {
                    duplicate: false,
                    ..
                }
            ),
            "{r:?}"
        );
    }
    // A barge-in drops what is pending, too.
    send(
        &mut hoarder,
        json!({"type": "response.cancel", "epoch": 0, "turn": 1}),
    )
    .await;
    assert!(matches!(
        reply(&mut hoarder).await,
        ServerEvent::Cancelled { epoch: 1, .. }
    ));
    send(&mut hoarder, chunk("b0", 1, 1)).await;
    assert!(matches!(
        reply(&mut hoarder).await,
        ServerEvent::Appended { seq: 1, .. }
    ));
    still_served(&mut v, "v2", 2).await;
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.appended, 2 + 3 + 3 + 1);
}
