//! Who a connection is: with `--auth-secret`, every connection presents an
//! HS256 JSON Web Token at the handshake (`Authorization: Bearer <jwt>`, or
//! `?access_token=<jwt>` for browsers, which cannot set headers on a
//! WebSocket), verified by `jsonwebtoken`; its `sub` is the connection's
//! principal. The application's backend mints the tokens with the same
//! secret; the gateway only verifies them.
//!
//! A principal's sessions are its own: the id a client names is scoped to
//! its principal ([`scoped`]), so two principals may both call a session
//! `call-1` without meeting, and no principal can open, resume or even
//! learn of another's session.

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio_tungstenite::tungstenite::http::Request;

use crate::server::ownership::hex;

/// The claims the gateway reads; `exp` is required and checked (with the
/// library's default leeway of 60 s).
#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
}

/// The longest principal accepted (a `sub` claim is an opaque id).
pub const MAX_PRINCIPAL: usize = 256;

/// Why a handshake was refused (answered with HTTP 401, the message as
/// its body).
///
/// ```
/// use duplex_gateway::auth::AuthError;
///
/// assert!(AuthError::Missing.to_string().contains("Authorization header"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token in the `Authorization` header or the query.
    #[error("a bearer token is required (Authorization header or access_token query parameter)")]
    Missing,
    /// The token does not verify, is expired, or lacks `sub` or `exp`.
    #[error("the bearer token was refused: {0}")]
    Invalid(String),
    /// An empty or over-long `sub`.
    #[error("the token's sub must be 1 to {MAX_PRINCIPAL} bytes")]
    Principal,
}

/// Verifies connections' tokens.
pub(crate) struct Verifier {
    key: DecodingKey,
    validation: Validation,
}

impl core::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Verifier(HS256, ..)")
    }
}

impl Verifier {
    /// A verifier of HS256 tokens signed with `secret`.
    pub(crate) fn new(secret: &[u8]) -> Result<Self, jsonwebtoken::errors::Error> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        Ok(Verifier {
            key: DecodingKey::from_secret(secret)?,
            validation,
        })
    }

    /// The principal of a handshake request.
    pub(crate) fn principal<B>(&self, request: &Request<B>) -> Result<String, AuthError> {
        let token = bearer(request).ok_or(AuthError::Missing)?;
        let data = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation)
            .map_err(|e| AuthError::Invalid(e.to_string()))?;
        let sub = data.claims.sub;
        if sub.is_empty() || sub.len() > MAX_PRINCIPAL {
            return Err(AuthError::Principal);
        }
        Ok(sub)
    }
}

/// The token of `Authorization: Bearer <token>`, of the `access_token`
/// query parameter, or of the `openai-insecure-api-key.<token>`
/// subprotocol.
fn bearer<B>(request: &Request<B>) -> Option<&str> {
    if let Some(header) = request.headers().get("authorization") {
        let value = header.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| token.trim());
    }
    let query = request.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("access_token="))
    });
    // A browser's realtime client, which cannot set headers, offers its
    // key as the subprotocol `openai-insecure-api-key.<key>`.
    query.or_else(|| subprotocols(request).find_map(|p| p.strip_prefix("openai-insecure-api-key.")))
}

/// The subprotocols a handshake offers (`Sec-WebSocket-Protocol`).
pub(crate) fn subprotocols<B>(request: &Request<B>) -> impl Iterator<Item = &str> {
    request
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// The id the manager knows a session by: the client's own id without
/// authentication; with it, 32 hex digits of SHA-256 over the principal
/// and the client's id, so that a principal's ids name only its own
/// sessions.
///
/// ```
/// use duplex_gateway::auth::scoped;
///
/// assert_eq!(scoped(None, "call-1"), "call-1");
/// let alice = scoped(Some("alice"), "call-1");
/// assert_eq!(alice.len(), 32);
/// assert_ne!(alice, scoped(Some("bob"), "call-1"));
/// assert_ne!(alice, scoped(Some("alice"), "call-2"));
/// ```
pub fn scoped(principal: Option<&str>, client_id: &str) -> String {
    let Some(principal) = principal else {
        return client_id.to_owned();
    };
    let mut hash = Sha256::new();
    hash.update((principal.len() as u64).to_le_bytes());
    hash.update(principal.as_bytes());
    hash.update(client_id.as_bytes());
    let digest = hash.finalize();
    hex(digest.get(..16).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};

    fn token(secret: &[u8], claims: &serde_json::Value) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(secret).expect("a key"),
        )
        .expect("encodes")
    }

    fn request(auth: Option<&str>, query: &str) -> Request<()> {
        let mut r = Request::builder().uri(format!("ws://h/{query}"));
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        r.body(()).expect("request")
    }

    fn later() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            + 600
    }

    #[test]
    fn a_valid_token_names_its_principal_by_header_or_query() {
        let v = Verifier::new(b"secret").expect("a key");
        let t = token(
            b"secret",
            &serde_json::json!({"sub": "alice", "exp": later()}),
        );
        let by_header = v.principal(&request(Some(&format!("Bearer {t}")), ""));
        assert_eq!(by_header, Ok("alice".into()));
        let by_query = v.principal(&request(None, &format!("?x=1&access_token={t}")));
        assert_eq!(by_query, Ok("alice".into()));
    }

    #[test]
    fn bad_tokens_are_refused() {
        let v = Verifier::new(b"secret").expect("a key");
        let bearer = |t: &str| request(Some(&format!("Bearer {t}")), "");
        assert_eq!(v.principal(&request(None, "")), Err(AuthError::Missing));
        let forged = token(
            b"other",
            &serde_json::json!({"sub": "alice", "exp": later()}),
        );
        assert!(matches!(
            v.principal(&bearer(&forged)),
            Err(AuthError::Invalid(_))
        ));
        let expired = token(
            b"secret",
            &serde_json::json!({"sub": "alice", "exp": 1_000}),
        );
        assert!(matches!(
            v.principal(&bearer(&expired)),
            Err(AuthError::Invalid(_))
        ));
        let no_exp = token(b"secret", &serde_json::json!({"sub": "alice"}));
        assert!(matches!(
            v.principal(&bearer(&no_exp)),
            Err(AuthError::Invalid(_))
        ));
        let empty = token(b"secret", &serde_json::json!({"sub": "", "exp": later()}));
        assert_eq!(v.principal(&bearer(&empty)), Err(AuthError::Principal));
        // `alg: none` and tokens of another algorithm are not accepted.
        let none =
            "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0.";
        assert!(matches!(
            v.principal(&bearer(none)),
            Err(AuthError::Invalid(_))
        ));
        assert_eq!(
            v.principal(&request(Some("Basic abc"), "")),
            Err(AuthError::Missing)
        );
    }
}
