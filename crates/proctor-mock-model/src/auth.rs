//! The API key a mock that stands in for a provider requires ([`crate::MockOptions::require_key`]).
//!
//! Each wire API carries the key in its own headers, as the real providers read it:
//!
//! | API | where the key is read |
//! |---|---|
//! | Anthropic Messages | `x-api-key: KEY` or `authorization: Bearer KEY` |
//! | OpenAI Responses and Chat Completions | `authorization: Bearer KEY` |
//! | Gemini | `x-goog-api-key: KEY` or the `key=KEY` query parameter |
//!
//! A request is accepted when it carries at least one of its API's credentials and every one it
//! carries is exactly the key (so a stray second credential, such as an agent's own token left
//! next to the real key, is caught). Keys are compared in time independent of where they
//! differ. Nothing here ever formats a key: a verdict says only `ok`, `missing` or `wrong`.

use std::ffi::OsString;

use crate::http::Request;
use crate::MockError;

/// Which headers (and query parameter) carry the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlace {
    /// `x-api-key`, or `authorization: Bearer` (Anthropic).
    Anthropic,
    /// `authorization: Bearer` (OpenAI Responses and Chat Completions).
    Bearer,
    /// `x-goog-api-key`, or the `key` query parameter (Gemini).
    Gemini,
    /// Any of `x-api-key` or `authorization: Bearer` (`GET /v1/models`, shared by Anthropic and
    /// OpenAI clients).
    AnthropicOrBearer,
}

/// The verdict on a request's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyCheck {
    /// It carries the key, and no other credential in its API's places.
    Ok,
    /// It carries no credential where its API puts one.
    Missing,
    /// It carries a credential that is not the key.
    Wrong,
}

impl KeyCheck {
    /// `ok`, `missing` or `wrong`: the exchange log's `key` field.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyCheck::Ok => "ok",
            KeyCheck::Missing => "missing",
            KeyCheck::Wrong => "wrong",
        }
    }
}

/// Checks the credentials `req` carries in `place` against `key`.
pub fn check(req: &Request, place: KeyPlace, key: &str) -> KeyCheck {
    let mut presented: Vec<String> = Vec::new();
    let headers = |name: &'static str| {
        req.headers
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let bearer = |out: &mut Vec<String>| {
        for v in headers("authorization") {
            // A scheme other than Bearer is still a credential, and never the key.
            out.push(match v.split_once(' ') {
                Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                    token.trim().to_string()
                }
                _ => String::new(),
            });
        }
    };
    match place {
        KeyPlace::Anthropic | KeyPlace::AnthropicOrBearer => {
            presented.extend(headers("x-api-key").map(String::from));
            bearer(&mut presented);
        }
        KeyPlace::Bearer => bearer(&mut presented),
        KeyPlace::Gemini => {
            presented.extend(headers("x-goog-api-key").map(String::from));
            presented.extend(
                req.query
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .filter(|(k, _)| *k == "key")
                    .map(|(_, v)| percent_decode(v)),
            );
        }
    }
    if presented.is_empty() {
        KeyCheck::Missing
    } else if presented.iter().all(|p| same(p.as_bytes(), key.as_bytes())) {
        KeyCheck::Ok
    } else {
        KeyCheck::Wrong
    }
}

/// Whether `a` and `b` are equal, taking the same time wherever they differ (only their lengths
/// show).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `%XX` escapes and `+` of a query value decoded; a malformed escape is kept as it is.
fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The key held by the environment variable `var`, for [`crate::MockOptions::require_key`].
pub fn key_from_env(var: &str) -> Result<String, MockError> {
    key_from_value(var, std::env::var_os(var))
}

/// The key in `value` (the content of the variable `var`): refused when it is unset, not UTF-8,
/// or not a usable key ([`validate_key`]). The error names the variable, never its content.
pub fn key_from_value(var: &str, value: Option<OsString>) -> Result<String, MockError> {
    let fail = |reason: &'static str| MockError::KeyEnv {
        var: var.to_string(),
        reason,
    };
    let value = value.ok_or_else(|| fail("is not set"))?;
    let key = value
        .into_string()
        .map_err(|_| fail("is not valid UTF-8"))?;
    validate_key(&key).map_err(fail)?;
    Ok(key)
}

/// Whether `key` can be required: it must be non-empty and visible ASCII (no spaces or control
/// characters), as every header and query parameter carries it exactly. `Err` says what is
/// wrong, without the key.
pub fn validate_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() {
        return Err("is empty");
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "has characters other than visible ASCII (spaces, control characters or non-ASCII)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)], query: &str) -> Request {
        Request {
            method: "POST".into(),
            path: "/v1/messages".into(),
            query: query.into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn each_api_reads_its_own_places() {
        let k = "sk-test-123";
        let anthropic = KeyPlace::Anthropic;
        assert_eq!(
            check(&req(&[("x-api-key", k)], ""), anthropic, k),
            KeyCheck::Ok
        );
        let bearer = req(&[("authorization", "Bearer sk-test-123")], "");
        assert_eq!(check(&bearer, anthropic, k), KeyCheck::Ok);
        assert_eq!(check(&bearer, KeyPlace::Bearer, k), KeyCheck::Ok);
        let lower = req(&[("authorization", "bearer sk-test-123")], "");
        assert_eq!(check(&lower, KeyPlace::Bearer, k), KeyCheck::Ok);
        // OpenAI does not read x-api-key; Gemini reads neither of those.
        let xkey = req(&[("x-api-key", k)], "");
        assert_eq!(check(&xkey, KeyPlace::Bearer, k), KeyCheck::Missing);
        assert_eq!(check(&xkey, KeyPlace::Gemini, k), KeyCheck::Missing);
        assert_eq!(check(&bearer, KeyPlace::Gemini, k), KeyCheck::Missing);
        let goog = req(&[("x-goog-api-key", k)], "alt=sse");
        assert_eq!(check(&goog, KeyPlace::Gemini, k), KeyCheck::Ok);
        let query = req(&[], "alt=sse&key=sk-test-123");
        assert_eq!(check(&query, KeyPlace::Gemini, k), KeyCheck::Ok);
        let escaped = req(&[], "key=sk%2Dtest-123");
        assert_eq!(check(&escaped, KeyPlace::Gemini, k), KeyCheck::Ok);
        assert_eq!(check(&bearer, KeyPlace::AnthropicOrBearer, k), KeyCheck::Ok);
    }

    #[test]
    fn a_wrong_or_extra_credential_is_wrong() {
        let k = "sk-test-123";
        let wrong = req(&[("x-api-key", "sk-test-124")], "");
        assert_eq!(check(&wrong, KeyPlace::Anthropic, k), KeyCheck::Wrong);
        let prefix = req(&[("x-api-key", "sk-test-12")], "");
        assert_eq!(check(&prefix, KeyPlace::Anthropic, k), KeyCheck::Wrong);
        let both = req(
            &[("x-api-key", k), ("authorization", "Bearer trial-token")],
            "",
        );
        assert_eq!(check(&both, KeyPlace::Anthropic, k), KeyCheck::Wrong);
        let basic = req(&[("authorization", "Basic sk-test-123")], "");
        assert_eq!(check(&basic, KeyPlace::Bearer, k), KeyCheck::Wrong);
        let empty = req(&[("x-api-key", "")], "");
        assert_eq!(check(&empty, KeyPlace::Anthropic, k), KeyCheck::Wrong);
        let two = req(&[("x-goog-api-key", k)], "key=other");
        assert_eq!(check(&two, KeyPlace::Gemini, k), KeyCheck::Wrong);
    }

    #[test]
    fn percent_decoding_keeps_malformed_escapes() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn the_key_variable_must_hold_a_usable_key() {
        let ok = key_from_value("K", Some("sk-1".into())).unwrap();
        assert_eq!(ok, "sk-1");
        for (value, reason) in [
            (None, "is not set"),
            (Some(""), "is empty"),
            (Some(" sk-1"), "other than visible ASCII"),
            (Some("sk-1\n"), "other than visible ASCII"),
            (Some("sk\u{7}1"), "other than visible ASCII"),
            (Some("sk-\u{e9}"), "other than visible ASCII"),
        ] {
            let e = key_from_value("K", value.map(OsString::from)).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("$K") && text.contains(reason), "{text}");
            assert!(!text.contains("sk"), "{text}");
        }
    }
}
