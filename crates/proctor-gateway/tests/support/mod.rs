//! Shared test harness: a real scripted upstream, a real client, and a gateway between them.
#![allow(dead_code)]

pub mod client;
pub mod pki;
pub mod upstream;

use std::io::Read;
use std::path::Path;

use proctor_gateway::{Config, Gateway, GatewayHandle, GatewayOptions, ProviderKeys};

pub use client::{Client, Target};
pub use upstream::{Reply, Upstream};

/// The real key every test provider uses.
pub const REAL_KEY: &str = "sk-real-7f3e9a1c5b2d4e6f8a0b";

/// Fast retries for tests, then `extra` configuration.
pub fn config(extra: &str) -> Config {
    let text = format!("[retries]\nattempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n\n{extra}");
    Config::parse(&text, Path::new("/test/config.toml")).unwrap()
}

/// A gateway on a TCP loopback port for `providers`, each keyed with [`REAL_KEY`].
pub fn gateway(config: &Config, providers: &[&str]) -> GatewayHandle {
    gateway_with(config, providers, GatewayOptions::default())
}

/// A gateway with options (a TCP loopback port is added when no listener is set).
pub fn gateway_with(
    config: &Config,
    providers: &[&str],
    mut options: GatewayOptions,
) -> GatewayHandle {
    let keys = ProviderKeys::resolve(config, providers.iter().copied(), |_| {
        Some(REAL_KEY.to_string())
    })
    .unwrap();
    if options.unix_socket.is_none() && options.tcp.is_none() {
        options.tcp = Some("127.0.0.1:0".parse().unwrap());
    }
    Gateway::start(config, &keys, options).unwrap()
}

/// A client of the gateway's TCP port.
pub fn client(gw: &GatewayHandle) -> Client {
    Client::new(Target::Tcp(gw.tcp_addr().unwrap()))
}

/// Every file under `dir`, gzip ones decompressed, as (relative path, bytes raw, bytes plain).
pub fn evidence_files(dir: &Path) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let raw = std::fs::read(&path).unwrap();
            let plain = if path.extension().is_some_and(|e| e == "gz") {
                let mut v = Vec::new();
                flate2::read::GzDecoder::new(&raw[..])
                    .read_to_end(&mut v)
                    .unwrap();
                v
            } else {
                raw.clone()
            };
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            out.push((rel, raw, plain));
        }
    }
    out.sort();
    out
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}
