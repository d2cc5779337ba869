//! The HTTP side of the gateway's port, through hyper: every connection
//! (TLS or not) is one HTTP/1.1 request, either a WebSocket upgrade (the
//! session protocols) or one of the operator's endpoints, answered and
//! closed.
//!
//! | request | answer |
//! |---|---|
//! | `GET /healthz` | `200 ok`: the process serves |
//! | `GET /readyz` | `200 ready`, or `503` and the reason: draining, at the connection cap, the store unreachable |
//! | `GET /metrics` | the Prometheus text format; on the public port only with the admin token as a bearer token |
//! | `GET /` | the browser client (and `GET /worklet.js`, its audio worklet) |
//! | a WebSocket upgrade | the realtime dialect on `/v1/realtime` and `/v1/duplex`, the native one elsewhere |
//!
//! The limits of the WebSocket handshake hold for every request: the
//! handshake timeout bounds the whole request (a probe included), the
//! head is at most [`MAX_HEAD`] bytes in at most [`MAX_HEADERS`] lines,
//! and the connection caps apply at accept, before any of this.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use crate::protocol::{MAX_FRAME, READ_BUFFER};
use crate::server::connection::Dialect;
use crate::server::state::Shared;
use crate::server::{auth, transport};
use crate::stats::bump;

/// The largest request head read (request line and headers), in bytes;
/// a larger one is answered 431.
///
/// ```
/// assert_eq!(duplex_gateway::server::http::MAX_HEAD, 16 * 1024);
/// ```
pub const MAX_HEAD: usize = 16 * 1024;
/// The most header lines a request may carry; more are answered 431.
///
/// ```
/// assert_eq!(duplex_gateway::server::http::MAX_HEADERS, 64);
/// ```
pub const MAX_HEADERS: usize = 64;

/// The browser client served at `/`, and its audio worklet.
const PAGE: &str = include_str!("page/index.html");
const WORKLET: &str = include_str!("page/worklet.js");

/// Who a listener serves: the public port (sessions, probes, and the
/// metrics behind the admin token) or the metrics port (probes and
/// metrics, no token, no sessions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Port {
    Public,
    Metrics,
}

/// Why a connection ended before it was served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("WebSocket upgrade failed: {0}")]
    Upgrade(hyper::Error),
    #[error("the upgraded connection is not the socket that was served")]
    NotOurs,
    #[error("request not finished within {0:?}")]
    TimedOut(Duration),
}

/// A WebSocket upgrade the request asked for and was granted: the
/// connection becomes a session socket once hyper hands it over.
struct Upgrade {
    on: hyper::upgrade::OnUpgrade,
    principal: Option<String>,
    dialect: Dialect,
}

type Body = Full<Bytes>;

/// A response of `status` with `body` of the media type `kind`.
fn typed(status: StatusCode, body: impl Into<Bytes>, kind: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    response
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    typed(status, body, "text/plain; charset=utf-8")
}

/// Serves one connection: one HTTP request, within the handshake timeout;
/// a WebSocket upgrade then runs as a session socket until it ends.
pub(crate) async fn serve<S>(
    shared: Arc<Shared>,
    io: S,
    stopped: watch::Receiver<bool>,
    port: Port,
    deadline: tokio::time::Instant,
) -> Result<(), HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limit = shared.config.limits.handshake_timeout;
    let granted: Arc<Mutex<Option<Upgrade>>> = Arc::default();
    let service = {
        let (shared, granted) = (Arc::clone(&shared), Arc::clone(&granted));
        hyper::service::service_fn(move |request| {
            let (shared, granted) = (Arc::clone(&shared), Arc::clone(&granted));
            async move {
                let mut response = answer(&shared, request, port, &granted).await;
                if response.status() != StatusCode::SWITCHING_PROTOCOLS {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                Ok::<_, std::convert::Infallible>(response)
            }
        })
    };
    // One request per connection: every answer but an upgrade says
    // `Connection: close` (hyper's own keep-alive switch would also
    // overwrite the upgrade's `Connection: Upgrade`).
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    let served = tokio::time::timeout_at(deadline, connection).await;
    let upgrade = granted
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    match served {
        Err(_) => {
            bump(&shared.stats.handshakes_timed_out);
            return Err(HandshakeError::TimedOut(limit));
        }
        Ok(result) => result?,
    }
    let Some(upgrade) = upgrade else {
        return Ok(());
    };
    let upgraded = upgrade.on.await.map_err(HandshakeError::Upgrade)?;
    // A small read buffer: tungstenite zero-fills the unused part of it on
    // every read, and a voice event is about 1 KiB. At the default 128 KiB
    // that memset was a fifth of the gateway's CPU under load.
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
    // The socket itself, back from hyper (with whatever the client sent
    // after its request): the session's frames then cost no layer of
    // hyper's, as they did before the port spoke HTTP.
    let ws = match upgraded.downcast::<TokioIo<S>>() {
        Ok(parts) => {
            WebSocketStream::from_partially_read(
                parts.io.into_inner(),
                parts.read_buf.to_vec(),
                Role::Server,
                Some(config),
            )
            .await
        }
        Err(_) => return Err(HandshakeError::NotOurs),
    };
    transport::run(shared, ws, upgrade.principal, upgrade.dialect, stopped).await;
    Ok(())
}

/// The answer to one request; a granted upgrade is left in `granted`.
async fn answer(
    shared: &Arc<Shared>,
    mut request: Request<Incoming>,
    port: Port,
    granted: &Mutex<Option<Upgrade>>,
) -> Response<Body> {
    if wants_websocket(&request) {
        if port == Port::Metrics {
            return text(StatusCode::NOT_FOUND, "no sessions on the metrics port\n");
        }
        return upgrade(shared, &mut request, granted);
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut refused = text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        refused
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return refused;
    }
    match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => match shared.unready().await {
            None => text(StatusCode::OK, "ready\n"),
            Some(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        "/metrics" => {
            if port == Port::Public {
                if let Err(refusal) = admin(shared, &request) {
                    return refusal;
                }
            }
            typed(
                StatusCode::OK,
                shared.metrics.render(
                    &shared.counters(),
                    &crate::server::metrics::Gauges {
                        connections_open: shared.slots.open(),
                        sessions: shared.manager.len(),
                        journal_bytes: shared.journals.bytes(),
                        config_bytes: shared
                            .journals
                            .config_bytes
                            .load(std::sync::atomic::Ordering::Relaxed),
                    },
                ),
                "text/plain; version=0.0.4; charset=utf-8",
            )
        }
        "/" | "/index.html" if port == Port::Public => {
            let mut response = typed(StatusCode::OK, PAGE, "text/html; charset=utf-8");
            // Nothing loads from outside the gateway.
            response.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; script-src 'self' 'unsafe-inline'; \
                     style-src 'self' 'unsafe-inline'; connect-src 'self' ws: wss:; \
                     worker-src 'self' blob:; img-src 'self' data:",
                ),
            );
            response
        }
        "/worklet.js" if port == Port::Public => {
            typed(StatusCode::OK, WORKLET, "text/javascript; charset=utf-8")
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// The metrics on the public port need the admin token as a bearer token.
#[allow(clippy::result_large_err)] // the refusal is the response itself
fn admin(shared: &Shared, request: &Request<Incoming>) -> Result<(), Response<Body>> {
    let Some(expected) = &shared.config.admin_token else {
        return Err(text(
            StatusCode::FORBIDDEN,
            "metrics on the public port need --admin-token (or serve them with --metrics-listen)\n",
        ));
    };
    let offered = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let matches = offered
        .is_some_and(|t| subtle::ConstantTimeEq::ct_eq(t.as_bytes(), expected.as_bytes()).into());
    if matches {
        return Ok(());
    }
    let mut refused = text(
        StatusCode::UNAUTHORIZED,
        "metrics need the admin token: Authorization: Bearer <token>\n",
    );
    refused
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    Err(refused)
}

/// Whether a header holds `token` in its comma-separated list.
fn lists(request: &Request<Incoming>, name: header::HeaderName, token: &str) -> bool {
    request
        .headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn wants_websocket(request: &Request<Incoming>) -> bool {
    lists(request, header::UPGRADE, "websocket")
}

/// Answers a WebSocket upgrade (RFC 6455 section 4.2): checks the
/// handshake and the token, and grants it with `101`.
fn upgrade(
    shared: &Shared,
    request: &mut Request<Incoming>,
    granted: &Mutex<Option<Upgrade>>,
) -> Response<Body> {
    if request.method() != Method::GET || !lists(request, header::CONNECTION, "upgrade") {
        return text(
            StatusCode::BAD_REQUEST,
            "a WebSocket handshake is a GET with Connection: Upgrade\n",
        );
    }
    let version = request.headers().get(header::SEC_WEBSOCKET_VERSION);
    if version.map(HeaderValue::as_bytes) != Some(b"13") {
        let mut refused = text(
            StatusCode::UPGRADE_REQUIRED,
            "Sec-WebSocket-Version 13 is required\n",
        );
        refused.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return refused;
    }
    let Some(key) = request.headers().get(header::SEC_WEBSOCKET_KEY) else {
        return text(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key is required\n");
    };
    let accept = derive_accept_key(key.as_bytes());
    // With `--auth-secret`, the handshake is where a connection says who
    // it is; without a valid token it gets HTTP 401 and nothing else.
    let principal = match &shared.verifier {
        None => None,
        Some(verifier) => match verifier.principal(request) {
            Ok(p) => Some(p),
            Err(e) => {
                bump(&shared.stats.auth_refused);
                tracing::debug!("handshake refused: {e}");
                return text(StatusCode::UNAUTHORIZED, format!("{e}\n"));
            }
        },
    };
    let dialect = dialect_of(request);
    let offers_realtime = auth::subprotocols(request).any(|p| p == "realtime");
    *granted.lock().unwrap_or_else(PoisonError::into_inner) = Some(Upgrade {
        on: hyper::upgrade::on(request),
        principal,
        dialect,
    });
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    // A browser's realtime client offers `realtime` (and its key as a
    // subprotocol): the answer must name one it offered.
    if offers_realtime {
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("realtime"),
        );
    }
    response
}

/// The dialect a handshake's path asks for: the realtime dialect on
/// `/v1/realtime` and `/v1/duplex` (with `autostart`, `resume`, `duplex`
/// and `session_id` from the query), the native one elsewhere. A socket opens
/// its session when it connects unless the query says `autostart=0` or
/// `resume=1` (a socket that resumes: its first message is
/// `session.resume`), with the release's spellings of true and false.
fn dialect_of<B>(request: &Request<B>) -> Dialect {
    let uri = request.uri();
    let path = uri.path().trim_end_matches('/');
    if path != "/v1/realtime" && path != "/v1/duplex" {
        return Dialect::Native;
    }
    let is = |v: &str, values: [&str; 4]| values.iter().any(|t| v.eq_ignore_ascii_case(t));
    let (truthy, falsy) = (["1", "true", "yes", "on"], ["0", "false", "no", "off"]);
    let mut autostart = true;
    let mut session_id = None;
    let mut contract = path == "/v1/duplex";
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("duplex", v)) if is(v, truthy) => contract = true,
            Some(("autostart", v)) if is(v, falsy) => autostart = false,
            Some(("resume", v)) if is(v, truthy) => autostart = false,
            Some(("session_id", v)) if !v.is_empty() => session_id = Some(v.to_owned()),
            _ => {}
        }
    }
    Dialect::Realtime {
        autostart,
        session_id,
        contract,
    }
}
