//! The clients' side of `wss://`: rustls trusting exactly the certificate
//! (or CA) the run names, and the name it must carry.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::LoadError;

/// How a client opens TLS to the gateway.
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) connector: TlsConnector,
    pub(crate) name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({:?})", self.name)
    }
}

/// TLS for `url` if it is `wss://` (`None` for `ws://`), trusting the PEM
/// certificates in `ca`.
pub(crate) fn for_url(url: &str, ca: Option<&Path>) -> Result<Option<Tls>, LoadError> {
    let Some(rest) = url.strip_prefix("wss://") else {
        return Ok(None);
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, _port)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => authority,
    };
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| LoadError::Tls(format!("{host:?} is not a server name: {e}")))?;
    let ca = ca.ok_or_else(|| {
        LoadError::Tls("a wss:// gateway needs --tls-ca: the certificate to trust".into())
    })?;
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| LoadError::Tls(format!("{}: {e}", ca.display())))?;
    if certs.is_empty() {
        return Err(LoadError::Tls(format!(
            "{}: no CERTIFICATE block",
            ca.display()
        )));
    }
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| LoadError::Tls(format!("{}: {e}", ca.display())))?;
    }
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| LoadError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(Tls {
        connector: TlsConnector::from(Arc::new(config)),
        name,
    }))
}
