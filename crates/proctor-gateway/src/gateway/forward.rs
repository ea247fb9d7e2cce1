//! Forwarding one admitted request upstream with the real key: retrying 429, 5xx, connection
//! errors and timeouts (with backoff, honouring `retry-after`) while no response byte has
//! reached the agent, then passing the answer back: errors whole and redacted, everything else
//! streamed through the usage tap.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use super::api_error::Refusal;
use super::body::{GatewayBody, TapBody};
use super::exchange::Exchange;
use super::limiter::Permit;
use super::respond::{failed, respond};
use super::trials::Trial;
use super::{headers, retry, Shared};
use crate::api::Route;
use crate::ledger::{Attempt, Ending, FaultKind};
use crate::usage::UsageParser;

/// The request as it goes upstream.
pub(crate) struct Upstream {
    /// The provider's URL for it.
    pub uri: http::Uri,
    /// The agent's headers with the real key in place of the token.
    pub headers: http::HeaderMap,
    /// The (possibly rewritten) body.
    pub body: Bytes,
}

/// An error with its causes, one after another.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// What one try upstream came to.
enum Tried {
    /// An answer to pass on as it comes (2xx, or a 4xx that is the request's own problem).
    Answer(Response<Incoming>),
    /// A fault no retry mends (401, 403), passed on whole.
    Fatal(Response<Incoming>, FaultKind),
    /// A fault a retry may mend: 429 or 5xx (with the answer), a timeout or a connection error.
    Retryable {
        fault: FaultKind,
        error: Option<String>,
        resp: Option<Response<Incoming>>,
    },
}

/// Sends the request once and waits up to `first_byte` for the response head.
async fn try_once(trial: &Trial, upstream: &Upstream, first_byte: Duration) -> Tried {
    let mut req = Request::new(Full::new(upstream.body.clone()));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = upstream.uri.clone();
    *req.headers_mut() = upstream.headers.clone();
    match tokio::time::timeout(first_byte, trial.provider.client.request(req)).await {
        Err(_) => Tried::Retryable {
            fault: FaultKind::Timeout,
            error: Some(format!(
                "no response headers within {} ms",
                first_byte.as_millis()
            )),
            resp: None,
        },
        Ok(Err(e)) => Tried::Retryable {
            fault: FaultKind::ProviderError,
            error: Some(error_chain(&e)),
            resp: None,
        },
        Ok(Ok(resp)) => match FaultKind::from_status(resp.status().as_u16()) {
            None => Tried::Answer(resp),
            Some(FaultKind::CredentialLoss) => Tried::Fatal(resp, FaultKind::CredentialLoss),
            Some(fault) => Tried::Retryable {
                fault,
                error: None,
                resp: Some(resp),
            },
        },
    }
}

fn attempt(status: Option<u16>, fault: Option<FaultKind>, error: Option<String>) -> Attempt {
    Attempt {
        status,
        fault,
        error,
        backoff_ms: None,
    }
}

/// Sends `upstream` until an answer goes to the agent, and gives that answer.
pub(crate) async fn forward(
    shared: &Shared,
    trial: &Arc<Trial>,
    mut ex: Exchange,
    route: &Route,
    upstream: Upstream,
) -> Response<GatewayBody> {
    let limiter = &trial.provider.limiter;
    let settings = shared.retries;
    let first_byte = Duration::from_millis(shared.timeouts.first_byte_ms);
    let mut tries = 0;
    loop {
        tries += 1;
        let queued_at = Instant::now();
        let permit = limiter.acquire().await;
        ex.queued += queued_at.elapsed();
        let tried = try_once(trial, &upstream, first_byte).await;
        if let Tried::Answer(r) | Tried::Fatal(r, _) | Tried::Retryable { resp: Some(r), .. } =
            &tried
        {
            ex.upstream_request_id = headers::request_id(r.headers());
        }
        let (fault, error, resp) = match tried {
            Tried::Answer(resp) => {
                let status = resp.status();
                ex.attempts.push(attempt(Some(status.as_u16()), None, None));
                if status.is_success() {
                    limiter.on_success();
                }
                return stream_back(shared, ex, route, resp, permit);
            }
            Tried::Fatal(resp, fault) => {
                ex.attempts
                    .push(attempt(Some(resp.status().as_u16()), Some(fault), None));
                return pass_error(shared, ex, resp, permit, fault).await;
            }
            Tried::Retryable { fault, error, resp } => (fault, error, resp),
        };
        if fault == FaultKind::RateLimit {
            limiter.on_rate_limit();
        }
        let status = resp.as_ref().map(|r| r.status().as_u16());
        if tries >= settings.attempts {
            ex.attempts
                .push(attempt(status, Some(fault), error.clone()));
            return match resp {
                Some(resp) => pass_error(shared, ex, resp, permit, fault).await,
                None => {
                    drop(permit);
                    give_up(ex, fault, tries, error.unwrap_or_default())
                }
            };
        }
        let after = resp
            .as_ref()
            .and_then(|r| retry::retry_after(r.headers(), SystemTime::now()));
        let wait = retry::delay(&settings, tries, after, retry::jitter_unit());
        ex.attempts.push(Attempt {
            backoff_ms: Some(wait.as_millis() as u64),
            ..attempt(status, Some(fault), error)
        });
        drop(resp);
        drop(permit);
        tokio::time::sleep(wait).await;
    }
}

/// Answers a request whose every try ended without a response (timeouts, connection errors).
fn give_up(ex: Exchange, fault: FaultKind, tries: u32, error: String) -> Response<GatewayBody> {
    let why = if fault == FaultKind::Timeout {
        Refusal::Timeout
    } else {
        Refusal::Unreachable
    };
    let message = format!(
        "proctor gateway: provider `{}` failed after {tries} tries: {error}",
        ex.trial.provider.provider.name
    );
    failed(ex, why, fault, message)
}

/// Passes an upstream error answer on to the agent (its own API's shape), whole and with
/// credentials removed, and files the request as failed with `fault`.
async fn pass_error(
    shared: &Shared,
    mut ex: Exchange,
    resp: Response<Incoming>,
    permit: Permit,
    fault: FaultKind,
) -> Response<GatewayBody> {
    let (parts, body) = resp.into_parts();
    let idle = Duration::from_millis(shared.timeouts.idle_ms);
    let bytes = match tokio::time::timeout(idle, Limited::new(body, 16 << 20).collect()).await {
        Ok(Ok(b)) => b.to_bytes(),
        _ => Bytes::new(),
    };
    drop(permit);
    let mut scrubbed = ex.trial.redactor.redact(&bytes).into_owned();
    let needles = ex.trial.needles.clone();
    needles.mask(&mut scrubbed);
    let bytes = Bytes::from(scrubbed);
    ex.ttfb = Some(ex.started.elapsed());
    ex.status = parts.status.as_u16();
    ex.fault = Some(fault);
    ex.error = Some(
        error_message(&bytes).unwrap_or_else(|| format!("upstream answered {}", parts.status)),
    );
    ex.response = bytes.to_vec();
    ex.finish(Ending::Complete);
    let mut headers = headers::downstream(&parts.headers, false);
    needles.mask_headers(&mut headers);
    if !headers.contains_key(header::CONTENT_TYPE) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    respond(parts.status, headers, GatewayBody::full(bytes))
}

/// The message of an API error body (`error.message` or `message`).
fn error_message(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let v = match &v {
        serde_json::Value::Array(items) => items.first()?.clone(),
        _ => v,
    };
    v.pointer("/error/message")
        .or_else(|| v.get("message"))
        .and_then(|m| m.as_str())
        .map(|m| m.chars().take(500).collect())
}

/// Streams an upstream answer back to the agent as it arrives, tapping it for usage.
fn stream_back(
    shared: &Shared,
    mut ex: Exchange,
    route: &Route,
    resp: Response<Incoming>,
    permit: Permit,
) -> Response<GatewayBody> {
    let (parts, body) = resp.into_parts();
    let sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
    ex.status = parts.status.as_u16();
    ex.stream = ex.stream || sse;
    if sse {
        ex.response_ext = "sse";
    }
    // A body encoded despite `accept-encoding: identity` cannot be read for usage: it then
    // counts as a response without usage.
    let encoded = parts
        .headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    if parts.status.is_success() && route.generates {
        ex.expects_usage = true;
        if !encoded {
            ex.parser = Some(UsageParser::new(route.api, sse));
        }
    }
    ex.permit = Some(permit);
    let mut headers = headers::downstream(&parts.headers, true);
    ex.trial.needles.mask_headers(&mut headers);
    let idle = Duration::from_millis(shared.timeouts.idle_ms);
    respond(
        parts.status,
        headers,
        GatewayBody::Tap(Box::new(TapBody::new(body, ex, idle))),
    )
}
