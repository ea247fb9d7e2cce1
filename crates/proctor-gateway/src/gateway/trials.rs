//! The running trials: each one's grant, counters, limits and request records.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use super::{ProviderRuntime, TrialGrant};
use crate::evidence::{EvidenceDir, Redactor};
use crate::ledger::{CostLedger, FaultKind, LimitKind, RequestRecord, TrialLedger};
use crate::usage::Usage;

/// One running trial.
#[derive(Debug)]
pub(crate) struct Trial {
    /// What it was granted.
    pub grant: TrialGrant,
    /// Its provider.
    pub provider: Arc<ProviderRuntime>,
    /// Removes the real key and the trial's token from what is recorded.
    pub redactor: Redactor,
    /// Where its evidence goes.
    pub evidence: Option<EvidenceDir>,
    /// The listener its token works on, when it is bound to one of its own
    /// ([`crate::GatewayHandle::register_trial_at`]); `None`: any listener of the gateway.
    pub bound_to: Option<u64>,
    /// The forms of the real key masked in everything sent back to the agent.
    pub needles: super::scrub::Needles,
    /// Its budget of request-body bytes held at once.
    pub budget: Arc<tokio::sync::Semaphore>,
    state: Mutex<State>,
    settled: Condvar,
}

#[derive(Debug, Default)]
struct State {
    next_seq: u64,
    forwarded: u64,
    refused: u64,
    without_usage: u64,
    usage: Usage,
    priced_usd: f64,
    unpriced: BTreeSet<String>,
    limit_reached: Option<LimitKind>,
    fault: Option<FaultKind>,
    faults: Vec<FaultKind>,
    records: Vec<RequestRecord>,
    in_flight: u64,
    closed: bool,
    evidence_errors: Vec<String>,
}

/// Why a request may not go upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denied {
    /// The trial was finished.
    Closed,
    /// A limit is reached.
    Limit(LimitKind),
}

/// What one finished request adds to the ledger.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// The model sent upstream.
    pub model: Option<String>,
    /// Usage read from the wire.
    pub usage: Option<Usage>,
    /// A successful generation whose response carried no usage.
    pub missing_usage: bool,
    /// Why it finally failed.
    pub fault: Option<FaultKind>,
}

impl Trial {
    /// A trial for `grant` served by `provider`, holding at most `budget` of request bodies.
    pub fn new(
        grant: TrialGrant,
        provider: Arc<ProviderRuntime>,
        redactor: Redactor,
        evidence: Option<EvidenceDir>,
        budget: Arc<tokio::sync::Semaphore>,
    ) -> Trial {
        Trial {
            grant,
            provider,
            redactor,
            evidence,
            bound_to: None,
            needles: super::scrub::Needles::default(),
            budget,
            state: Mutex::new(State::default()),
            settled: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reached(&self, s: &State) -> Option<LimitKind> {
        let l = &self.grant.limits;
        if l.tokens.is_some_and(|t| s.usage.total() >= t) {
            Some(LimitKind::Tokens)
        } else if l.cost_usd.is_some_and(|c| s.priced_usd >= c) {
            Some(LimitKind::CostUsd)
        } else if l.requests.is_some_and(|r| s.forwarded >= r) {
            Some(LimitKind::Requests)
        } else {
            None
        }
    }

    /// Lets a request go upstream: gives its `seq`, or why not (a refusal by limit then also
    /// takes a `seq`, given with it, and must be completed like any request).
    pub fn admit(&self) -> Result<u64, (Denied, Option<u64>)> {
        let mut s = self.lock();
        if s.closed {
            return Err((Denied::Closed, None));
        }
        s.next_seq += 1;
        let seq = s.next_seq;
        s.in_flight += 1;
        if let Some(kind) = s.limit_reached.or_else(|| self.reached(&s)) {
            s.limit_reached.get_or_insert(kind);
            s.refused += 1;
            return Err((Denied::Limit(kind), Some(seq)));
        }
        s.forwarded += 1;
        if s.limit_reached.is_none() {
            s.limit_reached = self.reached(&s);
        }
        Ok(seq)
    }

    /// A `seq` for a request the gateway refuses before admission (bad route or body); `None`
    /// once the trial is finished.
    pub fn refuse(&self) -> Option<u64> {
        let mut s = self.lock();
        if s.closed {
            return None;
        }
        s.next_seq += 1;
        s.in_flight += 1;
        s.refused += 1;
        Some(s.next_seq)
    }

    /// Adds a finished request's usage, cost and fault; gives its cost.
    pub fn account(&self, outcome: &Outcome) -> Option<f64> {
        let mut s = self.lock();
        let mut cost = None;
        if let Some(usage) = &outcome.usage {
            s.usage.add(usage);
            let price = outcome
                .model
                .as_ref()
                .and_then(|m| self.grant.prices.get(m));
            match price {
                Some(p) => {
                    let c = p.cost_usd(usage);
                    s.priced_usd += c;
                    cost = Some(c);
                }
                None => {
                    let name = outcome.model.clone().unwrap_or_else(|| "(unknown)".into());
                    s.unpriced.insert(name);
                }
            }
        }
        if outcome.missing_usage {
            s.without_usage += 1;
        }
        if let Some(f) = outcome.fault {
            s.fault.get_or_insert(f);
            if !s.faults.contains(&f) {
                s.faults.push(f);
            }
        }
        if s.limit_reached.is_none() {
            s.limit_reached = self.reached(&s);
        }
        cost
    }

    /// Files a request's record (after its evidence was written).
    pub fn complete(&self, record: RequestRecord, evidence_error: Option<String>) {
        let mut s = self.lock();
        s.records.push(record);
        if let Some(e) = evidence_error {
            s.evidence_errors.push(e);
        }
        s.in_flight = s.in_flight.saturating_sub(1);
        drop(s);
        self.settled.notify_all();
    }

    /// Closes the trial to new requests, waits up to `grace` for those under way, and gives
    /// the ledger.
    pub fn finish(&self, grace: Duration) -> TrialLedger {
        let deadline = Instant::now() + grace;
        let mut s = self.lock();
        s.closed = true;
        while s.in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = match self.settled.wait_timeout(s, left) {
                Ok((guard, _)) => guard,
                Err(e) => e.into_inner().0,
            };
        }
        let mut requests = s.records.clone();
        requests.sort_by_key(|r| r.seq);
        let incomplete = !s.unpriced.is_empty();
        TrialLedger {
            provider: self.grant.provider.clone(),
            model: self.grant.model.clone(),
            requests,
            usage: s.usage,
            requests_forwarded: s.forwarded,
            requests_refused: s.refused,
            requests_without_usage: s.without_usage,
            cost: CostLedger {
                usd: (!incomplete).then_some(s.priced_usd),
                priced_usd: s.priced_usd,
                incomplete,
                unpriced_models: s.unpriced.iter().cloned().collect(),
            },
            limit_reached: s.limit_reached,
            fault: s.fault,
            faults: s.faults.clone(),
            unfinished_requests: s.in_flight,
            evidence_dir: self.evidence.as_ref().map(|e| PathBuf::from(e.root())),
            evidence_errors: s.evidence_errors.clone(),
        }
    }
}

/// The running trials by token.
#[derive(Debug, Default)]
pub(crate) struct Trials {
    by_token: RwLock<HashMap<String, Arc<Trial>>>,
}

impl Trials {
    /// Adds a trial under its token.
    pub fn insert(&self, token: String, trial: Arc<Trial>) {
        self.by_token
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token, trial);
    }

    /// The trial of a token.
    pub fn get(&self, token: &str) -> Option<Arc<Trial>> {
        self.by_token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    /// Removes a trial; its token stops working.
    pub fn remove(&self, token: &str) -> Option<Arc<Trial>> {
        self.by_token
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token)
    }
}
