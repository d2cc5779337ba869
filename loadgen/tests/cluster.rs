//! Gateway nodes sharing sessions through Redis: one `redis-server` and a
//! three-master Redis Cluster (ignored unless run with `--ignored`: `duplex_testkit::stores`). Node kills under load are the `duplex-cluster` command's;
//! these are the protocol's steps one by one.

use duplex_testkit::socket as common;

use std::sync::Arc;
use std::time::Duration;

use common::{chunk, connect, kind, reply, send, Ws, ADMIN};
use duplex_gateway::cluster::{ClusterConfig, Directory, RedisTarget};
use duplex_gateway::protocol::ServerEvent;
use duplex_gateway::{Config, Gateway};
use duplex_testkit::stores;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Node {
    url: String,
    stop: oneshot::Sender<()>,
    served: JoinHandle<duplex_gateway::stats::Counters>,
}

/// A node whose responses stream slowly, so a request is in flight when
/// the session moves.
async fn node(redis: &RedisTarget, name: &str) -> Node {
    let config = Config {
        grace: Duration::from_secs(5),
        engine: std::sync::Arc::new(duplex_gateway::engine::StandIn {
            deltas: 1_000,
            interval: Duration::from_millis(50),
        }),
        ..node_config()
    };
    node_with(redis, name, config).await
}

fn node_config() -> Config {
    Config {
        admin_token: Some(ADMIN.into()),
        resume_key: Some(vec![42; 32]),
        limits: duplex_gateway::Limits {
            max_connections_per_ip: 10_000,
            ..duplex_gateway::Limits::default()
        },
        ..Config::default()
    }
}

async fn node_with(redis: &RedisTarget, name: &str, config: Config) -> Node {
    let cluster = ClusterConfig {
        redis: redis.clone(),
        ..ClusterConfig::new("", name)
    };
    let gw = Gateway::join(config, cluster).await.expect("joins");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(Arc::clone(&gw).serve(listener, async {
        let _ = stopped.await;
    }));
    Node { url, stop, served }
}

async fn open(ws: &mut Ws, id: &str) -> String {
    send(ws, json!({"type": "session.open", "session_id": id})).await;
    match reply(ws).await {
        ServerEvent::Opened { resume_token, .. } => resume_token,
        other => panic!("expected session.opened, got {other:?}"),
    }
}

async fn appended(ws: &mut Ws, event_id: &str, epoch: u64) -> (u64, bool) {
    send(ws, chunk(event_id, epoch, 0)).await;
    match reply(ws).await {
        ServerEvent::Appended { seq, duplicate, .. } => (seq, duplicate),
        other => panic!("expected input.appended for {event_id}, got {other:?}"),
    }
}

/// The request a commit bound, from its first delta.
async fn committed(ws: &mut Ws) -> String {
    send(ws, json!({"type": "input.commit", "epoch": 0, "turn": 0})).await;
    loop {
        if let ServerEvent::Delta { request_id, .. } = common::next(ws).await {
            return request_id;
        }
    }
}

async fn releases(redis: &RedisTarget, session: &str) -> Vec<(String, u64)> {
    let d = Directory::connect_to(redis, "test").await.unwrap();
    let mut r = d.releases(session).await.unwrap();
    r.sort();
    r
}

async fn a_session_moves_to_another_node_with_everything_it_acknowledged(redis: &RedisTarget) {
    let (a, b) = (node(redis, "a").await, node(redis, "b").await);

    let mut on_a = connect(&a.url).await;
    let token = open(&mut on_a, "call-1").await;
    assert_eq!(appended(&mut on_a, "e1", 0).await, (1, false));
    assert_eq!(appended(&mut on_a, "e2", 0).await, (2, false));
    let request = committed(&mut on_a).await;
    assert_eq!(
        releases(redis, "call-1").await,
        [(request.clone(), 0)],
        "bound, in flight"
    );

    // The client reaches B (its link to A is still up): B takes the
    // session over and releases the request A's engine was streaming.
    let mut on_b = connect(&b.url).await;
    send(
        &mut on_b,
        json!({"type": "session.open", "session_id": "call-1", "resume_token": token}),
    )
    .await;
    match reply(&mut on_b).await {
        ServerEvent::Opened {
            resumed: true,
            incarnation: 1,
            epoch: 0,
            turn: 0,
            ..
        } => {}
        other => panic!("expected a resume on b, got {other:?}"),
    }
    assert_eq!(releases(redis, "call-1").await, [(request, 1)]);

    // A retransmission is recognised on B; new input continues the sequence.
    assert_eq!(appended(&mut on_b, "e2", 0).await, (2, true));
    send(&mut on_b, chunk("e3", 0, 1)).await;
    assert!(matches!(
        reply(&mut on_b).await,
        ServerEvent::Appended { seq: 3, .. }
    ));

    // A's writes are refused by the directory: nothing more lands from A.
    send(&mut on_a, chunk("e4", 0, 1)).await;
    let refused = reply(&mut on_a).await;
    assert!(
        ["session_moved", "generation_mismatch"].contains(&kind(&refused)),
        "{refused:?}"
    );

    // Every node reads the same log.
    let mut admin = connect(&a.url).await;
    send(
        &mut admin,
        json!({"type": "session.audit", "session_id": "call-1", "admin_token": ADMIN}),
    )
    .await;
    match reply(&mut admin).await {
        ServerEvent::Audit {
            applied,
            next: None,
            ..
        } => {
            let ids: Vec<&str> = applied.iter().map(|(_, _, e)| e.as_str()).collect();
            assert_eq!(ids, ["e1", "e2", "e3"]);
        }
        other => panic!("expected session.audit, got {other:?}"),
    }

    send(&mut on_b, json!({"type": "session.close"})).await;
    assert!(matches!(reply(&mut on_b).await, ServerEvent::Closed { .. }));
    let d = Directory::connect_to(redis, "test").await.unwrap();
    assert!(
        d.load("call-1").await.unwrap().is_none(),
        "a closed session leaves the directory"
    );
    assert!(d.release_tally().await.unwrap().exactly_once());
    for n in [a, b] {
        let _ = n.stop.send(());
        let _ = n.served.await;
    }
}

async fn an_id_live_on_one_node_cannot_be_opened_on_another(redis: &RedisTarget) {
    let (a, b) = (node(redis, "a").await, node(redis, "b").await);
    let mut on_a = connect(&a.url).await;
    open(&mut on_a, "taken").await;
    let mut on_b = connect(&b.url).await;
    send(
        &mut on_b,
        json!({"type": "session.open", "session_id": "taken"}),
    )
    .await;
    assert_eq!(kind(&reply(&mut on_b).await), "session_exists");
    // The refused open left B nothing to serve under that id.
    send(&mut on_b, chunk("x", 0, 0)).await;
    assert_eq!(kind(&reply(&mut on_b).await), "no_session");
    for n in [a, b] {
        let _ = n.stop.send(());
        let _ = n.served.await;
    }
}

async fn a_draining_node_hands_its_sessions_off(redis: &RedisTarget) {
    let (a, b) = (node(redis, "a").await, node(redis, "b").await);
    let mut on_a = connect(&a.url).await;
    let token = open(&mut on_a, "call-2").await;
    assert_eq!(appended(&mut on_a, "e1", 0).await, (1, false));
    let request = committed(&mut on_a).await;

    // SIGTERM's path: the node stores its sessions, releases its engine's
    // requests and tells its clients where their sessions went.
    let _ = a.stop.send(());
    loop {
        match common::next(&mut on_a).await {
            ServerEvent::Moved { session_id } => {
                assert_eq!(session_id, "call-2");
                break;
            }
            ServerEvent::Delta { .. } | ServerEvent::Done { .. } => {}
            other => panic!("expected session.moved, got {other:?}"),
        }
    }
    let counters = a.served.await.unwrap();
    assert_eq!(counters.drained, 1);
    assert_eq!(releases(redis, "call-2").await, [(request, 1)]);

    let mut on_b = connect(&b.url).await;
    send(
        &mut on_b,
        json!({"type": "session.open", "session_id": "call-2", "resume_token": token}),
    )
    .await;
    assert!(matches!(
        reply(&mut on_b).await,
        ServerEvent::Opened { resumed: true, .. }
    ));
    assert_eq!(appended(&mut on_b, "e1", 0).await, (1, true));
    assert_eq!(appended(&mut on_b, "e2", 0).await, (2, false));
    let _ = b.stop.send(());
    let _ = b.served.await;
}

async fn clients_moving_between_nodes_lose_nothing_and_release_once(redis: &RedisTarget) {
    let config = || Config {
        grace: Duration::from_secs(1),
        engine: std::sync::Arc::new(duplex_gateway::engine::StandIn {
            deltas: 2,
            interval: Duration::from_millis(2),
        }),
        ..node_config()
    };
    let a = node_with(redis, "a", config()).await;
    let b = node_with(redis, "b", config()).await;
    let load = duplex_loadgen::Config {
        url: a.url.clone(),
        urls: vec![b.url.clone()],
        grace: Duration::from_secs(1),
        admin_token: Some(ADMIN.into()),
        ..duplex_loadgen::Config::new("", 30, Duration::from_secs(3))
    };
    let report = duplex_loadgen::run(load).await.expect("loopback urls");
    assert!(report.ok(), "{}\n{:?}", report.line(), report.failures());
    assert!(report.appended > 1_000, "{}", report.line());
    assert!(
        report.reconnects > 0,
        "sessions moved between the nodes: {}",
        report.line()
    );
    // Sessions the clients left (expired on the way) are gone after the
    // grace; then every engine request was released exactly once.
    let d = Directory::connect_to(redis, "test").await.unwrap();
    for _ in 0..100 {
        if d.records().await.unwrap() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(d.records().await.unwrap(), 0);
    let tally = d.release_tally().await.unwrap();
    assert!(tally.bound > 0 && tally.exactly_once(), "{tally:?}");
    for n in [a, b] {
        let _ = n.stop.send(());
        let counters = n.served.await.unwrap();
        assert_eq!(counters.releases_doubled, 0);
        assert_eq!(counters.store_failed, 0);
    }
}

/// `GET /readyz` on `addr`: the status line and the body, joined.
async fn readyz(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut io = tokio::net::TcpStream::connect(addr).await.expect("connect");
    io.write_all(b"GET /readyz HTTP/1.1\r\nHost: node\r\n\r\n")
        .await
        .expect("request");
    let mut raw = String::new();
    io.read_to_string(&mut raw).await.expect("answer");
    let status = raw.lines().next().unwrap_or_default();
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b.trim_end());
    format!("{status}: {body}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_store_that_goes_away_is_answered_unavailable_never_acknowledged() {
    let server = stores::server();
    let target = RedisTarget::Server(server.url());
    let a = node(&target, "a").await;
    let mut ws = connect(&a.url).await;
    let token = open(&mut ws, "call-3").await;
    assert_eq!(appended(&mut ws, "e1", 0).await, (1, false));
    let http = a.url.trim_start_matches("ws://").to_owned();
    assert_eq!(readyz(&http).await, "HTTP/1.1 200 OK: ready");
    drop(server); // redis-server killed
    send(&mut ws, chunk("e2", 0, 0)).await;
    assert_eq!(kind(&reply(&mut ws).await), "unavailable");
    // A load balancer asking sends no one here meanwhile.
    assert_eq!(
        readyz(&http).await,
        "HTTP/1.1 503 Service Unavailable: the store does not answer"
    );
    // Nothing is served from a copy the store may not hold: the session
    // is kept on the node, detached, and a resume needs the store too.
    send(&mut ws, chunk("e3", 0, 0)).await;
    assert_eq!(kind(&reply(&mut ws).await), "no_session");
    send(
        &mut ws,
        json!({"type": "session.open", "session_id": "call-3", "resume_token": token}),
    )
    .await;
    assert_eq!(kind(&reply(&mut ws).await), "unavailable");
    let _ = a.stop.send(());
    let counters = a.served.await.unwrap();
    assert!(counters.store_failed >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn an_empty_store_gets_back_what_the_nodes_hold() {
    let mut server = stores::server();
    let target = RedisTarget::Server(server.url());
    let (a, b) = (node(&target, "a").await, node(&target, "b").await);
    let mut live = connect(&a.url).await;
    let token = open(&mut live, "call-4").await;
    assert_eq!(appended(&mut live, "e1", 0).await, (1, false));
    assert_eq!(appended(&mut live, "e2", 0).await, (2, false));
    // A session closed a moment before: its log is the node's to give back
    // too (it keeps closed sessions' logs for a while).
    let mut done = connect(&b.url).await;
    open(&mut done, "call-5").await;
    assert_eq!(appended(&mut done, "d1", 0).await, (1, false));
    send(&mut done, json!({"type": "session.close"})).await;
    assert!(matches!(reply(&mut done).await, ServerEvent::Closed { .. }));

    // SIGKILL, and back on the same port with nothing.
    server.restart().expect("redis-server comes back");
    let d = Directory::connect_to(&target, "test").await.unwrap();
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while d.load("call-4").await.ok().flatten().is_none() {
        assert!(tokio::time::Instant::now() < give_up, "not written back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The session goes on where it was, with everything it acknowledged.
    assert_eq!(appended(&mut live, "e3", 0).await, (3, false));
    let log = |session: &'static str| {
        let d = d.clone();
        async move { d.applied_log(session).await.unwrap() }
    };
    assert_eq!(log("call-4").await, ["0:1:e1", "0:2:e2", "0:3:e3"]);
    while log("call-5").await.is_empty() {
        assert!(
            tokio::time::Instant::now() < give_up,
            "closed log not written back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(log("call-5").await, ["0:1:d1"]);
    assert!(d.was_closed("call-5").await.unwrap(), "and it stays closed");
    // A resume of a session nobody held is told the state is gone, once
    // every live node has written back (`unavailable` until then).
    let mut stranger = connect(&b.url).await;
    let answer = loop {
        send(
            &mut stranger,
            json!({"type": "session.open", "session_id": "call-9", "resume_token": token}),
        )
        .await;
        let answer = kind(&reply(&mut stranger).await).to_owned();
        if answer != "unavailable" || tokio::time::Instant::now() > give_up {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answer, "state_lost");
    let mut counted = Vec::new();
    for n in [a, b] {
        let _ = n.stop.send(());
        counted.push(n.served.await.unwrap());
    }
    assert!(counted.iter().all(|c| c.store_losses == 1));
    assert!(counted.iter().map(|c| c.written_back).sum::<u64>() >= 2);
}

/// Runs `args` on the redis-server at `url`.
async fn redis_cmd(url: &str, args: &[&str]) {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query_async(&mut c).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_takeover_whose_log_was_not_read_is_written_back_and_closed() {
    let server = stores::server();
    let target = RedisTarget::Server(server.url());
    let config = || Config {
        grace: Duration::from_secs(3),
        ..node_config()
    };
    let a = node_with(&target, "a", config()).await;
    let b = node_with(&target, "b", config()).await;
    let mut on_a = connect(&a.url).await;
    let token = open(&mut on_a, "call-7").await;
    assert_eq!(appended(&mut on_a, "e1", 0).await, (1, false));
    // The takeover's script moves the record, then fails to read the log
    // (a key of the wrong type): its error stands in for the answer lost
    // with a dying primary.
    redis_cmd(&server.url(), &["DEL", "dx:{call-7}:applied"]).await;
    redis_cmd(&server.url(), &["SET", "dx:{call-7}:applied", "x"]).await;
    let mut on_b = connect(&b.url).await;
    send(
        &mut on_b,
        json!({"type": "session.open", "session_id": "call-7", "resume_token": token}),
    )
    .await;
    assert_eq!(kind(&reply(&mut on_b).await), "unavailable");
    let d = Directory::connect_to(&target, "test").await.unwrap();
    let record = d.load("call-7").await.unwrap().expect("taken over");
    assert!(record.node.starts_with("b-"), "{}", record.node);
    // B holds it, detached, without what the store held of it. The store
    // now loses its generation (as a failover to a replica reads), keeping
    // the record: B writes back what it holds, and the session, whose
    // client does not come back, expires on B and is closed, not left.
    redis_cmd(&server.url(), &["DEL", "dx:{call-7}:applied"]).await;
    redis_cmd(&server.url(), &["DEL", "dx:gen"]).await;
    let give_up = tokio::time::Instant::now() + Duration::from_secs(12);
    while !d.was_closed("call-7").await.unwrap() {
        assert!(
            tokio::time::Instant::now() < give_up,
            "left open: {:?}",
            d.load("call-7")
                .await
                .unwrap()
                .map(|r| (r.node, r.incarnation))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(d.load("call-7").await.unwrap().is_none());
    let mut counted = Vec::new();
    for n in [a, b] {
        let _ = n.stop.send(());
        counted.push(n.served.await.unwrap());
    }
    assert_eq!(counted[1].store_losses, 1);
    assert_eq!(counted[1].expired, 1);
}

/// How many sessions the node at `url` holds, and its counters.
async fn stats_on(url: &str) -> (u64, Box<duplex_gateway::stats::Counters>) {
    let mut ws = connect(url).await;
    send(
        &mut ws,
        json!({"type": "admin.stats", "admin_token": ADMIN}),
    )
    .await;
    match reply(&mut ws).await {
        ServerEvent::Stats {
            sessions, counters, ..
        } => (sessions, counters),
        other => panic!("expected admin.stats, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_copy_held_without_its_log_does_not_fence_out_the_holder_that_has_it() {
    let server = stores::server();
    let target = RedisTarget::Server(server.url());
    // The grace travels with the session's image: B's copy expires after
    // it; A's stays attached to its client.
    let config = || Config {
        grace: Duration::from_secs(1),
        ..node_config()
    };
    let a = node_with(&target, "a", config()).await;
    let b = node_with(&target, "b", config()).await;
    let mut on_a = connect(&a.url).await;
    let token = open(&mut on_a, "call-10").await;
    assert_eq!(appended(&mut on_a, "e1", 0).await, (1, false));
    assert_eq!(appended(&mut on_a, "e2", 0).await, (2, false));
    // B's name, from a session it holds.
    let mut kept = connect(&b.url).await;
    open(&mut kept, "call-11").await;
    let d = Directory::connect_to(&target, "test").await.unwrap();
    let owned = format!(
        "dx:owned:{}",
        d.load("call-11").await.unwrap().unwrap().node
    );
    // A resume on B whose takeover goes unanswered before its script runs
    // (B's adoption hint, written first, is a key of the wrong type: it
    // stands in for the store not answering). B keeps its copy, detached,
    // without the session's log.
    redis_cmd(&server.url(), &["DEL", &owned]).await;
    redis_cmd(&server.url(), &["SET", &owned, "x"]).await;
    let mut on_b = connect(&b.url).await;
    send(
        &mut on_b,
        json!({"type": "session.open", "session_id": "call-10", "resume_token": token}),
    )
    .await;
    assert_eq!(kind(&reply(&mut on_b).await), "unavailable");
    drop(on_b);
    redis_cmd(&server.url(), &["DEL", &owned]).await;
    // The store then loses the session, and B's copy expires. B cannot
    // vouch for the log, so it writes nothing back: no tombstone, no
    // record at its later incarnation.
    redis_cmd(
        &server.url(),
        &["DEL", "dx:{call-10}:rec", "dx:{call-10}:applied"],
    )
    .await;
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while stats_on(&b.url).await.0 > 1 {
        assert!(
            tokio::time::Instant::now() < give_up,
            "B's copy never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!d.was_closed("call-10").await.unwrap());
    // A holds the session with its log: its next save writes it back, and
    // the session goes on with everything it acknowledged.
    assert_eq!(appended(&mut on_a, "e3", 0).await, (3, false));
    assert_eq!(
        d.applied_log("call-10").await.unwrap(),
        ["0:1:e1", "0:2:e2", "0:3:e3"]
    );
    assert!(d
        .load("call-10")
        .await
        .unwrap()
        .unwrap()
        .node
        .starts_with("a-"));
    assert_eq!(stats_on(&b.url).await.1.unvouched, 1);
    for n in [a, b] {
        let _ = n.stop.send(());
        let _ = n.served.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_session_whose_open_went_unanswered_is_not_written_back_once_the_store_lost_it() {
    let server = stores::server();
    let target = RedisTarget::Server(server.url());
    let config = Config {
        grace: Duration::from_secs(30),
        ..node_config()
    };
    let a = node_with(&target, "a", config).await;
    // The open's script runs but its answer is an error (a key of the
    // wrong type stands in for the answer lost with a dying primary): the
    // node keeps the session, detached, without a shadow.
    redis_cmd(&server.url(), &["SET", "dx:{call-8}:applied", "x"]).await;
    let mut ws = connect(&a.url).await;
    send(
        &mut ws,
        json!({"type": "session.open", "session_id": "call-8"}),
    )
    .await;
    assert_eq!(kind(&reply(&mut ws).await), "unavailable");
    // The store then loses its data (the generation with it). A's sweep
    // finds the copy without its log and the store without it: the copy
    // is dropped unwritten, not written back as a record no client was
    // ever told of.
    redis_cmd(
        &server.url(),
        &["DEL", "dx:{call-8}:applied", "dx:{call-8}:rec", "dx:gen"],
    )
    .await;
    let d = Directory::connect_to(&target, "test").await.unwrap();
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while stats_on(&a.url).await.0 > 0 && d.load("call-8").await.unwrap().is_none() {
        assert!(tokio::time::Instant::now() < give_up, "never dropped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(d.load("call-8").await.unwrap().is_none());
    assert!(!d.was_closed("call-8").await.unwrap());
    assert_eq!(stats_on(&a.url).await.1.unvouched, 1);
    let _ = a.stop.send(());
    let _ = a.served.await;
}

#[tokio::test]
async fn a_node_without_a_shared_resume_key_is_refused_at_start() {
    let config = Config {
        resume_key: None,
        ..node_config()
    };
    // Refused before any connection to Redis is tried.
    let refused = Gateway::join(config, ClusterConfig::new("redis://127.0.0.1:1/", "a")).await;
    assert!(matches!(
        refused,
        Err(duplex_gateway::StartError::NoResumeKey)
    ));
}

async fn a_forged_token_on_another_node_changes_nothing(redis: &RedisTarget) {
    let (a, b) = (node(redis, "a").await, node(redis, "b").await);
    let mut on_a = connect(&a.url).await;
    let token = open(&mut on_a, "call-4").await;
    assert_eq!(appended(&mut on_a, "e1", 0).await, (1, false));
    let d = Directory::connect_to(redis, "test").await.unwrap();
    let before = d.load("call-4").await.unwrap().unwrap();

    let mut on_b = connect(&b.url).await;
    let last = if token.ends_with('A') { 'B' } else { 'A' };
    let forged = format!("{}{last}", &token[..token.len() - 1]);
    for (id, token) in [
        ("call-4", forged.as_str()),
        ("no-such-call", token.as_str()),
    ] {
        send(
            &mut on_b,
            json!({"type": "session.open", "session_id": id, "resume_token": token}),
        )
        .await;
        assert_eq!(kind(&reply(&mut on_b).await), "resume_refused");
    }
    // The session is still A's, as it was, and A still serves it.
    assert_eq!(d.load("call-4").await.unwrap().unwrap(), before);
    assert_eq!(appended(&mut on_a, "e2", 0).await, (2, false));
    send(&mut on_b, chunk("x", 0, 0)).await;
    assert_eq!(kind(&reply(&mut on_b).await), "no_session");
    for n in [a, b] {
        let _ = n.stop.send(());
        let counters = n.served.await.unwrap();
        assert_eq!(counters.taken_over, 0);
    }
}

duplex_testkit::on_every_store!(
    a_session_moves_to_another_node_with_everything_it_acknowledged,
    an_id_live_on_one_node_cannot_be_opened_on_another,
    a_draining_node_hands_its_sessions_off,
    clients_moving_between_nodes_lose_nothing_and_release_once,
    a_forged_token_on_another_node_changes_nothing,
);
