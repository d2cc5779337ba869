//! TLS on the gateway's port, through rustls: `wss://` and `https://`
//! without a proxy in front. The certificate chain and key are PEM files,
//! read at start and again at each [`Gateway::reload_tls`]
//! (`duplex-gateway` calls it on SIGHUP), so a renewed certificate is
//! taken without a restart: connections open keep the one they began with,
//! new ones get the new one, and a reload that fails keeps the old.
//!
//! [`Gateway::reload_tls`]: crate::Gateway::reload_tls

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// Where the gateway's certificate chain and private key are (PEM).
///
/// ```
/// let files = duplex_gateway::TlsFiles::new("/etc/duplex/cert.pem", "/etc/duplex/key.pem");
/// assert!(files.cert.ends_with("cert.pem"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// The chain at `cert` and the key at `key`.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        TlsFiles {
            cert: cert.into(),
            key: key.into(),
        }
    }
}

/// Why the certificate or key could not be used.
///
/// ```
/// let files = duplex_gateway::TlsFiles::new("/nonexistent/cert.pem", "/nonexistent/key.pem");
/// let e = duplex_gateway::Gateway::new(duplex_gateway::Config {
///     tls: Some(files),
///     ..Default::default()
/// })
/// .unwrap_err();
/// assert!(e.to_string().contains("/nonexistent/cert.pem"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file could not be read or holds no certificate.
    #[error("TLS certificate {path}: {reason}")]
    Cert {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The key file could not be read or holds no private key.
    #[error("TLS private key {path}: {reason}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the
    /// certificate, an unsupported key type).
    #[error("TLS certificate and key refused: {0}")]
    Refused(String),
}

/// The acceptor in use, replaced whole by a reload.
#[derive(Debug)]
pub(crate) struct Tls {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    pub(crate) fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let config = server_config(&files)?;
        Ok(Tls {
            files,
            current: RwLock::new(config),
        })
    }

    /// Reads the files again; on error the acceptor in use stays.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let fresh = server_config(&self.files)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// The acceptor for a new connection.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(
            &self.current.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }
}

fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_error = |reason: String| TlsError::Cert {
        path: files.cert.clone(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| cert_error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_error(e.to_string()))?;
    if chain.is_empty() {
        return Err(cert_error("no CERTIFICATE block in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Refused(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Refused(e.to_string()))?;
    // WebSocket upgrades are HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
