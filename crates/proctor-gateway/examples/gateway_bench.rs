//! Measures what the gateway adds, against a local scripted upstream on 127.0.0.1:
//!
//! 1. time to first byte of a streamed response, through the gateway and direct, alternating,
//!    over one kept-alive connection each (median of `--requests`, default 500);
//! 2. `--concurrent` (default 1000) streamed requests at once through the gateway, each on its
//!    own connection: every one must arrive whole, and the ledger must count every token.
//!
//! Run: `cargo run --release -p proctor-gateway --example gateway_bench [-- --requests N --concurrent N]`

#[path = "../tests/support/upstream.rs"]
#[allow(dead_code)]
mod upstream;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use proctor_gateway::{
    Config, Gateway, GatewayHandle, GatewayOptions, ProviderKeys, TrialGrant, TrialLedger, Usage,
};
use upstream::{Reply, Upstream};

const KEY: &str = "sk-bench-0000000000000000";

fn events() -> Vec<String> {
    vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n".into(),
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello from the bench\"}}\n\n".into(),
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n".into(),
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
    ]
}

const PER_REQUEST: Usage = Usage {
    input: 10,
    output: 7,
    cache_read: 5,
    cache_write: 0,
    reasoning: 0,
};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn request(path: &str, auth: Option<&str>, stream: bool) -> Request<Full<Bytes>> {
    let mut r = Request::post(path)
        .header("host", "bench")
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01");
    if let Some(a) = auth {
        r = r.header("x-api-key", a);
    }
    let body = format!(
        r#"{{"model":"claude-sonnet-4-5","max_tokens":64,"stream":{stream},"messages":[{{"role":"user","content":"hi"}}]}}"#
    );
    r.body(Full::new(Bytes::from(body))).expect("a request")
}

async fn connect(addr: std::net::SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    sender
}

/// Sends one streamed request; gives (time to first body byte, whole body).
async fn timed(
    sender: &mut SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> (Duration, Vec<u8>) {
    sender.ready().await.expect("ready");
    let start = Instant::now();
    let resp = sender.send_request(req).await.expect("response");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut ttfb = None;
    let mut got = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("a frame");
        if let Some(d) = frame.data_ref() {
            ttfb.get_or_insert_with(|| start.elapsed());
            got.extend_from_slice(d);
        }
    }
    (ttfb.unwrap_or_else(|| start.elapsed()), got)
}

fn main() {
    let n = arg("--requests", 500);
    let concurrent = arg("--concurrent", 1000);

    let up = Upstream::start(|_, _| Reply::Sse {
        events: events(),
        gate: None,
        pause: Duration::from_millis(5),
    });
    let gw = start_gateway(&up, concurrent);
    let gw_addr = gw.tcp_addr().expect("tcp");
    let evidence = tempfile::tempdir().expect("tempdir");
    let mut grant = TrialGrant::new(&"anthropic/claude-sonnet-4-5".parse().expect("model"));
    grant.evidence_dir = Some(evidence.path().join("ttfb"));
    let token = gw.register_trial(grant.clone()).expect("trial");
    let expected = events().concat();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    // 1. Time to first byte, gateway vs direct, alternating, one kept-alive connection each.
    let (mut direct, mut via) = rt.block_on(first_byte_times(
        up.addr,
        gw_addr,
        token.as_str(),
        n,
        &expected,
    ));
    let ledger = gw.finish_trial(&token).expect("ledger");
    assert_eq!(ledger.requests_forwarded as usize, n + 20);
    print_first_byte_times(n, &mut direct, &mut via);

    // 2. Many streamed requests at once, each on its own connection.
    grant.evidence_dir = Some(evidence.path().join("concurrent"));
    let token = gw.register_trial(grant).expect("trial");
    let started = Instant::now();
    let results = rt.block_on(all_at_once(gw_addr, token.as_str(), concurrent));
    let wall = started.elapsed();
    let ledger = gw.finish_trial(&token).expect("ledger");
    let ok = report_all_at_once(concurrent, &results, wall, &ledger, &expected);
    gw.shutdown();
    if !ok {
        std::process::exit(1);
    }
}

/// A gateway on a loopback port in front of `up`, allowing `concurrent` requests at once.
fn start_gateway(up: &Upstream, concurrent: usize) -> GatewayHandle {
    let text = format!(
        "[providers.anthropic]\nbase_url = \"{}\"\nmax_concurrency = {}\n",
        up.url(),
        concurrent.max(1)
    );
    let config = Config::parse(&text, Path::new("bench.toml")).expect("config");
    let keys = ProviderKeys::resolve(&config, ["anthropic"], |_| Some(KEY.into())).expect("keys");
    let options = GatewayOptions {
        tcp: Some("127.0.0.1:0".parse().expect("addr")),
        increase_after: u32::MAX,
        ..GatewayOptions::default()
    };
    Gateway::start(&config, &keys, options).expect("gateway")
}

/// Times to first byte (ms) of `n` streamed requests direct to the upstream at `up` and as many
/// through the gateway at `gw` (after 20 of each to warm up), alternating, over one kept-alive
/// connection each; every body must be `expected`.
async fn first_byte_times(
    up: SocketAddr,
    gw: SocketAddr,
    token: &str,
    n: usize,
    expected: &str,
) -> (Vec<f64>, Vec<f64>) {
    let mut d = connect(up).await;
    let mut g = connect(gw).await;
    for _ in 0..20 {
        timed(&mut d, request("/v1/messages", Some(KEY), true)).await;
        timed(&mut g, request("/v1/messages", Some(token), true)).await;
    }
    let (mut direct, mut via) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let (t, body) = timed(&mut d, request("/v1/messages", Some(KEY), true)).await;
        assert_eq!(body, expected.as_bytes());
        direct.push(t.as_secs_f64() * 1e3);
        let (t, body) = timed(&mut g, request("/v1/messages", Some(token), true)).await;
        assert_eq!(body, expected.as_bytes());
        via.push(t.as_secs_f64() * 1e3);
    }
    (direct, via)
}

/// Prints the medians and 99th percentiles of the times to first byte.
fn print_first_byte_times(n: usize, direct: &mut [f64], via: &mut [f64]) {
    let (md, mv) = (median(direct), median(via));
    println!("time to first byte, streamed, {n} requests each (ms):");
    println!(
        "  direct   median {md:.3}  p99 {:.3}",
        percentile(direct, 0.99)
    );
    println!(
        "  gateway  median {mv:.3}  p99 {:.3}",
        percentile(via, 0.99)
    );
    println!(
        "  gateway - direct  {:.3} ms   gateway / direct  {:.2}x",
        mv - md,
        mv / md
    );
}

/// One streamed request's latency and whole body, or why its task failed.
type Outcome = Result<(Duration, Vec<u8>), String>;

/// Sends `concurrent` streamed requests through the gateway at `gw` at once, each on its own
/// connection.
async fn all_at_once(gw: SocketAddr, token: &str, concurrent: usize) -> Vec<Outcome> {
    let tasks: Vec<_> = (0..concurrent)
        .map(|_| {
            let token = token.to_string();
            tokio::spawn(async move {
                let mut s = connect(gw).await;
                let start = Instant::now();
                let (_, body) = timed(&mut s, request("/v1/messages", Some(&token), true)).await;
                (start.elapsed(), body)
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.map_err(|e| e.to_string()));
    }
    out
}

/// Prints what arrived of the concurrent requests and what the ledger counted; gives whether
/// nothing was lost.
fn report_all_at_once(
    concurrent: usize,
    results: &[Outcome],
    wall: Duration,
    ledger: &TrialLedger,
    expected: &str,
) -> bool {
    let whole = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|(_, b)| b == expected.as_bytes()))
        .count();
    let mut latencies: Vec<f64> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|(d, _)| d.as_secs_f64() * 1e3)
        .collect();
    let mut want = Usage::default();
    for _ in 0..concurrent {
        want.add(&PER_REQUEST);
    }
    println!("{concurrent} concurrent streamed requests through the gateway:");
    println!(
        "  whole responses {whole}/{concurrent}, wall {:.1} ms",
        wall.as_secs_f64() * 1e3
    );
    println!(
        "  per-request latency median {:.1} ms  p99 {:.1} ms",
        median(&mut latencies),
        percentile(&mut latencies, 0.99)
    );
    println!(
        "  ledger: forwarded {}, usage {} tokens (want {}), faults {:?}, records {}",
        ledger.requests_forwarded,
        ledger.usage.total(),
        want.total(),
        ledger.faults,
        ledger.requests.len()
    );
    let ok = whole == concurrent
        && ledger.usage == want
        && ledger.faults.is_empty()
        && ledger.requests.len() == concurrent;
    println!("  {}", if ok { "no loss" } else { "LOSS" });
    ok
}
