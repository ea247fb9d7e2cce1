//! Taking an agent's request in: find its trial by token, refuse what may not go (unknown
//! route, wrong method, an API the provider does not speak, an unreadable body, a reached
//! limit), and settle where it goes upstream and with which model.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::api_error::Refusal;
use super::body::GatewayBody;
use super::budget;
use super::exchange::Exchange;
use super::forward::{forward, Upstream};
use super::respond::{failed, refusal, refused, respond};
use super::rewrite::{self, Prepared};
use super::trials::{Denied, Trial};
use super::{headers, Shared};
use crate::api::{Api, Route};
use crate::ledger::FaultKind;
use crate::timefmt::rfc3339_millis;

/// The path that answers `200 ok` without a token, for readiness probes.
pub const HEALTH_PATH: &str = "/__proctor/health";

/// The service function: every request gets an answer. `listener` is the trial listener the
/// connection came in on, if it came in on one.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    listener: Option<u64>,
    req: Request<Incoming>,
) -> Result<Response<GatewayBody>, Infallible> {
    Ok(serve(&shared, listener, req).await)
}

/// Which API an unroutable request most likely speaks, for the shape of its error.
fn guess_api(headers: &http::HeaderMap, path: &str) -> Api {
    if headers.contains_key("x-goog-api-key") || path.contains("/models/") {
        Api::Gemini
    } else if headers.contains_key("x-api-key") || headers.contains_key("anthropic-version") {
        Api::AnthropicMessages
    } else {
        Api::OpenaiResponses
    }
}

/// What starts every exchange of one request.
struct Arrival {
    trial: Arc<Trial>,
    started: Instant,
    time: String,
    api: Api,
    endpoint: String,
}

impl Arrival {
    fn exchange(&self, seq: u64) -> Exchange {
        Exchange::new(
            Arc::clone(&self.trial),
            seq,
            self.started,
            self.time.clone(),
            self.api,
            self.endpoint.clone(),
        )
    }

    /// Refuses before admission, filing the request (unless the trial is finished).
    fn refuse(&self, why: Refusal, message: String) -> Response<GatewayBody> {
        match self.trial.refuse() {
            Some(seq) => refused(self.exchange(seq), why, message),
            None => finished(self.api),
        }
    }
}

fn finished(api: Api) -> Response<GatewayBody> {
    refusal(
        api,
        Refusal::UnknownToken,
        "proctor gateway: the trial is finished",
    )
}

async fn serve(
    shared: &Shared,
    listener: Option<u64>,
    req: Request<Incoming>,
) -> Response<GatewayBody> {
    let started = Instant::now();
    let time = rfc3339_millis(SystemTime::now());
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    if path == HEALTH_PATH {
        return respond(
            StatusCode::OK,
            http::HeaderMap::new(),
            GatewayBody::full("ok"),
        );
    }
    let route = Route::from_path(&path);
    let api = route
        .as_ref()
        .map_or_else(|| guess_api(&parts.headers, &path), |r| r.api);
    let Some(trial) = trial_of(shared, &parts, listener) else {
        return refusal(
            api,
            Refusal::UnknownToken,
            "proctor gateway: unknown or missing API token",
        );
    };
    let arrival = Arrival {
        endpoint: route
            .as_ref()
            .map_or_else(|| path.clone(), |r| r.suffix.clone()),
        trial,
        started,
        time,
        api,
    };
    let route = match check_route(&arrival.trial, route, &parts) {
        Ok(route) => route,
        Err((why, message)) => return arrival.refuse(why, message),
    };
    // Room for the body is taken before each piece of it is read: what waits stays in the
    // socket, not in proctor's memory.
    let max = shared.options.max_request_bytes;
    let (body, held) =
        match budget::read_body(body, max, &shared.budgets, &arrival.trial.budget).await {
            Ok(read) => read,
            Err((why, message)) => return arrival.refuse(why, message),
        };

    let trial = &arrival.trial;
    let granted = shared
        .options
        .rewrite_model
        .then_some(trial.grant.model.as_str());
    let prepared = rewrite::prepare(route.api, body, granted, shared.options.ask_stream_usage);
    let seq = match trial.admit() {
        Ok(seq) => seq,
        Err((Denied::Limit(kind), Some(seq))) => {
            let mut ex = arrival.exchange(seq);
            ex.request_body = prepared.body;
            ex.held = Some(held);
            ex.limit = Some(kind);
            let message = format!(
                "proctor gateway: this trial's {} limit is reached; no further model requests are allowed",
                kind.as_str()
            );
            return refused(ex, Refusal::Limit(kind), message);
        }
        Err(_) => return finished(api),
    };

    let mut ex = arrival.exchange(seq);
    let target = target(&route, granted, &prepared);
    ex.endpoint = target.suffix.clone();
    ex.model = target.model;
    ex.requested_model = target.requested;
    ex.stream = prepared.stream || route.gemini.as_ref().is_some_and(|g| g.streams());
    ex.request_body = prepared.body.clone();
    ex.held = Some(held);

    if let Some(kind) = trial.grant.injected(route.api) {
        let message = format!(
            "proctor gateway: an injected {} fault (the task's route_faults) answered this request",
            kind.as_str()
        );
        return failed(ex, Refusal::Injected(kind), kind, message);
    }
    match upstream_request(trial, &parts, &target.suffix, prepared.body) {
        Ok(upstream) => forward(shared, trial, ex, &route, upstream).await,
        Err(message) => failed(ex, Refusal::Unreachable, FaultKind::ProviderError, message),
    }
}

/// The trial whose token the request carries. A token bound to its trial's own listener works
/// there and nowhere else: a token read from another trial (or tried on the gateway's shared
/// socket) is unknown here.
fn trial_of(shared: &Shared, parts: &Parts, listener: Option<u64>) -> Option<Arc<Trial>> {
    headers::tokens(&parts.headers, parts.uri.query())
        .into_iter()
        .find_map(|t| shared.trials.get(t))
        .filter(|t| t.bound_to == listener)
}

/// The request to send upstream: the provider's URL for `suffix` with the agent's query (less
/// any key), its headers with the real key, `body`; or why the URL is bad.
fn upstream_request(
    trial: &Trial,
    parts: &Parts,
    suffix: &str,
    body: Bytes,
) -> Result<Upstream, String> {
    let provider = &trial.provider;
    let mut url = format!("{}{suffix}", provider.provider.base_url);
    if let Some(q) = headers::query_without_key(parts.uri.query()) {
        url.push('?');
        url.push_str(&q);
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("proctor gateway: bad upstream URL: {e}"))?;
    Ok(Upstream {
        uri,
        headers: headers::upstream(&parts.headers, provider.provider.api, provider.key.as_ref()),
        body,
    })
}

/// The route, if the trial's provider serves it with this method.
fn check_route(
    trial: &Trial,
    route: Option<Route>,
    parts: &Parts,
) -> Result<Route, (Refusal, String)> {
    let path = parts.uri.path();
    let Some(route) = route else {
        return Err((
            Refusal::NotFound,
            format!("proctor gateway: no model API at {path}"),
        ));
    };
    if parts.method != Method::POST {
        return Err((
            Refusal::MethodNotAllowed,
            format!("proctor gateway: {path} takes POST, not {}", parts.method),
        ));
    }
    let provider = &trial.provider.provider;
    if !provider.api.serves(route.api) {
        return Err((
            Refusal::NotFound,
            format!(
                "proctor gateway: provider `{}` speaks {}, not {}",
                provider.name, provider.api, route.api
            ),
        ));
    }
    Ok(route)
}

/// Where a request goes and with which model.
struct Target {
    /// The path after the provider's base URL.
    suffix: String,
    /// The model sent upstream.
    model: Option<String>,
    /// The model the agent asked for, when another is sent.
    requested: Option<String>,
}

fn target(route: &Route, granted: Option<&str>, prepared: &Prepared) -> Target {
    match &route.gemini {
        Some(g) => {
            let model = granted.unwrap_or(&g.model).to_string();
            Target {
                suffix: g.path_for(&model),
                requested: (model != g.model).then(|| g.model.clone()),
                model: Some(model),
            }
        }
        None => {
            let asked = prepared.requested_model.clone();
            let model = granted
                .filter(|_| asked.is_some())
                .map(str::to_string)
                .or_else(|| asked.clone());
            Target {
                suffix: route.suffix.clone(),
                requested: asked.filter(|a| Some(a) != model.as_ref()),
                model,
            }
        }
    }
}
