//! Headers across the gateway: the agent's token in, the real key out, hop-by-hop headers
//! dropped both ways.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::api::Api;
use crate::keys::SecretKey;

/// Headers that belong to one connection, never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Headers that carry credentials, never forwarded from the agent.
const CREDENTIALS: &[&str] = &["authorization", "x-api-key", "x-goog-api-key", "cookie"];

/// Every token the agent may have sent, in order: `x-api-key`, `authorization: Bearer`,
/// `x-goog-api-key`, and the `key` query parameter.
pub(crate) fn tokens<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Vec<&'a str> {
    let mut out = Vec::new();
    let text = |name: &str| headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
    out.extend(text("x-api-key").map(str::trim));
    out.extend(text("authorization").filter_map(|v| {
        let v = v.trim();
        v.get(..7)
            .filter(|p| p.eq_ignore_ascii_case("bearer "))
            .map(|_| v[7..].trim())
    }));
    out.extend(text("x-goog-api-key").map(str::trim));
    if let Some(q) = query {
        out.extend(q.split('&').filter_map(|kv| kv.strip_prefix("key=")));
    }
    out.retain(|t| !t.is_empty());
    out
}

/// The query without its `key` parameter (`None` when nothing is left).
pub(crate) fn query_without_key(query: Option<&str>) -> Option<String> {
    let kept: Vec<&str> = query?
        .split('&')
        .filter(|kv| !kv.is_empty() && *kv != "key" && !kv.starts_with("key="))
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

/// The headers to send upstream: the agent's, less hop-by-hop, credential, `host`,
/// `content-length`, `expect` and `accept-encoding` (the gateway reads usage from an
/// uncompressed body),
/// plus the real key in `api`'s own header.
pub(crate) fn upstream(agent: &HeaderMap, api: Api, key: Option<&SecretKey>) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(agent.len() + 2);
    for (name, value) in agent {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || CREDENTIALS.contains(&n)
            || matches!(n, "host" | "content-length" | "accept-encoding" | "expect")
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    if let Some(key) = key {
        let (name, value) = match api {
            Api::AnthropicMessages => (
                HeaderName::from_static("x-api-key"),
                key.expose().to_string(),
            ),
            Api::OpenaiResponses | Api::OpenaiChat => {
                (header::AUTHORIZATION, format!("Bearer {}", key.expose()))
            }
            Api::Gemini => (
                HeaderName::from_static("x-goog-api-key"),
                key.expose().to_string(),
            ),
        };
        if let Ok(mut v) = HeaderValue::from_str(&value) {
            v.set_sensitive(true);
            out.insert(name, v);
        }
    }
    out
}

/// The upstream's response headers for the agent, less hop-by-hop ones (and `content-length`
/// when the body will be replaced).
pub(crate) fn downstream(upstream: &HeaderMap, keep_length: bool) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || (!keep_length && n == "content-length") {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The provider's request id, for the record.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    ["request-id", "x-request-id", "x-goog-request-id"]
        .iter()
        .find_map(|n| headers.get(*n))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn tokens_come_from_every_auth_place() {
        let h = map(&[
            ("x-api-key", "a"),
            ("authorization", "Bearer b"),
            ("x-goog-api-key", "c"),
        ]);
        assert_eq!(tokens(&h, Some("alt=sse&key=d")), ["a", "b", "c", "d"]);
        let h = map(&[
            ("authorization", "bearer  e "),
            ("authorization", "Basic x"),
        ]);
        assert_eq!(tokens(&h, None), ["e"]);
        assert!(tokens(&map(&[("x-api-key", "")]), Some("key=")).is_empty());
    }

    #[test]
    fn the_key_parameter_is_dropped() {
        assert_eq!(
            query_without_key(Some("alt=sse&key=t")).as_deref(),
            Some("alt=sse")
        );
        assert_eq!(query_without_key(Some("key=t")), None);
        assert_eq!(
            query_without_key(Some("keyx=1&key")).as_deref(),
            Some("keyx=1")
        );
        assert_eq!(query_without_key(None), None);
    }

    #[test]
    fn upstream_headers_carry_the_real_key_only() {
        let agent = map(&[
            ("x-api-key", "tok"),
            ("authorization", "Bearer tok"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "a,b"),
            ("connection", "keep-alive"),
            ("accept-encoding", "gzip"),
            ("host", "127.0.0.1"),
            ("content-length", "5"),
        ]);
        let key = SecretKey::new("sk-real");
        let out = upstream(&agent, Api::AnthropicMessages, Some(&key));
        assert_eq!(out.get("x-api-key").unwrap(), "sk-real");
        assert!(out.get("authorization").is_none());
        assert_eq!(out.get("anthropic-version").unwrap(), "2023-06-01");
        assert_eq!(out.get("anthropic-beta").unwrap(), "a,b");
        assert_eq!(out.get("accept-encoding").unwrap(), "identity");
        for gone in ["connection", "host", "content-length"] {
            assert!(out.get(gone).is_none(), "{gone}");
        }
        let out = upstream(&agent, Api::OpenaiChat, Some(&key));
        assert_eq!(out.get("authorization").unwrap(), "Bearer sk-real");
        assert!(out.get("x-api-key").is_none());
        let out = upstream(&agent, Api::Gemini, None);
        assert!(out.get("x-goog-api-key").is_none() && out.get("x-api-key").is_none());
    }

    #[test]
    fn downstream_headers_drop_hop_by_hop() {
        let up = map(&[
            ("content-type", "text/event-stream"),
            ("transfer-encoding", "chunked"),
            ("content-length", "3"),
            ("request-id", "req_1"),
        ]);
        let d = downstream(&up, false);
        assert_eq!(d.len(), 2);
        assert_eq!(downstream(&up, true).len(), 3);
        assert_eq!(request_id(&up).as_deref(), Some("req_1"));
    }
}
