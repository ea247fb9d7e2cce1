//! Harbor's multi-step tasks (`[[steps]]` in `task.toml`, `schema_version = "1.1"`), imported
//! as a proctor task in steps (`[[tasks.steps]]`).
//!
//! Each Harbor step's folder `steps/NAME/` gives its `instruction.md` (the step's prompt), its
//! `tests/` (over the task's shared `tests/`, laid at `/tests` for the step's check),
//! `workdir/` (uploaded into the working directory before the agent's turn; a `setup.sh` there
//! runs first), and `solution/solve.sh` (one `[[turns]]` entry of the oracle). `[steps.agent]
//! timeout_sec`, `[steps.verifier] timeout_sec` and `env`, `[steps.healthcheck]`, `min_reward`
//! and the task's `multi_step_reward_strategy` are carried; `artifacts` are not.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use toml::Value;

use crate::files::FileEntry;
use crate::model::OraclePlan;
use crate::text::{basic_string, toml_string};

/// A Harbor task's steps, read.
#[derive(Debug, Clone)]
pub(crate) struct StepsImport {
    /// The task's `tests/` files, shared by every step.
    pub shared_tests: Vec<FileEntry>,
    /// The steps, in order.
    pub steps: Vec<StepImport>,
    /// `multi_step_reward_strategy`: `mean` or `final`.
    pub strategy: String,
}

/// One Harbor step, read.
#[derive(Debug, Clone)]
pub(crate) struct StepImport {
    /// Its name.
    pub name: String,
    /// Its `instruction.md`.
    pub prompt: String,
    /// `min_reward`.
    pub min_reward: Option<f64>,
    /// `[steps.agent] timeout_sec`, in whole seconds.
    pub timeout: Option<u64>,
    /// `[steps.verifier] timeout_sec`, in whole seconds.
    pub check_timeout: Option<u64>,
    /// `[steps.verifier.env]`, literal values.
    pub check_env: BTreeMap<String, String>,
    /// `[steps.healthcheck]`: command, interval, retries.
    pub healthcheck: Option<(String, Option<u64>, Option<u32>)>,
    /// Its `tests/` files.
    pub tests: Vec<FileEntry>,
    /// Its `workdir/` files.
    pub workdir: Vec<FileEntry>,
    /// Its `solution/`, for the oracle's turn.
    pub oracle: OraclePlan,
}

/// Reads the steps of the Harbor task in `dir` whose `task.toml` is `table`; `Err` says why
/// the task cannot be imported.
pub(crate) fn read(
    dir: &Path,
    table: &toml::Table,
    w: &mut Vec<String>,
) -> Result<StepsImport, String> {
    let steps = table
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("[[steps]] is not an array of tables")?;
    if steps.is_empty() {
        return Err("[[steps]] names no step".into());
    }
    let strategy = match table.get("multi_step_reward_strategy") {
        None => "mean".to_string(),
        Some(Value::String(s)) if s == "mean" || s == "final" => s.clone(),
        Some(v) => {
            return Err(format!(
                "multi_step_reward_strategy = {v} is not `mean` or `final`"
            ))
        }
    };
    if table.get("artifacts").is_some() || steps.iter().any(|s| s.get("artifacts").is_some()) {
        w.push("artifacts are not collected: a step's files stay in the end state and its check's output in the trial's steps/NAME/".into());
    }
    let shared_tests = collect(&dir.join("tests"), "tests", w);
    let steps = steps
        .iter()
        .map(|s| step(dir, s, w))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(StepsImport {
        shared_tests,
        steps,
        strategy,
    })
}

/// One `[[steps]]` entry and its folder.
fn step(dir: &Path, s: &Value, w: &mut Vec<String>) -> Result<StepImport, String> {
    let name = s
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a [[steps]] entry has no name")?
        .to_string();
    let folder = dir.join("steps").join(&name);
    let prompt = std::fs::read_to_string(folder.join("instruction.md"))
        .map_err(|e| format!("step `{name}`: cannot read steps/{name}/instruction.md: {e}"))?;
    if !folder.join("tests/test.sh").is_file() {
        return Err(format!("step `{name}` has no steps/{name}/tests/test.sh"));
    }
    let sub = |key: &str| s.get(key).and_then(Value::as_table);
    let secs = |key: &str| {
        sub(key)
            .and_then(|t| t.get("timeout_sec"))
            .and_then(crate::harbor::seconds)
    };
    let healthcheck = sub("healthcheck").and_then(|h| {
        let command = h.get("command").and_then(Value::as_str)?.to_string();
        let interval = h.get("interval_sec").and_then(crate::harbor::seconds);
        let retries = h
            .get("retries")
            .and_then(Value::as_integer)
            .and_then(|r| u32::try_from(r).ok());
        Some((command, interval, retries))
    });
    let shown = format!("steps/{name}");
    let oracle = match folder.join("solution/solve.sh").is_file() {
        true => OraclePlan {
            files: collect(&folder.join("solution"), &format!("{shown}/solution"), w),
            entry: Some("solve.sh".into()),
            expected_dir: Some("/solution"),
            env: BTreeMap::new(),
            missing: None,
        },
        false => {
            OraclePlan::without_solution(&format!("step `{name}` has no solution/solve.sh"), w)
        }
    };
    Ok(StepImport {
        min_reward: s.get("min_reward").and_then(|v| match v {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        }),
        timeout: secs("agent"),
        check_timeout: secs("verifier"),
        check_env: crate::harbor::literal_env(
            sub("verifier").and_then(|v| v.get("env")),
            "steps.verifier",
            w,
        ),
        healthcheck,
        tests: collect(&folder.join("tests"), &format!("{shown}/tests"), w),
        workdir: collect(&folder.join("workdir"), &format!("{shown}/workdir"), w),
        oracle,
        name,
        prompt,
    })
}

/// The files under `dir`, if it exists.
fn collect(dir: &Path, shown: &str, w: &mut Vec<String>) -> Vec<FileEntry> {
    if dir.is_dir() {
        crate::files::collect(dir, shown, w)
    } else {
        Vec::new()
    }
}

/// The task's `[[tasks.steps]]` and its success, for `suite.toml` (its `step_reward` is
/// written with the task's other keys).
pub(crate) fn render(s: &mut String, steps: &StepsImport) {
    for st in &steps.steps {
        s.push_str("\n[[tasks.steps]]\n");
        let _ = writeln!(s, "name = {}", basic_string(&st.name));
        let _ = writeln!(s, "prompt = {}", toml_string(&st.prompt));
        if let Some(m) = st.min_reward {
            let _ = writeln!(s, "min_reward = {m:?}");
        }
        if let Some(t) = st.timeout {
            let _ = writeln!(s, "timeout_seconds = {t}");
        }
        if let Some(t) = st.check_timeout {
            let _ = writeln!(s, "check_timeout_seconds = {t}");
        }
        if !st.check_env.is_empty() {
            let pairs: Vec<String> = st
                .check_env
                .iter()
                .map(|(k, v)| format!("{} = {}", basic_string(k), basic_string(v)))
                .collect();
            let _ = writeln!(s, "check_env = {{ {} }}", pairs.join(", "));
        }
        if let Some((cmd, interval, retries)) = &st.healthcheck {
            let mut parts = vec![format!("command = {}", basic_string(cmd))];
            parts.extend(interval.map(|i| format!("interval_seconds = {i}")));
            parts.extend(retries.map(|r| format!("retries = {r}")));
            let _ = writeln!(s, "healthcheck = {{ {} }}", parts.join(", "));
        }
    }
    s.push_str("\n[tasks.success]\nall = [{ steps = { min_reward = 1.0 } }]\n");
}

/// Writes the steps' files into the suite at `root`: `steps/TASK_ID/tests/` and each step's
/// `tests/` and `workdir/`.
pub(crate) fn write_files(
    root: &Path,
    id: &str,
    steps: &StepsImport,
    copy_all: impl Fn(&[FileEntry], &Path) -> Result<(), crate::error::ImportError>,
) -> Result<(), crate::error::ImportError> {
    let base = root.join("steps").join(id);
    copy_all(&steps.shared_tests, &base.join("tests"))?;
    for st in &steps.steps {
        copy_all(&st.tests, &base.join(&st.name).join("tests"))?;
        copy_all(&st.workdir, &base.join(&st.name).join("workdir"))?;
    }
    Ok(())
}
