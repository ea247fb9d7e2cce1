//! Service readiness probes and guards, shared by the sandbox init and the no-namespace mode,
//! and a sidecar's healthcheck (run in the sidecar's mount namespace by the sandbox init).

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::exec::{Enter, ExecPlan};
use crate::http;
use crate::report::{Exit, ProbeOutcome};
use crate::spec::{CommandProbe, HttpGuard};
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

/// What a healthcheck is run with: the service's environment, working folder and log.
pub(crate) struct HealthRun<'a> {
    /// The service's environment.
    pub env: &'a [(String, String)],
    /// Its working folder (inside its root).
    pub cwd: &'a Path,
    /// `/dev/null`, the healthcheck's standard input.
    pub devnull: RawFd,
    /// The service's log, where the healthcheck's output goes.
    pub log: RawFd,
}

/// Runs `probe` in the mount namespace of the service (`pid`, `pidfd`) until it exits 0, the
/// service exits, or `probe.timeout` (counted from `started_at`) passes.
pub(crate) fn wait_healthy(
    probe: &CommandProbe,
    run: &HealthRun<'_>,
    pid: libc::pid_t,
    pidfd: &OwnedFd,
    started_at: Instant,
) -> ProbeOutcome {
    let deadline = started_at + probe.timeout;
    let mut pause = Duration::from_millis(20);
    let mut tries = 0u32;
    let mut last;
    loop {
        if let Some(e) = sys::peek_exit(pid) {
            return ProbeOutcome::Failed {
                reason: format!(
                    "it exited ({}) before its healthcheck passed",
                    describe_exit(&e)
                ),
            };
        }
        tries += 1;
        match try_once(probe, run, pidfd, deadline) {
            Ok(()) => {
                return ProbeOutcome::Passed {
                    elapsed: started_at.elapsed(),
                }
            }
            Err(e) => last = e,
        }
        if Instant::now() + pause >= deadline {
            return ProbeOutcome::Failed {
                reason: format!(
                    "its healthcheck {:?} did not pass within {:.1?} ({tries} tries; the last: {last})",
                    probe.argv, probe.timeout
                ),
            };
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(probe.interval.max(Duration::from_millis(20)));
    }
}

/// One try of the healthcheck: `Ok` when it exits 0 before `deadline`.
fn try_once(
    probe: &CommandProbe,
    run: &HealthRun<'_>,
    pidfd: &OwnedFd,
    deadline: Instant,
) -> Result<(), String> {
    let pid = ExecPlan::new(&probe.argv, run.env, run.cwd, run.devnull, run.log, run.log)?
        .entering(Enter::MountsOf(pidfd.as_raw_fd()))
        .spawn()?;
    let fd = sys::pidfd_open(pid).map_err(|e| {
        sys::kill(pid, libc::SIGKILL);
        let _ = sys::wait4(pid, 0);
        format!("pidfd_open: {e}")
    })?;
    let left = deadline.saturating_duration_since(Instant::now());
    let ended = sys::wait_readable(fd.as_fd(), Some(left)).unwrap_or(false);
    if !ended {
        // Its own session: the whole of it goes.
        sys::kill(-pid, libc::SIGKILL);
        sys::kill(pid, libc::SIGKILL);
    }
    let exit = match sys::wait4(pid, 0) {
        Ok(Some((_, status, _))) => sys::decode_status(status),
        _ => return Err("it could not be waited for".into()),
    };
    match (ended, exit.code) {
        (false, _) => Err("it was still running at the deadline".into()),
        (true, Some(0)) => Ok(()),
        (true, _) => Err(format!("it ended with {}", describe_exit(&exit))),
    }
}
