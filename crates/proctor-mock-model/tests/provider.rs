//! The mock as a real provider upstream of proctor's model gateway, over real sockets: a
//! required API key in each API's own header (`--require-key-env`), the `server_error` fault,
//! and HTTPS with a certificate signed by a CA made at test time (`--tls-cert`, `--tls-key`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_mock_model::{
    FaultKind, MockError, MockHandle, MockModel, MockOptions, RouteFault, Script, TlsFiles,
};
use serde_json::{json, Value};

/// The key the provider requires; it must appear nowhere in the log.
const KEY: &str = "sk-mock-PROVIDER-5f0c1e7a9b";
/// A key that is not the one required; it must appear nowhere in the log either.
const WRONG: &str = "sk-mock-TRIALTOKEN-77d2e1";

const SCRIPT: &str = r#"
main_requests = "all"

[[turns]]
text = "first"
usage = { input = 10, output = 2 }

[[turns]]
text = "second"
usage = { input = 20, output = 3 }
"#;

struct Reply {
    status: u16,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends one HTTP/1.1 request (closing the connection) over `stream` and reads the response.
fn exchange(
    stream: &mut impl ReadWrite,
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream.flush().unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    Reply {
        status: head.split_whitespace().nth(1).unwrap().parse().unwrap(),
        body: body.to_string(),
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn send(
    server: &MockHandle,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    exchange(&mut s, server.addr(), method, target, headers, body)
}

fn anthropic_body(text: &str) -> String {
    json!({ "model": "m", "max_tokens": 10, "messages": [{ "role": "user", "content": text }] })
        .to_string()
}

fn responses_body() -> String {
    json!({ "model": "m", "input": "hi" }).to_string()
}

fn chat_body() -> String {
    json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }).to_string()
}

fn gemini_body() -> String {
    json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] }).to_string()
}

const GEMINI: &str = "/v1beta/models/gemini-x:generateContent";

fn start(dir: &Path, options: MockOptions) -> (MockHandle, PathBuf) {
    let log = dir.join("wire.jsonl");
    let options = MockOptions {
        log: Some(log.clone()),
        ..options
    };
    let server =
        MockModel::start_with(Script::parse(SCRIPT).unwrap(), "127.0.0.1:0", options).unwrap();
    (server, log)
}

fn with_key() -> MockOptions {
    MockOptions {
        require_key: Some(KEY.into()),
        ..MockOptions::default()
    }
}

fn log_lines(log: &Path) -> (String, Vec<Value>) {
    let text = std::fs::read_to_string(log).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (text, lines)
}

#[test]
fn a_required_key_admits_the_right_key_in_each_apis_header() {
    let dir = tempfile::tempdir().unwrap();
    let (server, log) = start(dir.path(), with_key());
    let bearer = format!("Bearer {KEY}");

    let r = send(
        &server,
        "POST",
        "/v1/messages",
        &[("x-api-key", KEY)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["content"][0]["text"], "first");
    let r = send(
        &server,
        "POST",
        "/v1/messages",
        &[("authorization", &bearer)],
        &anthropic_body("again"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        &server,
        "POST",
        "/v1/responses",
        &[("authorization", &bearer)],
        &responses_body(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        &server,
        "POST",
        "/v1/chat/completions",
        &[("Authorization", &bearer)],
        &chat_body(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        &server,
        "POST",
        GEMINI,
        &[("x-goog-api-key", KEY)],
        &gemini_body(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        &server,
        "POST",
        &format!("{GEMINI}?key={KEY}"),
        &[],
        &gemini_body(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        &server,
        "GET",
        "/v1/models",
        &[("authorization", &bearer)],
        "",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Health and guard requests need no key.
    assert_eq!(send(&server, "GET", "/health", &[], "").status, 200);
    assert_eq!(send(&server, "GET", "/__mock", &[], "").status, 200);
    assert_eq!(server.stats().auth_rejected, 0);

    let (text, lines) = log_lines(&log);
    assert!(!text.contains(KEY), "the key is in the log:\n{text}");
    let api_lines: Vec<&Value> = lines.iter().filter(|l| l["route"].is_string()).collect();
    assert_eq!(api_lines.len(), 7);
    for l in &api_lines {
        assert_eq!(l["key"], "ok", "{l}");
        assert_eq!(l["status"], 200, "{l}");
    }
    let routes: Vec<&str> = api_lines
        .iter()
        .map(|l| l["route"].as_str().unwrap())
        .collect();
    assert_eq!(
        routes,
        [
            "anthropic",
            "anthropic",
            "responses",
            "chat",
            "gemini",
            "gemini",
            "responses"
        ]
    );
    // Health checks are not checked, so they say nothing about a key.
    let health = lines.iter().find(|l| l["path"] == "/health").unwrap();
    assert!(
        health.get("key").is_none() && health.get("route").is_none(),
        "{health}"
    );
}

#[test]
fn a_missing_or_wrong_key_is_refused_401_in_the_apis_shape_and_logged() {
    let dir = tempfile::tempdir().unwrap();
    let (server, log) = start(dir.path(), with_key());
    send_refused_requests(&server);
    refused_requests_consume_no_turn(&server);
    refusals_are_logged_without_the_keys(&log);
}

/// Eleven requests the keyed server refuses 401, each in its API's error shape: a missing or
/// wrong key on every API, a key where the API does not read it, and a body quoting the key.
fn send_refused_requests(server: &MockHandle) {
    let wrong_bearer = format!("Bearer {WRONG}");
    // Anthropic: missing, wrong, and the right key next to a stray second credential.
    let r = send(server, "POST", "/v1/messages", &[], &anthropic_body("hi"));
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    let r = send(
        server,
        "POST",
        "/v1/messages",
        &[("x-api-key", WRONG)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    let r = send(
        server,
        "POST",
        "/v1/messages",
        &[("x-api-key", KEY), ("authorization", &wrong_bearer)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 401);
    // OpenAI reads only authorization: Bearer.
    let r = send(
        server,
        "POST",
        "/v1/responses",
        &[("x-api-key", KEY)],
        &responses_body(),
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    let r = send(
        server,
        "POST",
        "/v1/chat/completions",
        &[("authorization", &wrong_bearer)],
        &chat_body(),
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["type"], "invalid_api_key");
    // Gemini: a wrong query key, and a Bearer token it does not read.
    let r = send(
        server,
        "POST",
        &format!("{GEMINI}?key={WRONG}"),
        &[],
        &gemini_body(),
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["status"], "UNAUTHENTICATED");
    assert_eq!(r.json()["error"]["code"], 401);
    let r = send(
        server,
        "POST",
        GEMINI,
        &[("authorization", &format!("Bearer {KEY}"))],
        &gemini_body(),
    );
    assert_eq!(r.status, 401);
    // Token counts and listings are API requests too.
    let r = send(
        server,
        "POST",
        "/v1/messages/count_tokens",
        &[("x-api-key", WRONG)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 401);
    let r = send(
        server,
        "GET",
        "/v1/models",
        &[("anthropic-version", "2023-06-01")],
        "",
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    let r = send(server, "GET", "/v1beta/models", &[], "");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["status"], "UNAUTHENTICATED");
    // A body quoting the key is scrubbed from the log as well.
    let r = send(
        server,
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body(&format!("my key is {KEY}")),
    );
    assert_eq!(r.status, 401);
}

/// The right key after the refusals gets the script's first turn: a refusal consumes none.
fn refused_requests_consume_no_turn(server: &MockHandle) {
    // Refused requests consume no turn.
    let r = send(
        server,
        "POST",
        "/v1/messages",
        &[("x-api-key", KEY)],
        &anthropic_body("now"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["content"][0]["text"], "first");
    let stats = server.stats();
    assert_eq!(stats.auth_rejected, 11);
    assert_eq!(stats.main_requests, 1);
    assert_eq!(stats.turns_served, 1);
}

/// Each refusal is a line of the log (route, path, `missing` or `wrong`, no turn, no usage),
/// no key is in it, and a quoted key is redacted.
fn refusals_are_logged_without_the_keys(log: &Path) {
    let (text, lines) = log_lines(log);
    assert!(!text.contains(KEY), "the key is in the log:\n{text}");
    assert!(
        !text.contains(WRONG),
        "the wrong key is in the log:\n{text}"
    );
    let rejected: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "auth_rejected")
        .collect();
    assert_eq!(rejected.len(), 11);
    for l in &rejected {
        assert_eq!(l["status"], 401, "{l}");
        assert!(l["route"].is_string() && l["path"].is_string(), "{l}");
        assert!(l["key"] == "missing" || l["key"] == "wrong", "{l}");
        assert!(l["turn"].is_null() && l["usage"].is_null(), "{l}");
    }
    let verdicts: Vec<(&str, &str)> = rejected
        .iter()
        .map(|l| (l["route"].as_str().unwrap(), l["key"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("anthropic", "missing"),
            ("anthropic", "wrong"),
            ("anthropic", "wrong"),
            ("responses", "missing"),
            ("chat", "wrong"),
            ("gemini", "wrong"),
            ("gemini", "missing"),
            ("anthropic", "wrong"),
            ("anthropic", "missing"),
            ("gemini", "missing"),
            ("anthropic", "missing"),
        ]
    );
    assert_eq!(rejected[0]["path"], "/v1/messages");
    assert!(rejected[10]["request"]
        .to_string()
        .contains("my key is [redacted]"));
    let accepted = lines.last().unwrap();
    assert_eq!(
        (accepted["kind"].as_str(), accepted["key"].as_str()),
        (Some("main"), Some("ok"))
    );
}

#[test]
fn without_a_required_key_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (server, log) = start(dir.path(), MockOptions::default());
    let r = send(&server, "POST", "/v1/messages", &[], &anthropic_body("hi"));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(&server, "GET", "/v1beta/models", &[], "");
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, lines) = log_lines(&log);
    for l in &lines {
        assert!(l.get("key").is_none(), "{l}");
    }
    assert_eq!(lines[0]["kind"], "main");
    assert_eq!(lines[0]["route"], "anthropic");
}

#[test]
fn the_required_key_is_a_secret_and_must_be_usable() {
    let options = with_key();
    let shown = format!("{options:?}");
    assert!(
        !shown.contains(KEY) && shown.contains("[redacted]"),
        "{shown}"
    );

    let bad = MockOptions {
        require_key: Some(String::new()),
        ..MockOptions::default()
    };
    let e = MockModel::start_with(Script::parse(SCRIPT).unwrap(), "127.0.0.1:0", bad).unwrap_err();
    assert!(matches!(e, MockError::Key { .. }), "{e}");
    let e = proctor_mock_model::auth::key_from_value("PROVIDER_KEY", None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the API key variable $PROVIDER_KEY is not set"
    );
    let e = proctor_mock_model::auth::key_from_value("PROVIDER_KEY", Some("".into())).unwrap_err();
    assert_eq!(e.to_string(), "the API key variable $PROVIDER_KEY is empty");
}

#[test]
fn the_server_error_fault_answers_500_in_each_apis_shape() {
    let dir = tempfile::tempdir().unwrap();
    let options = MockOptions {
        faults: vec![RouteFault {
            route: "*".into(),
            kind: FaultKind::ServerError,
        }],
        ..with_key()
    };
    let (server, log) = start(dir.path(), options);
    assert_eq!(
        FaultKind::parse("server_error"),
        Some(FaultKind::ServerError)
    );
    assert_eq!(FaultKind::ServerError.as_str(), "server_error");
    let bearer = format!("Bearer {KEY}");

    let r = send(
        &server,
        "POST",
        "/v1/messages",
        &[("x-api-key", KEY)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "api_error");
    let r = send(
        &server,
        "POST",
        "/v1/responses",
        &[("authorization", &bearer)],
        &responses_body(),
    );
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["error"]["type"], "server_error");
    let r = send(
        &server,
        "POST",
        GEMINI,
        &[("x-goog-api-key", KEY)],
        &gemini_body(),
    );
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["error"]["status"], "INTERNAL");
    assert_eq!(r.json()["error"]["code"], 500);
    // The key is checked first: a refused request never reaches the fault.
    let r = send(&server, "POST", "/v1/messages", &[], &anthropic_body("hi"));
    assert_eq!(r.status, 401);
    assert_eq!(server.stats().turns_served, 0);

    let (_, lines) = log_lines(&log);
    let kinds: Vec<(&str, Option<&str>)> = lines
        .iter()
        .map(|l| (l["kind"].as_str().unwrap(), l["fault"].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("fault", Some("server_error")),
            ("fault", Some("server_error")),
            ("fault", Some("server_error")),
            ("auth_rejected", None),
        ]
    );
}

#[test]
fn the_credential_loss_fault_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let options = MockOptions {
        faults: vec![RouteFault {
            route: "anthropic".into(),
            kind: FaultKind::CredentialLoss,
        }],
        ..MockOptions::default()
    };
    let (server, _log) = start(dir.path(), options);
    let r = send(&server, "POST", "/v1/messages", &[], &anthropic_body("hi"));
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json(),
        json!({ "type": "error", "error": {
            "type": "authentication_error",
            "message": "invalid x-api-key (proctor mock-model: injected credential_loss)",
        } })
    );
}

/// A throwaway CA, and a certificate for 127.0.0.1 and localhost it signed, written as PEM files
/// (as proctor-gateway's `tests/support/pki.rs` makes them): the CA's PEM and the TLS files.
fn test_pki(dir: &Path) -> (String, TlsFiles) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "proctor mock-model test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let files = TlsFiles {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    std::fs::write(&files.cert, format!("{}{}", leaf.pem(), ca.pem())).unwrap();
    std::fs::write(&files.key, leaf_key.serialize_pem()).unwrap();
    (ca.pem(), files)
}

/// A TLS client trusting only `ca_pem`, connected to `addr` as `127.0.0.1`.
fn tls_connect(
    ca_pem: &str,
    addr: SocketAddr,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap())
}

#[test]
fn https_with_a_certificate_from_a_test_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, files) = test_pki(dir.path());
    let options = MockOptions {
        tls: Some(files),
        ..with_key()
    };
    let (server, log) = start(dir.path(), options);
    let addr = server.addr();
    assert_eq!(server.base_url(), format!("https://{addr}"));

    let mut s = tls_connect(&ca_pem, addr);
    let r = exchange(
        &mut s,
        addr,
        "POST",
        "/v1/messages",
        &[("x-api-key", KEY)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["content"][0]["text"], "first");
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));

    let mut s = tls_connect(&ca_pem, addr);
    let r = exchange(
        &mut s,
        addr,
        "POST",
        "/v1/messages",
        &[("x-api-key", WRONG)],
        &anthropic_body("hi"),
    );
    assert_eq!(r.status, 401);

    // Plain HTTP on the TLS port gets no HTTP answer, and the server goes on serving.
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        plain,
        "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = plain.read_to_end(&mut raw);
    assert!(
        !raw.starts_with(b"HTTP/"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    let mut s = tls_connect(&ca_pem, addr);
    let r = exchange(&mut s, addr, "GET", "/health", &[], "");
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));

    let (text, lines) = log_lines(&log);
    assert!(!text.contains(KEY) && !text.contains(WRONG), "{text}");
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["main", "auth_rejected", "meta"]);
}

#[test]
fn a_client_not_trusting_the_ca_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = test_pki(dir.path());
    let other = tempfile::tempdir().unwrap();
    let (other_ca, _) = test_pki(other.path());
    let options = MockOptions {
        tls: Some(files),
        ..MockOptions::default()
    };
    let (server, _log) = start(dir.path(), options);
    let mut s = tls_connect(&other_ca, server.addr());
    let e = s
        .write_all(b"GET /health HTTP/1.1\r\n\r\n")
        .and_then(|()| s.flush());
    let e = match e {
        Err(e) => e,
        Ok(()) => s.read_to_end(&mut Vec::new()).unwrap_err(),
    };
    // Both test CAs share their name, so the client finds the issuer and rejects its signature.
    assert!(e.to_string().contains("invalid peer certificate"), "{e}");
}

#[test]
fn unusable_tls_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = test_pki(dir.path());
    let start_tls = |tls: TlsFiles| {
        let options = MockOptions {
            tls: Some(tls),
            ..MockOptions::default()
        };
        MockModel::start_with(Script::parse(SCRIPT).unwrap(), "127.0.0.1:0", options)
            .map(|_| ())
            .unwrap_err()
    };

    let missing = dir.path().join("nope.pem");
    let e = start_tls(TlsFiles {
        cert: missing.clone(),
        key: files.key.clone(),
    });
    assert!(
        matches!(e, MockError::TlsFile { ref path, .. } if path.ends_with("nope.pem")),
        "{e}"
    );

    // The certificate file holds no key.
    let e = start_tls(TlsFiles {
        cert: files.cert.clone(),
        key: files.cert.clone(),
    });
    assert!(e.to_string().contains("no PEM PRIVATE KEY"), "{e}");

    // The key file holds no certificate.
    let e = start_tls(TlsFiles {
        cert: files.key.clone(),
        key: files.key.clone(),
    });
    assert!(e.to_string().contains("no PEM CERTIFICATE"), "{e}");

    // A key that is not the certificate's.
    let other = tempfile::tempdir().unwrap();
    let (_, others) = test_pki(other.path());
    let e = start_tls(TlsFiles {
        cert: files.cert.clone(),
        key: others.key,
    });
    assert!(matches!(e, MockError::Tls { .. }), "{e}");
}
