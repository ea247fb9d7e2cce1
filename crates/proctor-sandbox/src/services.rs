//! Service readiness probes and guards, shared by the sandbox init and the no-namespace mode.

use std::time::{Duration, Instant};

use crate::http;
use crate::report::{Exit, ProbeOutcome};
use crate::spec::HttpGuard;
use crate::sys;

/// Polls `GET url` until it answers 2xx, the service (child `pid`) exits, or `timeout` (counted
/// from `started_at`) passes. Does not reap the service.
pub(crate) fn wait_ready(
    pid: libc::pid_t,
    url: &str,
    timeout: Duration,
    started_at: Instant,
) -> ProbeOutcome {
    let url = match http::Url::parse(url) {
        Ok(u) => u,
        Err(reason) => return ProbeOutcome::Failed { reason },
    };
    let deadline = started_at + timeout;
    let mut pause = Duration::from_millis(2);
    let mut last;
    loop {
        if let Some(e) = sys::peek_exit(pid) {
            return ProbeOutcome::Failed {
                reason: format!("it exited ({}) before it was ready", describe_exit(&e)),
            };
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match http::get(&url, left.min(Duration::from_secs(2))) {
            Ok(r) if (200..300).contains(&r.status) => {
                return ProbeOutcome::Passed {
                    elapsed: started_at.elapsed(),
                }
            }
            Ok(r) => last = format!("GET {} answered HTTP {}", url.path, r.status),
            Err(e) => last = e,
        }
        if Instant::now() + pause >= deadline {
            return ProbeOutcome::Failed {
                reason: format!("no 2xx answer within {timeout:.1?}: {last}"),
            };
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// `GET guard.url` once: passes when the body contains `guard.expect`.
pub(crate) fn check_guard(guard: &HttpGuard, started_at: Instant) -> ProbeOutcome {
    match http::Url::parse(&guard.url).and_then(|u| http::get(&u, guard.timeout)) {
        Ok(resp) => {
            let body = String::from_utf8_lossy(&resp.body);
            if body.contains(&guard.expect) {
                ProbeOutcome::Passed {
                    elapsed: started_at.elapsed(),
                }
            } else {
                ProbeOutcome::Failed {
                    reason: format!(
                        "body did not contain '{}' (HTTP {})",
                        guard.expect, resp.status
                    ),
                }
            }
        }
        Err(e) => ProbeOutcome::Failed {
            reason: format!("GET {} failed: {e}", guard.url),
        },
    }
}

/// "exit code 3", "signal 9".
pub(crate) fn describe_exit(e: &Exit) -> String {
    match (e.code, e.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (_, Some(s)) => format!("signal {s}"),
        _ => "unknown status".to_owned(),
    }
}

/// The refusal sentence for a failed readiness probe.
pub(crate) fn ready_refusal(name: &str, outcome: &ProbeOutcome) -> Option<String> {
    match outcome {
        ProbeOutcome::Failed { reason } => Some(format!("service {name} was not ready: {reason}")),
        ProbeOutcome::Passed { .. } => None,
    }
}

/// The refusal sentence for a failed guard.
pub(crate) fn guard_refusal(name: &str, outcome: &ProbeOutcome) -> Option<String> {
    match outcome {
        ProbeOutcome::Failed { reason } => Some(format!("guard of {name} refused: {reason}")),
        ProbeOutcome::Passed { .. } => None,
    }
}
