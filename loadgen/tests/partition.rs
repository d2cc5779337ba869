//! A node cut off from Redis while its clients still reach it, against a
//! real `redis-server` (ignored unless run with `--ignored`: `duplex_testkit::stores`).
//! The node reaches Redis through a TCP proxy this test controls; cut, the
//! proxy keeps every connection open and forwards nothing, as a network
//! partition does (no refusal, only silence). The node must stop
//! acknowledging within a bounded time, and once the link heals it must
//! never act on the session another node took over meanwhile.

use duplex_testkit::socket as common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{chunk, connect, kind, reply, send, ADMIN};
use duplex_gateway::cluster::{ClusterConfig, Directory, RedisTarget};
use duplex_gateway::protocol::ServerEvent;
use duplex_gateway::{Config, Gateway};
use duplex_testkit::stores;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy to `upstream` that forwards while `cut` is false and
/// swallows every byte, both ways, while it is true.
async fn proxy(upstream: SocketAddr, cut: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = TcpStream::connect(upstream).await else {
                continue;
            };
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            tokio::spawn(pipe(in_read, out_write, Arc::clone(&cut)));
            tokio::spawn(pipe(out_read, in_write, Arc::clone(&cut)));
        }
    });
    addr
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::SeqCst) {
            continue; // partitioned: the bytes never arrive
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn node(redis: RedisTarget, name: &str) -> String {
    let config = Config {
        admin_token: Some(ADMIN.into()),
        resume_key: Some(vec![7; 32]),
        grace: Duration::from_secs(2),
        ..Config::default()
    };
    let cluster = ClusterConfig {
        redis,
        liveness_ttl: Duration::from_secs(1),
        ..ClusterConfig::new("", name)
    };
    let gw = Gateway::join(config, cluster).await.expect("joins");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    tokio::spawn(Arc::clone(&gw).serve(listener, std::future::pending::<()>()));
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_partitioned_node_stops_acknowledging_and_never_acts_on_a_session_taken_over() {
    let server = stores::server();
    let cut = Arc::new(AtomicBool::new(false));
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port()).parse().unwrap();
    let via = proxy(upstream, Arc::clone(&cut)).await;
    let a = node(RedisTarget::Server(format!("redis://{via}/")), "a").await;
    let b = node(RedisTarget::Server(server.url()), "b").await;

    let mut on_a = connect(&a).await;
    send(
        &mut on_a,
        json!({"type": "session.open", "session_id": "p"}),
    )
    .await;
    let ServerEvent::Opened { resume_token, .. } = reply(&mut on_a).await else {
        panic!("not opened");
    };
    send(&mut on_a, chunk("e1", 0, 0)).await;
    assert!(matches!(
        reply(&mut on_a).await,
        ServerEvent::Appended { seq: 1, .. }
    ));

    // The partition: A's client still reaches A, A no longer reaches Redis.
    cut.store(true, Ordering::SeqCst);
    send(&mut on_a, chunk("e2", 0, 0)).await;
    // Answered within `reply`'s 10 s, and not acknowledged.
    let answer = reply(&mut on_a).await;
    assert_eq!(kind(&answer), "unavailable", "{answer:?}");

    // The client resumes on B, which reaches Redis, and sends e2 again.
    let mut on_b = connect(&b).await;
    send(
        &mut on_b,
        json!({"type": "session.open", "session_id": "p", "resume_token": resume_token}),
    )
    .await;
    let ServerEvent::Opened {
        incarnation: 1,
        resumed: true,
        ..
    } = reply(&mut on_b).await
    else {
        panic!("not resumed on B");
    };
    send(&mut on_b, chunk("e2", 0, 0)).await;
    assert!(matches!(
        reply(&mut on_b).await,
        ServerEvent::Appended {
            seq: 2,
            duplicate: false,
            ..
        }
    ));

    // The link heals. A's copy is stale: its grace runs out, its close is
    // refused; a resume on A with the spent token is refused too.
    cut.store(false, Ordering::SeqCst);
    let healed = tokio::time::Instant::now();
    let answer = loop {
        let mut again = connect(&a).await;
        send(
            &mut again,
            json!({"type": "session.open", "session_id": "p", "resume_token": resume_token}),
        )
        .await;
        let answer = reply(&mut again).await;
        // Until A's connection to Redis works again, it says so.
        if kind(&answer) != "unavailable" || healed.elapsed() > Duration::from_secs(20) {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(kind(&answer), "resume_refused", "{answer:?}");

    // The store holds B's session with exactly what was acknowledged.
    let d = Directory::connect(&server.url(), "test").await.unwrap();
    let record = d.load("p").await.unwrap().expect("B's record");
    assert!(record.node.starts_with("b-"), "{}", record.node);
    assert_eq!(record.incarnation, 1);
    let log = d.applied_log("p").await.unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log[0].ends_with(":e1") && log[1].ends_with(":e2"),
        "{log:?}"
    );
}
