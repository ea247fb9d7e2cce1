//! One request of a trial from receipt to its record: timings, tries, the usage tap, the kept
//! bodies, and exactly one finalisation (also when the agent goes away mid-way).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::budget::Held;
use super::limiter::Permit;
use super::trials::{Outcome, Trial};
use crate::api::Api;
use crate::ledger::{Attempt, Ending, FaultKind, LimitKind, RequestRecord};
use crate::usage::UsageParser;

/// The largest response body kept as evidence; past it the copy is cut (the agent still gets
/// everything).
const MAX_KEPT_RESPONSE: usize = 64 << 20;

/// A request under way.
#[derive(Debug)]
pub(crate) struct Exchange {
    pub trial: Arc<Trial>,
    pub seq: u64,
    pub started: Instant,
    pub time: String,
    pub api: Api,
    pub endpoint: String,
    pub model: Option<String>,
    pub requested_model: Option<String>,
    pub stream: bool,
    /// A successful response of a generating route: it should carry usage.
    pub expects_usage: bool,
    pub request_body: Bytes,
    pub status: u16,
    pub ttfb: Option<Duration>,
    pub queued: Duration,
    pub attempts: Vec<Attempt>,
    pub parser: Option<UsageParser>,
    pub response: Vec<u8>,
    pub response_truncated: bool,
    /// `json` or `sse`: the kept response's file extension.
    pub response_ext: &'static str,
    pub fault: Option<FaultKind>,
    pub error: Option<String>,
    pub limit: Option<LimitKind>,
    pub upstream_request_id: Option<String>,
    /// The provider place this request holds while its response streams.
    pub permit: Option<Permit>,
    /// The room its request body holds in the gateway's byte budgets, until its evidence is
    /// written.
    pub held: Option<Held>,
    done: bool,
}

impl Exchange {
    /// A new exchange for request `seq` of `trial`.
    pub fn new(
        trial: Arc<Trial>,
        seq: u64,
        started: Instant,
        time: String,
        api: Api,
        endpoint: String,
    ) -> Self {
        Exchange {
            trial,
            seq,
            started,
            time,
            api,
            endpoint,
            model: None,
            requested_model: None,
            stream: false,
            expects_usage: false,
            request_body: Bytes::new(),
            status: 0,
            ttfb: None,
            queued: Duration::ZERO,
            attempts: Vec::new(),
            parser: None,
            response: Vec::new(),
            response_truncated: false,
            response_ext: "json",
            fault: None,
            error: None,
            limit: None,
            upstream_request_id: None,
            permit: None,
            held: None,
            done: false,
        }
    }

    /// A piece of the response body passed to the agent.
    pub fn on_data(&mut self, data: &[u8]) {
        if self.ttfb.is_none() {
            self.ttfb = Some(self.started.elapsed());
        }
        if let Some(p) = &mut self.parser {
            p.feed(data);
        }
        if self.response.len() + data.len() <= MAX_KEPT_RESPONSE {
            self.response.extend_from_slice(data);
        } else {
            self.response_truncated = true;
        }
    }

    /// Ends the exchange: accounts it, writes its evidence, files its record.
    pub fn finish(mut self, ending: Ending) {
        self.finalize(ending);
    }

    fn finalize(&mut self, ending: Ending) {
        if self.done {
            return;
        }
        self.done = true;
        self.permit = None;
        let latency = self.started.elapsed();
        let reading = self.parser.take().map(UsageParser::finish);
        let usage = reading.as_ref().and_then(|r| r.usage);
        match ending {
            Ending::UpstreamBroke => {
                self.fault.get_or_insert(FaultKind::ProviderError);
            }
            Ending::IdleTimeout => {
                self.fault.get_or_insert(FaultKind::Timeout);
            }
            _ => {}
        }
        let malformed = reading.as_ref().is_some_and(|r| r.malformed);
        if let (Some(r), Ending::Complete) = (&reading, ending) {
            if r.malformed {
                self.fault.get_or_insert(FaultKind::ProviderError);
                self.error
                    .get_or_insert_with(|| "malformed response body".into());
            } else if let Some(e) = &r.stream_error {
                self.fault.get_or_insert(FaultKind::ProviderError);
                self.error
                    .get_or_insert_with(|| format!("error in the stream: {e}"));
            }
        }
        let missing_usage =
            ending == Ending::Complete && self.expects_usage && usage.is_none() && !malformed;
        let cost = self.trial.account(&Outcome {
            model: self.model.clone(),
            usage,
            missing_usage,
            fault: self.fault,
        });
        let trial = Arc::clone(&self.trial);
        let record = RequestRecord {
            seq: self.seq,
            time: std::mem::take(&mut self.time),
            provider: trial.grant.provider.clone(),
            api: self.api,
            endpoint: std::mem::take(&mut self.endpoint),
            model: self.model.take(),
            requested_model: self.requested_model.take(),
            stream: self.stream,
            status: self.status,
            latency_ms: millis(latency),
            ttfb_ms: self.ttfb.map(millis),
            queued_ms: millis(self.queued),
            usage,
            cost_usd: cost,
            retries: (self.attempts.len() as u32).saturating_sub(1),
            attempts: std::mem::take(&mut self.attempts),
            fault: self.fault,
            error: self.error.take().map(|e| trial.redactor.redact_str(&e)),
            limit: self.limit,
            ending,
            upstream_request_id: self.upstream_request_id.take(),
            request_body: None,
            response_body: None,
        };
        let bodies = Bodies {
            request: std::mem::take(&mut self.request_body),
            response: std::mem::take(&mut self.response),
            response_ext: self.response_ext,
            _held: self.held.take(),
        };
        if trial.evidence.is_none() {
            trial.complete(record, None);
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(move || write_evidence(&trial, record, bodies));
            }
            Err(_) => write_evidence(&trial, record, bodies),
        }
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.finalize(Ending::ClientClosed);
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The bodies an exchange keeps.
struct Bodies {
    request: Bytes,
    response: Vec<u8>,
    response_ext: &'static str,
    /// The request's room in the byte budgets, given back once the bodies are written.
    _held: Option<Held>,
}

/// Writes the bodies and the record's line (credentials removed), then files the record.
fn write_evidence(trial: &Trial, mut record: RequestRecord, bodies: Bodies) {
    let Some(dir) = &trial.evidence else {
        trial.complete(record, None);
        return;
    };
    let r = &trial.redactor;
    let seq = record.seq;
    let result = (|| -> std::io::Result<()> {
        if !bodies.request.is_empty() {
            record.request_body =
                Some(dir.write_body(seq, "request", "json", &r.redact(&bodies.request))?);
        }
        if !bodies.response.is_empty() {
            record.response_body = Some(dir.write_body(
                seq,
                "response",
                bodies.response_ext,
                &r.redact(&bodies.response),
            )?);
        }
        let line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        dir.append_line(&r.redact(&line))
    })();
    let error = result.err().map(|e| {
        format!(
            "request {seq}: cannot write its evidence in {}: {e}",
            dir.root().display()
        )
    });
    trial.complete(record, error);
}
