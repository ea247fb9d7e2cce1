//! Registry authentication: `WWW-Authenticate` challenges and the token request they ask for.

use std::collections::BTreeMap;

/// One challenge of a `WWW-Authenticate` header: a scheme and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// The scheme, lowercased: `bearer`, `basic`, ...
    pub(crate) scheme: String,
    /// The parameters, names lowercased: `realm`, `service`, `scope`, ...
    pub(crate) params: BTreeMap<String, String>,
}

/// Parses a `WWW-Authenticate` value, which may hold several challenges:
/// `Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"`.
/// Parameter values are quoted strings (with `\` escapes) or tokens; anything unparsable is
/// skipped.
pub(crate) fn parse_challenges(header: &str) -> Vec<Challenge> {
    let chars: Vec<char> = header.chars().collect();
    let mut pos = 0;
    let mut out: Vec<Challenge> = Vec::new();
    let skip = |pos: &mut usize, also_commas: bool| {
        while *pos < chars.len()
            && (chars[*pos].is_whitespace() || (also_commas && chars[*pos] == ','))
        {
            *pos += 1;
        }
    };
    loop {
        skip(&mut pos, true);
        if pos >= chars.len() {
            break;
        }
        let start = pos;
        while pos < chars.len()
            && !chars[pos].is_whitespace()
            && chars[pos] != ','
            && chars[pos] != '='
        {
            pos += 1;
        }
        let token: String = chars[start..pos].iter().collect();
        let mut look = pos;
        skip(&mut look, false);
        let is_param = look < chars.len() && chars[look] == '=' && !token.is_empty();
        if !is_param || out.is_empty() {
            if token.is_empty() {
                // A stray `=`: skip it.
                pos += 1;
                continue;
            }
            if is_param {
                // A parameter before any scheme: skip its value.
                pos = look + 1;
                let _ = read_value(&chars, &mut pos);
                continue;
            }
            out.push(Challenge {
                scheme: token.to_ascii_lowercase(),
                params: BTreeMap::new(),
            });
            continue;
        }
        pos = look + 1;
        skip(&mut pos, false);
        let value = read_value(&chars, &mut pos);
        if let Some(last) = out.last_mut() {
            last.params.insert(token.to_ascii_lowercase(), value);
        }
    }
    out
}

/// Reads a quoted string or a token at `pos`.
fn read_value(chars: &[char], pos: &mut usize) -> String {
    let mut value = String::new();
    if *pos < chars.len() && chars[*pos] == '"' {
        *pos += 1;
        while *pos < chars.len() {
            match chars[*pos] {
                '\\' if *pos + 1 < chars.len() => {
                    value.push(chars[*pos + 1]);
                    *pos += 2;
                }
                '"' => {
                    *pos += 1;
                    break;
                }
                c => {
                    value.push(c);
                    *pos += 1;
                }
            }
        }
    } else {
        while *pos < chars.len() && chars[*pos] != ',' && !chars[*pos].is_whitespace() {
            value.push(chars[*pos]);
            *pos += 1;
        }
    }
    value
}

/// The URL of a token request for a bearer challenge: its realm with `service` and `scope`
/// (the challenge's scope, else `default_scope`) as query parameters.
pub(crate) fn token_url(challenge: &Challenge, default_scope: &str) -> Option<String> {
    let realm = challenge.params.get("realm").filter(|r| !r.is_empty())?;
    let mut url = realm.clone();
    let mut sep = if realm.contains('?') { '&' } else { '?' };
    if let Some(service) = challenge.params.get("service") {
        url.push(sep);
        url.push_str("service=");
        url.push_str(&percent_encode(service));
        sep = '&';
    }
    let scope = challenge
        .params
        .get("scope")
        .filter(|s| !s.is_empty())
        .map(String::as_str)
        .unwrap_or(default_scope);
    url.push(sep);
    url.push_str("scope=");
    url.push_str(&percent_encode(scope));
    Some(url)
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(text, KEEP).to_string()
}

/// The token of a token service's JSON answer (`token`, else `access_token`).
pub(crate) fn token_from_json(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TokenAnswer {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        access_token: Option<String>,
    }
    let answer: TokenAnswer = serde_json::from_slice(body).ok()?;
    answer
        .token
        .filter(|t| !t.is_empty())
        .or(answer.access_token)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn docker_hub_bearer_challenge() {
        let header = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/python:pull""#;
        let challenges = parse_challenges(header);
        assert_eq!(
            challenges,
            vec![Challenge {
                scheme: "bearer".into(),
                params: params(&[
                    ("realm", "https://auth.docker.io/token"),
                    ("service", "registry.docker.io"),
                    ("scope", "repository:library/python:pull"),
                ]),
            }]
        );
        assert_eq!(
            token_url(&challenges[0], "unused").unwrap(),
            "https://auth.docker.io/token?service=registry.docker.io&scope=repository%3Alibrary%2Fpython%3Apull"
        );
    }

    #[test]
    fn scope_with_commas_tokens_spaces_and_escapes() {
        let header = r#"bearer  realm = "https://r.example/t?x=1" , service=svc, scope="repository:a/b:pull,push", error="say \"hi\"""#;
        let c = &parse_challenges(header)[0];
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://r.example/t?x=1");
        assert_eq!(c.params["service"], "svc");
        assert_eq!(c.params["scope"], "repository:a/b:pull,push");
        assert_eq!(c.params["error"], r#"say "hi""#);
        assert_eq!(
            token_url(c, "x").unwrap(),
            "https://r.example/t?x=1&service=svc&scope=repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }

    #[test]
    fn several_challenges_and_basic() {
        let c = parse_challenges(r#"Basic realm="Registry Realm", Bearer realm="https://a/t""#);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].scheme, "basic");
        assert_eq!(c[0].params["realm"], "Registry Realm");
        assert_eq!(c[1].scheme, "bearer");
        assert_eq!(c[1].params["realm"], "https://a/t");
        assert_eq!(parse_challenges("Basic").len(), 1);
        assert!(parse_challenges("").is_empty());
        assert!(parse_challenges("  ,  ").is_empty());
    }

    #[test]
    fn default_scope_and_missing_realm() {
        let c = &parse_challenges(r#"Bearer realm="https://a/t""#)[0];
        assert_eq!(
            token_url(c, "repository:x/y:pull").unwrap(),
            "https://a/t?scope=repository%3Ax%2Fy%3Apull"
        );
        let no_realm = &parse_challenges(r#"Bearer service="s""#)[0];
        assert_eq!(token_url(no_realm, "s"), None);
    }

    #[test]
    fn token_answers() {
        assert_eq!(
            token_from_json(br#"{"token":"abc","expires_in":300}"#).as_deref(),
            Some("abc")
        );
        assert_eq!(
            token_from_json(br#"{"access_token":"xyz"}"#).as_deref(),
            Some("xyz")
        );
        assert_eq!(token_from_json(br#"{"token":""}"#), None);
        assert_eq!(token_from_json(b"nope"), None);
    }
}
