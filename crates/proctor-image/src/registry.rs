//! A registry client for the OCI distribution API (pull only): manifests and blobs, token and
//! basic authentication, redirects, mirrors, HTTPS with the system's roots and plain HTTP for
//! the registries that are declared insecure.
//!
//! It is blocking: each source runs a current-thread tokio runtime of its own, so it must not be
//! used from inside an async task.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, USER_AGENT, WWW_AUTHENTICATE,
};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use tokio::runtime::Runtime;

use crate::auth::{parse_challenges, token_from_json, token_url, Challenge};
use crate::config::RegistryConfig;
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::manifest::{ACCEPT_MANIFESTS, MAX_MANIFEST_BYTES};
use crate::reference::RegistryRef;
use crate::source::{BlobSink, Fetched, Source, Top};

/// A pooled HTTP/1.1 client for `http` and `https` URLs.
type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Time to make a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Time from a request to its response's headers.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Time a body may go without a byte before the transfer is given up.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Redirects followed for one request, at most.
const MAX_REDIRECTS: usize = 5;
/// The largest token answer or error body read.
const MAX_SMALL_BODY: u64 = 1 << 20;
/// The `User-Agent` sent.
const USER_AGENT_VALUE: &str = concat!("proctor-image/", env!("CARGO_PKG_VERSION"));

/// Images of one repository of one registry (or its mirrors).
pub(crate) struct RegistrySource {
    rt: Runtime,
    http: Http,
    reference: RegistryRef,
}

/// The HTTP side: the client, the configuration, and the authorization earned per host.
struct Http {
    client: HttpClient,
    config: RegistryConfig,
    auth: HashMap<String, String>,
}

/// A registry or a mirror of it, and how it is reached.
#[derive(Debug, Clone)]
struct Endpoint {
    host: String,
    scheme: &'static str,
}

impl RegistrySource {
    /// A source for `reference`, reaching registries as `config` says.
    pub(crate) fn new(reference: &RegistryRef, config: &RegistryConfig) -> Result<Self> {
        let unreachable = |cause: String| ImageError::Unreachable {
            registry: reference.registry().to_string(),
            cause,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| unreachable(format!("cannot start the HTTP runtime: {e}")))?;
        let client = http_client().map_err(unreachable)?;
        Ok(RegistrySource {
            rt,
            http: Http {
                client,
                config: config.clone(),
                auth: HashMap::new(),
            },
            reference: reference.clone(),
        })
    }

    /// Runs `op` on each mirror of the registry, then on the registry itself, until one
    /// succeeds; the registry's own error is the one returned.
    fn on_endpoints<T>(
        &mut self,
        mut op: impl FnMut(&Runtime, &mut Http, &Endpoint) -> Result<T>,
    ) -> Result<T> {
        let registry = self.reference.registry();
        let mut endpoints: Vec<Endpoint> = self
            .http
            .config
            .mirrors_for(registry)
            .into_iter()
            .map(|host| self.http.endpoint(host))
            .collect();
        endpoints.push(self.http.endpoint(registry.to_string()));
        let last = endpoints.len() - 1;
        for (i, endpoint) in endpoints.iter().enumerate() {
            match op(&self.rt, &mut self.http, endpoint) {
                Ok(value) => return Ok(value),
                Err(_) if i < last => continue, // a mirror failed: try the next
                Err(e) => return Err(e),
            }
        }
        Err(ImageError::Unreachable {
            registry: registry.to_string(),
            cause: "no endpoint".into(),
        })
    }

    /// `GET /v2/<name>/manifests/<reference>`: the document, and the digest the registry
    /// announced for it (`Docker-Content-Digest`).
    fn get_manifest(&mut self, reference: &str) -> Result<(Fetched, Option<Digest>)> {
        let repository = self.reference.repository().to_string();
        let path = format!("/v2/{repository}/manifests/{reference}");
        let what = format!("manifest `{reference}` of {repository}");
        self.on_endpoints(|rt, http, endpoint| {
            rt.block_on(async {
                let response = http
                    .get(endpoint, &repository, &path, Some(ACCEPT_MANIFESTS), &what)
                    .await?;
                let content_type = header(&response, CONTENT_TYPE.as_str());
                let announced =
                    header(&response, "docker-content-digest").and_then(|d| Digest::parse(&d).ok());
                let bytes = read_body(response, MAX_MANIFEST_BYTES)
                    .await
                    .map_err(|cause| ImageError::Unreachable {
                        registry: endpoint.host.clone(),
                        cause: format!("reading {what}: {cause}"),
                    })?;
                Ok((
                    Fetched {
                        bytes,
                        content_type,
                    },
                    announced,
                ))
            })
        })
    }
}

impl Source for RegistrySource {
    fn top(&mut self) -> Result<Top> {
        let reference = self.reference.manifest_reference();
        let (fetched, announced) = self.get_manifest(&reference)?;
        let expected = self.reference.pinned().cloned().or(announced);
        Ok(Top {
            fetched,
            expected,
            layout_index: false,
        })
    }

    fn manifest(&mut self, digest: &Digest) -> Result<Fetched> {
        Ok(self.get_manifest(&digest.to_string())?.0)
    }

    fn blob(&mut self, digest: &Digest, sink: &mut BlobSink) -> Result<()> {
        let repository = self.reference.repository().to_string();
        let path = format!("/v2/{repository}/blobs/{digest}");
        let what = format!("blob {digest}");
        self.on_endpoints(|rt, http, endpoint| {
            sink.restart()
                .map_err(|e| ImageError::io("emptying", sink.path().to_path_buf(), e))?;
            rt.block_on(async {
                let response = http.get(endpoint, &repository, &path, None, &what).await?;
                stream_body(response, sink, &endpoint.host, &what).await
            })
        })
    }
}

impl Http {
    /// How `host` is reached: plain HTTP if it is declared insecure, else HTTPS.
    fn endpoint(&self, host: String) -> Endpoint {
        let scheme = if self.config.is_insecure(&host) {
            "http"
        } else {
            "https"
        };
        Endpoint { host, scheme }
    }

    /// A GET of `path` on `endpoint` that answers an authentication challenge once and gives
    /// the successful response; 404 is [`ImageError::NotFound`] of `what`.
    async fn get(
        &mut self,
        endpoint: &Endpoint,
        repository: &str,
        path: &str,
        accept: Option<&str>,
        what: &str,
    ) -> Result<Response<Incoming>> {
        let url = format!("{}://{}{}", endpoint.scheme, endpoint.host, path);
        let mut challenged = false;
        loop {
            let auth = self.auth.get(&endpoint.host).cloned();
            let response = self
                .send(
                    &url,
                    accept,
                    auth.as_deref(),
                    &endpoint.host,
                    &endpoint.host,
                )
                .await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            match status {
                StatusCode::UNAUTHORIZED if !challenged => {
                    challenged = true;
                    let challenges: Vec<Challenge> = response
                        .headers()
                        .get_all(WWW_AUTHENTICATE)
                        .iter()
                        .filter_map(|v| v.to_str().ok())
                        .flat_map(parse_challenges)
                        .collect();
                    drop(response);
                    self.authenticate(endpoint, repository, &challenges).await?;
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(ImageError::Unauthorized {
                        registry: endpoint.host.clone(),
                        repository: repository.to_string(),
                        detail: error_detail(response).await,
                    })
                }
                StatusCode::NOT_FOUND => {
                    return Err(ImageError::NotFound {
                        what: what.to_string(),
                        location: format!("registry {}", endpoint.host),
                    })
                }
                _ => {
                    return Err(ImageError::Registry {
                        registry: endpoint.host.clone(),
                        status: status.as_u16(),
                        request: format!("GET {path}"),
                        detail: error_detail(response).await,
                    })
                }
            }
        }
    }

    /// Answers a 401's challenges: fetches a bearer token (with the docker config's credentials
    /// for the registry, if any), or uses those credentials for basic authentication.
    async fn authenticate(
        &mut self,
        endpoint: &Endpoint,
        repository: &str,
        challenges: &[Challenge],
    ) -> Result<()> {
        let unauthorized = |detail: String| ImageError::Unauthorized {
            registry: endpoint.host.clone(),
            repository: repository.to_string(),
            detail,
        };
        let credentials = self.config.credentials(&endpoint.host)?;
        if let Some(bearer) = challenges.iter().find(|c| c.scheme == "bearer") {
            let scope = format!("repository:{repository}:pull");
            let url = token_url(bearer, &scope)
                .ok_or_else(|| unauthorized("its Bearer challenge names no realm".into()))?;
            let realm: Uri = url
                .parse()
                .map_err(|e| unauthorized(format!("its token realm `{url}` is not a URL: {e}")))?;
            let realm_host = realm
                .authority()
                .map(|a| a.as_str().to_string())
                .unwrap_or_default();
            match realm.scheme_str() {
                Some("https") => {}
                Some("http")
                    if endpoint.scheme == "http" || self.config.is_insecure(&realm_host) => {}
                _ => {
                    return Err(unauthorized(format!(
                        "its token service `{url}` is not HTTPS (add `{realm_host}` to \
                         `insecure` to use it anyway)"
                    )))
                }
            }
            let basic = credentials.as_ref().map(|c| c.basic_header());
            let response = self
                .send(
                    &url,
                    Some("application/json"),
                    basic.as_deref(),
                    &realm_host,
                    &endpoint.host,
                )
                .await?;
            let status = response.status();
            if !status.is_success() {
                let detail = error_detail(response).await;
                return Err(unauthorized(format!(
                    "its token service {realm_host} answered {status}: {detail}"
                )));
            }
            let body = read_body(response, MAX_SMALL_BODY).await.map_err(|cause| {
                ImageError::Unreachable {
                    registry: realm_host.clone(),
                    cause,
                }
            })?;
            let token = token_from_json(&body)
                .ok_or_else(|| unauthorized("its token service answered without a token".into()))?;
            self.auth
                .insert(endpoint.host.clone(), format!("Bearer {token}"));
            Ok(())
        } else if challenges.iter().any(|c| c.scheme == "basic") {
            let credentials = credentials.ok_or_else(|| {
                unauthorized(format!(
                    "it asks for a user name and password, and the docker config has none for \
                     {}",
                    endpoint.host
                ))
            })?;
            self.auth
                .insert(endpoint.host.clone(), credentials.basic_header());
            Ok(())
        } else {
            Err(unauthorized(
                "it answered 401 without a Bearer or Basic challenge".into(),
            ))
        }
    }

    /// Sends a GET of `url`, following redirects. `authorization` is sent only to `auth_host`
    /// (never to the storage a registry redirects to). Failures are unreachability of
    /// `registry`.
    async fn send(
        &self,
        url: &str,
        accept: Option<&str>,
        authorization: Option<&str>,
        auth_host: &str,
        registry: &str,
    ) -> Result<Response<Incoming>> {
        let unreachable = |cause: String| ImageError::Unreachable {
            registry: registry.to_string(),
            cause,
        };
        let mut uri: Uri = url
            .parse()
            .map_err(|e| unreachable(format!("`{url}` is not a URL: {e}")))?;
        for _ in 0..=MAX_REDIRECTS {
            let host = authority(&uri);
            let mut builder = Request::get(uri.clone()).header(USER_AGENT, USER_AGENT_VALUE);
            if let Some(accept) = accept {
                builder = builder.header(ACCEPT, accept);
            }
            if let Some(value) = authorization.filter(|_| host == auth_host) {
                let value = HeaderValue::from_str(value)
                    .map_err(|_| unreachable("the credentials are not a valid header".into()))?;
                builder = builder.header(AUTHORIZATION, value);
            }
            let request = builder
                .body(Empty::new())
                .map_err(|e| unreachable(format!("cannot make a request for {uri}: {e}")))?;
            let response =
                match tokio::time::timeout(RESPONSE_TIMEOUT, self.client.request(request)).await {
                    Err(_) => {
                        return Err(unreachable(format!(
                            "{host} did not answer within {} s",
                            RESPONSE_TIMEOUT.as_secs()
                        )))
                    }
                    Ok(Err(e)) => {
                        let cause = error_chain(&e);
                        let hint = tls_hint(&uri, &host, &cause);
                        return Err(unreachable(format!("{host}: {cause}{hint}")));
                    }
                    Ok(Ok(response)) => response,
                };
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string);
            match location {
                Some(location) if response.status().is_redirection() => {
                    let next = join_location(&uri, &location).ok_or_else(|| {
                        unreachable(format!("{host} redirected to `{location}`, not a URL"))
                    })?;
                    let plain_allowed = uri.scheme_str() == Some("http")
                        || self.config.is_insecure(&authority(&next));
                    if next.scheme_str() != Some("https") && !plain_allowed {
                        return Err(unreachable(format!(
                            "{host} redirected to `{next}`, which is not HTTPS (plain HTTP is \
                             only used for the hosts in `insecure`)"
                        )));
                    }
                    uri = next;
                }
                _ => return Ok(response),
            }
        }
        Err(unreachable(format!(
            "more than {MAX_REDIRECTS} redirects from {url}"
        )))
    }
}

/// A client trusting the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured).
fn http_client() -> std::result::Result<HttpClient, String> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("cannot set up TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(https))
}

/// `HOST[:PORT]` of a URI.
fn authority(uri: &Uri) -> String {
    uri.authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default()
}

/// A header's value as text.
fn header<B>(response: &Response<B>, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The URI a `Location` header points to, relative to `base`.
fn join_location(base: &Uri, location: &str) -> Option<Uri> {
    let scheme = base.scheme_str()?;
    let text = if location.starts_with("http://") || location.starts_with("https://") {
        location.to_string()
    } else if let Some(rest) = location.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if location.starts_with('/') {
        format!("{scheme}://{}{location}", authority(base))
    } else {
        let path = base.path();
        let dir = &path[..path.rfind('/').map(|i| i + 1).unwrap_or(0)];
        format!("{scheme}://{}{dir}{location}", authority(base))
    };
    text.parse().ok()
}

/// A hint for a failed HTTPS connection: a plain-HTTP server, or an untrusted certificate.
fn tls_hint(uri: &Uri, host: &str, cause: &str) -> String {
    if uri.scheme_str() != Some("https") {
        return String::new();
    }
    if cause.contains("corrupt message") || cause.contains("InvalidContentType") {
        format!(" (it does not seem to speak HTTPS: if it serves plain HTTP, add `{host}` to `insecure`)")
    } else if cause.contains("certificate") {
        " (its certificate is not trusted by this machine's roots; SSL_CERT_FILE and SSL_CERT_DIR \
         can add one)"
            .to_string()
    } else {
        String::new()
    }
}

/// An error and its sources, as one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Reads a whole body of at most `limit` bytes.
async fn read_body(
    response: Response<Incoming>,
    limit: u64,
) -> std::result::Result<Vec<u8>, String> {
    let mut body = response.into_body();
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(IDLE_TIMEOUT, body.frame()).await {
            Err(_) => return Err(format!("no data for {} s", IDLE_TIMEOUT.as_secs())),
            Ok(None) => return Ok(out),
            Ok(Some(Err(e))) => return Err(error_chain(&e)),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if (out.len() + data.len()) as u64 > limit {
                        return Err(format!("the answer is larger than {limit} bytes"));
                    }
                    out.extend_from_slice(&data);
                }
            }
        }
    }
}

/// Streams a blob's body into `sink`.
async fn stream_body(
    response: Response<Incoming>,
    sink: &mut BlobSink,
    registry: &str,
    what: &str,
) -> Result<()> {
    let unreachable = |cause: String| ImageError::Unreachable {
        registry: registry.to_string(),
        cause: format!("downloading {what}: {cause}"),
    };
    let mut body = response.into_body();
    loop {
        match tokio::time::timeout(IDLE_TIMEOUT, body.frame()).await {
            Err(_) => {
                return Err(unreachable(format!(
                    "no data for {} s",
                    IDLE_TIMEOUT.as_secs()
                )))
            }
            Ok(None) => return Ok(()),
            Ok(Some(Err(e))) => return Err(unreachable(error_chain(&e))),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    sink.write_all(&data)
                        .map_err(|e| ImageError::io("writing", sink.path().to_path_buf(), e))?;
                }
            }
        }
    }
}

/// What a registry's error body says (`{"errors":[{"code","message"}]}`), else its text.
async fn error_detail(response: Response<Incoming>) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<ErrorEntry>,
    }
    #[derive(serde::Deserialize)]
    struct ErrorEntry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let status = response.status();
    let body = read_body(response, MAX_SMALL_BODY)
        .await
        .unwrap_or_default();
    if let Ok(errors) = serde_json::from_slice::<Errors>(&body) {
        let parts: Vec<String> = errors
            .errors
            .iter()
            .map(|e| match (e.code.is_empty(), e.message.is_empty()) {
                (false, false) => format!("{}: {}", e.code, e.message),
                (false, true) => e.code.clone(),
                _ => e.message.clone(),
            })
            .filter(|p| !p.is_empty())
            .collect();
        if !parts.is_empty() {
            return parts.join("; ");
        }
    }
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    if text.is_empty() {
        status.canonical_reason().unwrap_or("no detail").to_string()
    } else {
        text.chars().take(300).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_joined_to_the_request() {
        let base: Uri = "https://reg.example:5000/v2/a/blobs/sha256:1"
            .parse()
            .unwrap();
        let join = |l: &str| join_location(&base, l).unwrap().to_string();
        assert_eq!(
            join("https://cdn.example/x?sig=1"),
            "https://cdn.example/x?sig=1"
        );
        assert_eq!(join("/other/path"), "https://reg.example:5000/other/path");
        assert_eq!(join("//cdn.example/y"), "https://cdn.example/y");
        assert_eq!(
            join("sibling"),
            "https://reg.example:5000/v2/a/blobs/sibling"
        );
    }

    #[test]
    fn error_chains_keep_every_cause_once() {
        let inner = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(error_chain(&inner), "refused");
    }
}
