//! Who may act on a session: unguessable session ids, resume tokens that
//! rotate on every resume, and the admin token.
//!
//! A resume token is an HMAC-SHA256, under a key the gateway draws from the
//! OS random source at start, of the session's id, a random nonce the
//! session was opened with (kept in the session, as its session config)
//! and its lease generation:
//!
//! - nobody without the key can make one, and the gateway keeps no table of
//!   tokens to leak or to clean up: the nonce lives and dies with the
//!   session;
//! - the generation moves on every resume, so each resume hands out a new
//!   token and the one it consumed stops working;
//! - the nonce differs for every open, so a token of a closed session never
//!   opens a later session of the same id;
//! - a token is checked with the MAC's constant-time comparison, and a
//!   refusal says the same thing whether the id is unknown or the token is
//!   wrong (it never shows the expected value).
//!
//! The core's generation check stays the one that decides a race: a token
//! is verified for generation `g`, and the resume is applied only if the
//! session is still at `g` under its shard lock.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The random part of a session, drawn at open: what makes its resume
/// tokens its own. It is the gateway's session configuration type, so it is
/// stored in the session and dropped with it. Only the gateway draws one;
/// hosts meet it as the `SC` of [`Manager`](crate::Manager).
///
/// ```
/// // A secret never reaches a log line.
/// fn logged(o: &duplex_gateway::Owner) -> String { format!("{o:?}") }
/// # let _ = logged;
/// ```
#[derive(Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    nonce: [u8; 16],
}

impl core::fmt::Debug for Owner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // A secret: never in a log line.
        f.write_str("Owner(..)")
    }
}

/// Why the gateway could not make a secret.
///
/// ```
/// use duplex_gateway::RandomError;
///
/// let e = RandomError::Source(getrandom::Error::UNSUPPORTED);
/// assert!(e.to_string().starts_with("the OS random source failed"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RandomError {
    /// The OS random source failed: no id or token can be handed out.
    #[error("the OS random source failed: {0}")]
    Source(getrandom::Error),
    /// The MAC refused its key (HMAC takes keys of any length: not seen).
    #[error("the resume-token key was refused: {0}")]
    Key(hmac::digest::InvalidLength),
}

fn random<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(RandomError::Source)?;
    Ok(bytes)
}

impl Owner {
    /// A new session's owner, from the OS random source.
    pub(crate) fn draw() -> Result<Self, RandomError> {
        Ok(Owner { nonce: random()? })
    }
}

/// A server-chosen session id: 128 bits from the OS random source, as 32
/// lowercase hex digits.
pub(crate) fn new_session_id() -> Result<String, RandomError> {
    let bytes: [u8; 16] = random()?;
    Ok(hex(&bytes))
}

/// `bytes` as lowercase hex digits.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// The gateway's secrets: the key resume tokens are made with, and the
/// admin token, if admin events are enabled.
pub(crate) struct Keys {
    mac: HmacSha256,
    admin: Option<Vec<u8>>,
}

impl core::fmt::Debug for Keys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Keys")
            .field("admin", &self.admin.is_some())
            .finish_non_exhaustive()
    }
}

/// The resume-token alphabet: URL-safe base64 without padding (43
/// characters for the 32-byte MAC).
const TOKEN: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The shortest resume key a gateway accepts: 32 bytes, HMAC-SHA256's
/// output size (a shorter key would be the weakest part of a token).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use duplex_gateway::{Config, Gateway, RESUME_KEY_MIN};
/// let key = vec![7u8; RESUME_KEY_MIN];
/// assert!(Gateway::new(Config { resume_key: Some(key), ..Config::default() }).is_ok());
/// # }
/// ```
pub const RESUME_KEY_MIN: usize = 32;

impl Keys {
    /// The MAC key: `resume_key` when given (nodes of one cluster share it,
    /// so any of them can verify a token another made), else a fresh one
    /// from the OS random source; and the admin token.
    pub(crate) fn new(admin: Option<&str>, resume_key: Option<&[u8]>) -> Result<Self, RandomError> {
        let drawn: [u8; 32];
        let key = if let Some(key) = resume_key {
            key
        } else {
            drawn = random()?;
            &drawn
        };
        let mac = <HmacSha256 as Mac>::new_from_slice(key).map_err(RandomError::Key)?;
        Ok(Keys {
            mac,
            admin: admin.map(|a| a.as_bytes().to_vec()),
        })
    }

    fn mac(&self, session: &str, owner: &Owner, generation: u64) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(&owner.nonce);
        mac.update(&generation.to_le_bytes());
        mac.update(session.as_bytes());
        mac
    }

    /// The token that resumes `session` at lease `generation`.
    pub(crate) fn token(&self, session: &str, owner: &Owner, generation: u64) -> String {
        TOKEN.encode(self.mac(session, owner, generation).finalize().into_bytes())
    }

    /// Whether `token` resumes `session` at `generation` (constant time in
    /// the token's contents).
    pub(crate) fn verify(
        &self,
        session: &str,
        owner: &Owner,
        generation: u64,
        token: &str,
    ) -> bool {
        let Ok(tag) = TOKEN.decode(token) else {
            return false;
        };
        self.mac(session, owner, generation)
            .verify_slice(&tag)
            .is_ok()
    }

    /// Whether admin events are enabled at all.
    pub(crate) fn admin_enabled(&self) -> bool {
        self.admin.is_some()
    }

    /// Whether `given` is the admin token (constant time in its contents;
    /// never, when admin events are disabled).
    pub(crate) fn is_admin(&self, given: Option<&str>) -> bool {
        match (&self.admin, given) {
            (Some(admin), Some(given)) => bool::from(admin.as_slice().ct_eq(given.as_bytes())),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_resumes_only_its_session_at_its_generation() -> Result<(), RandomError> {
        let keys = Keys::new(None, None)?;
        let owner = Owner::draw()?;
        let token = keys.token("s", &owner, 3);
        assert_eq!(token.len(), 43);
        assert!(keys.verify("s", &owner, 3, &token));
        assert!(!keys.verify("s", &owner, 4, &token));
        assert!(!keys.verify("t", &owner, 3, &token));
        assert!(!keys.verify("s", &Owner::draw()?, 3, &token));
        assert!(!Keys::new(None, None)?.verify("s", &owner, 3, &token));
        assert!(!keys.verify("s", &owner, 3, "not base64!"));
        assert!(!keys.verify("s", &owner, 3, ""));
        // The nonce never reaches a log line.
        assert_eq!(format!("{owner:?}"), "Owner(..)");
        Ok(())
    }

    #[test]
    fn nodes_that_share_a_resume_key_accept_each_others_tokens() -> Result<(), RandomError> {
        let key = [7u8; RESUME_KEY_MIN];
        let (a, b) = (Keys::new(None, Some(&key))?, Keys::new(None, Some(&key))?);
        let owner = Owner::draw()?;
        let token = a.token("s", &owner, 2);
        assert!(b.verify("s", &owner, 2, &token));
        assert!(!b.verify("s", &owner, 3, &token));
        let other = Keys::new(None, Some(&[8u8; RESUME_KEY_MIN]))?;
        assert!(!other.verify("s", &owner, 2, &token));
        Ok(())
    }

    #[test]
    fn an_owner_travels_in_a_snapshot_image() -> Result<(), Box<dyn std::error::Error>> {
        use crate::profile::Fence;
        use crate::GatewayProfile;
        use crate::Id;
        use duplex_core::{AnySession, Instant, OpenOptions, Session};
        type GatewaySession = AnySession<GatewayProfile>;
        let owner = Owner::draw()?;
        let fence = Fence::new(Id::new("s")?, 0);
        let s: Session<duplex_core::Open, GatewayProfile> =
            Session::open_with_capacities(fence, OpenOptions::new(owner, ()), Instant::ZERO)?;
        let mut buf = vec![0u8; Session::<duplex_core::Open, GatewayProfile>::SNAPSHOT_MAX + 64];
        let image = GatewaySession::from(s).snapshot(&mut buf)?.to_vec();
        let back = GatewaySession::restore_with_capacities(&image)?;
        assert_eq!(back.as_open().map(|s| *s.session_config()), Some(owner));
        Ok(())
    }

    #[test]
    fn session_ids_are_128_random_bits_in_hex() -> Result<(), RandomError> {
        let (a, b) = (new_session_id()?, new_session_id()?);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        Ok(())
    }

    #[test]
    fn the_admin_token_is_checked_and_absent_means_disabled() -> Result<(), RandomError> {
        let keys = Keys::new(Some("hunter2-but-longer"), None)?;
        assert!(keys.is_admin(Some("hunter2-but-longer")));
        assert!(!keys.is_admin(Some("hunter2")));
        assert!(!keys.is_admin(None));
        let off = Keys::new(None, None)?;
        assert!(!off.admin_enabled() && !off.is_admin(Some("")));
        Ok(())
    }
}
