//! Stage 3, execute: the sandbox runs the services and the agent until the agent exits or
//! reaches its wall timeout, then stops every process of the trial (the full stop); the calls log
//! is closed. When the agent never started, this stage knows why, and says so with a typed kind:
//! a service that failed its ready probe or guard, or an agent that could not be executed.

use std::os::fd::BorrowedFd;
use std::path::Path;

use proctor_sandbox::{ProbeOutcome, SandboxReport, SandboxSpec};
use proctor_score::ErrorKind;

use crate::calls::CallsLog;
use crate::trial::conversation::{Said, Spoken};
use crate::trial::error::{Stage, TrialError};
use crate::trial::launch::Launched;
use crate::trial::paths::TrialPaths;

/// What the execute stage saw.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The sandbox's report (a not-started reason carries the failed service's last lines).
    pub report: SandboxReport,
    /// Why the agent never started, typed: `None` when it started.
    pub not_started_kind: Option<ErrorKind>,
    /// The sandbox init was killed after the agent ran (how, and when): the workspace's
    /// changes went with it. The capture tells from the trial's control group whether a limit
    /// of the trial's own killed it (the agent's doing, graded) or not (a harness fault).
    pub init_lost: Option<String>,
    /// In a conversation: what opened each turn and why the conversation ended.
    pub spoken: Option<crate::trial::conversation::Spoken>,
    /// In a task in steps: what each step's check gave.
    pub steps: Option<proctor_score::StepsRecord>,
}

/// Runs the sandbox to the full stop, then closes the calls log.
pub fn execute(
    spec: &SandboxSpec,
    calls_log: &mut CallsLog,
    paths: &TrialPaths,
) -> Result<Executed, TrialError> {
    execute_on(spec, calls_log, paths, None)
}

/// [`execute`], with the agent on `terminal` when given (a person's sitting: see
/// [`proctor_sandbox::run_on_terminal`]).
pub fn execute_on(
    spec: &SandboxSpec,
    calls_log: &mut CallsLog,
    paths: &TrialPaths,
    terminal: Option<BorrowedFd<'_>>,
) -> Result<Executed, TrialError> {
    let report = match terminal {
        Some(tty) => proctor_sandbox::run_on_terminal(spec, tty),
        None => proctor_sandbox::run(spec),
    };
    after_run(report, spec, calls_log, paths)
}

/// [`execute`] for a launch that may hold a conversation ([`Launched::turns`]): after each turn
/// the task's simulated user decides what follows (see [`crate::trial::conversation`]).
pub fn execute_launched(
    launched: &Launched,
    calls_log: &mut CallsLog,
    paths: &TrialPaths,
) -> Result<Executed, TrialError> {
    if let Some(plan) = &launched.steps {
        return execute_steps(launched, plan, calls_log, paths);
    }
    let Some(plan) = &launched.turns else {
        return execute(&launched.spec, calls_log, paths);
    };
    let mut spoken = Spoken {
        said: vec![Said {
            turn: 1,
            prompt: plan.relaunch.launch.prompt.clone(),
            by: None,
        }],
        ended: String::new(),
        ends: Vec::new(),
    };
    let mut previous = (0, 0);
    let t0 = calls_log.t0();
    let report = proctor_sandbox::run_conversation(&launched.spec, &mut |end| {
        spoken.ends.push((end.turn, t0.elapsed().as_secs_f64()));
        let next = plan.next(launched.adapter.as_ref(), end, previous, &mut spoken);
        previous = (end.stdout_end, end.stderr_end);
        next
    });
    let mut executed = after_run(report, &launched.spec, calls_log, paths)?;
    if spoken.ended.is_empty() {
        spoken.ended = why_it_ended(&executed.report, launched.spec.max_turns);
    }
    executed.spoken = Some(spoken);
    Ok(executed)
}

/// [`execute_launched`] for a task in steps (see [`crate::trial::steps`]): after each turn the
/// plan decides the next (a step's agent turn, its check, the next step's preparation).
fn execute_steps(
    launched: &Launched,
    plan: &crate::trial::steps::StepsPlan,
    calls_log: &mut CallsLog,
    paths: &TrialPaths,
) -> Result<Executed, TrialError> {
    let mut spoken = Spoken::default();
    let mut run = crate::trial::steps::StepsRun::default();
    let t0 = calls_log.t0();
    let report = proctor_sandbox::run_conversation(&launched.spec, &mut |end| {
        spoken.ends.push((end.turn, t0.elapsed().as_secs_f64()));
        plan.next(launched.adapter.as_ref(), end, &mut run, &mut spoken)
    });
    let mut executed = after_run(report, &launched.spec, calls_log, paths)?;
    let why = why_it_ended(&executed.report, launched.spec.max_turns);
    let record = plan.record(run, Some(&why));
    spoken.ended = record
        .stopped_early
        .clone()
        .unwrap_or_else(|| "every step ran".to_string());
    executed.steps = Some(record);
    executed.spoken = Some(spoken);
    Ok(executed)
}

/// Why a conversation the user did not end ended: the agent's time, `max_turns`, or an agent
/// that never started.
fn why_it_ended(report: &SandboxReport, max_turns: u32) -> String {
    if report.not_started.is_some() {
        "the agent never started".to_string()
    } else if report.timed_out {
        "the agent's time ran out".to_string()
    } else if report.turns.len() >= max_turns as usize {
        format!("max_turns ({max_turns}) reached")
    } else {
        "the conversation's time ran out".to_string()
    }
}

/// What follows the sandbox run of [`execute_on`] and [`execute_launched`]: the calls log is
/// closed, a run that failed is a harness error, and the evidence of a service that did not
/// come up is kept.
fn after_run(
    report: Result<SandboxReport, proctor_sandbox::SandboxError>,
    spec: &SandboxSpec,
    calls_log: &mut CallsLog,
    paths: &TrialPaths,
) -> Result<Executed, TrialError> {
    calls_log.finish();
    let (mut report, init_lost) = match report {
        Ok(r) => (r, None),
        Err(proctor_sandbox::SandboxError::InitLost { why, report }) => (*report, Some(why)),
        Err(e) => {
            return Err(TrialError::harness(
                Stage::Execute,
                format!("the sandbox failed: {e}"),
            ))
        }
    };
    let not_started_kind = report
        .not_started
        .as_ref()
        .map(|_| not_started_kind(&report));
    // A service (the model endpoint too) that did not come up: its output is kept as evidence
    // and its last lines go in the reason, which otherwise says only how it ended.
    if let (Some(why), Some(name)) = (report.not_started.clone(), failed_service(&report)) {
        let kept = format!("services/{name}.log");
        let evidence =
            match keep_service_log(&paths.service_log(name), &paths.trial_dir.join(&kept)) {
                Ok(Some(tail)) => format!("; its output ends: {tail} (all of it in {kept})"),
                Ok(None) => "; it printed nothing".to_string(),
                Err(e) => format!("; its output could not be kept: {e}"),
            };
        report.not_started = Some(format!("{why}{evidence}"));
    }
    keep_sidecar_logs(spec, paths);
    Ok(Executed {
        report,
        not_started_kind,
        init_lost,
        spoken: None,
        steps: None,
    })
}

/// Every sidecar's output (a service with a root of its own: a container of the task's) is
/// evidence, kept in the trial's folder as `services/NAME.log` whatever came of the trial. A
/// log that cannot be copied is said on stderr; the trial goes on.
fn keep_sidecar_logs(spec: &SandboxSpec, paths: &TrialPaths) {
    for s in spec.services.iter().filter(|s| s.root.is_some()) {
        let to = paths.trial_dir.join(format!("services/{}.log", s.name));
        if to.exists() {
            continue;
        }
        if let Err(e) = keep_service_log(&s.log, &to) {
            eprintln!(
                "warning: the log of sidecar `{}` could not be kept: {e}",
                s.name
            );
        }
    }
}

/// Why the agent of `report` never started: a service that could not start, was not ready or
/// failed its guard is `service-guard`; otherwise the agent itself could not be executed,
/// `agent-start`.
pub fn not_started_kind(report: &SandboxReport) -> ErrorKind {
    let failed = |p: &Option<ProbeOutcome>| p.as_ref().is_some_and(|o| !o.passed());
    if report
        .services
        .iter()
        .any(|s| !s.started || failed(&s.ready) || failed(&s.guard))
    {
        ErrorKind::ServiceGuard
    } else {
        ErrorKind::AgentStart
    }
}

/// Lines of a failed service's output quoted in the trial's reason.
const SERVICE_TAIL_LINES: usize = 5;
/// Characters of each quoted line.
const SERVICE_TAIL_WIDTH: usize = 200;
/// Bytes at the end of a service's output read for the quote.
const SERVICE_TAIL_BYTES: u64 = 64 * 1024;

/// The service that kept the agent from starting: the first that was started but failed its
/// readiness probe or its guard.
pub fn failed_service(report: &SandboxReport) -> Option<&str> {
    let failed = |p: &Option<ProbeOutcome>| p.as_ref().is_some_and(|o| !o.passed());
    report
        .services
        .iter()
        .find(|s| s.started && (failed(&s.ready) || failed(&s.guard)))
        .map(|s| s.name.as_str())
}

/// Copies a service's output (stdout and stderr, interleaved as written) from `log` to `to`
/// and returns its last lines, quoted; `None` when it printed nothing (then nothing is kept).
fn keep_service_log(log: &Path, to: &Path) -> std::io::Result<Option<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match std::fs::File::open(log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(len.saturating_sub(SERVICE_TAIL_BYTES)))?;
    let mut end = Vec::new();
    file.read_to_end(&mut end)?;
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(log, to)?;
    let tail = last_lines(&end, SERVICE_TAIL_LINES, SERVICE_TAIL_WIDTH);
    Ok((!tail.is_empty()).then_some(tail))
}

/// The last `lines` non-blank lines of `bytes`, each cut to `width` characters (marked `…`),
/// joined by ` ⏎ ` so that they stay on one line of a table.
fn last_lines(bytes: &[u8], lines: usize, width: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut picked: Vec<String> = text
        .lines()
        .map(|l| l.trim_end())
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(lines)
        .map(|l| {
            if l.chars().count() > width {
                let cut: String = l.chars().take(width).collect();
                format!("{cut}…")
            } else {
                l.to_string()
            }
        })
        .collect();
    picked.reverse();
    picked.join(" ⏎ ")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proctor_sandbox::{FullStop, Isolation, ServiceReport, WorkspaceKind};

    use super::*;

    #[test]
    fn last_lines_keeps_the_last_non_blank_lines_cut_to_width() {
        assert_eq!(last_lines(b"", 5, 10), "");
        assert_eq!(last_lines(b"boom\n", 5, 10), "boom");
        let many = b"one\ntwo\n\nthree\nfour\r\nfive\nsix\n  \n";
        assert_eq!(
            last_lines(many, 5, 10),
            "two \u{23ce} three \u{23ce} four \u{23ce} five \u{23ce} six"
        );
        assert_eq!(
            last_lines("h\u{e9}llo w\u{f6}rld".as_bytes(), 1, 5),
            "h\u{e9}llo\u{2026}"
        );
        // Not UTF-8: still readable.
        assert_eq!(last_lines(b"bad \xff byte", 1, 20), "bad \u{fffd} byte");
    }

    #[test]
    fn a_failed_services_output_is_kept_and_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("svc.log");
        let to = dir.path().join("trial/services/svc.log");
        assert_eq!(keep_service_log(&log, &to).unwrap(), None);
        std::fs::write(&log, "").unwrap();
        assert_eq!(keep_service_log(&log, &to).unwrap(), None);
        assert!(!to.exists());
        let long = format!("{}\nboom\n", "x".repeat(200_000));
        std::fs::write(&log, &long).unwrap();
        let tail = keep_service_log(&log, &to).unwrap().unwrap();
        assert!(tail.ends_with("boom"), "{tail}");
        assert!(
            tail.chars().count() <= 2 * (SERVICE_TAIL_WIDTH + 1) + 3,
            "{tail}"
        );
        assert_eq!(std::fs::read_to_string(&to).unwrap(), long);
    }

    fn report(services: Vec<ServiceReport>) -> SandboxReport {
        SandboxReport {
            exit_code: None,
            signal: None,
            timed_out: false,
            wall: Duration::ZERO,
            agent_cpu: None,
            services,
            not_started: Some("why".into()),
            isolation: Isolation {
                namespaces: Vec::new(),
                workspace: WorkspaceKind::Bind,
                network: proctor_sandbox::Network::None,
                read_only_host: false,
                private_home_and_tmp: false,
                hidden: Vec::new(),
                full_stop: FullStop::ProcessGroup,
                notes: Vec::new(),
                ids: None,
                host_view: None,
                egress: None,
            },
            total: Duration::ZERO,
            bounds: Default::default(),
            turns: Vec::new(),
        }
    }

    fn service(
        name: &str,
        started: bool,
        ready: Option<bool>,
        guard: Option<bool>,
    ) -> ServiceReport {
        let probe = |passed: bool| {
            if passed {
                ProbeOutcome::Passed {
                    elapsed: Duration::from_millis(3),
                }
            } else {
                ProbeOutcome::Failed {
                    reason: "no".into(),
                }
            }
        };
        ServiceReport {
            name: name.into(),
            started,
            ready: ready.map(probe),
            guard: guard.map(probe),
            exit: None,
        }
    }

    #[test]
    fn a_service_that_failed_is_a_service_guard_failure_and_is_named() {
        let r = report(vec![
            service("ok", true, Some(true), Some(true)),
            service("api", true, Some(true), Some(false)),
        ]);
        assert_eq!(not_started_kind(&r), ErrorKind::ServiceGuard);
        assert_eq!(failed_service(&r), Some("api"));
        let r = report(vec![service("api", true, Some(false), None)]);
        assert_eq!(not_started_kind(&r), ErrorKind::ServiceGuard);
        assert_eq!(failed_service(&r), Some("api"));
        // A service that could not be started never became ready; it left no output to quote.
        let r = report(vec![service("api", false, None, None)]);
        assert_eq!(not_started_kind(&r), ErrorKind::ServiceGuard);
        assert_eq!(failed_service(&r), None);
    }

    #[test]
    fn with_every_service_up_an_agent_that_never_started_is_an_agent_start_failure() {
        let r = report(vec![service("api", true, Some(true), Some(true))]);
        assert_eq!(not_started_kind(&r), ErrorKind::AgentStart);
        assert_eq!(failed_service(&r), None);
        assert_eq!(not_started_kind(&report(Vec::new())), ErrorKind::AgentStart);
    }
}
