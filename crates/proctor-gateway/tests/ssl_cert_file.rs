//! `SSL_CERT_FILE` names the gateway's trust roots. Alone in its test binary, since it sets a
//! process-wide environment variable.

mod support;

use proctor_gateway::TrialGrant;
use support::pki::test_pki;
use support::*;

#[test]
fn the_gateway_honours_ssl_cert_file() {
    let (ca_pem, server) = test_pki();
    let up = Upstream::start_tls(
        |_, _| Reply::ok(r#"{"usage":{"input_tokens":1,"output_tokens":1}}"#),
        server,
    );
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("bundle.pem");
    std::fs::write(&ca_path, ca_pem).unwrap();
    std::env::set_var("SSL_CERT_FILE", &ca_path);

    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"https://127.0.0.1:{}\"\n",
        up.addr.port()
    ));
    let gw = gateway(&config, &["anthropic"]);
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
    assert_eq!((l.usage.total(), l.fault), (2, None));
}
