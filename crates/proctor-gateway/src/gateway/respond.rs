//! The gateway's own answers: responses it makes, and filing the requests they end.

use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use super::api_error::Refusal;
use super::body::GatewayBody;
use super::exchange::Exchange;
use crate::api::Api;
use crate::ledger::{Ending, FaultKind};

/// A response of `status` with these headers and body.
pub(crate) fn respond(
    status: StatusCode,
    headers: HeaderMap,
    body: GatewayBody,
) -> Response<GatewayBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

/// `content-type: application/json`.
pub(crate) fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h
}

/// The gateway's own error in `api`'s shape.
pub(crate) fn refusal(api: Api, refusal: Refusal, message: &str) -> Response<GatewayBody> {
    let (status, body) = refusal.body(api, message);
    respond(status, json_headers(), GatewayBody::full(body))
}

/// Answers a request the gateway refuses (route, body, limit) and files it.
pub(crate) fn refused(mut ex: Exchange, why: Refusal, message: String) -> Response<GatewayBody> {
    let resp = refusal(ex.api, why, &message);
    ex.status = resp.status().as_u16();
    ex.error = Some(message);
    ex.finish(Ending::Refused);
    resp
}

/// Answers a request that finally failed without an upstream answer (timeout, unreachable)
/// and files it with `fault`.
pub(crate) fn failed(
    mut ex: Exchange,
    why: Refusal,
    fault: FaultKind,
    message: String,
) -> Response<GatewayBody> {
    let message = ex.trial.redactor.redact_str(&message);
    let resp = refusal(ex.api, why, &message);
    ex.status = resp.status().as_u16();
    ex.fault = Some(fault);
    ex.error = Some(message);
    ex.finish(Ending::Complete);
    resp
}
