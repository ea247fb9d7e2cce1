//! The internet network, for real: a trial's own namespace with a way out through slirp4netns
//! that proctor decides, reaching PyPI (which this machine can reach) and never the host.

use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use proctor_sandbox::{run, Network, SandboxReport, SandboxSpec, Workspace};

fn init_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_proctor-sandbox-testinit"))
}

/// slirp4netns must be here (ci/setup installs it): missing, the test fails, never skips.
fn require_stack() {
    if let Err(e) = proctor_sandbox::internet_available() {
        panic!("{e}: run ci/setup");
    }
}

/// The host's address on its default route (no packet is sent to learn it).
fn host_address() -> String {
    let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
    s.connect("192.0.2.200:9").expect("route");
    s.local_addr().expect("addr").ip().to_string()
}

struct Trial {
    dir: tempfile::TempDir,
}

impl Trial {
    fn new() -> Trial {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("ws")).expect("mkdir");
        Trial { dir }
    }

    fn spec(&self, python: &str) -> SandboxSpec {
        let out = self.dir.path().join("out");
        let mut s = SandboxSpec::new(
            init_exe(),
            Workspace::Bind {
                dir: self.dir.path().join("ws"),
            },
            vec!["python3".into(), "-c".into(), python.into()],
            &out,
            self.dir.path().join("err"),
            Duration::from_secs(60),
        );
        s.network = Network::Internet;
        s.grace = Duration::from_millis(500);
        s
    }

    fn run(&self, spec: &SandboxSpec) -> (SandboxReport, String) {
        let report = run(spec).unwrap_or_else(|e| {
            panic!(
                "run failed: {e}\n{}",
                fs::read_to_string(self.dir.path().join("err")).unwrap_or_default()
            )
        });
        let out = fs::read_to_string(self.dir.path().join("out")).unwrap_or_default();
        let err = fs::read_to_string(self.dir.path().join("err")).unwrap_or_default();
        assert_eq!(report.exit_code, Some(0), "{out}\n{err}");
        (report, out)
    }
}

const PROBES: &str = r#"
import socket, urllib.request
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "connected"
    except OSError as e:
        return "failed"
def name(host):
    try:
        return socket.gethostbyname(host)
    except OSError:
        return "unresolved"
def fetch(url):
    try:
        return str(urllib.request.urlopen(url, timeout=30).status)
    except Exception as e:
        return "failed"
"#;

#[test]
fn the_internet_is_reached_and_the_host_is_not() {
    require_stack();
    let listener = TcpListener::bind("0.0.0.0:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let host = host_address();
    let script = format!(
        "{PROBES}
print('pypi', fetch('https://pypi.org/simple/six/'))
print('resolv', open('/etc/resolv.conf').read().split()[1])
print('host-address', tcp('{host}', {port}))
print('host-loopback-via-gateway', tcp('10.0.2.2', {port}))
print('own-loopback', tcp('127.0.0.1', {port}))
print('metadata', tcp('169.254.169.254', 80))
"
    );
    let t = Trial::new();
    let (report, out) = t.run(&t.spec(&script));
    assert!(out.contains("pypi 200\n"), "{out}");
    assert!(out.contains("resolv 127.0.0.53\n"), "{out}");
    assert!(out.contains("host-address failed\n"), "{out}");
    assert!(out.contains("host-loopback-via-gateway failed\n"), "{out}");
    assert!(out.contains("own-loopback failed\n"), "{out}");
    assert!(out.contains("metadata failed\n"), "{out}");
    assert_eq!(report.isolation.network, Network::Internet);
    let egress = report.isolation.egress.expect("the way out is recorded");
    assert_eq!(egress.stack, "slirp4netns");
    assert!(egress.lookups >= 1 && egress.allowed >= 1, "{egress:?}");
    let refused: Vec<_> = egress
        .refused
        .iter()
        .filter_map(|r| r.address.as_deref())
        .collect();
    assert!(
        refused.contains(&format!("{host}:{port}").as_str()),
        "the host's address is refused and recorded: {egress:?}"
    );
    assert!(refused.contains(&"169.254.169.254:80"), "{egress:?}");
    // Nothing reached the host's listener.
    listener.set_nonblocking(true).expect("nonblocking");
    assert!(
        listener.accept().is_err(),
        "a trial connection reached the host"
    );
}

#[test]
fn allowed_hosts_limit_the_names_and_the_addresses() {
    require_stack();
    let script = format!(
        "{PROBES}
print('pypi', fetch('https://pypi.org/simple/six/'))
print('example', name('example.com'))
print('literal', tcp('1.1.1.1', 443))
"
    );
    let t = Trial::new();
    let mut spec = t.spec(&script);
    spec.allowed_hosts = vec!["pypi.org".into(), "*.pythonhosted.org".into()];
    let (report, out) = t.run(&spec);
    assert!(out.contains("pypi 200\n"), "{out}");
    assert!(out.contains("example unresolved\n"), "{out}");
    assert!(out.contains("literal failed\n"), "{out}");
    let egress = report.isolation.egress.expect("recorded");
    assert_eq!(egress.allowed_hosts, spec.allowed_hosts);
    let lookup = egress
        .refused
        .iter()
        .find(|r| r.host.as_deref() == Some("example.com"))
        .expect("the refused lookup is recorded");
    assert_eq!(lookup.reason, "not an allowed host");
    assert!(
        egress
            .refused
            .iter()
            .any(|r| r.address.as_deref() == Some("1.1.1.1:443")),
        "{egress:?}"
    );
}

#[test]
fn allowed_hosts_need_the_internet_network() {
    let t = Trial::new();
    let mut spec = t.spec("print(1)");
    spec.network = Network::None;
    spec.allowed_hosts = vec!["pypi.org".into()];
    let e = run(&spec).expect_err("refused");
    assert!(
        e.to_string()
            .contains("allowed_hosts needs the internet network"),
        "{e}"
    );
}
