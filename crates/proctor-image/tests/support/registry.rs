//! A real registry for the tests (Debian's `docker-registry`, on a free loopback port), a plain
//! HTTP/1.1 client to push images into it, and an authenticating proxy in front of it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine;

use super::{Blob, TestImage};

/// Where Debian's package installs the registry.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A free loopback port (nothing listens on it once this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `docker-registry` process serving plain HTTP on `addr`, killed when dropped.
pub struct Registry {
    pub addr: String,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry with its storage in a temporary folder and waits until it answers.
    pub fn start() -> Registry {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: the registry tests need Debian's registry; install it \
             with `apt-get install docker-registry`"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    \
                 rootdirectory: {}\nhttp:\n  addr: {addr}\n  secret: proctor-test\n",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let log = dir.path().join("registry.log");
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut registry = Registry {
            addr,
            child,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(response) = try_http(&registry.addr, "GET", "/v2/", &[], b"") {
                if response.status == 200 {
                    return registry;
                }
            }
            if let Ok(Some(status)) = registry.child.try_wait() {
                panic!("docker-registry exited ({status}): {}", registry.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not answer on {} within 20 s: {}",
                registry.addr,
                registry.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Pushes a blob with a monolithic upload (POST, then PUT with the digest).
    pub fn push_blob(&self, repository: &str, blob: &Blob) {
        let started = http(
            &self.addr,
            "POST",
            &format!("/v2/{repository}/blobs/uploads/"),
            &[],
            b"",
        );
        assert_eq!(started.status, 202, "starting an upload: {started:?}");
        let location = started.header("location").expect("an upload location");
        let path = path_of(&location);
        let sep = if path.contains('?') { '&' } else { '?' };
        let done = http(
            &self.addr,
            "PUT",
            &format!("{path}{sep}digest={}", blob.digest),
            &[("Content-Type", "application/octet-stream")],
            &blob.bytes,
        );
        assert_eq!(done.status, 201, "finishing an upload: {done:?}");
    }

    /// Puts a manifest or index under `reference` (a tag or its digest).
    pub fn push_manifest(&self, repository: &str, reference: &str, manifest: &Blob) {
        let put = http(
            &self.addr,
            "PUT",
            &format!("/v2/{repository}/manifests/{reference}"),
            &[("Content-Type", &manifest.media_type)],
            &manifest.bytes,
        );
        assert_eq!(put.status, 201, "putting a manifest: {put:?}");
    }

    /// Pushes an image's config and layers, then its manifest under `tag`.
    pub fn push_image(&self, repository: &str, tag: &str, image: &TestImage) {
        self.push_blob(repository, &image.config);
        for layer in &image.layers {
            self.push_blob(repository, layer);
        }
        self.push_manifest(repository, tag, &image.manifest);
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The path and query of a URL (or the text itself if it is already a path).
fn path_of(location: &str) -> String {
    match location.split_once("://") {
        Some((_, rest)) => rest
            .find('/')
            .map(|i| rest[i..].to_string())
            .unwrap_or("/".into()),
        None => location.to_string(),
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

/// One HTTP/1.1 request on its own connection.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    try_http(addr, method, path, headers, body).unwrap()
}

fn try_http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no response head"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(HttpResponse {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}

/// How the proxy asks clients to authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// 401 with a Bearer challenge; `/token` gives a token for the right basic credentials.
    Bearer,
    /// 401 with a Basic challenge; the right basic credentials are let through.
    Basic,
    /// No authentication, but every manifest served is altered (same length, other bytes).
    TamperManifests,
}

/// The user and password the proxy accepts.
pub const USER: &str = "tester";
pub const PASSWORD: &str = "s3cret:with:colons";
const TOKEN: &str = "token-for-tester";

/// A proxy in front of a registry that demands authentication, answers blob requests with a
/// redirect to the registry itself, and logs every request line with its `Authorization`.
pub struct AuthProxy {
    pub addr: String,
    pub log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AuthProxy {
    pub fn start(upstream: &str, mode: AuthMode) -> AuthProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (upstream, log2, stop2, addr2) = (
            upstream.to_string(),
            log.clone(),
            stop.clone(),
            addr.clone(),
        );
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (upstream, log, addr) = (upstream.clone(), log2.clone(), addr2.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &upstream, &addr, mode, &log);
                });
            }
        });
        AuthProxy {
            addr,
            log,
            stop,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for AuthProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// The head of one request: its request line, path and the headers the proxy reads.
struct Request {
    line: String,
    path: String,
    authorization: String,
    accept: String,
}

/// Reads the head of one request from `stream`; `None` when it closes before one.
fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&raw).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default().to_string();
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut authorization = String::new();
    let mut accept = String::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                authorization = v.trim().to_string();
            } else if k.eq_ignore_ascii_case("accept") {
                accept = v.trim().to_string();
            }
        }
    }
    Ok(Some(Request {
        line,
        path,
        authorization,
        accept,
    }))
}

/// Writes a response of `status` with `headers` and `body` to `stream`.
fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)
}

/// Serves one request (every response closes the connection).
fn serve(
    mut stream: TcpStream,
    upstream: &str,
    own_addr: &str,
    mode: AuthMode,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let Some(request) = read_request(&mut stream)? else {
        return Ok(());
    };
    log.lock()
        .unwrap()
        .push(format!("{} auth={}", request.line, request.authorization));
    let (path, authorization) = (&request.path, &request.authorization);
    let credentials = basic(USER, PASSWORD);
    if path.starts_with("/token") {
        return token(&mut stream, mode, *authorization == credentials);
    }
    let authorized = match mode {
        AuthMode::Bearer => *authorization == format!("Bearer {TOKEN}"),
        AuthMode::Basic => *authorization == credentials,
        AuthMode::TamperManifests => true,
    };
    if !authorized {
        return challenge(&mut stream, mode, own_addr);
    }
    if path.contains("/blobs/") {
        // Blobs come from "storage" elsewhere, as from a CDN: a redirect without credentials.
        return respond(
            &mut stream,
            "307 Temporary Redirect",
            &[("Location", format!("http://{upstream}{path}"))],
            b"",
        );
    }
    forward(&mut stream, upstream, &request, mode)
}

/// The token endpoint: a token for the right basic credentials (`good`) in bearer mode, else
/// 401.
fn token(stream: &mut TcpStream, mode: AuthMode, good: bool) -> std::io::Result<()> {
    if mode == AuthMode::Bearer && good {
        let body = format!(r#"{{"token":"{TOKEN}","expires_in":300}}"#);
        return respond(
            stream,
            "200 OK",
            &[("Content-Type", "application/json".into())],
            body.as_bytes(),
        );
    }
    respond(
        stream,
        "401 Unauthorized",
        &[],
        br#"{"details":"bad credentials"}"#,
    )
}

/// 401 with the challenge of `mode` (a bearer realm at `own_addr`'s token endpoint, or basic).
fn challenge(stream: &mut TcpStream, mode: AuthMode, own_addr: &str) -> std::io::Result<()> {
    let challenge = match mode {
        AuthMode::Bearer => format!(
            r#"Bearer realm="http://{own_addr}/token",service="proxy-test",scope="repository:test/img:pull""#
        ),
        AuthMode::Basic | AuthMode::TamperManifests => r#"Basic realm="proxy-test""#.to_string(),
    };
    let body = br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#;
    respond(
        stream,
        "401 Unauthorized",
        &[
            ("WWW-Authenticate", challenge),
            ("Content-Type", "application/json".into()),
        ],
        body,
    )
}

/// Forwards `request` to `upstream` and its answer back (a manifest's `schemaVersion`
/// corrupted in tamper mode).
fn forward(
    stream: &mut TcpStream,
    upstream: &str,
    request: &Request,
    mode: AuthMode,
) -> std::io::Result<()> {
    let (path, accept) = (&request.path, &request.accept);
    let mut up = TcpStream::connect(upstream)?;
    up.set_read_timeout(Some(Duration::from_secs(20)))?;
    let forwarded = format!(
        "GET {path} HTTP/1.1\r\nHost: {upstream}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    up.write_all(forwarded.as_bytes())?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    if mode == AuthMode::TamperManifests && path.contains("/manifests/") {
        if let Some(at) = answer.windows(13).position(|w| w == b"schemaVersion") {
            answer[at + 12] = b'N';
        }
    }
    stream.write_all(&answer)
}

/// A docker config file in `dir` with the proxy's credentials for `host`.
pub fn docker_config_for(dir: &Path, host: &str) -> PathBuf {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let path = dir.join("docker-config.json");
    std::fs::write(
        &path,
        format!(r#"{{"auths": {{"{host}": {{"auth": "{auth}"}}, "other.example": {{"auth": "eDp5"}}}}}}"#),
    )
    .unwrap();
    path
}
