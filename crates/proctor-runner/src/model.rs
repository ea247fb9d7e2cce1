//! The model endpoint of a trial with a real agent CLI: `proctor mock-model` started as a service
//! inside the trial's own namespaces (so `network = "none"` still reaches it), and the reading of
//! its exchange log afterwards: the token usage and request count as seen on the wire, and the
//! faults it injected.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_mock_model::FaultKind;
use proctor_sandbox::{HttpGuard, HttpProbe, ServiceSpec};
use proctor_score::ErrorKind;
use proctor_suite::model::{Task, Variant};
use proctor_suite::Suite;

/// The service name of the model endpoint.
pub const MODEL_SERVICE: &str = "__model";

pub use proctor_trial_record::{Ledgers, Usage};

/// The model script a variant serves for a task, when it has one.
pub fn script_path(suite: &Suite, variant: &Variant, task: &str) -> Option<PathBuf> {
    let base = suite.root.join(variant.model_script.as_ref()?.get_ref());
    Some(if base.is_dir() {
        base.join(format!("{task}.toml"))
    } else {
        base
    })
}

/// A free TCP port on the host's loopback (used inside the trial's own network namespace, or on
/// the host network, where it must be free).
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The mock model a trial is served by: the proctor binary that runs it, its script, its port
/// on the trial's loopback, and the trial's seed, which chooses among a script's weighted
/// `[[alternatives]]` (on the command line proctor builds, out of the agent's reach).
#[derive(Debug, Clone, Copy)]
pub struct MockModel<'a> {
    /// The proctor binary (`proctor mock-model`).
    pub proctor: &'a Path,
    /// The model script.
    pub script: &'a Path,
    /// The port it listens on.
    pub port: u16,
    /// The trial's seed.
    pub seed: Option<u64>,
}

/// The mock-model service of a trial.
pub fn service(
    mock: MockModel,
    task: &Task,
    suite_root: &Path,
    dir_host: PathBuf,
    log: PathBuf,
) -> ServiceSpec {
    let MockModel {
        proctor,
        script,
        port,
        seed,
    } = mock;
    let mut argv = vec![
        proctor.display().to_string(),
        "mock-model".into(),
        "--script".into(),
        script.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
    ];
    if let Some(seed) = seed {
        argv.push("--seed".into());
        argv.push(seed.to_string());
    }
    for (route, kind) in &task.route_faults {
        argv.push("--fault".into());
        argv.push(format!("{route}={}", kind.get_ref()));
    }
    let base = format!("http://127.0.0.1:{port}");
    ServiceSpec {
        name: MODEL_SERVICE.into(),
        argv,
        cwd: suite_root.to_path_buf(),
        env: vec![("PATH".into(), crate::trial::env::DEFAULT_PATH.into())],
        dir_host,
        log,
        ready: Some(HttpProbe {
            url: format!("{base}/health"),
            timeout: Duration::from_secs(10),
        }),
        guard: Some(HttpGuard::new(
            format!("{base}/__mock"),
            proctor_mock_model::GUARD_TEXT,
        )),
        state: None,
        root: None,
        health: None,
        own_network: false,
    }
}

/// What the wire log shows.
#[derive(Debug, Clone, Default)]
pub struct Wire {
    /// Usage summed over main model responses.
    pub usage: Usage,
    /// Faults the mock injected, typed.
    pub faults: Vec<(ErrorKind, String)>,
}

/// The model's wire log, as kept in a trial's folder.
pub fn wire_log(trial_dir: &Path) -> PathBuf {
    trial_dir
        .join("services")
        .join(MODEL_SERVICE)
        .join("wire.jsonl")
}

/// Reads the mock's exchange log (`wire.jsonl`).
pub fn read_wire(path: &Path) -> Result<Wire, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the model's wire log: {e}"))?;
    let mut wire = Wire {
        usage: Usage {
            source: "wire".into(),
            input: Some(0),
            output: Some(0),
            cache_read: Some(0),
            cache_write: Some(0),
            requests: Some(0),
        },
        faults: Vec::new(),
    };
    let add = |slot: &mut Option<u64>, n: u64| *slot = Some(slot.unwrap_or(0) + n);
    for line in proctor_mock_model::wire_log::parse_lines(&text)? {
        if line.kind.is_generation() {
            add(&mut wire.usage.requests, 1);
            let u = line.usage.unwrap_or_default();
            add(&mut wire.usage.input, u.input);
            add(&mut wire.usage.output, u.output);
            add(&mut wire.usage.cache_read, u.cache_read);
            add(&mut wire.usage.cache_write, u.cache_write);
        } else if let (Some(fault), Some(sentence)) = (line.fault, line.fault_sentence()) {
            add(&mut wire.usage.requests, 1);
            let kind = match fault {
                FaultKind::CredentialLoss => ErrorKind::CredentialLoss,
                FaultKind::RateLimit => ErrorKind::RateLimit,
                FaultKind::Timeout | FaultKind::ServerError => ErrorKind::Timeout,
            };
            if !wire.faults.iter().any(|(k, _)| *k == kind) {
                wire.faults.push((kind, sentence));
            }
        }
    }
    Ok(wire)
}

/// The cost of `usage` for `model` at the suite's prices; `Err` names the models without a
/// price.
pub fn cost(suite: &Suite, model: Option<&str>, usage: &Usage) -> Result<f64, Vec<String>> {
    let Some(model) = model else {
        return Err(vec!["the variant's model (it names none)".into()]);
    };
    let Some(price) = suite.file.prices.get(model) else {
        return Err(vec![format!("`{model}`")]);
    };
    let per = |n: Option<u64>, p: f64| n.unwrap_or(0) as f64 * p / 1e6;
    Ok(per(usage.input, price.input)
        + per(usage.output, price.output)
        + per(usage.cache_read, price.cache_read.unwrap_or(price.input))
        + per(usage.cache_write, price.cache_write.unwrap_or(price.input)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_wire_log_lives_in_the_trials_services_folder() {
        assert_eq!(
            wire_log(Path::new("/runs/r/trials/t.v.0")),
            Path::new("/runs/r/trials/t.v.0/services/__model/wire.jsonl")
        );
    }
}
