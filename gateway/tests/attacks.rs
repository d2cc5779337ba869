//! The gateway as a hostile client meets it, over real sockets: each test
//! is one attack, what the server must answer, and the victim's session
//! checked untouched afterwards.

use duplex_testkit::socket as common;

use std::time::Duration;

use common::{audit_config, chunk, connect, kind, reply, send, start, Ws, ADMIN};
use duplex_gateway::protocol::{ServerEvent, MAX_EXPLANATION, MAX_FRAME};
use duplex_gateway::Config;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

/// Opens a session with a server-chosen id: its id and resume token.
async fn open(ws: &mut Ws) -> (String, String) {
    send(ws, json!({"type": "session.open"})).await;
    match reply(ws).await {
        ServerEvent::Opened {
            session_id,
            resume_token,
            resumed: false,
            ..
        } => (session_id, resume_token),
        other => panic!("expected session.opened, got {other:?}"),
    }
}

/// The refusal's message.
fn message(e: &ServerEvent) -> &str {
    match e {
        ServerEvent::Error { message, .. } => message,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Appends `event_id` on the victim's connection: its position.
async fn append(ws: &mut Ws, event_id: &str) -> u64 {
    send(ws, chunk(event_id, 0, 0)).await;
    match reply(ws).await {
        ServerEvent::Appended {
            seq,
            duplicate: false,
            ..
        } => seq,
        other => panic!("expected input.appended, got {other:?}"),
    }
}

/// The close frame the server ends a connection with.
async fn close_code(ws: &mut Ws) -> Option<CloseCode> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("the server answers within 10 s")
        {
            Some(Ok(Message::Close(frame))) => return frame.map(|f| f.code),
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return None,
        }
    }
}

/// Server-chosen ids are 128 random bits, not a counter another client
/// could predict and claim first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_chosen_ids_cannot_be_predicted() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let mut ws = connect(&url).await;
        let (id, token) = open(&mut ws).await;
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert_eq!(token.len(), 43, "{token}");
        ids.push(id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
    let _ = stop.send(());
    server.await.expect("server");
}

/// Knowing a live session's id gets an attacker nothing: every guessed or
/// forged token is refused with the answer an unknown id gets (which
/// shows neither the expected token nor that the id is live), and the
/// victim goes on as if nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessed_token_takes_over_nothing_and_reveals_nothing() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut victim = connect(&url).await;
    let (id, token) = open(&mut victim).await;
    assert_eq!(append(&mut victim, "v1").await, 1);
    // Another session's token, valid for its own session only.
    let mut other = connect(&url).await;
    let (_, other_token) = open(&mut other).await;

    let mut attacker = connect(&url).await;
    send(
        &mut attacker,
        json!({"type": "session.open", "session_id": "0123456789abcdef0123456789abcdef", "resume_token": token}),
    )
    .await;
    let unknown = reply(&mut attacker).await;
    assert_eq!(kind(&unknown), "resume_refused");
    let mut flipped = token.clone().into_bytes();
    flipped[10] = if flipped[10] == b'A' { b'B' } else { b'A' };
    let guesses = [
        String::new(),
        "0".into(),
        "777".into(),
        "A".repeat(43),
        String::from_utf8(flipped).expect("ascii"),
        other_token,
        format!("{token}="),
    ];
    for guess in guesses {
        send(
            &mut attacker,
            json!({"type": "session.open", "session_id": id, "resume_token": guess}),
        )
        .await;
        let refused = reply(&mut attacker).await;
        assert_eq!(kind(&refused), "resume_refused", "{guess:?}");
        assert_eq!(message(&refused), message(&unknown), "{guess:?}");
        assert!(!message(&refused).contains(&token));
    }
    // The old lease-generation form of a resume is not a resume.
    send(
        &mut attacker,
        json!({"type": "session.open", "session_id": id, "generation": 0}),
    )
    .await;
    assert_eq!(kind(&reply(&mut attacker).await), "session_exists");
    // Events for a session the connection does not hold go nowhere.
    send(&mut attacker, chunk("a1", 0, 0)).await;
    assert_eq!(kind(&reply(&mut attacker).await), "no_session");
    send(&mut attacker, json!({"type": "session.close"})).await;
    assert_eq!(kind(&reply(&mut attacker).await), "no_session");

    // The victim never noticed.
    assert_eq!(append(&mut victim, "v2").await, 2);
    let _ = stop.send(());
    server.await.expect("server");
}

/// A token resumes once: the resume hands out the next, and a copy of the
/// one it consumed (a leaked token, a replayed message) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_token_is_refused_and_the_new_one_works() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut first = connect(&url).await;
    let (id, token) = open(&mut first).await;
    assert_eq!(append(&mut first, "v1").await, 1);
    drop(first);

    let mut second = connect(&url).await;
    send(
        &mut second,
        json!({"type": "session.open", "session_id": id, "resume_token": token}),
    )
    .await;
    let ServerEvent::Opened {
        resume_token: next,
        resumed: true,
        ..
    } = reply(&mut second).await
    else {
        panic!("expected the owner's resume to succeed")
    };
    assert_ne!(next, token);

    let mut replay = connect(&url).await;
    send(
        &mut replay,
        json!({"type": "session.open", "session_id": id, "resume_token": token}),
    )
    .await;
    assert_eq!(kind(&reply(&mut replay).await), "resume_refused");
    assert_eq!(append(&mut second, "v2").await, 2);

    // The new token moves the session on (a takeover, as after a network
    // change); the socket it superseded is told so, without numbers.
    send(
        &mut replay,
        json!({"type": "session.open", "session_id": id, "resume_token": next}),
    )
    .await;
    assert!(matches!(
        reply(&mut replay).await,
        ServerEvent::Opened { resumed: true, .. }
    ));
    send(&mut second, chunk("v3", 0, 0)).await;
    let superseded = reply(&mut second).await;
    assert_eq!(kind(&superseded), "generation_mismatch");
    assert!(
        !message(&superseded).chars().any(|c| c.is_ascii_digit()),
        "{}",
        message(&superseded)
    );
    let _ = stop.send(());
    server.await.expect("server");
}

/// Admin events need the admin token: not a client's resume token, not a
/// guess, and nothing at all when the gateway has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_and_audit_need_the_admin_token() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut client = connect(&url).await;
    let (id, token) = open(&mut client).await;
    for event in [
        json!({"type": "admin.stats"}),
        json!({"type": "admin.stats", "admin_token": token}),
        json!({"type": "admin.stats", "admin_token": "test-admin-toke"}),
        json!({"type": "session.audit", "session_id": id}),
        json!({"type": "session.audit", "session_id": id, "admin_token": token}),
    ] {
        send(&mut client, event.clone()).await;
        assert_eq!(kind(&reply(&mut client).await), "forbidden", "{event}");
    }
    send(
        &mut client,
        json!({"type": "admin.stats", "admin_token": ADMIN}),
    )
    .await;
    assert!(matches!(
        reply(&mut client).await,
        ServerEvent::Stats { sessions: 1, .. }
    ));
    let _ = stop.send(());
    server.await.expect("server");

    let (_gw, url, stop, server) = start(Config {
        admin_token: None,
        ..audit_config()
    })
    .await;
    let mut client = connect(&url).await;
    send(
        &mut client,
        json!({"type": "admin.stats", "admin_token": ""}),
    )
    .await;
    let refused = reply(&mut client).await;
    assert_eq!(kind(&refused), "forbidden");
    assert!(message(&refused).contains("--admin-token"));
    let _ = stop.send(());
    server.await.expect("server");
}

/// A large bad value comes back as a short explanation, not a copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_bad_value_is_not_echoed() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut client = connect(&url).await;
    let epoch = "9".repeat(60_000);
    client
        .send(Message::text(
            json!({"type": "input.commit", "epoch": epoch, "turn": 0}).to_string(),
        ))
        .await
        .expect("send");
    let refused = reply(&mut client).await;
    assert_eq!(kind(&refused), "malformed");
    // The explanation is cut to its first MAX_EXPLANATION bytes.
    let m = message(&refused);
    assert!(m.len() < 2 * MAX_EXPLANATION, "{} bytes", m.len());
    assert!(!m.contains(&"9".repeat(MAX_EXPLANATION)));
    let _ = stop.send(());
    server.await.expect("server");
}

/// A message over the transport limit closes with 1009, and text that is
/// not UTF-8 with 1007 (RFC 6455 §7.4.1); other clients go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_violations_close_with_their_rfc_6455_codes() {
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut victim = connect(&url).await;
    let _ = open(&mut victim).await;

    let mut big = connect(&url).await;
    // Sent as one frame; the server stops reading at the limit.
    let _ = big.send(Message::text("x".repeat(MAX_FRAME + 1))).await;
    assert_eq!(close_code(&mut big).await, Some(CloseCode::Size));

    let mut garbled = connect(&url).await;
    let frame = Frame::message(vec![0xff, 0xfe, b'{'], OpCode::Data(Data::Text), true);
    garbled
        .send(Message::Frame(frame))
        .await
        .expect("send a raw frame");
    assert_eq!(close_code(&mut garbled).await, Some(CloseCode::Invalid));

    assert_eq!(append(&mut victim, "v1").await, 1);
    let _ = stop.send(());
    server.await.expect("server");
}

/// The gateway with `--auth-secret`, and tokens minted for it.
mod authenticated {
    use super::*;
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    const SECRET: &str = "the application backend's signing key";

    fn token(secret: &str, sub: &str, exp_from_now: i64) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let exp = now.saturating_add_signed(exp_from_now);
        encode(
            &Header::new(Algorithm::HS256),
            &json!({"sub": sub, "exp": exp}),
            &EncodingKey::from_secret(secret.as_bytes()).expect("key"),
        )
        .expect("token")
    }

    async fn connect_as(url: &str, bearer: Option<&str>) -> Result<Ws, String> {
        let mut request = url.into_client_request().map_err(|e| e.to_string())?;
        if let Some(t) = bearer {
            let value = format!("Bearer {t}").parse().map_err(|_| "header")?;
            request.headers_mut().insert("authorization", value);
        }
        tokio_tungstenite::connect_async(request)
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| e.to_string())
    }

    fn config() -> Config {
        Config {
            auth_secret: Some(SECRET.into()),
            ..audit_config()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_connection_without_a_valid_token() {
        let (_gw, url, stop, server) = start(config()).await;
        for bearer in [
            None,
            Some(token("another key", "alice", 600)),
            Some(token(SECRET, "alice", -600)),
            Some(token(SECRET, "", 600)),
            Some("not.a.jwt".to_owned()),
        ] {
            let refused = connect_as(&url, bearer.as_deref()).await;
            let Err(e) = refused else {
                panic!("accepted {bearer:?}")
            };
            assert!(e.contains("401"), "{e}");
        }
        let mut ws = connect_as(&url, Some(&token(SECRET, "alice", 600)))
            .await
            .expect("a valid token is accepted");
        let _ = open(&mut ws).await;
        let _ = stop.send(());
        let counters = server.await.expect("server");
        assert_eq!(counters.auth_refused, 5);
    }

    /// Two principals may use one session id without meeting; neither can
    /// open, resume or learn of the other's session.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_principal_reaches_only_its_own_sessions() {
        let (_gw, url, stop, server) = start(config()).await;
        let alice_jwt = token(SECRET, "alice", 600);
        let mut alice = connect_as(&url, Some(&alice_jwt)).await.expect("alice");
        send(
            &mut alice,
            json!({"type": "session.open", "session_id": "call-1"}),
        )
        .await;
        let ServerEvent::Opened {
            session_id,
            resume_token,
            ..
        } = reply(&mut alice).await
        else {
            panic!("alice opens call-1")
        };
        assert_eq!(session_id, "call-1");
        assert_eq!(append(&mut alice, "a1").await, 1);

        let mut bob = connect_as(&url, Some(&token(SECRET, "bob", 600)))
            .await
            .expect("bob");
        // Alice's token, even if Bob got hold of it, resumes nothing of his.
        send(
            &mut bob,
            json!({"type": "session.open", "session_id": "call-1", "resume_token": resume_token}),
        )
        .await;
        assert_eq!(kind(&reply(&mut bob).await), "resume_refused");
        // Bob's own call-1 is a new session, not Alice's.
        send(
            &mut bob,
            json!({"type": "session.open", "session_id": "call-1"}),
        )
        .await;
        assert!(matches!(
            reply(&mut bob).await,
            ServerEvent::Opened { resumed: false, .. }
        ));
        assert_eq!(append(&mut bob, "b1").await, 1);
        assert_eq!(append(&mut alice, "a2").await, 2);

        // The admin reads each principal's log by principal and id.
        let mut admin = connect_as(&url, Some(&token(SECRET, "ops", 600)))
            .await
            .expect("admin");
        send(
            &mut admin,
            json!({"type": "session.audit", "session_id": "call-1", "principal": "alice", "admin_token": ADMIN}),
        )
        .await;
        let ServerEvent::Audit { applied, .. } = reply(&mut admin).await else {
            panic!("expected session.audit")
        };
        let ids: Vec<&str> = applied.iter().map(|(_, _, id)| id.as_str()).collect();
        assert_eq!(ids, ["a1", "a2"]);
        let _ = stop.send(());
        server.await.expect("server");
    }
}

/// The gateway's `/metrics` page, read with the admin token.
async fn metrics(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("ws://");
    let mut io = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {ADMIN}\r\nConnection: close\r\n\r\n"
    );
    io.write_all(request.as_bytes()).await.expect("write");
    let mut page = String::new();
    io.read_to_string(&mut page).await.expect("read");
    page
}

/// Many clients send large configurations at once, each trying to grow its
/// session's past the bound: every session keeps at most 1 MiB, a merge
/// past it is refused `event_too_large` (the contract's code) and changes
/// nothing, the gateway's configuration bytes stay within what the
/// sessions may hold, and a streaming client is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_configurations_at_once_stay_bounded() {
    const ATTACKERS: usize = 8;
    const TRIES: usize = 6;
    let (_gw, url, stop, server) = start(audit_config()).await;
    let mut victim = connect(&url).await;
    open(&mut victim).await;
    let voice = "A".repeat(700_000);
    let mut attackers = Vec::new();
    for n in 0..ATTACKERS {
        let mut ws = connect(&format!("{url}/v1/realtime?duplex=1&autostart=0")).await;
        let session = json!({"session_id": format!("flood-{n}"), "ref_audio": voice});
        send(
            &mut ws,
            json!({"type": "session.update", "session": session}),
        )
        .await;
        attackers.push(ws);
    }
    // Every attacker's tries go out before any answer is read.
    for ws in &mut attackers {
        for k in 0..TRIES {
            let update = json!({"type": "session.update", "event_id": format!("grow-{k}"),
                "session": {format!("frame_{k}"): voice}});
            send(ws, update).await;
        }
    }
    for i in 0..20_u64 {
        assert_eq!(append(&mut victim, &format!("v{i}")).await, i + 1);
    }
    for ws in &mut attackers {
        let (mut updated, mut refused) = (0, 0);
        while updated + refused < 1 + TRIES {
            let event = common::next_json(ws, Duration::from_secs(20)).await;
            match event["type"].as_str() {
                Some("session.updated") => updated += 1,
                Some("error") => {
                    assert_eq!(event["error"]["code"], "event_too_large", "{event}");
                    refused += 1;
                }
                _ => {}
            }
        }
        assert_eq!(
            (updated, refused),
            (1, TRIES),
            "the first fits, no merge past it does"
        );
    }
    let page = metrics(&url).await;
    let held: usize = page
        .lines()
        .find_map(|l| l.strip_prefix("duplex_gateway_config_bytes ")?.parse().ok())
        .expect("the config_bytes gauge");
    let voices = ATTACKERS * voice.len();
    assert!(
        held >= voices && held < voices + voices / 100,
        "{held} bytes held for {voices} of voices"
    );
    assert_eq!(append(&mut victim, "after").await, 21);
    drop(attackers);
    let _ = stop.send(());
    server.await.expect("server");
}
