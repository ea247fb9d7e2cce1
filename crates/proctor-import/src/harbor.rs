//! Reading one Harbor task folder: `task.toml`, `instruction.md`, `environment/`, `tests/`,
//! `solution/`.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Value;

use crate::fields::{unknown_toml_keys, HARBOR_TASK_TOML};
use crate::files;
use crate::image;
use crate::model::{OraclePlan, Read, TaskPlan, Verdict, VerifierPlan};
use crate::scan;

/// Harbor's verifier timeout when `[verifier] timeout_sec` is absent.
const HARBOR_VERIFIER_TIMEOUT: u64 = 600;

/// Reads the Harbor task in `dir` as task `id`.
pub(crate) fn read(dir: &Path, id: &str) -> Read {
    let mut warnings = Vec::new();
    let outcome = plan(dir, id, &mut warnings).map(Box::new);
    Read { outcome, warnings }
}

/// Seconds as a whole number, rounded up; `None` for a value that is not a positive number.
pub(crate) fn seconds(v: &Value) -> Option<u64> {
    let f = match v {
        Value::Integer(i) => *i as f64,
        Value::Float(f) => *f,
        _ => return None,
    };
    (f.is_finite() && f > 0.0).then(|| f.ceil() as u64)
}

/// Whether `name` can be an environment variable set from a shell.
pub(crate) fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The literal string values of an `env` table; values Harbor would resolve from the host
/// (`${VAR}`) and values that are not strings are reported instead.
fn literal_env(
    table: Option<&Value>,
    section: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(table) = table.and_then(Value::as_table) else {
        return out;
    };
    for (k, v) in table {
        let value = match v {
            Value::String(s) => s.clone(),
            Value::Integer(_) | Value::Float(_) | Value::Boolean(_) => v.to_string(),
            _ => {
                warnings.push(format!(
                    "task.toml: [{section}.env] {k} is not a string, not imported"
                ));
                continue;
            }
        };
        if !is_var_name(k) {
            warnings.push(format!(
                "task.toml: [{section}.env] `{k}` is not a valid variable name, not imported"
            ));
        } else if value.contains("${") {
            warnings.push(format!(
                "task.toml: [{section}.env] {k} = {value:?} is resolved from the host by Harbor; a suite holds no secrets, so it was not imported (set it in a variant's `env`)"
            ));
        } else {
            out.insert(k.clone(), value);
        }
    }
    out
}

fn plan(dir: &Path, id: &str, w: &mut Vec<String>) -> Result<TaskPlan, String> {
    let text = std::fs::read_to_string(dir.join("task.toml"))
        .map_err(|e| format!("cannot read task.toml: {e}"))?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| format!("task.toml does not parse: {}", e.message().trim()))?;
    for key in unknown_toml_keys(&table, HARBOR_TASK_TOML) {
        w.push(format!("task.toml: unknown field `{key}`, not imported"));
    }
    let empty = toml::Table::new();
    let section = |name: &str| table.get(name).and_then(Value::as_table).unwrap_or(&empty);
    let (meta, verifier, agent, env, solution, task) = (
        section("metadata"),
        section("verifier"),
        section("agent"),
        section("environment"),
        section("solution"),
        section("task"),
    );

    if table.contains_key("steps") {
        return Err(
            "it is a multi-step task ([[steps]] in task.toml); a proctor task has one prompt and one success condition".into(),
        );
    }
    if env.get("os").and_then(Value::as_str) == Some("windows") {
        return Err(
            "it is a Windows task ([environment] os = \"windows\"); proctor runs Linux images"
                .into(),
        );
    }

    let prompt = std::fs::read_to_string(dir.join("instruction.md"))
        .map_err(|e| format!("cannot read instruction.md: {e}"))?;
    if prompt.trim().is_empty() {
        return Err("instruction.md is empty".into());
    }

    // The image.
    let env_dir = dir.join("environment");
    for compose in ["docker-compose.yaml", "docker-compose.yml"] {
        if env_dir.join(compose).is_file() {
            return Err(format!(
                "its environment is environment/{compose}, several containers; proctor runs one image per trial"
            ));
        }
    }
    let image = match image::resolve(dir, env.get("docker_image").and_then(Value::as_str)) {
        Some(resolved) => resolved?,
        None if env_dir.join("Dockerfile").is_file() => {
            return Err(image::build_instructions(
                id,
                "environment/Dockerfile, and task.toml names no [environment] docker_image",
                "environment",
            ))
        }
        None => {
            return Err(
                "it has no image: task.toml names no [environment] docker_image and there is no environment/Dockerfile".into(),
            )
        }
    };
    let workdir = env
        .get("workdir")
        .and_then(Value::as_str)
        .map(str::to_string);
    let environment_env = literal_env(env.get("env"), "environment", w);

    // What proctor has no counterpart for.
    let mut comments = Vec::new();
    let resources: Vec<String> = ["cpus", "memory_mb", "storage_mb", "memory", "storage"]
        .iter()
        .filter_map(|k| env.get(*k).map(|v| format!("{k} = {v}")))
        .collect();
    if !resources.is_empty() {
        let list = resources.join(", ");
        comments.push(format!("Harbor resources: {list}"));
        w.push(format!(
            "[environment] {list}: proctor does not limit a trial's resources (kept as a comment)"
        ));
    }
    if env.get("gpus").and_then(Value::as_integer).unwrap_or(0) > 0
        || env.contains_key("gpu_types")
        || env.contains_key("tpu")
    {
        w.push("[environment] asks for GPUs or TPUs, which proctor does not provide".to_string());
    }
    for key in ["mcp_servers", "skills_dir", "healthcheck"] {
        let set = match env.get(key) {
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
            None => false,
        };
        if set {
            w.push(format!(
                "[environment] {key} has no proctor counterpart, not imported"
            ));
        }
    }
    if table
        .get("artifacts")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        w.push(
            "artifacts: proctor keeps the whole end state of the workspace, not named artifacts; not imported"
                .to_string(),
        );
    }
    for (name, t) in [("agent", agent), ("verifier", verifier)] {
        if let Some(user) = t.get("user") {
            w.push(format!(
                "[{name}] user = {user}: proctor runs the agent and the checks as the sandbox's own user; not imported"
            ));
        }
    }

    // The network.
    let mode = env.get("network_mode").and_then(Value::as_str);
    let internet = match mode {
        Some(m) => m == "public" || m == "allowlist",
        None => env.get("allow_internet").and_then(Value::as_bool) == Some(true),
    };
    if internet {
        let why = match mode {
            Some(m) => format!("network_mode = \"{m}\""),
            None => "allow_internet = true".to_string(),
        };
        w.push(format!(
            "[environment] {why}: the task needs the internet, so it runs with network = \"host\" (the host's network, not an isolated one)"
        ));
        if env.contains_key("allowed_hosts") {
            w.push(
                "[environment] allowed_hosts: proctor cannot limit the hosts reached; the task gets the whole host network".to_string(),
            );
        }
    }
    if agent.contains_key("network_mode") || agent.contains_key("allowed_hosts") {
        w.push(
            "[agent] network_mode / allowed_hosts: proctor sets one network per task; the [environment] one was used".to_string(),
        );
    }
    if verifier.contains_key("network_mode") || verifier.contains_key("allowed_hosts") {
        w.push(
            "[verifier] network_mode / allowed_hosts: proctor runs every check with no network; not imported".to_string(),
        );
    }

    // Timeouts.
    let wall_timeout = agent.get("timeout_sec").and_then(seconds);
    if agent.contains_key("timeout_sec") && wall_timeout.is_none() {
        w.push("[agent] timeout_sec is not a positive number, not imported".to_string());
    }
    let validation_timeout = match verifier.get("timeout_sec") {
        Some(v) => seconds(v).or_else(|| {
            w.push(
                "[verifier] timeout_sec is not a positive number; Harbor's default (600) was used"
                    .to_string(),
            );
            Some(HARBOR_VERIFIER_TIMEOUT)
        }),
        None => Some(HARBOR_VERIFIER_TIMEOUT),
    };

    // The verifier.
    let tests_dir = dir.join("tests");
    if !tests_dir.join("test.sh").is_file() {
        return Err("it has no tests/test.sh, so nothing could check its end state".into());
    }
    let test_files = files::collect(&tests_dir, "tests", w);
    let scanned = scan::scan(&test_files);
    if !scanned.downloads.is_empty() {
        w.push(format!(
            "tests/ download while verifying ({}): proctor runs checks with no network, so the check fails unless the image already holds what they fetch",
            scanned.downloads.join(", ")
        ));
    }
    if scanned.writes_reward_json && scanned.metrics.is_empty() {
        w.push(
            "tests/ write reward.json, but no metric names could be read from them: success is reward = 1 (or every metric = 1), and no rubric was made".to_string(),
        );
    }
    let verifier_plan = VerifierPlan {
        verdict: Verdict::Reward,
        files: test_files,
        entry: "test.sh".to_string(),
        env: literal_env(verifier.get("env"), "verifier", w),
        metrics: scanned.metrics,
    };

    // The solution.
    let solution_dir = dir.join("solution");
    let solution_env = literal_env(solution.get("env"), "solution", w);
    let oracle = if solution_dir.join("solve.sh").is_file() {
        let solution_files = files::collect(&solution_dir, "solution", w);
        w.extend(scan::solution_warning(&solution_files, "solution/"));
        OraclePlan {
            files: solution_files,
            entry: Some("solve.sh".to_string()),
            expected_dir: Some("/solution"),
            env: solution_env,
            missing: None,
        }
    } else {
        w.push("no solution/solve.sh: its oracle does nothing, so `proctor validate --oracle` fails for it".to_string());
        OraclePlan {
            files: Vec::new(),
            entry: None,
            expected_dir: None,
            env: BTreeMap::new(),
            missing: Some("no solution/solve.sh".into()),
        }
    };

    // Metadata, kept for the reader.
    let difficulty = meta
        .get("difficulty")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut about = Vec::new();
    if let Some(name) = task.get("name").and_then(Value::as_str) {
        about.push(format!("name: {name}"));
    }
    for key in ["author_name", "author_email", "category"] {
        if let Some(v) = meta.get(key).and_then(Value::as_str) {
            about.push(format!("{}: {v}", key.replace('_', " ")));
        }
    }
    if let Some(tags) = meta.get("tags").and_then(Value::as_array) {
        let tags: Vec<&str> = tags.iter().filter_map(Value::as_str).collect();
        if !tags.is_empty() {
            about.push(format!("tags: {}", tags.join(", ")));
        }
    }
    for key in ["expert_time_estimate_min", "junior_time_estimate_min"] {
        if let Some(v) = meta.get(key) {
            about.push(format!("{key}: {v}"));
        }
    }
    if !about.is_empty() {
        comments.insert(0, about.join("; "));
    }
    if let Some(desc) = task.get("description").and_then(Value::as_str) {
        comments.insert(0, desc.lines().collect::<Vec<_>>().join(" "));
    }

    Ok(TaskPlan {
        source: dir.to_path_buf(),
        id: id.to_string(),
        prompt,
        image,
        workdir,
        env: environment_env,
        wall_timeout,
        validation_timeout,
        host_network: internet,
        difficulty,
        comments,
        verifier: verifier_plan,
        oracle,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up_and_refuse_non_numbers() {
        assert_eq!(seconds(&Value::Float(120.0)), Some(120));
        assert_eq!(seconds(&Value::Float(0.5)), Some(1));
        assert_eq!(seconds(&Value::Integer(90)), Some(90));
        assert_eq!(seconds(&Value::Integer(0)), None);
        assert_eq!(seconds(&Value::String("60".into())), None);
    }

    #[test]
    fn variable_names() {
        assert!(is_var_name("API_KEY"));
        assert!(is_var_name("_x1"));
        assert!(!is_var_name("1x"));
        assert!(!is_var_name("A-B"));
        assert!(!is_var_name(""));
    }
}
