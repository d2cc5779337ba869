//! The HTTP side of the gateway's port: the probes, the metrics, the page,
//! the HTTP limits, and TLS with a certificate made here (rcgen), served
//! and reloaded.

use duplex_testkit::socket as common;

use std::sync::Arc;
use std::time::Duration;

use common::{chunk, connect, reply, send, start, Ws, ADMIN};
use duplex_gateway::protocol::ServerEvent;
use duplex_gateway::{Config, Gateway, Limits, TlsFiles};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::Message;

/// Writes `request` on `io` and reads until the gateway closes it: the
/// bytes read, or the error that ended the read (a reset).
async fn raw_exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    request: &str,
) -> (Vec<u8>, std::io::Result<usize>) {
    io.write_all(request.as_bytes())
        .await
        .expect("request written");
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), io.read_to_end(&mut raw))
        .await
        .expect("answered or closed within 10 s");
    (raw, read)
}

/// An HTTP/1.1 answer: the status code, the head (lowercase) and the body.
fn parse(raw: Vec<u8>) -> (u16, String, String) {
    let raw = String::from_utf8(raw).expect("UTF-8 answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// One HTTP/1.1 exchange on `io`: the status code, the head and the body.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    io: S,
    request: &str,
) -> (u16, String, String) {
    let (raw, read) = raw_exchange(io, request).await;
    read.expect("read");
    parse(raw)
}

async fn get(addr: &str, path: &str, headers: &str) -> (u16, String, String) {
    let io = TcpStream::connect(addr).await.expect("connect");
    exchange(
        io,
        &format!("GET {path} HTTP/1.1\r\nHost: gw\r\n{headers}\r\n"),
    )
    .await
}

/// `GET path` once the gateway admits the connection. A connection over
/// the cap is closed (or reset) at accept with no answer; a slot is given
/// back only when the gateway's side of an earlier connection has ended,
/// which can be a moment after its client read the whole answer.
async fn get_admitted(gw: &Gateway, addr: &str, path: &str) -> (u16, String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: gw\r\n\r\n");
    for _ in 0..500 {
        let io = TcpStream::connect(addr).await.expect("connect");
        let (raw, _) = raw_exchange(io, &request).await;
        if !raw.is_empty() {
            return parse(raw);
        }
        assert!(
            gw.counters().connections_refused > 0,
            "closed unanswered but not refused"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{path}: not admitted in 5 s")
}

fn addr(url: &str) -> &str {
    url.trim_start_matches("ws://")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_as_load_balancers_expect() {
    let (_gw, url, stop, server) = start(Config::default()).await;
    let (status, head, body) = get(addr(&url), "/healthz", "").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert!(head.contains("connection: close"), "{head}");
    let (status, _, body) = get(addr(&url), "/readyz", "").await;
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    let (status, _, _) = get(addr(&url), "/no/such/page", "").await;
    assert_eq!(status, 404);
    let io = TcpStream::connect(addr(&url)).await.expect("connect");
    let (status, head, _) = exchange(
        io,
        "POST /healthz HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    assert_eq!(status, 405);
    assert!(head.contains("allow: get, head"), "{head}");
    let _ = stop.send(());
    server.await.expect("server");
}

/// A gateway whose every slot is taken is not ready: the probe took the
/// last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_at_its_connection_cap_is_not_ready() {
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let (gw, url, stop, server) = start(Config {
        limits,
        ..Config::default()
    })
    .await;
    let (status, _, _) = get(addr(&url), "/readyz", "").await;
    assert_eq!(status, 200, "one slot in use of two");
    let _held = connect(&url).await;
    let (status, _, body) = get_admitted(&gw, addr(&url), "/readyz").await;
    assert_eq!((status, body.as_str()), (503, "at the connection cap\n"));
    let _ = stop.send(());
    server.await.expect("server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_the_public_port_need_the_admin_token() {
    let (_gw, url, stop, server) = start(Config::default()).await;
    let (status, _, body) = get(addr(&url), "/metrics", "").await;
    assert_eq!(status, 403, "no admin token configured: {body}");
    let _ = stop.send(());
    server.await.expect("server");

    let config = Config {
        admin_token: Some(ADMIN.into()),
        ..Config::default()
    };
    let (_gw, url, stop, server) = start(config).await;
    let (status, head, _) = get(addr(&url), "/metrics", "").await;
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    let (status, _, _) = get(addr(&url), "/metrics", "Authorization: Bearer wrong\r\n").await;
    assert_eq!(status, 401);
    let (status, head, body) = get(
        addr(&url),
        "/metrics",
        &format!("Authorization: Bearer {ADMIN}\r\n"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        body.contains("# TYPE duplex_gateway_connections_total counter"),
        "{body}"
    );
    let _ = stop.send(());
    server.await.expect("server");
}

/// The value of the sample `name` (with its labels) on a metrics page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A gateway serving sessions and, on a second address, its metrics port:
/// (its URL, the metrics address, the stop sender, the server task).
async fn start_with_metrics() -> (
    String,
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<duplex_gateway::stats::Counters>,
) {
    let gw = Gateway::new(Config::default()).expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let metrics_addr = metrics.local_addr().expect("addr").to_string();
    tokio::spawn(Arc::clone(&gw).serve_metrics(metrics, std::future::pending()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(gw.serve(listener, async {
        let _ = stopped.await;
    }));
    (url, metrics_addr, stop, server)
}

/// The metrics count what clients did: their events by type, their
/// appends (with the append histogram), their refusals by code, and the
/// sessions by state; the metrics listener needs no token and serves no
/// sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_clients_did() {
    let (url, metrics_addr, stop, server) = start_with_metrics().await;

    let mut ws: Ws = connect(&url).await;
    send(&mut ws, json!({"type": "session.open", "client_id": "m1"})).await;
    let ServerEvent::Opened { epoch, turn, .. } = reply(&mut ws).await else {
        panic!("opened")
    };
    for i in 0..5 {
        send(&mut ws, chunk(&format!("c{i}"), epoch, turn)).await;
        assert!(matches!(reply(&mut ws).await, ServerEvent::Appended { .. }));
    }
    send(&mut ws, json!({"type": "no.such.event"})).await;
    assert!(matches!(reply(&mut ws).await, ServerEvent::Error { .. }));

    let (status, _, page) = get(&metrics_addr, "/metrics", "").await;
    assert_eq!(status, 200);
    let at_least = |name: &str, n: f64| {
        let v = sample(&page, name).unwrap_or_else(|| panic!("{name} missing:\n{page}"));
        assert!(v >= n, "{name} = {v}, expected at least {n}");
    };
    at_least("duplex_gateway_appended_total", 5.0);
    at_least(
        r#"duplex_gateway_events_in_total{dialect="native",type="input.append"}"#,
        5.0,
    );
    at_least(
        r#"duplex_gateway_events_in_total{dialect="native",type="invalid"}"#,
        1.0,
    );
    at_least(
        r#"duplex_gateway_events_out_total{dialect="native",type="input.appended"}"#,
        5.0,
    );
    at_least(
        r#"duplex_gateway_refusals_total{dialect="native",code="unknown_type"}"#,
        1.0,
    );
    at_least("duplex_gateway_connections_open", 1.0);
    at_least("duplex_gateway_sessions", 1.0);
    // The histogram and duplex-std's gauges are the process's (tests share
    // it): present, and counting at least this test's appends.
    at_least("duplex_gateway_append_seconds_count", 5.0);
    assert!(
        page.contains("duplex_gateway_append_seconds_bucket{le="),
        "{page}"
    );
    assert!(page.contains(r#"duplex_sessions{state="open"}"#), "{page}");

    let (status, _, _) = get(&metrics_addr, "/healthz", "").await;
    assert_eq!(status, 200);
    let upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    let (status, _, _) = get(&metrics_addr, "/", upgrade).await;
    assert_eq!(status, 404, "no sessions on the metrics port");
    // The public port upgrades (and the socket stays open: read the head).
    let mut io = TcpStream::connect(addr(&url)).await.expect("connect");
    io.write_all(format!("GET / HTTP/1.1\r\nHost: gw\r\n{upgrade}\r\n").as_bytes())
        .await
        .expect("written");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        io.read_exact(&mut byte).await.expect("a head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    let _ = stop.send(());
    server.await.expect("server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_whole_from_the_gateway() {
    let (_gw, url, stop, server) = start(Config::default()).await;
    let (status, head, body) = get(addr(&url), "/", "").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'self'"),
        "{head}"
    );
    assert!(body.contains("<title>duplex-gateway</title>"));
    assert!(
        body.contains("/v1/realtime?duplex=1"),
        "speaks the realtime dialect"
    );
    // Nothing loads from elsewhere.
    assert!(
        !body.contains("http://") && !body.contains("https://"),
        "no outside URL"
    );
    let (status, head, body) = get(addr(&url), "/worklet.js", "").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/javascript"), "{head}");
    assert!(body.contains("registerProcessor(\"pcm16-chunker\""));
    let _ = stop.send(());
    server.await.expect("server");
}

/// The limits of the WebSocket handshake hold for plain HTTP requests:
/// an oversized head is refused, a bad handshake is answered, and a
/// request that never ends is cut at the handshake timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_requests_keep_the_handshake_limits() {
    let limits = Limits {
        handshake_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let (_gw, url, stop, server) = start(Config {
        limits,
        ..Config::default()
    })
    .await;
    let big = format!(
        "X-Filler: {}\r\n",
        "a".repeat(duplex_gateway::server::http::MAX_HEAD)
    );
    let (status, _, _) = get(addr(&url), "/healthz", &big).await;
    assert_eq!(status, 431, "an oversized head");
    let (status, head, _) = get(
        addr(&url),
        "/",
        "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: x\r\n",
    )
    .await;
    assert_eq!(status, 426, "an old WebSocket version");
    assert!(head.contains("sec-websocket-version: 13"), "{head}");
    let (status, _, _) = get(
        addr(&url),
        "/",
        "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n",
    )
    .await;
    assert_eq!(status, 400, "no key");
    // A request head that never ends.
    let mut slow = TcpStream::connect(addr(&url)).await.expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let cut = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut buf)).await;
    assert!(cut.is_ok(), "cut at the handshake timeout");
    let _ = stop.send(());
    let counters = server.await.expect("server");
    assert_eq!(counters.handshakes_timed_out, 1, "{}", counters.line());
}

/// A certificate for `localhost`, made here, written as PEM files.
fn certificate(dir: &std::path::Path, name: &str) -> (TlsFiles, CertificateDer<'static>) {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    let cert = dir.join(format!("{name}.pem"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, made.cert.pem()).expect("cert written");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("key written");
    (TlsFiles::new(cert, key), made.cert.der().clone())
}

/// A TLS connection to `at` as `localhost`, trusting only `trusted`.
async fn tls_to(
    at: &str,
    trusted: &CertificateDer<'static>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = RootCertStore::empty();
    roots.add(trusted.clone()).expect("a root");
    let config = ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let localhost = ServerName::try_from("localhost").expect("name");
    let tcp = TcpStream::connect(at).await?;
    TlsConnector::from(Arc::new(config))
        .connect(localhost, tcp)
        .await
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("duplex-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `wss://` and `https://` without a proxy: a session over TLS, the
/// probes over TLS, and a reload that new connections see while a bad
/// reload keeps the certificate in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_sessions_and_reloads_its_certificate() {
    let dir = scratch("serve");
    let (files, first) = certificate(&dir, "first");
    let config = Config {
        tls: Some(files.clone()),
        ..Config::default()
    };
    let (gw, url, stop, server) = start(config).await;
    assert!(gw.tls());
    let at = addr(&url).to_owned();

    // A session over wss://.
    let tls = tls_to(&at, &first).await.expect("TLS handshake");
    let (mut ws, _) = tokio_tungstenite::client_async("wss://localhost/", tls)
        .await
        .expect("WebSocket over TLS");
    ws.send(Message::text(
        json!({"type": "session.open", "client_id": "tls-1"}).to_string(),
    ))
    .await
    .expect("send");
    let opened = loop {
        if let Message::Text(t) = ws.next().await.expect("open").expect("frame") {
            break t.to_string();
        }
    };
    assert!(opened.contains("session.opened"), "{opened}");

    // A probe over https://, and none over plain HTTP.
    let tls = tls_to(&at, &first).await.expect("TLS handshake");
    let (status, _, body) = exchange(tls, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    // A renewed certificate in the same files: new connections get it.
    let (renewed, second) = certificate(&dir, "second");
    std::fs::copy(&renewed.cert, &files.cert).expect("cert replaced");
    std::fs::copy(&renewed.key, &files.key).expect("key replaced");
    gw.reload_tls().expect("reloaded");
    let refused = tls_to(&at, &first).await;
    assert!(refused.is_err(), "the old certificate is no longer served");
    let tls = tls_to(&at, &second).await.expect("the new one is");
    let (status, _, _) = exchange(tls, "GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert_eq!(status, 200);
    // The session opened before the reload goes on.
    ws.send(Message::text(json!({"type": "session.close"}).to_string()))
        .await
        .expect("still open");

    // A broken file: the reload is refused and the certificate in use stays.
    std::fs::write(&files.key, "not a key").expect("key broken");
    let e = gw.reload_tls().expect_err("refused");
    assert!(
        e.to_string().contains(files.key.to_str().expect("path")),
        "{e}"
    );
    tls_to(&at, &second).await.expect("still served");

    let _ = stop.send(());
    server.await.expect("server");
    let _ = std::fs::remove_dir_all(dir);
}

/// A gateway shutting down is not ready: the metrics port, still up,
/// says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_shutting_down_is_not_ready() {
    let (_, metrics_addr, stop, server) = start_with_metrics().await;
    let (status, _, _) = get(&metrics_addr, "/readyz", "").await;
    assert_eq!(status, 200);
    let _ = stop.send(());
    server.await.expect("server");
    let (status, _, body) = get(&metrics_addr, "/readyz", "").await;
    assert_eq!((status, body.as_str()), (503, "draining\n"));
    let (status, _, _) = get(&metrics_addr, "/healthz", "").await;
    assert_eq!(status, 200, "alive, not ready");
}
