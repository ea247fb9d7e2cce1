//! The gateway reaching an upstream over TLS whose certificate is signed by a test CA, trusted
//! only through the provider's `ca_file`.

mod support;

use proctor_gateway::{Config, FaultKind, TrialGrant};
use std::path::Path;
use support::pki::test_pki;
use support::*;

fn tls_config(port: u16, ca_file: Option<&Path>) -> Config {
    let mut text = format!("[providers.anthropic]\nbase_url = \"https://127.0.0.1:{port}\"\n");
    if let Some(ca) = ca_file {
        text.push_str(&format!("ca_file = \"{}\"\n", ca.display()));
    }
    support::config(&text)
}

#[test]
fn the_gateway_trusts_the_providers_ca_file() {
    let (ca_pem, server) = test_pki();
    let up = Upstream::start_tls(
        |_, _| Reply::ok(r#"{"usage":{"input_tokens":4,"output_tokens":2}}"#),
        server,
    );
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, ca_pem).unwrap();

    let gw = gateway(&tls_config(up.addr.port(), Some(&ca_path)), &["anthropic"]);
    let t = gw
        .register_trial(TrialGrant::new(&"anthropic/m".parse().unwrap()))
        .unwrap();
    let r = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.usage.total(), 6);
    assert_eq!(up.seen()[0].header("x-api-key"), Some(REAL_KEY));
}

#[test]
fn without_the_ca_file_the_upstream_is_not_trusted() {
    let (_, server) = test_pki();
    let up = Upstream::start_tls(|_, _| Reply::ok("{}"), server);
    let gw = gateway(&tls_config(up.addr.port(), None), &["anthropic"]);
    let t = gw
        .register_trial(TrialGrant::new(&"anthropic/m".parse().unwrap()))
        .unwrap();
    let r = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 502);
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::ProviderError));
    let error = l.requests[0].error.clone().unwrap();
    assert!(error.contains("certificate"), "{error}");
    assert!(up.seen().is_empty(), "no request got through");
}

#[test]
fn a_bad_ca_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, "not a certificate").unwrap();
    let config = tls_config(1, Some(&ca_path));
    let keys = proctor_gateway::ProviderKeys::resolve(&config, ["anthropic"], |_| Some("k".into()))
        .unwrap();
    let options = proctor_gateway::GatewayOptions {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let err = proctor_gateway::Gateway::start(&config, &keys, options).unwrap_err();
    assert!(err.to_string().contains("ca_file"), "{err}");
}
