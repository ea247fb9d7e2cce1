//! What keeps the viewer's pages safe to open: a `Host` check against DNS rebinding (a page on
//! another site that resolves its own name to 127.0.0.1 cannot read the store through it), and
//! the response headers every page and API answer carries, the Content-Security-Policy first
//! (only the page's own inline style and script run; nothing from another origin loads).

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::html::PAGE_POLICY;

/// The policy the server sends with every answer: the page's, and no framing by any site
/// (`frame-ancestors` is only honoured in a header).
static HEADER_POLICY: LazyLock<String> =
    LazyLock::new(|| format!("{}; frame-ancestors 'none'", *PAGE_POLICY));

/// The `Host` values the viewer answers: the address it listens on and, on loopback,
/// `localhost`, `127.0.0.1` and `[::1]`, each with its port; plus the names given with
/// `--allow-host` (with or without a port).
#[derive(Debug, Clone)]
pub struct Hosts {
    allowed: Vec<String>,
}

impl Hosts {
    /// The hosts of a viewer listening on `addr`, with `extra` names allowed.
    pub fn new(addr: SocketAddr, extra: &[String]) -> Hosts {
        let port = addr.port();
        let mut allowed = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                allowed.push(format!("{name}:{port}"));
            }
        }
        // A name given is answered as written (it may carry a port, as behind a proxy) and
        // with the viewer's own port.
        for name in extra {
            let name = name.to_ascii_lowercase();
            allowed.push(format!("{name}:{port}"));
            allowed.push(name);
        }
        if port == 80 {
            let bare: Vec<String> = allowed
                .iter()
                .filter_map(|h| h.strip_suffix(":80").map(str::to_string))
                .collect();
            allowed.extend(bare);
        }
        Hosts { allowed }
    }

    /// Whether a request whose `Host` header is `host` is answered.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        self.allowed.contains(&host)
    }
}

/// Refuses a request for a host the viewer does not serve (421, before any store read), and
/// adds the security headers to every answer.
pub async fn guard(State(hosts): State<Arc<Hosts>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let mut response = match host {
        Some(h) if hosts.allows(&h) => next.run(req).await,
        Some(h) => (
            StatusCode::MISDIRECTED_REQUEST,
            format!("proctor view does not serve the host `{h}`: open it by the address it printed, or start it with `--allow-host NAME`\n"),
        )
            .into_response(),
        None => (StatusCode::BAD_REQUEST, "a request needs a Host header\n").into_response(),
    };
    let headers = response.headers_mut();
    let set = |v: &str| {
        HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("default-src 'none'"))
    };
    headers.insert(header::CONTENT_SECURITY_POLICY, set(&HEADER_POLICY));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::hash_source;

    #[test]
    fn on_loopback_only_its_own_names_and_the_allowed_ones_are_served() {
        let hosts = Hosts::new("127.0.0.1:7777".parse().unwrap(), &["proctor.lan".into()]);
        for ok in [
            "127.0.0.1:7777",
            "localhost:7777",
            "LOCALHOST:7777",
            "[::1]:7777",
            "proctor.lan",
            "proctor.lan:7777",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:7777",
            "127.0.0.1:7778",
            "localhost",
            "127.0.0.1.evil.example:7777",
            "",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
        // Bound elsewhere on purpose: its address and the names given, no loopback names.
        let hosts = Hosts::new("10.0.0.5:8080".parse().unwrap(), &[]);
        assert!(hosts.allows("10.0.0.5:8080"));
        assert!(!hosts.allows("localhost:8080"));
    }

    #[test]
    fn the_policy_allows_the_pages_own_script_and_style_by_hash_and_nothing_remote() {
        let p = &*PAGE_POLICY;
        assert!(
            p.starts_with("default-src 'none'; script-src 'sha256-"),
            "{p}"
        );
        assert!(!p.contains("unsafe-inline") && !p.contains("http"), "{p}");
        assert_eq!(
            hash_source("a"),
            "'sha256-ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs='"
        );
        assert!(HEADER_POLICY.ends_with("frame-ancestors 'none'"));
    }
}
