//! HTTP(S) clients to the providers: rustls (ring) trusting the system's roots (which honour
//! `SSL_CERT_FILE` / `SSL_CERT_DIR`) plus a provider's `ca_file`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

use super::GatewayError;
use crate::config::{Provider, Timeouts};

/// A pooled HTTP/1.1 client to one provider.
pub(crate) type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The system's trust roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured); unreadable
/// ones are skipped.
pub(crate) fn system_roots() -> Vec<CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}

/// A client for `provider`, trusting `system` roots and its `ca_file`.
pub(crate) fn client(
    provider: &Provider,
    system: &[CertificateDer<'static>],
    timeouts: &Timeouts,
) -> Result<UpstreamClient, GatewayError> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(system.iter().cloned());
    if let Some(path) = &provider.ca_file {
        let ca_error = |message: String| GatewayError::CaFile {
            provider: provider.name.clone(),
            path: path.clone(),
            message,
        };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| ca_error(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ca_error(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca_error("no PEM certificate in it".into()));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| GatewayError::Tls {
        provider: provider.name.clone(),
        message: e.to_string(),
    })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_millis(timeouts.connect_ms)));
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https))
}
