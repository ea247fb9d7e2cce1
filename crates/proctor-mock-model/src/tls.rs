//! HTTPS for the mock ([`crate::MockOptions::tls`]): a rustls server configuration (the `ring`
//! provider, as proctor's gateway uses for its clients) from a PEM certificate chain and a PEM
//! private key (PKCS#8, PKCS#1 or SEC1). It offers TLS 1.2 and 1.3 and the ALPN protocol
//! `http/1.1` only, since the mock speaks HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::MockError;

/// The PEM files of an HTTPS mock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, leaf first (PEM `CERTIFICATE` blocks).
    pub cert: PathBuf,
    /// The leaf's private key (one PEM private-key block).
    pub key: PathBuf,
}

/// The server configuration for `files`; an unreadable or unusable file, or a key that does not
/// match the certificate, is an error naming the file.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, MockError> {
    let file_error = |path: &Path, reason: String| MockError::TlsFile {
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_error(&files.cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(file_error(
            &files.cert,
            "it holds no PEM CERTIFICATE block".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        let reason = match e {
            pem::Error::NoItemsFound => {
                "it holds no PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block".into()
            }
            e => e.to_string(),
        };
        file_error(&files.key, reason)
    })?;
    let config_error = |e: rustls::Error| MockError::Tls {
        cert: files.cert.display().to_string(),
        key: files.key.display().to_string(),
        reason: e.to_string(),
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(config_error)?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(config_error)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
