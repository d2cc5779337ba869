//! The gateway over real sockets on loopback: a scripted conversation that
//! checks every event of the protocol, a small load with every fault
//! (nothing lost, nothing applied twice), and shutdown releasing what is
//! left.

use duplex_testkit::socket as common;

use std::num::NonZeroU32;
use std::time::Duration;

use common::{audit_config, chunk, kind, next, reply, send, start, ADMIN};
use duplex_gateway::protocol::{ServerEvent, MAX_MESSAGE};
use duplex_gateway::Config;
use duplex_loadgen::{self as loadgen, Report};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_walks_every_event_of_the_protocol() {
    // Responses slow enough that a barge-in sent right after its commit
    // always finds the response streaming, however loaded the machine.
    let (gw, url, stop, server) = start(Config {
        engine: std::sync::Arc::new(duplex_gateway::engine::StandIn {
            deltas: 2,
            interval: Duration::from_millis(200),
        }),
        ..audit_config()
    })
    .await;
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("connect");

    // Open.
    send(
        &mut ws,
        json!({"type": "session.open", "session_id": "call-1"}),
    )
    .await;
    let ServerEvent::Opened {
        session_id,
        resume_token,
        resumed: false,
        epoch: 0,
        turn: 0,
        ..
    } = reply(&mut ws).await
    else {
        panic!("expected session.opened");
    };
    assert_eq!(session_id, "call-1");
    send(&mut ws, json!({"type": "session.open"})).await;
    assert_eq!(kind(&reply(&mut ws).await), "already_open");

    // Appends, and a retransmission answered from the cache.
    for (i, id) in ["a", "b"].iter().enumerate() {
        send(&mut ws, chunk(id, 0, 0)).await;
        let expected = ServerEvent::Appended {
            event_id: (*id).into(),
            seq: i as u64 + 1,
            turn_seq: i as u64 + 1,
            duplicate: false,
        };
        assert_eq!(reply(&mut ws).await, expected);
    }
    send(&mut ws, chunk("a", 0, 0)).await;
    assert_eq!(
        reply(&mut ws).await,
        ServerEvent::Appended {
            event_id: "a".into(),
            seq: 1,
            turn_seq: 1,
            duplicate: true
        }
    );

    // Commit: the response streams, then completes.
    send(
        &mut ws,
        json!({"type": "input.commit", "epoch": 0, "turn": 0}),
    )
    .await;
    let ServerEvent::Delta {
        request_id,
        index: 0,
        ..
    } = next(&mut ws).await
    else {
        panic!("expected a delta")
    };
    assert!(matches!(
        next(&mut ws).await,
        ServerEvent::Delta { index: 1, .. }
    ));
    assert_eq!(
        next(&mut ws).await,
        ServerEvent::Done {
            request_id,
            epoch: 0,
            turn: 0
        }
    );

    // Commit, then barge in: the response is cancelled and listed.
    send(&mut ws, chunk("c", 0, 1)).await;
    assert!(matches!(
        reply(&mut ws).await,
        ServerEvent::Appended {
            seq: 3,
            turn_seq: 1,
            ..
        }
    ));
    send(
        &mut ws,
        json!({"type": "input.commit", "epoch": 0, "turn": 1}),
    )
    .await;
    send(
        &mut ws,
        json!({"type": "response.cancel", "epoch": 0, "turn": 1}),
    )
    .await;
    let ServerEvent::Cancelled {
        epoch: 1,
        turn: 1,
        request_ids,
    } = reply(&mut ws).await
    else {
        panic!("expected response.cancelled");
    };
    assert_eq!(request_ids.len(), 1);
    // A late chunk of the cancelled epoch is refused; the new epoch starts
    // its own sequence.
    send(&mut ws, chunk("late", 0, 1)).await;
    let late = reply(&mut ws).await;
    assert_eq!(kind(&late), "fence_mismatch");
    assert!(matches!(late, ServerEvent::Error { event_id: Some(ref e), .. } if e == "late"));
    send(&mut ws, chunk("d", 1, 2)).await;
    assert!(matches!(
        reply(&mut ws).await,
        ServerEvent::Appended { seq: 1, .. }
    ));

    // Garbage of every kind is refused and the connection stays usable.
    for (message, expected) in [
        (Message::text("{"), "malformed"),
        (Message::text(r#"{"type":"nope"}"#), "unknown_type"),
        (Message::text("x".repeat(MAX_MESSAGE + 1)), "too_large"),
        (Message::binary(vec![1, 2, 3]), "binary_unsupported"),
        (
            Message::text(chunk("e", 1, 2).to_string().replace("AQEB", "%%%%")),
            "invalid_audio",
        ),
        (
            Message::text(
                chunk(&"x".repeat(duplex_gateway::profile::ID_LEN + 1), 1, 2).to_string(),
            ),
            "invalid_id",
        ),
        (
            Message::text(json!({"type": "session.open", "resume_token": "x"}).to_string()),
            "already_open",
        ),
    ] {
        ws.send(message).await.expect("send");
        assert_eq!(kind(&reply(&mut ws).await), expected);
    }

    // Drop the socket: the session waits for a resume. A wrong token is
    // refused; the right one resumes where the session was, and hands out
    // the next token.
    drop(ws);
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("reconnect");
    send(&mut ws, chunk("early", 1, 2)).await;
    assert_eq!(kind(&reply(&mut ws).await), "no_session");
    send(
        &mut ws,
        json!({"type": "session.open", "session_id": "call-1", "resume_token": "guess"}),
    )
    .await;
    assert_eq!(kind(&reply(&mut ws).await), "resume_refused");
    send(
        &mut ws,
        json!({"type": "session.open", "session_id": "call-1", "resume_token": resume_token}),
    )
    .await;
    let ServerEvent::Opened {
        session_id,
        incarnation: 0,
        epoch: 1,
        turn: 2,
        resume_token: next_token,
        resumed: true,
    } = reply(&mut ws).await
    else {
        panic!("expected the session resumed")
    };
    assert_eq!(session_id, "call-1");
    assert_ne!(next_token, resume_token);
    send(&mut ws, chunk("d", 1, 2)).await;
    assert!(matches!(
        reply(&mut ws).await,
        ServerEvent::Appended {
            seq: 1,
            duplicate: true,
            ..
        }
    ));

    // The audit log holds every chunk applied, once, in order.
    send(
        &mut ws,
        json!({"type": "session.audit", "session_id": "call-1", "admin_token": ADMIN}),
    )
    .await;
    let ServerEvent::Audit { applied, .. } = reply(&mut ws).await else {
        panic!("expected session.audit")
    };
    let ids: Vec<(u64, u64, &str)> = applied
        .iter()
        .map(|(e, s, id)| (*e, *s, id.as_str()))
        .collect();
    assert_eq!(ids, [(0, 1, "a"), (0, 2, "b"), (0, 3, "c"), (1, 1, "d")]);

    // Close.
    send(&mut ws, json!({"type": "session.close"})).await;
    assert_eq!(
        reply(&mut ws).await,
        ServerEvent::Closed {
            session_id: "call-1".into(),
            request_ids: vec![]
        }
    );
    send(
        &mut ws,
        json!({"type": "admin.stats", "admin_token": ADMIN}),
    )
    .await;
    let ServerEvent::Stats {
        sessions: 0,
        connections: 1,
        counters,
    } = reply(&mut ws).await
    else {
        panic!("expected admin.stats")
    };
    assert_eq!(
        (
            counters.appended,
            counters.duplicates,
            counters.responses_done
        ),
        (4, 2, 1)
    );
    assert_eq!(
        (counters.requests_cancelled, counters.requests_outstanding()),
        (1, 0)
    );

    drop(ws);
    stop.send(()).expect("server running");
    let counters = server.await.expect("server task");
    assert_eq!(counters.closed, 1);
    assert_eq!(gw.sessions(), 0);
}

/// Fifty clients, each authenticated as its own principal, with every
/// fault and every defence on (the default limits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_clients_with_every_fault_lose_nothing_and_apply_nothing_twice() {
    const SECRET: &str = "loopback signing key";
    let (gw, url, stop, server) = start(Config {
        auth_secret: Some(SECRET.into()),
        ..audit_config()
    })
    .await;
    let mut config = loadgen::Config::new(url, 50, Duration::from_secs(5));
    config.grace = Duration::from_secs(1);
    config.admin_token = Some(ADMIN.into());
    config.auth_secret = Some(SECRET.into());
    let report: Report = loadgen::run(config).await.expect("loopback url");
    println!("{}\n{}", report.detail(), report.line());
    assert_eq!((report.lost, report.doubled), (0, 0), "{}", report.line());
    assert_eq!(report.unexpected, 0, "{}", report.detail());
    assert_eq!(report.unreconciled, 0, "{:?}", report.failures());
    assert!(report.ok());
    // Every fault happened.
    assert!(report.reconnects > 0 && report.expired > 0 && report.duplicates > 0);
    assert!(report.stale_refused > 0 && report.resumes_refused > 0);
    assert!(report.garbage_refused > 0 && report.barge_ins > 0 && report.responses > 0);
    assert!(report.appended > 1_000, "{}", report.line());

    stop.send(()).expect("server running");
    let counters = server.await.expect("server task");
    // The server's view agrees with the clients' ledgers.
    assert_eq!(counters.appended, report.appended);
    assert_eq!(counters.duplicates, report.duplicates);
    assert_eq!(counters.opened, report.sessions);
    assert_eq!(counters.expired, report.expired);
    // Every engine request was released exactly once, and nothing is left.
    assert_eq!(counters.requests_outstanding(), 0, "{}", counters.line());
    assert_eq!(gw.sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_every_session_and_releases_its_requests() {
    let config = Config {
        engine: std::sync::Arc::new(duplex_gateway::engine::StandIn {
            deltas: 2,
            interval: Duration::from_secs(60),
        }),
        ..audit_config()
    };
    let (gw, url, stop, server) = start(config).await;
    let mut clients = Vec::new();
    for i in 0..3 {
        let (mut ws, _) = tokio_tungstenite::connect_async(&url)
            .await
            .expect("connect");
        send(&mut ws, json!({"type": "session.open"})).await;
        assert!(matches!(reply(&mut ws).await, ServerEvent::Opened { .. }));
        send(&mut ws, chunk(&format!("e{i}"), 0, 0)).await;
        assert!(matches!(reply(&mut ws).await, ServerEvent::Appended { .. }));
        // A response that will not finish before shutdown.
        send(
            &mut ws,
            json!({"type": "input.commit", "epoch": 0, "turn": 0}),
        )
        .await;
        clients.push(ws);
    }
    // One client drops: its session waits in grace.
    drop(clients.pop());
    send(
        &mut clients[0],
        json!({"type": "admin.stats", "admin_token": ADMIN}),
    )
    .await;
    assert!(matches!(
        reply(&mut clients[0]).await,
        ServerEvent::Stats { sessions: 3, .. }
    ));

    stop.send(()).expect("server running");
    // The connected clients are told, with a close frame.
    for ws in &mut clients {
        let closed = loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => break frame,
                Some(Ok(_)) => {}
                other => panic!("expected a close frame, got {other:?}"),
            }
        };
        assert_eq!(
            closed.map(|f| f.reason.to_string()).as_deref(),
            Some("server shutting down")
        );
    }
    let counters = server.await.expect("server task");
    assert_eq!(counters.shutdown_closed, 3);
    assert_eq!((counters.requests_bound, counters.requests_closed), (3, 3));
    assert_eq!(counters.requests_outstanding(), 0);
    assert_eq!(gw.sessions(), 0);
}

/// A takeover: a second socket resumes the session while the first is
/// still connected. The first socket's close is refused
/// (`generation_mismatch`, checked under the lock that would close) and
/// the session stays with the second, which goes on appending and closes
/// it itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_socket_cannot_close_the_session_it_lost() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let (mut old, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("connect");
    send(
        &mut old,
        json!({"type": "session.open", "session_id": "call-9"}),
    )
    .await;
    let ServerEvent::Opened { resume_token, .. } = reply(&mut old).await else {
        panic!("expected session.opened")
    };
    let (mut new, _) = tokio_tungstenite::connect_async(&url)
        .await
        .expect("connect");
    send(
        &mut new,
        json!({"type": "session.open", "session_id": "call-9", "resume_token": resume_token}),
    )
    .await;
    assert!(matches!(
        reply(&mut new).await,
        ServerEvent::Opened { resumed: true, .. }
    ));
    send(&mut old, json!({"type": "session.close"})).await;
    assert_eq!(kind(&reply(&mut old).await), "generation_mismatch");
    send(&mut new, chunk("after-takeover", 0, 0)).await;
    assert!(matches!(
        reply(&mut new).await,
        ServerEvent::Appended {
            seq: 1,
            duplicate: false,
            ..
        }
    ));
    send(&mut new, json!({"type": "session.close"})).await;
    assert!(matches!(reply(&mut new).await, ServerEvent::Closed { .. }));
    let _ = stop.send(());
    server.await.expect("server");
}

/// A load run cannot pass without checking: against a gateway that keeps no
/// audit log, no client can reconcile its ledger, and the run fails with
/// that reason instead of reporting `lost=0 doubled=0` as a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_run_that_cannot_reconcile_fails() {
    let config = Config {
        audit: false,
        ..audit_config()
    };
    let (_gw, url, stop, server) = start(config).await;
    let mut load = loadgen::Config::new(url, 4, Duration::from_millis(300));
    load.faults = false;
    load.admin_token = Some(ADMIN.into());
    let report: Report = loadgen::run(load).await.expect("loopback url");
    assert!(report.appended > 0, "{}", report.line());
    assert_eq!(report.unreconciled, 4, "{}", report.line());
    assert!(!report.ok());
    let failures = report.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("audit_disabled"), "{failures:?}");
    let _ = stop.send(());
    server.await.expect("server");
}

/// The load over `wss://`: the gateway serves TLS with a certificate made
/// here, the clients trust only it, and every fault still loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_over_tls_loses_nothing() {
    let dir = std::env::temp_dir().join(format!("duplex-loadgen-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a cert");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).expect("cert written");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("key written");
    let (_gw, url, stop, server) = start(Config {
        tls: Some(duplex_gateway::TlsFiles::new(&cert, &key)),
        ..audit_config()
    })
    .await;
    let port = url.rsplit(':').next().expect("a port");
    let wss = format!("wss://localhost:{port}");

    // Without the certificate to trust, the run does not start.
    let untrusting = loadgen::Config::new(wss.clone(), 1, Duration::from_secs(1));
    let refused = loadgen::run(untrusting).await.expect_err("needs --tls-ca");
    assert!(refused.to_string().contains("--tls-ca"), "{refused}");

    let mut config = loadgen::Config::new(wss, 20, Duration::from_secs(3));
    config.grace = Duration::from_secs(1);
    config.admin_token = Some(ADMIN.into());
    config.tls_ca = Some(cert);
    let report: Report = loadgen::run(config).await.expect("loopback url");
    println!("{}\n{}", report.detail(), report.line());
    assert!(report.ok(), "{:?}", report.failures());
    assert_eq!((report.lost, report.doubled, report.unexpected), (0, 0, 0));
    assert!(
        report.appended > 100 && report.reconnects > 0,
        "{}",
        report.line()
    );
    stop.send(()).expect("server running");
    let counters = server.await.expect("server task");
    assert_eq!(counters.appended, report.appended);
    let _ = std::fs::remove_dir_all(dir);
}

/// Clients that keep a window of chunks in flight, in either dialect:
/// every fault still loses nothing and applies nothing twice; the gateway
/// applied what the clients acknowledged, and beyond it at most the chunks
/// in flight on the sockets they dropped; and the realtime client sends
/// its heartbeat once a window, not once a chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_chunks_in_flight_lose_nothing_in_either_dialect() {
    let window = NonZeroU32::new(4).expect("nonzero");
    for dialect in [loadgen::Dialect::Native, loadgen::Dialect::Realtime] {
        let (gw, url, stop, server) = start(audit_config()).await;
        let mut config = loadgen::Config::new(url, 20, Duration::from_secs(3));
        config.grace = Duration::from_secs(1);
        config.admin_token = Some(ADMIN.into());
        config.dialect = dialect;
        config.window = window;
        let report: Report = loadgen::run(config).await.expect("loopback url");
        println!("{dialect:?}\n{}\n{}", report.detail(), report.line());
        assert!(report.ok(), "{dialect:?}: {:?}", report.failures());
        assert_eq!(
            (report.lost, report.doubled, report.unexpected),
            (0, 0, 0),
            "{dialect:?}"
        );
        assert!(
            report.appended > 500 && report.reconnects > 0 && report.duplicates > 0,
            "{dialect:?}: {}",
            report.line()
        );
        if dialect == loadgen::Dialect::Realtime {
            // A heartbeat a chunk would be two messages a chunk.
            assert!(report.events < report.appended * 7 / 4, "{}", report.line());
        }
        stop.send(()).expect("server running");
        let counters = server.await.expect("server task");
        let dropped = report.reconnects + report.failovers;
        let unacknowledged = counters.appended - report.appended.min(counters.appended);
        assert!(
            counters.appended >= report.appended
                && unacknowledged <= u64::from(window.get() - 1) * dropped,
            "{dialect:?}: applied {} acknowledged {} over {dropped} dropped sockets",
            counters.appended,
            report.appended
        );
        assert_eq!(counters.requests_outstanding(), 0, "{}", counters.line());
        assert_eq!(gw.sessions(), 0);
    }
}
