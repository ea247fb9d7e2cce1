//! The gateway end to end over real sockets: a real client, the gateway, a real scripted
//! upstream.

mod support;

use std::sync::Arc;
use std::time::Duration;

use proctor_gateway::ledger::Ending;
use proctor_gateway::{
    Api, FaultKind, GatewayHandle, GatewayOptions, LimitKind, Limits, Price, TrialGrant,
    TrialLedger, Usage,
};
use support::*;

fn grant(provider: &str, model: &str) -> TrialGrant {
    TrialGrant::new(&format!("{provider}/{model}").parse().unwrap())
}

fn anthropic_stream(key_echo: &str) -> Vec<String> {
    vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":30,\"cache_read_input_tokens\":400,\"output_tokens\":1}}}\n\n".into(),
        format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"I saw {key_echo}\"}}}}\n\n"),
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n".into(),
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
    ]
}

const ANTHROPIC_USAGE: Usage = Usage {
    input: 12,
    output: 42,
    cache_read: 400,
    cache_write: 30,
    reasoning: 0,
};

fn no_secret_in_evidence(ledger: &TrialLedger, secrets: &[&str]) {
    let dir = ledger.evidence_dir.as_ref().expect("an evidence folder");
    let files = evidence_files(dir);
    assert!(!files.is_empty());
    for (name, raw, plain) in &files {
        for s in secrets {
            assert!(!contains(raw, s), "{s} in {name} (raw)");
            assert!(!contains(plain, s), "{s} in {name}");
        }
    }
    let ledger_json = serde_json::to_string(ledger).unwrap();
    for s in secrets {
        assert!(!ledger_json.contains(s), "{s} in the ledger");
    }
}

#[test]
fn a_streamed_anthropic_request_carries_the_real_key_and_its_usage_is_ledgered() {
    let up = Upstream::start(|seen, _| {
        let echo = seen.header("x-api-key").unwrap_or("nothing").to_string();
        let events = anthropic_stream(&echo);
        Reply::Sse {
            events,
            gate: None,
            pause: Duration::ZERO,
        }
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let dir = tempfile::tempdir().unwrap();
    let mut g = grant("anthropic", "claude-sonnet-4-5");
    g.evidence_dir = Some(dir.path().join("trial"));
    let token = gw.register_trial(g).unwrap();
    let c = client(&gw);
    let body = format!(
        r#"{{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{{"role":"user","content":"my key is {token}"}}]}}"#
    );
    let mut expected = String::new();
    for _ in 0..2 {
        let resp = c.post(
            "/v1/messages",
            &[
                ("x-api-key", token.as_str()),
                ("anthropic-version", "2023-06-01"),
                ("anthropic-beta", "fine-grained-tool-streaming-2025-05-14"),
                ("content-type", "application/json"),
            ],
            &body,
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.headers["content-type"], "text/event-stream");
        // The upstream echoed the real key: it reaches the agent masked, and the stream is
        // otherwise byte for byte what the upstream sent.
        expected = anthropic_stream(&"*".repeat(REAL_KEY.len())).concat();
        assert_eq!(
            resp.text(),
            expected,
            "the stream passes through byte for byte, the key masked"
        );
        assert!(!resp.text().contains(REAL_KEY));
    }

    upstream_saw_the_real_key_only(&up, token.as_str());
    let ledger = gw.finish_trial(&token).unwrap();
    two_streams_are_ledgered(&ledger);
    the_evidence_keeps_the_stream_redacted(&dir.path().join("trial"), &expected);
    no_secret_in_evidence(&ledger, &[REAL_KEY, token.as_str()]);
}

/// Each request reached the upstream with the real key and the agent's other headers, and no
/// trace of the trial's token.
fn upstream_saw_the_real_key_only(up: &Upstream, token: &str) {
    let seen = up.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.path, "/v1/messages");
        assert_eq!(
            s.header("x-api-key"),
            Some(REAL_KEY),
            "the real key upstream"
        );
        assert_eq!(s.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(
            s.header("anthropic-beta"),
            Some("fine-grained-tool-streaming-2025-05-14")
        );
        assert_eq!(s.header("authorization"), None);
        assert!(
            !s.headers.iter().any(|(_, v)| v.contains(token)),
            "no token in headers"
        );
        assert!(s.query.is_none());
    }
}

/// The ledger of the two streamed requests: their usage summed, no price so an incomplete
/// cost, and the first request's record.
fn two_streams_are_ledgered(ledger: &TrialLedger) {
    let mut twice = ANTHROPIC_USAGE;
    twice.add(&ANTHROPIC_USAGE);
    assert_eq!(ledger.usage, twice);
    assert_eq!(ledger.requests_forwarded, 2);
    assert_eq!(ledger.requests_without_usage, 0);
    assert_eq!(ledger.fault, None);
    assert_eq!(ledger.limit_reached, None);
    assert!(ledger.cost.incomplete, "no price given");
    assert_eq!(ledger.cost.usd, None);
    assert_eq!(ledger.cost.unpriced_models, ["claude-sonnet-4-5"]);
    assert_eq!(ledger.requests.len(), 2);
    let r = &ledger.requests[0];
    assert_eq!((r.seq, r.status, r.stream), (1, 200, true));
    assert_eq!(r.api, Api::AnthropicMessages);
    assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(r.usage, Some(ANTHROPIC_USAGE));
    assert_eq!(r.retries, 0);
    assert_eq!(r.ending, Ending::Complete);
    assert!(r.ttfb_ms.is_some() && r.latency_ms >= r.ttfb_ms.unwrap());
    assert_eq!(r.upstream_request_id.as_deref(), Some("req_upstream_1"));
    assert_eq!(
        r.request_body.as_deref(),
        Some("model/0001.request.json.gz")
    );
    assert_eq!(
        r.response_body.as_deref(),
        Some("model/0001.response.sse.gz")
    );
}

/// The trial's evidence: the log's two lines and each request and response kept as sent, the
/// key redacted (so the response differs from what the agent got, `expected`).
fn the_evidence_keeps_the_stream_redacted(trial: &std::path::Path, expected: &str) {
    let files = evidence_files(trial);
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "model.jsonl",
            "model/0001.request.json.gz",
            "model/0001.response.sse.gz",
            "model/0002.request.json.gz",
            "model/0002.response.sse.gz"
        ]
    );
    let lines = String::from_utf8(files[0].2.clone()).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let line: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(line["provider"], "anthropic");
    assert_eq!(line["usage"]["cache_read"], 400);
    let response = String::from_utf8(files[2].2.clone()).unwrap();
    // The evidence keeps what the upstream sent, the key redacted.
    assert_ne!(response, expected);
    assert_eq!(
        response,
        anthropic_stream(REAL_KEY)
            .concat()
            .replace(REAL_KEY, "[REDACTED]")
    );
    let request = String::from_utf8(files[1].2.clone()).unwrap();
    assert!(request.contains("my key is [REDACTED]"), "{request}");
}

/// An upstream that reflects what it was sent (some proxies and self-hosted servers do) would
/// hand the agent the real key: in a response header, in a whole JSON body, and in an event
/// stream, raw, base64-encoded inside `Basic` credentials, and split across two frames. The
/// agent gets every one masked, at the same length; the rest arrives as sent.
#[test]
fn a_reflected_key_never_reaches_the_agent_in_headers_bodies_or_streams() {
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{REAL_KEY}"));
    let (head, tail) = REAL_KEY.split_at(9);
    let sent = basic.clone();
    let up = Upstream::start(move |seen, _| {
        let key = seen.header("x-api-key").unwrap_or("none").to_string();
        if seen.query.as_deref().is_some_and(|q| q.contains("stream")) {
            Reply::Sse {
                events: vec![
                    format!("data: {{\"echo\":\"{head}"),
                    format!("{tail}\",\"basic\":\"Basic {sent}\"}}\n\n"),
                    "data: [DONE]\n\n".to_string(),
                ],
                gate: None,
                pause: Duration::ZERO,
            }
        } else {
            Reply::Json {
                status: 200,
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("x-echo-key".into(), key.clone()),
                ],
                body: format!(
                    r#"{{"echo":"{key}","usage":{{"input_tokens":1,"output_tokens":1}}}}"#
                ),
            }
        }
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let c = client(&gw);
    let stars = "*".repeat(REAL_KEY.len());
    let r = c.post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-echo-key"], stars.as_str());
    assert_eq!(
        r.text(),
        format!(r#"{{"echo":"{stars}","usage":{{"input_tokens":1,"output_tokens":1}}}}"#)
    );
    let r = c.post(
        "/v1/messages?stream",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m","stream":true}"#,
    );
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(!text.contains(REAL_KEY) && !text.contains(&basic), "{text}");
    assert!(
        text.starts_with(&format!("data: {{\"echo\":\"{stars}\",\"basic\":\"Basic ")),
        "{text}"
    );
    assert!(text.ends_with("\"}\n\ndata: [DONE]\n\n"), "{text}");
    assert_eq!(
        text.len(),
        format!(
            "data: {{\"echo\":\"{REAL_KEY}\",\"basic\":\"Basic {basic}\"}}\n\ndata: [DONE]\n\n"
        )
        .len()
    );
    assert_eq!(gw.finish_trial(&t).unwrap().requests_forwarded, 2);
}

#[test]
fn whole_json_responses_of_every_api_are_ledgered() {
    let up = Upstream::start(|seen, _| {
        if seen.path.ends_with("/responses") {
            Reply::ok(
                r#"{"id":"resp_1","output":[],"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":60},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":4}}}"#,
            )
        } else if seen.path.ends_with("/chat/completions") {
            Reply::ok(
                r#"{"id":"c","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8}}}"#,
            )
        } else {
            Reply::ok(
                r#"{"candidates":[],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":7,"cachedContentTokenCount":10,"thoughtsTokenCount":3}}"#,
            )
        }
    });
    let config = config(&format!(
        "[providers.openai]\nbase_url = \"{u}/v1\"\n[providers.openrouter]\nbase_url = \"{u}/api/v1\"\n[providers.google]\nbase_url = \"{u}\"\n",
        u = up.url()
    ));
    let gw = gateway(&config, &["openai", "openrouter", "google"]);
    let c = client(&gw);

    openai_responses_and_chat_are_ledgered(&gw, &c);
    openrouter_chat_is_ledgered_under_the_granted_model(&gw, &c);
    gemini_is_ledgered(&gw, &c);
    upstream_saw_each_api_with_the_real_key(&up);
}

/// An OpenAI grant: a Responses and a Chat Completions request, both complete, usage summed.
fn openai_responses_and_chat_are_ledgered(gw: &GatewayHandle, c: &Client) {
    let t = gw.register_trial(grant("openai", "gpt-5")).unwrap();
    let bearer = format!("Bearer {t}");
    let r = c.post(
        "/v1/responses",
        &[("authorization", &bearer)],
        r#"{"model":"gpt-5","input":"hi"}"#,
    );
    assert_eq!(r.status, 200);
    let r = c.post(
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        r#"{"model":"gpt-5","messages":[]}"#,
    );
    assert_eq!(
        r.status, 200,
        "an openai-responses provider also serves chat"
    );
    let l = gw.finish_trial(&t).unwrap();
    assert!(
        l.requests.iter().all(|r| r.ending == Ending::Complete),
        "a whole body read to its end is complete: {:?}",
        l.requests.iter().map(|r| r.ending).collect::<Vec<_>>()
    );
    assert_eq!(
        l.usage,
        Usage {
            input: 40 + 12,
            output: 9 + 5,
            cache_read: 60 + 8,
            cache_write: 0,
            reasoning: 4
        }
    );
}

/// An OpenRouter grant: the request names another model, the granted one is sent and ledgered.
fn openrouter_chat_is_ledgered_under_the_granted_model(gw: &GatewayHandle, c: &Client) {
    let t = gw
        .register_trial(grant("openrouter", "anthropic/claude-sonnet-4.5"))
        .unwrap();
    let bearer = format!("Bearer {t}");
    let r = c.post(
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        r#"{"model":"x","messages":[]}"#,
    );
    assert_eq!(r.status, 200);
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        l.usage,
        Usage {
            input: 12,
            output: 5,
            cache_read: 8,
            ..Usage::default()
        }
    );
    assert_eq!(
        l.requests[0].model.as_deref(),
        Some("anthropic/claude-sonnet-4.5")
    );
    assert_eq!(l.requests[0].requested_model.as_deref(), Some("x"));
}

/// A Gemini grant, the token given as `key=`.
fn gemini_is_ledgered(gw: &GatewayHandle, c: &Client) {
    let t = gw
        .register_trial(grant("google", "gemini-2.5-pro"))
        .unwrap();
    let path = format!("/v1beta/models/gemini-2.5-pro:generateContent?key={t}");
    let r = c.post(&path, &[], r#"{"contents":[]}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        l.usage,
        Usage {
            input: 20,
            output: 10,
            cache_read: 10,
            cache_write: 0,
            reasoning: 3
        }
    );
}

/// What the upstream saw: each API's path, the real key where each API reads it, the granted
/// model, and no `key=` parameter left.
fn upstream_saw_each_api_with_the_real_key(up: &Upstream) {
    let seen = up.seen();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[0].path, "/v1/responses");
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {REAL_KEY}").as_str())
    );
    assert_eq!(seen[1].path, "/v1/chat/completions");
    assert_eq!(seen[2].path, "/api/v1/chat/completions");
    assert_eq!(
        seen[2].json()["model"],
        "anthropic/claude-sonnet-4.5",
        "the granted model"
    );
    assert_eq!(
        seen[3].path,
        "/v1beta/models/gemini-2.5-pro:generateContent"
    );
    assert_eq!(seen[3].header("x-goog-api-key"), Some(REAL_KEY));
    assert_eq!(seen[3].query, None, "the token's key= parameter is dropped");
}

#[test]
fn streamed_usage_of_every_api_is_ledgered() {
    let up = Upstream::start(|seen, _| {
        if seen.path.ends_with("/responses") {
            Reply::sse(&[
                "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n",
                "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
                "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":50,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":6}}}\n\n",
            ])
        } else if seen.path.ends_with("/chat/completions") {
            let asked = seen.json()["stream_options"]["include_usage"] == true;
            let mut events =
                vec!["data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n".to_string()];
            if asked {
                events.push("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":33,\"completion_tokens\":4}}\n\n".into());
            }
            events.push("data: [DONE]\n\n".into());
            Reply::Sse {
                events,
                gate: None,
                pause: Duration::ZERO,
            }
        } else {
            Reply::sse(&[
                "data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":70,\"candidatesTokenCount\":1}}\r\n\r\n",
                "data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":70,\"candidatesTokenCount\":8}}\r\n\r\n",
            ])
        }
    });
    let config = config(&format!(
        "[providers.openai]\nbase_url = \"{u}/v1\"\n[providers.google]\nbase_url = \"{u}\"\n",
        u = up.url()
    ));
    let gw = gateway(&config, &["openai", "google"]);
    let c = client(&gw);

    let t = gw.register_trial(grant("openai", "gpt-5")).unwrap();
    let bearer = format!("Bearer {t}");
    let r = c.post(
        "/v1/responses",
        &[("authorization", &bearer)],
        r#"{"model":"gpt-5","stream":true}"#,
    );
    assert!(r.text().contains("response.completed"));
    let r = c.post(
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        r#"{"model":"gpt-5","stream":true,"messages":[]}"#,
    );
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        l.usage,
        Usage {
            input: 50 + 33,
            output: 6 + 4,
            ..Usage::default()
        }
    );
    assert_eq!(l.requests_without_usage, 0);
    assert!(l.requests.iter().all(|r| r.stream));

    let t = gw
        .register_trial(grant("google", "gemini-2.5-flash"))
        .unwrap();
    let r = c.post(
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        &[("x-goog-api-key", t.as_str())],
        r#"{"contents":[]}"#,
    );
    assert_eq!(r.status, 200);
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        l.usage,
        Usage {
            input: 70,
            output: 8,
            ..Usage::default()
        }
    );
    let seen = up.seen();
    assert_eq!(seen[2].query.as_deref(), Some("alt=sse"));
    assert_eq!(seen[2].header("x-goog-api-key"), Some(REAL_KEY));
}

#[test]
fn a_stream_without_usage_marks_the_token_ledger_incomplete() {
    let up =
        Upstream::start(|_, _| Reply::sse(&["data: {\"choices\":[]}\n\n", "data: [DONE]\n\n"]));
    let config = config(&format!(
        "[providers.openrouter]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let options = GatewayOptions {
        ask_stream_usage: false,
        ..GatewayOptions::default()
    };
    let gw = gateway_with(&config, &["openrouter"], options);
    let t = gw.register_trial(grant("openrouter", "m")).unwrap();
    let r = client(&gw).post(
        "/chat/completions",
        &[("authorization", &format!("Bearer {t}"))],
        r#"{"model":"m","stream":true}"#,
    );
    assert_eq!(r.status, 200);
    assert!(up.seen()[0].json().get("stream_options").is_none());
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.requests_without_usage, 1);
    assert_eq!(l.requests[0].usage, None);
}

#[test]
fn sse_reaches_the_client_before_the_upstream_finishes() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let g2 = Arc::clone(&gate);
    let up = Upstream::start(move |_, _| Reply::Sse {
        events: anthropic_stream("x"),
        gate: Some(Arc::clone(&g2)),
        pause: Duration::ZERO,
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw
        .register_trial(grant("anthropic", "claude-sonnet-4-5"))
        .unwrap();
    let c = client(&gw);
    let mut s = c.open(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"claude-sonnet-4-5","stream":true}"#,
    );
    assert_eq!(s.status, 200);
    // The upstream holds the rest of its stream until the gate opens: the first event must
    // arrive on its own.
    let first = c
        .read_until(&mut s, "\n\n", Duration::from_secs(10))
        .expect("the first event before the upstream finishes");
    assert!(first.contains("message_start"));
    assert!(!first.contains("message_stop"));
    gate.notify_one();
    let rest = c.read_rest(s);
    assert!(
        rest.ends_with("data: {\"type\":\"message_stop\"}\n\n"),
        "{rest}"
    );
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.usage, ANTHROPIC_USAGE);
    assert!(l.requests[0].ttfb_ms.unwrap() < l.requests[0].latency_ms);
}

#[test]
fn rate_limits_forever_end_in_a_rate_limit_fault_after_the_configured_tries() {
    let up = Upstream::start(|_, _| {
        Reply::status(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )
        .with_header("retry-after", "0")
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\nmax_concurrency = 8\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let r = client(&gw).post(
        "/v1/messages",
        &[("authorization", &format!("Bearer {t}"))],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 429);
    assert_eq!(
        r.json()["error"]["type"],
        "rate_limit_error",
        "the provider's own error"
    );
    assert_eq!(up.seen().len(), 3, "attempts = 3");
    assert!(up
        .seen()
        .iter()
        .all(|s| s.header("x-api-key") == Some(REAL_KEY)));
    assert_eq!(
        gw.provider_concurrency("anthropic"),
        Some(1),
        "8 halved three times"
    );
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::RateLimit));
    assert_eq!(l.faults, [FaultKind::RateLimit]);
    let rec = &l.requests[0];
    assert_eq!((rec.status, rec.retries, rec.attempts.len()), (429, 2, 3));
    assert!(rec.attempts.iter().all(|a| a.status == Some(429)));
    assert_eq!(
        rec.attempts[0].backoff_ms,
        Some(0),
        "retry-after: 0 honoured"
    );
    assert_eq!(rec.error.as_deref(), Some("slow down"));
}

#[test]
fn a_refused_key_is_credential_loss_without_retry_and_the_key_is_not_echoed() {
    let up = Upstream::start(|seen, _| {
        let key = seen
            .header("authorization")
            .unwrap_or("")
            .trim_start_matches("Bearer ")
            .to_string();
        Reply::status(
            401,
            format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {key}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
            ),
        )
    });
    let config = config(&format!(
        "[providers.openai]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["openai"]);
    let dir = tempfile::tempdir().unwrap();
    let mut g = grant("openai", "gpt-5");
    g.evidence_dir = Some(dir.path().to_path_buf());
    let t = gw.register_trial(g).unwrap();
    let r = client(&gw).post(
        "/v1/responses",
        &[("authorization", &format!("Bearer {t}"))],
        r#"{"model":"gpt-5"}"#,
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    assert!(
        !r.text().contains(REAL_KEY),
        "the agent never sees the real key: {}",
        r.text()
    );
    assert!(r.text().contains("[REDACTED]"));
    assert_eq!(up.seen().len(), 1, "401 is not retried");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::CredentialLoss));
    assert_eq!(l.requests[0].retries, 0);
    no_secret_in_evidence(&l, &[REAL_KEY, t.as_str()]);
}

#[test]
fn a_server_error_then_success_is_retried_and_not_a_fault() {
    let up = Upstream::start(|_, n| {
        if n == 0 {
            Reply::status(500, r#"{"error":{"message":"boom"}}"#)
        } else {
            Reply::ok(r#"{"usage":{"prompt_tokens":3,"completion_tokens":2}}"#)
        }
    });
    let config = config(&format!(
        "[providers.openrouter]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["openrouter"]);
    let t = gw.register_trial(grant("openrouter", "m")).unwrap();
    let r = client(&gw).post(
        "/v1/chat/completions",
        &[("authorization", &format!("Bearer {t}"))],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 200);
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, None);
    let rec = &l.requests[0];
    assert_eq!(rec.retries, 1);
    assert_eq!(rec.attempts[0].status, Some(500));
    assert_eq!(rec.attempts[0].fault, Some(FaultKind::ProviderError));
    assert!(rec.attempts[0].backoff_ms.is_some());
    assert_eq!(rec.attempts[1].status, Some(200));
    assert_eq!(l.usage.total(), 5);
    assert_eq!(up.seen().len(), 2);
}

#[test]
fn a_server_error_every_time_is_a_provider_error() {
    let up = Upstream::start(|_, _| {
        Reply::status(
            503,
            r#"{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}"#,
        )
    });
    let config = config(&format!(
        "[providers.google]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["google"]);
    let t = gw
        .register_trial(grant("google", "gemini-2.5-pro"))
        .unwrap();
    let r = client(&gw).post(
        "/v1beta/models/gemini-2.5-pro:generateContent",
        &[("x-goog-api-key", t.as_str())],
        "{}",
    );
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["status"], "UNAVAILABLE");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::ProviderError));
    assert_eq!(up.seen().len(), 3);
}

#[test]
fn an_upstream_that_does_not_answer_in_time_is_a_timeout() {
    let up = Upstream::start(|_, _| Reply::Slow {
        delay: Duration::from_millis(500),
        reply: Box::new(Reply::ok("{}")),
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n[timeouts]\nfirst_byte_ms = 50\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let r = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 504);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "timeout_error");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::Timeout));
    assert_eq!(l.requests[0].attempts.len(), 3);
}

#[test]
fn an_unreachable_upstream_is_a_provider_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = config(&format!(
        "[providers.openai]\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
    ));
    let gw = gateway(&config, &["openai"]);
    let t = gw.register_trial(grant("openai", "gpt-5")).unwrap();
    let r = client(&gw).post(
        "/v1/responses",
        &[("authorization", &format!("Bearer {t}"))],
        "{}",
    );
    assert_eq!(r.status, 502);
    assert_eq!(r.json()["error"]["type"], "server_error");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::ProviderError));
    assert!(l.requests[0]
        .error
        .as_deref()
        .unwrap()
        .contains("failed after 3 tries"));
}

#[test]
fn a_reached_token_limit_refuses_further_requests_in_the_agents_shape() {
    let up = Upstream::start(|_, _| {
        Reply::ok(
            r#"{"usage":{"input_tokens":100,"output_tokens":60,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}"#,
        )
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let dir = tempfile::tempdir().unwrap();
    let mut g = grant("anthropic", "claude-sonnet-4-5");
    g.limits = Limits {
        tokens: Some(150),
        ..Limits::default()
    };
    g.evidence_dir = Some(dir.path().to_path_buf());
    let t = gw.register_trial(g).unwrap();
    let c = client(&gw);
    let first = c.post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"claude-sonnet-4-5"}"#,
    );
    assert_eq!(first.status, 200);
    for _ in 0..2 {
        let r = c.post(
            "/v1/messages",
            &[("x-api-key", t.as_str())],
            r#"{"model":"claude-sonnet-4-5"}"#,
        );
        assert_eq!(r.status, 400);
        let v = r.json();
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tokens limit"));
    }
    assert_eq!(up.seen().len(), 1, "refused requests are not forwarded");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.limit_reached, Some(LimitKind::Tokens));
    assert_eq!((l.requests_forwarded, l.requests_refused), (1, 2));
    assert_eq!(l.requests[1].limit, Some(LimitKind::Tokens));
    assert_eq!(l.requests[1].ending, Ending::Refused);
    assert_eq!(l.fault, None, "a limit is not a fault");
    let jsonl = std::fs::read_to_string(dir.path().join("model.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 3);
    assert!(jsonl.contains("\"limit\":\"tokens\""));
}

#[test]
fn request_and_cost_limits_refuse_in_openai_and_gemini_shapes() {
    let up = Upstream::start(|seen, _| {
        if seen.path.contains("models") {
            Reply::ok(r#"{"usageMetadata":{"promptTokenCount":1000000,"candidatesTokenCount":0}}"#)
        } else {
            Reply::ok(r#"{"usage":{"prompt_tokens":1,"completion_tokens":1}}"#)
        }
    });
    let config = config(&format!(
        "[providers.openrouter]\nbase_url = \"{u}\"\n[providers.google]\nbase_url = \"{u}\"\n",
        u = up.url()
    ));
    let gw = gateway(&config, &["openrouter", "google"]);
    let c = client(&gw);

    let mut g = grant("openrouter", "m");
    g.limits.requests = Some(2);
    let t = gw.register_trial(g).unwrap();
    let auth = format!("Bearer {t}");
    let codes: Vec<u16> = (0..3)
        .map(|_| {
            c.post(
                "/v1/chat/completions",
                &[("authorization", &auth)],
                r#"{"model":"m"}"#,
            )
            .status
        })
        .collect();
    assert_eq!(codes, [200, 200, 429]);
    let r = c.post(
        "/v1/chat/completions",
        &[("authorization", &auth)],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.json()["error"]["code"], "insufficient_quota");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.limit_reached, Some(LimitKind::Requests));

    let mut g = grant("google", "gemini-2.5-pro");
    g.limits.cost_usd = Some(1.0);
    g.prices.insert(
        "gemini-2.5-pro".into(),
        Price {
            input: 1.25,
            output: 10.0,
            cache_read: None,
            cache_write: None,
        },
    );
    let t = gw.register_trial(g).unwrap();
    let path = "/v1beta/models/gemini-2.5-pro:generateContent";
    assert_eq!(
        c.post(path, &[("x-goog-api-key", t.as_str())], "{}").status,
        200
    );
    let r = c.post(path, &[("x-goog-api-key", t.as_str())], "{}");
    assert_eq!(r.status, 429);
    assert_eq!(r.json()["error"]["status"], "RESOURCE_EXHAUSTED");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.limit_reached, Some(LimitKind::CostUsd));
    assert_eq!(l.cost.usd, Some(1.25));
    assert!(!l.cost.incomplete);
    assert_eq!(l.requests[0].cost_usd, Some(1.25));
}

#[test]
fn an_unknown_token_is_refused_and_not_forwarded() {
    let up = Upstream::start(|_, _| Reply::ok("{}"));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{u}\"\n[providers.openai]\nbase_url = \"{u}\"\n[providers.google]\nbase_url = \"{u}\"\n",
        u = up.url()
    ));
    let gw = gateway(&config, &["anthropic", "openai", "google"]);
    let c = client(&gw);
    let r = c.post("/v1/messages", &[("x-api-key", REAL_KEY)], "{}");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    let r = c.post("/v1/responses", &[("authorization", "Bearer nope")], "{}");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    let r = c.post("/v1beta/models/g:generateContent", &[], "{}");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["status"], "UNAUTHENTICATED");
    // A finished trial's token stops working.
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    gw.finish_trial(&t).unwrap();
    assert_eq!(
        c.post("/v1/messages", &[("x-api-key", t.as_str())], "{}")
            .status,
        401
    );
    assert!(gw.finish_trial(&t).is_err());
    assert!(up.seen().is_empty(), "nothing was forwarded");
}

#[test]
fn routes_a_provider_does_not_serve_are_refused_and_recorded() {
    let up = Upstream::start(|_, _| Reply::ok("{}"));
    let config = config(&format!(
        "[providers.openrouter]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["openrouter"]);
    let t = gw.register_trial(grant("openrouter", "m")).unwrap();
    let c = client(&gw);
    let auth = format!("Bearer {t}");
    let r = c.post("/v1/responses", &[("authorization", &auth)], "{}");
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("speaks openai-chat"));
    let r = c.post("/v1/embeddings", &[("authorization", &auth)], "{}");
    assert_eq!(r.status, 404);
    assert!(up.seen().is_empty());
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        (l.requests_refused, l.requests_forwarded, l.requests.len()),
        (2, 0, 2)
    );
    assert!(l.requests.iter().all(|r| r.ending == Ending::Refused));
}

/// A Gemini path that climbs out of the model route (`..`, encoded separators, a method of its
/// own) is refused in the API's shape and never reaches the upstream with the real key.
#[test]
fn gemini_paths_outside_the_apis_own_methods_are_refused_and_not_forwarded() {
    let up = Upstream::start(|_, _| {
        Reply::ok(r#"{"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}"#)
    });
    let config = config(&format!(
        "[providers.google]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["google"]);
    let t = gw
        .register_trial(grant("google", "gemini-2.5-pro"))
        .unwrap();
    let c = client(&gw);
    let key = [("x-goog-api-key", t.as_str())];
    for path in [
        "/v1beta/models/gemini-2.5-pro:generateContent/../../admin",
        "/v1beta/models/gemini-2.5-pro:generateContent%2F..%2F..%2Fadmin",
        "/v1beta/models/..%2F..%2Fadmin:generateContent",
        "/v1beta/models/%2E%2E:generateContent",
        "/v1beta/models/gemini-2.5-pro:listEverything",
    ] {
        let r = c.post(path, &key, "{}");
        assert_eq!(r.status, 404, "{path}");
    }
    assert!(
        up.seen().is_empty(),
        "nothing was forwarded: {:?}",
        up.seen()
    );
    // The API's own method still goes through.
    let r = c.post("/v1beta/models/gemini-2.5-pro:generateContent", &key, "{}");
    assert_eq!(r.status, 200);
    assert_eq!(up.seen().len(), 1);
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!((l.requests_refused, l.requests_forwarded), (5, 1));
}

#[test]
fn the_granted_model_replaces_the_asked_one() {
    let up = Upstream::start(|_, _| Reply::ok(r#"{"usage":{"input_tokens":1,"output_tokens":1}}"#));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{u}\"\n[providers.google]\nbase_url = \"{u}\"\n[prices.\"anthropic/claude-sonnet-4-5\"]\ninput = 3\noutput = 15\n",
        u = up.url()
    ));
    let gw = gateway(&config, &["anthropic", "google"]);
    let c = client(&gw);
    let mut g = grant("anthropic", "claude-sonnet-4-5");
    g.prices = config.prices_for("anthropic");
    let t = gw.register_trial(g).unwrap();
    c.post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"claude-haiku-4-5","max_tokens":5}"#,
    );
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        up.seen()[0].body,
        br#"{"model":"claude-sonnet-4-5","max_tokens":5}"#
    );
    assert_eq!(l.requests[0].model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        l.requests[0].requested_model.as_deref(),
        Some("claude-haiku-4-5")
    );
    assert_eq!(l.cost.usd, Some(18.0 / 1e6));

    let t = gw
        .register_trial(grant("google", "gemini-2.5-pro"))
        .unwrap();
    c.post(
        "/v1beta/models/gemini-2.5-flash:generateContent",
        &[("x-goog-api-key", t.as_str())],
        "{}",
    );
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(
        up.seen()[1].path,
        "/v1beta/models/gemini-2.5-pro:generateContent"
    );
    assert_eq!(
        l.requests[0].requested_model.as_deref(),
        Some("gemini-2.5-flash")
    );
}

#[test]
fn the_unix_socket_serves_like_tcp() {
    let up = Upstream::start(|_, _| Reply::ok(r#"{"usage":{"input_tokens":2,"output_tokens":3}}"#));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("gateway.sock");
    let options = GatewayOptions {
        unix_socket: Some(sock.clone()),
        ..GatewayOptions::default()
    };
    let gw = gateway_with(&config, &["anthropic"], options);
    assert_eq!(gw.unix_socket(), Some(sock.as_path()));
    assert!(gw.tcp_addr().is_none());
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let c = Client::new(Target::Unix(sock.clone()));
    let r = c.post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(c.post("/__proctor/health", &[], "").status, 200);
    assert_eq!(gw.finish_trial(&t).unwrap().usage.total(), 5);
    gw.shutdown();
    assert!(!sock.exists(), "the socket is removed on shutdown");
}

/// A trial registered at a socket of its own: its token works there and nowhere else, and no
/// other trial's token works there, so a token one trial reads from another (they share the
/// host network with `network = "host"`) lands in no ledger.
#[test]
fn a_token_bound_to_its_trials_socket_works_only_there() {
    let up = Upstream::start(|_, _| Reply::ok(r#"{"usage":{"input_tokens":2,"output_tokens":3}}"#));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("gateway.sock");
    let options = GatewayOptions {
        unix_socket: Some(shared.clone()),
        ..GatewayOptions::default()
    };
    let gw = gateway_with(&config, &["anthropic"], options);
    let (sock_a, sock_b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let a = gw
        .register_trial_at(grant("anthropic", "m"), &sock_a)
        .unwrap();
    let b = gw
        .register_trial_at(grant("anthropic", "m"), &sock_b)
        .unwrap();
    let post = |sock: &std::path::Path, token: &str| {
        Client::new(Target::Unix(sock.to_path_buf()))
            .post("/v1/messages", &[("x-api-key", token)], r#"{"model":"m"}"#)
            .status
    };
    assert_eq!(post(&sock_a, a.as_str()), 200);
    assert_eq!(post(&sock_b, b.as_str()), 200);
    assert_eq!(post(&sock_b, a.as_str()), 401, "A's token from B's trial");
    assert_eq!(post(&sock_a, b.as_str()), 401, "B's token from A's trial");
    assert_eq!(
        post(&shared, a.as_str()),
        401,
        "a bound token on the shared socket"
    );
    assert_eq!(
        up.seen().len(),
        2,
        "only the two own requests went upstream"
    );
    let la = gw.finish_trial(&a).unwrap();
    assert_eq!((la.requests_forwarded, la.usage.total()), (1, 5));
    assert!(!sock_a.exists(), "a finished trial's socket is removed");
    let lb = gw.finish_trial(&b).unwrap();
    assert_eq!(lb.requests_forwarded, 1);
}

#[test]
fn a_regular_file_at_the_socket_path_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-socket");
    std::fs::write(&path, "keep me").unwrap();
    let options = GatewayOptions {
        unix_socket: Some(path.clone()),
        ..GatewayOptions::default()
    };
    let keys = proctor_gateway::ProviderKeys::default();
    let err = proctor_gateway::Gateway::start(&config(""), &keys, options).unwrap_err();
    assert!(err.to_string().contains("cannot listen"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    let options = GatewayOptions {
        tcp: Some("10.0.0.1:0".parse().unwrap()),
        ..GatewayOptions::default()
    };
    assert!(proctor_gateway::Gateway::start(&config(""), &keys, options).is_err());
}

#[test]
fn an_agent_that_goes_away_mid_stream_is_recorded_without_a_fault() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let g2 = Arc::clone(&gate);
    let up = Upstream::start(move |_, _| Reply::Sse {
        events: anthropic_stream("x"),
        gate: Some(Arc::clone(&g2)),
        pause: Duration::ZERO,
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    {
        let c = client(&gw);
        let mut s = c.open(
            "/v1/messages",
            &[("x-api-key", t.as_str())],
            r#"{"model":"m","stream":true}"#,
        );
        c.read_until(&mut s, "\n\n", Duration::from_secs(10))
            .unwrap();
        drop(s);
        drop(c);
    }
    gate.notify_one();
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.unfinished_requests, 0);
    assert_eq!(l.requests[0].ending, Ending::ClientClosed);
    assert_eq!(l.fault, None);
    assert_eq!(
        l.requests[0].usage.map(|u| u.input),
        Some(12),
        "what passed was read"
    );
}

#[test]
fn an_unknown_provider_cannot_be_granted() {
    let up = Upstream::start(|_, _| Reply::ok("{}"));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let err = gw.register_trial(grant("openai", "gpt-5")).unwrap_err();
    assert!(err.to_string().contains("`openai`"), "{err}");
}

#[test]
fn a_malformed_success_body_is_a_provider_error() {
    let up = Upstream::start(|_, _| Reply::ok("{\"usage\": {"));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let r = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(r.status, 200, "the bytes already went to the agent");
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::ProviderError));
    assert_eq!(
        l.requests[0].error.as_deref(),
        Some("malformed response body")
    );
}

#[test]
fn a_stream_that_breaks_off_is_a_provider_error_and_not_retried() {
    let up = Upstream::start(|_, _| Reply::Broken {
        events: anthropic_stream("x")[..2].to_vec(),
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let c = client(&gw);
    let s = c.open(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m","stream":true}"#,
    );
    assert_eq!(s.status, 200);
    assert!(
        c.try_read_rest(s).is_err(),
        "the agent sees the stream break"
    );
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(up.seen().len(), 1, "no retry once bytes reached the agent");
    assert_eq!(l.fault, Some(FaultKind::ProviderError));
    assert_eq!(l.requests[0].ending, Ending::UpstreamBroke);
    assert_eq!(l.requests[0].usage.map(|u| u.input), Some(12));
}

#[test]
fn a_stream_that_stalls_past_the_idle_timeout_is_a_timeout() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let g2 = Arc::clone(&gate);
    let up = Upstream::start(move |_, _| Reply::Sse {
        events: anthropic_stream("x"),
        gate: Some(Arc::clone(&g2)),
        pause: Duration::ZERO,
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n[timeouts]\nidle_ms = 100\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let c = client(&gw);
    let mut s = c.open(
        "/v1/messages",
        &[("x-api-key", t.as_str())],
        r#"{"model":"m","stream":true}"#,
    );
    c.read_until(&mut s, "\n\n", Duration::from_secs(10))
        .unwrap();
    assert!(
        c.try_read_rest(s).is_err(),
        "the gateway cuts a stalled stream"
    );
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!(l.fault, Some(FaultKind::Timeout));
    assert_eq!(l.requests[0].ending, Ending::IdleTimeout);
    drop(gate);
}

#[test]
fn many_trials_share_a_provider_and_keep_separate_ledgers() {
    let up = Upstream::start(|seen, _| {
        let n = seen.json()["n"].as_u64().unwrap_or(0);
        Reply::ok(format!(
            r#"{{"usage":{{"input_tokens":{n},"output_tokens":1}}}}"#
        ))
    });
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let gw = gateway(&config, &["anthropic"]);
    let tokens: Vec<_> = (0..4)
        .map(|_| gw.register_trial(grant("anthropic", "m")).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for (i, t) in tokens.iter().enumerate() {
            let gw = &gw;
            scope.spawn(move || {
                let c = client(gw);
                for _ in 0..5 {
                    let body = format!(r#"{{"model":"m","n":{}}}"#, (i + 1) * 10);
                    assert_eq!(
                        c.post("/v1/messages", &[("x-api-key", t.as_str())], &body)
                            .status,
                        200
                    );
                }
            });
        }
    });
    for (i, t) in tokens.iter().enumerate() {
        let l = gw.finish_trial(t).unwrap();
        assert_eq!(l.usage.input, 5 * (i as u64 + 1) * 10);
        assert_eq!(l.requests.len(), 5);
        let seqs: Vec<u64> = l.requests.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
    }
}

/// A gateway whose byte budget holds one 600 KB body at a time, waiting `wait_ms` for room.
fn tight_gateway(up: &Upstream, wait_ms: u64) -> proctor_gateway::GatewayHandle {
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n\n[providers.openai]\nbase_url = \"{}\"\n",
        up.url(),
        up.url()
    ));
    let options = GatewayOptions {
        max_request_bytes: 1 << 20,
        budget_bytes: 1 << 20,
        trial_budget_bytes: 1 << 20,
        budget_wait: Duration::from_millis(wait_ms),
        ..GatewayOptions::default()
    };
    gateway_with(&config, &["anthropic", "openai"], options)
}

/// An upstream that answers at once, except a request whose body holds `slow`: that one after
/// `delay_ms`.
fn slow_upstream(delay_ms: u64) -> Upstream {
    Upstream::start(move |seen, _| {
        let reply = Reply::ok(r#"{"usage":{"input_tokens":1,"output_tokens":1}}"#);
        if seen.contains("slow") {
            Reply::Slow {
                delay: Duration::from_millis(delay_ms),
                reply: Box::new(reply),
            }
        } else {
            reply
        }
    })
}

/// A 600 KB request the slow upstream holds, sent from a thread of its own.
fn slow_request(
    gw: &Arc<proctor_gateway::GatewayHandle>,
    token: &str,
) -> std::thread::JoinHandle<support::client::Resp> {
    let (gw, token) = (Arc::clone(gw), token.to_string());
    std::thread::spawn(move || {
        client(&gw).post(
            "/v1/messages",
            &[("x-api-key", &token)],
            &big_body(600).replace("\"xxxx", "\"slow"),
        )
    })
}

fn big_body(kb: usize) -> String {
    format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(kb * 1000)
    )
}

#[test]
fn a_body_with_no_room_in_the_budget_waits_then_is_refused_as_overloaded_in_the_apis_shape() {
    // The first request holds its room while the upstream takes 1.5 s to answer.
    let up = slow_upstream(1500);
    let gw = Arc::new(tight_gateway(&up, 200));
    let slow = gw.register_trial(grant("anthropic", "m")).unwrap();
    let other = gw.register_trial(grant("anthropic", "m")).unwrap();
    let oai = gw.register_trial(grant("openai", "m")).unwrap();
    let first = slow_request(&gw, slow.as_str());
    std::thread::sleep(Duration::from_millis(400));
    // Another trial's 600 KB body finds no room within 200 ms: 529 overloaded_error.
    let r = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", other.as_str())],
        &big_body(600),
    );
    assert_eq!(r.status, 529, "{}", r.text());
    assert_eq!(
        r.json()["error"]["type"],
        "overloaded_error",
        "{}",
        r.text()
    );
    // In OpenAI's shape: 503 with its error object.
    let r = client(&gw).post(
        "/v1/responses",
        &[("authorization", &format!("Bearer {}", oai.as_str()))],
        &big_body(600),
    );
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "overloaded", "{}", r.text());
    // A small body still fits beside the held one.
    let small = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", other.as_str())],
        r#"{"model":"m"}"#,
    );
    assert_eq!(small.status, 200, "{}", small.text());
    assert_eq!(first.join().unwrap().status, 200);
    // Once the first is filed, its room is back: the same body now goes through.
    let r = client(&gw).post(
        "/v1/messages",
        &[("x-api-key", other.as_str())],
        &big_body(600),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        up.seen().len(),
        3,
        "the refused requests never went upstream"
    );
    let l = gw.finish_trial(&other).unwrap();
    assert_eq!((l.requests_forwarded, l.requests_refused), (2, 1));
    assert_eq!(
        l.fault, None,
        "the gateway's own overload is not the provider's fault"
    );
}

#[test]
fn a_waiting_body_is_served_once_room_is_free() {
    let up = slow_upstream(600);
    let gw = Arc::new(tight_gateway(&up, 10_000));
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let first = slow_request(&gw, t.as_str());
    std::thread::sleep(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let r = client(&gw).post("/v1/messages", &[("x-api-key", t.as_str())], &big_body(600));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "it waited for the first request's room"
    );
    assert_eq!(first.join().unwrap().status, 200);
    let l = gw.finish_trial(&t).unwrap();
    assert_eq!((l.requests_forwarded, l.requests_refused), (2, 0));
}

#[test]
fn a_body_declared_over_the_limit_is_refused_before_it_is_sent() {
    use std::io::{Read, Write};
    let up = Upstream::start(|_, _| Reply::ok("{}"));
    let gw = tight_gateway(&up, 200);
    let t = gw.register_trial(grant("anthropic", "m")).unwrap();
    let mut s = std::net::TcpStream::connect(gw.tcp_addr().unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // 100 MB declared, nothing sent: the answer comes without the body.
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nhost: gw\r\nx-api-key: {}\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\nexpect: 100-continue\r\n\r\n",
        t.as_str()
    )
    .unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.contains("request_too_large"), "{head}");
    assert!(up.seen().is_empty());
}

#[test]
fn a_trials_socket_serves_a_bounded_number_of_connections_at_once() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let up = Upstream::start(|_, _| Reply::ok(r#"{"usage":{"input_tokens":1,"output_tokens":1}}"#));
    let config = config(&format!(
        "[providers.anthropic]\nbase_url = \"{}\"\n",
        up.url()
    ));
    let dir = tempfile::tempdir().unwrap();
    let options = GatewayOptions {
        unix_socket: Some(dir.path().join("gateway.sock")),
        trial_connections: 2,
        ..GatewayOptions::default()
    };
    let gw = gateway_with(&config, &["anthropic"], options);
    let sock = dir.path().join("trial.sock");
    let t = gw
        .register_trial_at(grant("anthropic", "m"), &sock)
        .unwrap();
    // Two idle connections take both places.
    let idle: Vec<UnixStream> = (0..2)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut third = UnixStream::connect(&sock).unwrap();
    let body = r#"{"model":"m"}"#;
    write!(
        third,
        "POST /v1/messages HTTP/1.1\r\nhost: gw\r\nx-api-key: {}\r\ncontent-length: {}\r\n\r\n{body}",
        t.as_str(),
        body.len()
    )
    .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 4096];
    assert!(
        third.read(&mut buf).is_err(),
        "a third connection is not served while two are open"
    );
    drop(idle);
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let n = third.read(&mut buf).unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    gw.finish_trial(&t).unwrap();
}
