//! Reading one Terminal-Bench task folder: `task.yaml`, `docker-compose.yaml`, `Dockerfile`,
//! `run-tests.sh`, `tests/`, `solution.sh` (or `solution.yaml`).

use std::collections::BTreeMap;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use crate::fields::TERMINAL_BENCH_TASK_YAML;
use crate::files::{self, FileEntry};
use crate::harbor::is_var_name;
use crate::image;
use crate::model::{OraclePlan, Read, TaskPlan, Verdict, VerifierPlan};
use crate::scan;

/// Terminal-Bench's defaults for `max_agent_timeout_sec` and `max_test_timeout_sec`.
const DEFAULT_AGENT_TIMEOUT: u64 = 360;
const DEFAULT_TEST_TIMEOUT: u64 = 60;

/// Reads the Terminal-Bench task in `dir` as task `id`.
pub(crate) fn read(dir: &Path, id: &str) -> Read {
    let mut warnings = Vec::new();
    let outcome = plan(dir, id, &mut warnings).map(Box::new);
    Read { outcome, warnings }
}

/// The first YAML document of `path`.
fn load(path: &Path, name: &str) -> Result<Yaml, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let docs =
        YamlLoader::load_from_str(&text).map_err(|e| format!("{name} does not parse: {e}"))?;
    Ok(docs.into_iter().next().unwrap_or(Yaml::Null))
}

/// The value at `key` of a mapping.
fn get<'a>(y: &'a Yaml, key: &str) -> Option<&'a Yaml> {
    y.as_hash()?.get(&Yaml::String(key.to_string()))
}

/// A YAML number of seconds, rounded up to whole seconds; `None` unless positive.
fn seconds(y: &Yaml) -> Option<u64> {
    let f = match y {
        Yaml::Integer(i) => *i as f64,
        Yaml::Real(_) => y.as_f64()?,
        _ => return None,
    };
    (f.is_finite() && f > 0.0).then(|| f.ceil() as u64)
}

/// A scalar as text.
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn plan(dir: &Path, id: &str, w: &mut Vec<String>) -> Result<TaskPlan, String> {
    let task = load(&dir.join("task.yaml"), "task.yaml")?;
    let Some(hash) = task.as_hash() else {
        return Err("task.yaml is not a mapping of fields".into());
    };
    for key in hash.keys() {
        match key.as_str() {
            Some(k) if TERMINAL_BENCH_TASK_YAML.contains(&k) => {}
            Some(k) => w.push(format!("task.yaml: unknown field `{k}`, not imported")),
            None => w.push(format!(
                "task.yaml: a field whose name is not text ({key:?}), not imported"
            )),
        }
    }

    let prompt = match get(&task, "instruction").and_then(Yaml::as_str) {
        Some(p) => p.to_string(),
        None => description(&task).ok_or(
            "task.yaml has no `instruction` (nor a `descriptions` entry), so there is no prompt",
        )?,
    };
    if prompt.trim().is_empty() {
        return Err("the instruction in task.yaml is empty".into());
    }

    // The image.
    let dockerfile_path = dir.join("Dockerfile");
    let compose_name = ["docker-compose.yaml", "docker-compose.yml"]
        .into_iter()
        .find(|n| dir.join(n).is_file());
    let mut env = BTreeMap::new();
    let mut workdir = None;
    let image = match compose_name {
        Some(name) => {
            let compose = load(&dir.join(name), name)?;
            let services = get(&compose, "services")
                .and_then(Yaml::as_hash)
                .ok_or(format!("{name} has no services"))?;
            if services.len() > 1 {
                return Err(format!(
                    "{name} starts {} containers; proctor runs one image per trial",
                    services.len()
                ));
            }
            let Some((_, service)) = services.iter().next() else {
                return Err(format!("{name} has no services"));
            };
            compose_env(service, &mut env, w);
            workdir = get(service, "working_dir")
                .and_then(Yaml::as_str)
                .map(str::to_string);
            // The harness's own `image: ${T_BENCH_...}` names the image it is about to build.
            let declared = get(service, "image")
                .and_then(Yaml::as_str)
                .filter(|i| !i.contains('$') && get(service, "build").is_none());
            match image::resolve(dir, declared) {
                Some(resolved) => resolved?,
                None if get(service, "build").is_some() || dockerfile_path.is_file() => {
                    return Err(image::build_instructions(
                        id,
                        &format!("its Dockerfile ({name} builds it at run time)"),
                        ".",
                    ))
                }
                None => return Err(format!("{name} names no image its service runs")),
            }
        }
        None => match image::resolve(dir, None) {
            Some(resolved) => resolved?,
            None if dockerfile_path.is_file() => {
                return Err(image::build_instructions(
                    id,
                    "its Dockerfile (it has no docker-compose.yaml)",
                    ".",
                ))
            }
            None => {
                return Err("it has no image: no docker-compose.yaml and no Dockerfile".into());
            }
        },
    };

    // Timeouts and settings.
    let timeout = |key: &str, default: u64, w: &mut Vec<String>| {
        match get(&task, key) {
        None | Some(Yaml::Null) => Some(default),
        Some(v) => seconds(v).or_else(|| {
            w.push(format!(
                "task.yaml: {key} is not a positive number; Terminal-Bench's default ({default}) was used"
            ));
            Some(default)
        }),
    }
    };
    let wall_timeout = timeout("max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT, w);
    let validation_timeout = timeout("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT, w);
    if get(&task, "run_tests_in_same_shell").and_then(Yaml::as_bool) == Some(true) {
        w.push("task.yaml: run_tests_in_same_shell = true: proctor runs the tests in a fresh shell after the agent has stopped, so shell state the tests look at is gone".to_string());
    }
    let parser = get(&task, "parser_name")
        .and_then(Yaml::as_str)
        .unwrap_or("pytest");

    // The verifier: Terminal-Bench copies run-tests.sh and tests/ into one folder, /tests.
    let run_tests = dir.join("run-tests.sh");
    if !run_tests.is_file() {
        return Err("it has no run-tests.sh, so nothing could check its end state".into());
    }
    let tests_dir = dir.join("tests");
    let mut test_files: Vec<FileEntry> = if tests_dir.is_dir() {
        files::collect(&tests_dir, "tests", w)
    } else {
        Vec::new()
    };
    if test_files.iter().any(|f| f.rel == "run-tests.sh") {
        w.push(
            "tests/run-tests.sh is replaced by the task's own run-tests.sh, as Terminal-Bench does"
                .to_string(),
        );
        test_files.retain(|f| f.rel != "run-tests.sh");
    }
    test_files.push(files::single(&run_tests, "run-tests.sh"));
    let verdict = if parser == "pytest" {
        Verdict::PytestSummary
    } else {
        w.push(format!(
            "task.yaml: parser_name = \"{parser}\": proctor has no such result parser; the check passes when run-tests.sh exits 0"
        ));
        Verdict::ExitStatus
    };
    let scanned = scan::scan(&test_files);
    if !scanned.downloads.is_empty() {
        w.push(format!(
            "run-tests.sh or tests/ download while verifying ({}): proctor runs checks with no network, so the check fails unless the image already holds what they fetch",
            scanned.downloads.join(", ")
        ));
    }

    // The solution.
    let oracle = if dir.join("solution.sh").is_file() {
        let solution_files = vec![files::single(&dir.join("solution.sh"), "solution.sh")];
        w.extend(scan::solution_warning(&solution_files, "solution.sh"));
        OraclePlan {
            files: solution_files,
            entry: Some("solution.sh".to_string()),
            expected_dir: None,
            env: BTreeMap::new(),
            missing: None,
        }
    } else {
        let why = if dir.join("solution.yaml").is_file() {
            "solution.yaml holds keystrokes for an interactive terminal, which proctor's scripted agent cannot replay"
        } else {
            "no solution.sh"
        };
        w.push(format!(
            "{why}: its oracle does nothing, so `proctor validate --oracle` fails for it"
        ));
        OraclePlan {
            files: Vec::new(),
            entry: None,
            expected_dir: None,
            env: BTreeMap::new(),
            missing: Some(why.to_string()),
        }
    };

    // Metadata, kept for the reader.
    let difficulty = get(&task, "difficulty")
        .and_then(Yaml::as_str)
        .map(str::to_string);
    let mut about = Vec::new();
    for key in ["author_name", "author_email", "category"] {
        if let Some(v) = get(&task, key).and_then(scalar) {
            about.push(format!("{}: {v}", key.replace('_', " ")));
        }
    }
    if let Some(tags) = get(&task, "tags").and_then(Yaml::as_vec) {
        let tags: Vec<String> = tags.iter().filter_map(scalar).collect();
        if !tags.is_empty() {
            about.push(format!("tags: {}", tags.join(", ")));
        }
    }
    for key in [
        "estimated_duration_sec",
        "expert_time_estimate_min",
        "junior_time_estimate_min",
    ] {
        if let Some(v) = get(&task, key).and_then(scalar) {
            about.push(format!("{key}: {v}"));
        }
    }
    let comments = if about.is_empty() {
        Vec::new()
    } else {
        vec![about.join("; ")]
    };

    Ok(TaskPlan {
        source: dir.to_path_buf(),
        id: id.to_string(),
        prompt,
        image,
        workdir,
        env,
        wall_timeout,
        validation_timeout,
        host_network: false,
        difficulty,
        comments,
        verifier: VerifierPlan {
            verdict,
            files: test_files,
            entry: "run-tests.sh".to_string(),
            env: BTreeMap::new(),
            metrics: Vec::new(),
        },
        oracle,
    })
}

/// The prompt of an older task.yaml: its `descriptions` entry with `key: base`, else the first.
fn description(task: &Yaml) -> Option<String> {
    let list = get(task, "descriptions")?.as_vec()?;
    let text = |d: &Yaml| {
        get(d, "description")
            .and_then(Yaml::as_str)
            .map(str::to_string)
    };
    list.iter()
        .find(|d| get(d, "key").and_then(Yaml::as_str) == Some("base"))
        .and_then(text)
        .or_else(|| list.iter().find_map(text))
}

/// The literal environment of a compose service; the harness's own variables
/// (`${T_BENCH_...}`) are left out, other `${...}` values are reported.
fn compose_env(service: &Yaml, env: &mut BTreeMap<String, String>, w: &mut Vec<String>) {
    let pairs: Vec<(String, String)> = match get(service, "environment") {
        Some(Yaml::Array(items)) => items
            .iter()
            .filter_map(Yaml::as_str)
            .map(|s| match s.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (s.to_string(), String::new()),
            })
            .collect(),
        Some(Yaml::Hash(h)) => h
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), scalar(v).unwrap_or_default())))
            .collect(),
        _ => Vec::new(),
    };
    for (k, v) in pairs {
        if v.contains("${T_BENCH_") || k == "TEST_DIR" {
            continue;
        }
        if !is_var_name(&k) {
            w.push(format!(
                "docker-compose: environment `{k}` is not a valid variable name, not imported"
            ));
        } else if v.contains('$') {
            w.push(format!(
                "docker-compose: environment {k} = {v:?} is resolved from the host; a suite holds no secrets, so it was not imported (set it in a variant's `env`)"
            ));
        } else {
            env.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_descriptions_give_the_base_prompt() {
        let docs = YamlLoader::load_from_str(
            "descriptions:\n  - key: hard\n    description: Hard one.\n  - key: base\n    description: Base one.\n",
        )
        .expect("yaml");
        assert_eq!(description(&docs[0]).as_deref(), Some("Base one."));
    }

    #[test]
    fn yaml_seconds() {
        let docs = YamlLoader::load_from_str("a: 360.0\nb: 60\nc: x\nd: 0.2\n").expect("yaml");
        let d = &docs[0];
        assert_eq!(get(d, "a").and_then(seconds), Some(360));
        assert_eq!(get(d, "b").and_then(seconds), Some(60));
        assert_eq!(get(d, "c").and_then(seconds), None);
        assert_eq!(get(d, "d").and_then(seconds), Some(1));
    }
}
