//! `network = "internet"` through the real binary: a trial (and its checks) reach a real package
//! index this machine can reach, as `pip download` does, and never a server on the host's
//! loopback or the host's own address; `allowed_hosts` refuses what it does not name; every
//! refusal is in the trial's record, written by proctor. As root and as uid 65534.

mod common;

use std::net::{TcpListener, UdpSocket};

use common::lab::{users, Lab};

/// The host's address on its default route (learned without sending a packet).
fn host_address() -> String {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("192.0.2.200:9").unwrap();
    s.local_addr().unwrap().ip().to_string()
}

/// A step that records whether `host:port` answered, in `reached-HOST`.
fn probe(host: &str, port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('{host}', {port}), timeout=5)\" && touch reached-{host} || true"
    )
}

const DOWNLOAD: &str = "python3 -m pip download --no-deps --no-cache-dir -q six==1.16.0 -d dl";

fn refusals(record: &serde_json::Value) -> Vec<serde_json::Value> {
    record["isolation"]["egress"]["refused"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_trial_on_the_internet_downloads_a_package_and_never_reaches_the_host() {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let host = host_address();
    for who in users() {
        let lab = Lab::new(&format!("internet-{who:?}"));
        lab.one_task(
            "network = \"internet\"\ncheck_network = \"internet\"",
            &format!(
                "{{ check = \"test -f dl/six-1.16.0-py2.py3-none-any.whl\" }}, \
                 {{ check = \"test ! -e reached-{host} && test ! -e reached-127.0.0.1 && test ! -e reached-10.0.2.2\" }}, \
                 {{ check = \"python3 -m pip download --no-deps --no-cache-dir -q six==1.16.0 -d /tmp/c\" }}"
            ),
            &[
                DOWNLOAD,
                &probe(&host, port),
                &probe("127.0.0.1", port),
                &probe("10.0.2.2", port),
            ],
            false,
        );
        let Some(record) = lab.run_graded(who, false, &[]) else {
            return;
        };
        assert_eq!(
            record["outcome"], "completed",
            "{who:?}: the package came down, in the trial and in its check, and the host stayed out of reach\n{record:#}"
        );
        assert_eq!(record["isolation"]["network"], "internet", "{record:#}");
        assert_eq!(record["isolation"]["egress"]["stack"], "slirp4netns");
        let refused = refusals(&record);
        let to_host = format!("{host}:{port}");
        assert!(
            refused.iter().any(
                |r| r["address"] == to_host.as_str() && r["reason"] == "an address of the host"
            ),
            "{who:?}: the connection to the host's address is refused and recorded: {refused:#?}"
        );
        let store = lab.store();
        let shown = lab.proctor(
            who,
            &[
                "show",
                &lab.run_id(),
                "t.agent.0",
                "--store",
                store.to_str().unwrap(),
            ],
        );
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        assert!(
            shown
                .stdout
                .contains("network    internet through slirp4netns (reaches: any public address)")
                && shown.stdout.contains(&format!(
                    "  refused connect {to_host}: an address of the host"
                )),
            "{who:?}: show lists the refusals\n{}",
            shown.stdout
        );
    }
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "a trial reached the host's listener"
    );
}

#[test]
fn allowed_hosts_let_through_only_the_names_they_list() {
    for who in users() {
        let lab = Lab::new(&format!("allowed-{who:?}"));
        lab.one_task(
            "network = \"internet\"\nallowed_hosts = [\"pypi.org\", \"files.pythonhosted.org\"]",
            "{ check = \"test -f dl/six-1.16.0-py2.py3-none-any.whl\" }, { check = \"test ! -e reached-example.com && test ! -e reached-1.1.1.1\" }",
            &[DOWNLOAD, &probe("example.com", 443), &probe("1.1.1.1", 443)],
            false,
        );
        let Some(record) = lab.run_graded(who, false, &[]) else {
            return;
        };
        assert_eq!(record["outcome"], "completed", "{who:?}\n{record:#}");
        let egress = &record["isolation"]["egress"];
        assert_eq!(
            egress["allowed_hosts"],
            serde_json::json!(["pypi.org", "files.pythonhosted.org"])
        );
        let refused = refusals(&record);
        assert!(
            refused
                .iter()
                .any(|r| r["kind"] == "lookup" && r["host"] == "example.com"),
            "{who:?}: the lookup of a name not listed is refused and recorded: {refused:#?}"
        );
        assert!(
            refused
                .iter()
                .any(|r| r["kind"] == "connect" && r["address"] == "1.1.1.1:443"),
            "{who:?}: an address no allowed name gave is refused: {refused:#?}"
        );
    }
}

#[test]
fn validate_names_what_is_wrong_with_allowed_hosts() {
    let lab = Lab::new("allowed-validate");
    lab.one_task(
        "allowed_hosts = [\"pypi.org\", \"https://example.com/\", \"*.\"]",
        "{ files_unchanged = true }",
        &["true"],
        false,
    );
    let suite = lab.suite();
    let out = lab.proctor(common::lab::As::Me, &["validate", suite.to_str().unwrap()]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    let text = flat(&format!("{}{}", out.stdout, out.stderr));
    assert!(
        text.contains("`allowed_hosts` entry `https://example.com/` is not a host name"),
        "{text}"
    );
    assert!(
        text.contains("`allowed_hosts` entry `*.` names no host"),
        "{text}"
    );
    assert!(
        text.contains("`allowed_hosts` without the internet network"),
        "{text}"
    );
    assert!(text.contains("set `network = \"internet\"`"), "{text}");

    // With the internet network and good names, it is valid; the host network is warned about.
    lab.one_task(
        "network = \"internet\"\ncheck_network = \"host\"\nallowed_hosts = [\"pypi.org\", \"*.pythonhosted.org\"]",
        "{ files_unchanged = true }",
        &["true"],
        false,
    );
    let out = lab.proctor(common::lab::As::Me, &["validate", suite.to_str().unwrap()]);
    let text = flat(&format!("{}{}", out.stdout, out.stderr));
    assert_eq!(out.code, 0, "{text}");
    assert!(
        text.contains("check_network = \"host\": it shares the host's network"),
        "{text}"
    );
}

/// A diagnostic's words on one line (the renderer wraps long messages in a frame).
fn flat(text: &str) -> String {
    text.split_whitespace()
        .filter(|w| *w != "│")
        .collect::<Vec<_>>()
        .join(" ")
}
