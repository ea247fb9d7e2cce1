//! Reading one Terminal-Bench task folder: `task.yaml`, `docker-compose.yaml`, `Dockerfile`,
//! `run-tests.sh`, `tests/`, `solution.sh` (or `solution.yaml`).

use std::collections::BTreeMap;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use crate::compose::{build_paths, compose_env};
use crate::fields::{unknown_field, TERMINAL_BENCH_TASK_YAML};
use crate::files::{self, FileEntry};
use crate::image::{self, Build, ImageSource};
use crate::model::{Net, Networks, OraclePlan, Read, Resources, TaskPlan, Verdict, VerifierPlan};
use crate::parsers::Parser;
use crate::scan;
use crate::settings::{self, whole_seconds};
use crate::yaml::{get, scalar};

/// Terminal-Bench's defaults for `max_agent_timeout_sec` and `max_test_timeout_sec`.
const DEFAULT_AGENT_TIMEOUT: u64 = 360;
const DEFAULT_TEST_TIMEOUT: u64 = 60;

/// Reads the Terminal-Bench task in `dir` as task `id`; `description`: the key of the
/// `descriptions` entry to prompt with (`--description`), instead of the one the task names.
pub(crate) fn read(dir: &Path, id: &str, description: Option<&str>) -> Read {
    let mut warnings = Vec::new();
    let outcome = plan(dir, id, description, &mut warnings).map(Box::new);
    Read { outcome, warnings }
}

/// The first YAML document of `path`.
fn load(path: &Path, name: &str) -> Result<Yaml, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let docs =
        YamlLoader::load_from_str(&text).map_err(|e| format!("{name} does not parse: {e}"))?;
    Ok(docs.into_iter().next().unwrap_or(Yaml::Null))
}

/// A YAML number of seconds, rounded up to whole seconds; `None` unless positive.
fn seconds(y: &Yaml) -> Option<u64> {
    match y {
        Yaml::Integer(i) => whole_seconds(*i as f64),
        Yaml::Real(_) => whole_seconds(y.as_f64()?),
        _ => None,
    }
}

/// The plan for the Terminal-Bench task in `dir`, or why it is skipped; what is not carried
/// over exactly is reported in `w`. As for Harbor, every part is read even when an earlier one
/// skips the task, so a skipped task's other warnings are reported too.
fn plan(
    dir: &Path,
    id: &str,
    description: Option<&str>,
    w: &mut Vec<String>,
) -> Result<TaskPlan, String> {
    let task = load(&dir.join("task.yaml"), "task.yaml")?;
    check_fields(&task, w)?;
    let descriptions = descriptions(&task, w);
    let prompt = prompt(&task, &descriptions, description, w);
    let from = prompt_from(&task, &descriptions, description);
    let environment = environment(dir, w);
    let network = environment
        .as_ref()
        .map_or_else(|_| default_network(), |e| e.network.clone());
    let wall_timeout = timeout(&task, "max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT, w);
    let validation_timeout = timeout(&task, "max_test_timeout_sec", DEFAULT_TEST_TIMEOUT, w);
    if get(&task, "run_tests_in_same_shell").and_then(Yaml::as_bool) == Some(true) {
        w.push("task.yaml: run_tests_in_same_shell = true: proctor runs the tests in a fresh shell after the agent has stopped, so shell state the tests look at is gone".to_string());
    }
    let parser = get(&task, "parser_name")
        .and_then(Yaml::as_str)
        .unwrap_or("pytest");
    let verifier = verifier_plan(dir, parser, network.checks == Net::None, w);
    let oracle = oracle_plan(dir, network.agent == Net::None, w);
    let (prompt, environment, verifier) = match (prompt, environment, verifier) {
        (Ok(p), Ok(e), Ok(v)) => (p, e, v),
        (p, e, v) => {
            return Err(crate::model::skip_reason([p.err(), e.err(), v.err()], w));
        }
    };
    Ok(TaskPlan {
        source: dir.to_path_buf(),
        id: id.to_string(),
        prompt,
        image: environment.image,
        fallback_build: None,
        build_timeout: None,
        workdir: environment.workdir,
        env: environment.env,
        wall_timeout,
        validation_timeout,
        network,
        resources: environment.resources,
        difficulty: get(&task, "difficulty")
            .and_then(Yaml::as_str)
            .map(str::to_string),
        comments: about(&task, id, &from),
        metadata: crate::metadata::terminal_bench(&task, &descriptions, from.as_deref()),
        descriptions,
        verifier,
        oracle,
        sidecars: environment.sidecars,
        steps: None,
        mcp_servers: Vec::new(),
    })
}

/// The network Terminal-Bench gives a task: Docker's default network, with the internet, to the
/// agent and to the tests alike.
fn default_network() -> Networks {
    Networks {
        agent: Net::Internet,
        checks: Net::Internet,
        why: "Terminal-Bench runs the task's container on Docker's default network (the internet)"
            .to_string(),
        allowed_hosts: Vec::new(),
    }
}

/// Checks that `task` (task.yaml) is a mapping, and reports the fields Terminal-Bench does not
/// define.
fn check_fields(task: &Yaml, w: &mut Vec<String>) -> Result<(), String> {
    let Some(hash) = task.as_hash() else {
        return Err("task.yaml is not a mapping of fields".into());
    };
    for key in hash.keys() {
        match key.as_str() {
            Some(k) if TERMINAL_BENCH_TASK_YAML.contains(&k) => {}
            Some(k) => w.push(unknown_field("task.yaml", k)),
            None => w.push(format!(
                "task.yaml: a field whose name is not text ({key:?}), not imported"
            )),
        }
    }
    Ok(())
}

/// The entries of task.yaml's `descriptions` list, `(key, text)` in order; an entry without a
/// `key` or a `description` text is reported and left out.
fn descriptions(task: &Yaml, w: &mut Vec<String>) -> Vec<(String, String)> {
    let Some(list) = get(task, "descriptions") else {
        return Vec::new();
    };
    let Some(items) = list.as_vec() else {
        w.push(
            "task.yaml: `descriptions` is not a list of { key, description }, not imported".into(),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, d) in items.iter().enumerate() {
        let key = get(d, "key").and_then(scalar);
        let text = get(d, "description").and_then(Yaml::as_str);
        match (key, text) {
            (Some(k), Some(t)) => out.push((k, t.to_string())),
            _ => w.push(format!(
                "task.yaml: descriptions entry {} has no `key` or no `description` text, not imported",
                i + 1
            )),
        }
    }
    out
}

/// The key of the `descriptions` entry the prompt comes from: the one `--description` chose;
/// else the one `instruction` names (livecodebenchpro's `instruction: base`); else, without an
/// `instruction`, the `base` entry (Terminal-Bench's default key), else the first. `None`: the
/// prompt is `instruction` itself.
fn prompt_from(task: &Yaml, entries: &[(String, String)], chosen: Option<&str>) -> Option<String> {
    if let Some(key) = chosen {
        return Some(key.to_string());
    }
    let has = |k: &str| entries.iter().any(|(key, _)| key == k);
    match get(task, "instruction").and_then(Yaml::as_str) {
        Some(i) => has(i.trim()).then(|| i.trim().to_string()),
        None if has("base") => Some("base".to_string()),
        None => entries.first().map(|(k, _)| k.clone()),
    }
}

/// The task's prompt (see [`prompt_from`]); it must not be empty. The other `descriptions`
/// entries are reported: they are kept in the suite and selectable with `--description`.
fn prompt(
    task: &Yaml,
    entries: &[(String, String)],
    chosen: Option<&str>,
    w: &mut Vec<String>,
) -> Result<String, String> {
    let keys = || {
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        keys.join(", ")
    };
    let prompt = match prompt_from(task, entries, chosen) {
        Some(key) => {
            let Some((_, text)) = entries.iter().find(|(k, _)| *k == key) else {
                return Err(format!(
                    "task.yaml has no `descriptions` entry `{key}` (--description {key}); its entries: {}",
                    if entries.is_empty() { "none".to_string() } else { keys() }
                ));
            };
            if chosen.is_none() && get(task, "instruction").is_some() {
                w.push(format!("task.yaml: instruction = \"{key}\" names the `descriptions` entry `{key}`: its text is the prompt (Terminal-Bench itself would send the word `{key}`)"));
            }
            let others: Vec<&str> = entries
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| *k != key)
                .collect();
            if !others.is_empty() {
                w.push(format!(
                    "task.yaml: the prompt is the `descriptions` entry `{key}`; the other entries ({}) are kept in descriptions/TASK_ID/ and chosen with `--description KEY`",
                    others.join(", ")
                ));
            }
            text.clone()
        }
        None => {
            if !entries.is_empty() {
                w.push(format!(
                    "task.yaml: the prompt is `instruction`; the `descriptions` entries ({}) are kept in descriptions/TASK_ID/ and chosen with `--description KEY`",
                    keys()
                ));
            }
            get(task, "instruction")
                .and_then(Yaml::as_str)
                .map(str::to_string)
                .ok_or("task.yaml has no `instruction` (nor a `descriptions` entry), so there is no prompt")?
        }
    };
    if prompt.trim().is_empty() {
        return Err("the instruction in task.yaml is empty".into());
    }
    Ok(prompt)
}

/// What the task runs in.
struct Environment {
    /// The image.
    image: ImageSource,
    /// The working directory inside the image, when the task states it.
    workdir: Option<String>,
    /// Environment variables (literal values only).
    env: BTreeMap<String, String>,
    /// The compose service's `deploy.resources.limits`.
    resources: Resources,
    /// The network the agent and the tests get.
    network: Networks,
    /// The compose file's services beside `client`, the agent's container: its sidecars.
    sidecars: Vec<crate::model::SidecarPlan>,
}

/// The task's environment: its compose file's one service when it has a compose file, else
/// just its image.
fn environment(dir: &Path, w: &mut Vec<String>) -> Result<Environment, String> {
    let compose_name = ["docker-compose.yaml", "docker-compose.yml"]
        .into_iter()
        .find(|n| dir.join(n).is_file());
    if let Some(name) = compose_name {
        return compose_environment(dir, name, w);
    }
    let build = dir.join("Dockerfile").is_file().then_some(Build {
        what: "its Dockerfile (it has no docker-compose.yaml)",
        context: ".",
        dockerfile: "Dockerfile",
    });
    let image = image::for_task(
        dir,
        None,
        build,
        "it has no image: no docker-compose.yaml and no Dockerfile",
    )?;
    Ok(Environment {
        image,
        workdir: None,
        env: BTreeMap::new(),
        resources: Resources::default(),
        network: default_network(),
        sidecars: Vec::new(),
    })
}

/// The environment of the one service of the task's compose file `name`.
fn compose_environment(dir: &Path, name: &str, w: &mut Vec<String>) -> Result<Environment, String> {
    let compose = load(&dir.join(name), name)?;
    let (service, several) = main_service(&compose, name)?;
    report_compose_keys(&compose, service, name, w);
    let resources = compose_resources(service, name, w);
    let env = compose_env(service, w);
    let workdir = get(service, "working_dir")
        .and_then(Yaml::as_str)
        .map(str::to_string);
    // The harness's own `image: ${T_BENCH_...}` names the image it is about to build.
    let declared = get(service, "image")
        .and_then(Yaml::as_str)
        .filter(|i| !i.contains('$') && get(service, "build").is_none());
    let what = format!("its Dockerfile ({name} builds it at run time)");
    let builds = get(service, "build").is_some() || dir.join("Dockerfile").is_file();
    let (context, dockerfile) = build_paths(get(service, "build"));
    let image = image::for_task(
        dir,
        declared,
        builds.then_some(Build {
            what: &what,
            context: &context,
            dockerfile: &dockerfile,
        }),
        &format!("{name} names no image its service runs"),
    )?;
    // `network_mode: none` takes the network away; anything else leaves Docker's.
    let network = match get(service, "network_mode").and_then(Yaml::as_str) {
        Some("none") => Networks {
            agent: Net::None,
            checks: Net::None,
            why: format!("{name}: network_mode: none"),
            allowed_hosts: Vec::new(),
        },
        _ => default_network(),
    };
    let sidecars = match several {
        true => compose_sidecars(dir, name, w)?,
        false => Vec::new(),
    };
    Ok(Environment {
        image,
        workdir,
        env,
        resources,
        network,
        sidecars,
    })
}

/// Reports what the compose file `name` sets that the import does not carry over: top-level
/// keys other than `services`, and service keys other than those read (`image`, `build`,
/// `environment`, `working_dir`, `deploy.resources.limits`) and the harness's own template
/// (`container_name`, a `sleep infinity` keep-alive `command`, the `${T_BENCH_...}` log volumes).
fn report_compose_keys(compose: &Yaml, service: &Yaml, name: &str, w: &mut Vec<String>) {
    let text = |y: &Yaml| scalar(y).unwrap_or_else(|| format!("{y:?}"));
    if let Some(top) = compose.as_hash() {
        for key in top.keys().map(text).filter(|k| k != "services") {
            w.push(format!("{name}: top-level `{key}` is not imported"));
        }
    }
    let Some(hash) = service.as_hash() else {
        return;
    };
    for (key, value) in hash {
        let key = text(key);
        match key.as_str() {
            "image" | "build" | "environment" | "working_dir" | "container_name" | "deploy"
            | "network_mode" => {}
            "command" if is_keep_alive(value) => {}
            "volumes" => {
                let own = |v: &Yaml| {
                    v.as_str().is_some_and(|s| {
                        s.trim()
                            .split(':')
                            .all(|part| part.starts_with("${T_BENCH_"))
                    })
                };
                let others: Vec<String> = value
                    .as_vec()
                    .map(|items| items.iter().filter(|v| !own(v)).map(text).collect())
                    .unwrap_or_else(|| vec![text(value)]);
                if !others.is_empty() {
                    w.push(format!(
                        "{name}: volumes {} are not mounted: proctor's workspace comes from the image alone, so files the task expects from a mount are missing",
                        others.join(", ")
                    ));
                }
            }
            _ => w.push(format!(
                "{name}: service key `{key}` has no proctor counterpart, not imported"
            )),
        }
    }
    if let Some(deploy) = get(service, "deploy").and_then(Yaml::as_hash) {
        for (key, value) in deploy {
            let key = text(key);
            if key != "resources" {
                w.push(format!(
                    "{name}: `deploy.{key}` has no proctor counterpart, not imported"
                ));
                continue;
            }
            for (rkey, rvalue) in value.as_hash().into_iter().flatten() {
                let rkey = text(rkey);
                if rkey != "limits" {
                    w.push(format!(
                        "{name}: `deploy.resources.{rkey}` has no proctor counterpart (only limits are read), not imported"
                    ));
                    continue;
                }
                for lkey in rvalue.as_hash().into_iter().flatten().map(|(k, _)| text(k)) {
                    if lkey != "cpus" && lkey != "memory" {
                        w.push(format!(
                            "{name}: `deploy.resources.limits.{lkey}` has no proctor counterpart, not imported"
                        ));
                    }
                }
            }
        }
    }
}

/// Whether a compose `command` only keeps the container alive (`sleep infinity`), as the
/// harness's template does; proctor keeps its own containers alive.
fn is_keep_alive(command: &Yaml) -> bool {
    let words: Vec<String> = match command {
        Yaml::String(s) => s.split_whitespace().map(str::to_string).collect(),
        Yaml::Array(items) => items.iter().filter_map(scalar).collect(),
        _ => return false,
    };
    let joined = words.join(" ");
    joined == "sleep infinity"
        || joined == "sh -c sleep infinity"
        || joined == "bash -c sleep infinity"
}

/// The compose service's `deploy.resources.limits` `cpus` and `memory` (a size such as `4G`;
/// a plain number is bytes, as Docker reads it); a value that cannot be read is reported.
fn compose_resources(service: &Yaml, name: &str, w: &mut Vec<String>) -> Resources {
    let Some(limits) = get(service, "deploy")
        .and_then(|d| get(d, "resources"))
        .and_then(|r| get(r, "limits"))
    else {
        return Resources::default();
    };
    let mut resources = Resources::default();
    if let Some(v) = get(limits, "cpus") {
        resources.cpus = scalar(v).as_deref().and_then(settings::cpus);
        if resources.cpus.is_none() {
            w.push(format!(
                "{name}: deploy.resources.limits.cpus = {v:?} is not a positive number, not imported"
            ));
        }
    }
    if let Some(v) = get(limits, "memory") {
        resources.memory_mb = scalar(v).and_then(|s| settings::size_mb(&s, false));
        if resources.memory_mb.is_none() {
            w.push(format!(
                "{name}: deploy.resources.limits.memory = {v:?} is not a size such as 4G, not imported"
            ));
        }
    }
    resources
}

/// The compose service Terminal-Bench runs the agent in, beside a task's other services.
const CLIENT: &str = "client";

/// The sidecars of the compose file `name` in `dir` (when it has several services, every one
/// but `client`).
fn compose_sidecars(
    dir: &Path,
    name: &str,
    w: &mut Vec<String>,
) -> Result<Vec<crate::model::SidecarPlan>, String> {
    let Some(compose) = crate::compose::read(&dir.join(name))? else {
        return Ok(Vec::new());
    };
    let at = crate::compose::ComposeAt {
        task: dir,
        folder: ".",
    };
    let sidecars = crate::compose::sidecars(&compose, CLIENT, &at, w)?;
    w.push(format!(
        "{name}: {} sidecar container(s) ({}) run beside `{CLIENT}`, reached by name; the tests run after they have stopped",
        sidecars.len(),
        sidecars.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    ));
    Ok(sidecars)
}

/// The agent's service of the compose file `compose` (named `name`): its one service, or,
/// of several, `client` (`true`: the others are its sidecars). Several without a `client`
/// are refused.
fn main_service<'a>(compose: &'a Yaml, name: &str) -> Result<(&'a Yaml, bool), String> {
    let services = get(compose, "services")
        .and_then(Yaml::as_hash)
        .ok_or(format!("{name} has no services"))?;
    if services.len() > 1 {
        return match services.get(&Yaml::String(CLIENT.into())) {
            Some(client) => Ok((client, true)),
            None => Err(format!(
                "{name} starts {} containers and none is `{CLIENT}`, the agent's container as Terminal-Bench names it",
                services.len()
            )),
        };
    }
    match services.iter().next() {
        Some((_, service)) => Ok((service, false)),
        None => Err(format!("{name} has no services")),
    }
}

/// The timeout `key` of task.yaml, in seconds; Terminal-Bench's `default` when it is not set.
fn timeout(task: &Yaml, key: &str, default: u64, w: &mut Vec<String>) -> Option<u64> {
    let set = get(task, key).filter(|v| !matches!(v, Yaml::Null));
    settings::timeout_or_default(
        set.map(seconds),
        &format!("task.yaml: {key}"),
        "Terminal-Bench",
        default,
        w,
    )
}

/// The verifier: `run-tests.sh` with the files of `tests/`, and how its result is read, by the
/// result parser named `parser`; `offline`: the tests' phase has no network.
fn verifier_plan(
    dir: &Path,
    parser: &str,
    offline: bool,
    w: &mut Vec<String>,
) -> Result<VerifierPlan, String> {
    let test_files = test_files(dir, w)?;
    let verdict = Verdict::Parser(Parser::named(parser)?);
    let scanned = scan::scan(&test_files);
    if offline {
        w.extend(scan::download_warning(&scanned, "run-tests.sh or tests/"));
    }
    Ok(VerifierPlan {
        verdict,
        files: test_files,
        entry: "run-tests.sh".to_string(),
        env: BTreeMap::new(),
        metrics: Vec::new(),
        separate: false,
    })
}

/// The verifier's files: Terminal-Bench copies `run-tests.sh` and `tests/` into one folder,
/// `/tests`, the task's own `run-tests.sh` replacing one in `tests/`.
fn test_files(dir: &Path, w: &mut Vec<String>) -> Result<Vec<FileEntry>, String> {
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
    Ok(test_files)
}

/// The oracle: `solution.sh`. A `solution.yaml` cannot be replayed, so with one the oracle
/// does nothing. `offline`: the agent phase, where it runs, has no network.
fn oracle_plan(dir: &Path, offline: bool, w: &mut Vec<String>) -> OraclePlan {
    let script = dir.join("solution.sh");
    if !script.is_file() {
        let why = if dir.join("solution.yaml").is_file() {
            "solution.yaml holds keystrokes for an interactive terminal, which proctor's scripted agent cannot replay"
        } else {
            "no solution.sh"
        };
        return OraclePlan::without_solution(why, w);
    }
    let files = vec![files::single(&script, "solution.sh")];
    w.extend(scan::solution_warning(&files, "solution.sh", offline));
    OraclePlan {
        files,
        entry: Some("solution.sh".to_string()),
        expected_dir: None,
        env: BTreeMap::new(),
        missing: None,
    }
}

/// The lines kept for the reader above the task: where its prompt comes from (a `descriptions`
/// entry, `prompt_from`), then its metadata: authors (`author_name`, `author_email`, and the
/// `author` some datasets write), category, tags and the time estimates.
fn about(task: &Yaml, id: &str, prompt_from: &Option<String>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(key) = prompt_from {
        lines.push(format!(
            "prompt: the `descriptions` entry `{key}`; every entry is in descriptions/{id}/KEY.md"
        ));
    }
    let mut about = Vec::new();
    for key in ["author", "author_name", "author_email", "category"] {
        if let Some(v) = get(task, key).and_then(scalar) {
            about.push(format!("{}: {v}", key.replace('_', " ")));
        }
    }
    if let Some(tags) = get(task, "tags").and_then(Yaml::as_vec) {
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
        if let Some(v) = get(task, key).and_then(scalar) {
            about.push(format!("{key}: {v}"));
        }
    }
    if !about.is_empty() {
        lines.push(about.join("; "));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prompt of each shape of task.yaml: `instruction` text; `instruction` naming an
    /// entry (livecodebenchpro); no `instruction` (the `base` entry, else the first); the entry
    /// `--description` chose, or the task skipped when it has none by that key.
    #[test]
    fn descriptions_give_the_prompt_the_task_names() {
        let of = |text: &str, chosen: Option<&str>| {
            let doc = YamlLoader::load_from_str(text).expect("yaml").remove(0);
            let mut w = Vec::new();
            let entries = descriptions(&doc, &mut w);
            (prompt(&doc, &entries, chosen, &mut w), w)
        };
        let two = "descriptions:\n  - key: hard\n    description: Hard one.\n  - key: base\n    description: Base one.\n";
        assert_eq!(of(two, None).0.as_deref(), Ok("Base one."));
        assert_eq!(
            of(&format!("{two}instruction: hard\n"), None).0.as_deref(),
            Ok("Hard one.")
        );
        assert_eq!(
            of(&format!("{two}instruction: base\n"), Some("hard"))
                .0
                .as_deref(),
            Ok("Hard one.")
        );
        assert_eq!(
            of(&format!("{two}instruction: Do it.\n"), None)
                .0
                .as_deref(),
            Ok("Do it.")
        );
        let first = "descriptions:\n  - key: a\n    description: First.\n  - key: b\n    description: Second.\n";
        assert_eq!(of(first, None).0.as_deref(), Ok("First."));
        let (missing, _) = of(two, Some("problem"));
        assert!(missing.is_err_and(
            |e| e.contains("no `descriptions` entry `problem`") && e.contains("hard, base")
        ));
        let (_, w) = of(&format!("{two}instruction: base\n"), None);
        assert!(
            w.iter()
                .any(|w| w.contains("names the `descriptions` entry `base`")),
            "{w:?}"
        );
        assert!(
            w.iter().any(|w| w.contains("other entries (hard)")),
            "{w:?}"
        );
        let (_, w) = of(&format!("{two}instruction: Do it.\n"), None);
        assert!(
            w.iter().any(|w| w.contains(
                "the prompt is `instruction`; the `descriptions` entries (hard, base) are kept"
            )),
            "{w:?}"
        );
    }

    fn compose(text: &str) -> (Yaml, Vec<String>, Resources) {
        let docs = YamlLoader::load_from_str(text).expect("yaml");
        let doc = docs.into_iter().next().expect("doc");
        let service = main_service(&doc, "docker-compose.yaml")
            .expect("service")
            .0
            .clone();
        let mut w = Vec::new();
        report_compose_keys(&doc, &service, "docker-compose.yaml", &mut w);
        let r = compose_resources(&service, "docker-compose.yaml", &mut w);
        (service, w, r)
    }

    #[test]
    fn several_services_run_beside_client_as_sidecars() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |text: &str| {
            std::fs::write(dir.path().join("docker-compose.yaml"), text).expect("write");
        };
        let services = "services:\n  client:\n    image: ghcr.io/example/t:1\n    network_mode: none\n  api:\n    build: ./api\n    command: serve --port 8000\n";
        write(services);
        let mut w = Vec::new();
        let env =
            compose_environment(dir.path(), "docker-compose.yaml", &mut w).expect("environment");
        assert_eq!(env.sidecars.len(), 1);
        assert_eq!(env.sidecars[0].name, "api");
        let ImageSource::Dockerfile(build) = &env.sidecars[0].image else {
            panic!("{:?}", env.sidecars[0].image)
        };
        assert_eq!(build.shown_dockerfile, "api/Dockerfile");
        assert!(
            w.iter()
                .any(|m| m.contains("1 sidecar container(s) (api) run beside `client`")),
            "{w:?}"
        );
        // Without a `client`, several services are refused.
        write(&services.replace("client:", "main:"));
        let e = compose_environment(dir.path(), "docker-compose.yaml", &mut Vec::new())
            .err()
            .expect("skipped");
        assert!(e.contains("none is `client`"), "{e}");
    }

    /// The shape of rese1f/terminal-bench-datasets' compose files.
    #[test]
    fn compose_keys_not_used_are_reported_and_limits_become_resources() {
        let (_, w, r) = compose(
            r#"services:
  client:
    image: buildpack-deps:jammy
    container_name: ${COMPOSE_PROJECT_NAME}
    command: ["sleep", "infinity"]
    tty: true
    working_dir: /app
    volumes:
      - ./:/app
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
    deploy:
      resources:
        limits:
          cpus: '2'
          memory: 4G
          pids: 100
        reservations:
          memory: 1G
"#,
        );
        assert_eq!(
            r,
            Resources {
                cpus: Some(2.0),
                memory_mb: Some(4096),
                storage_mb: None
            }
        );
        assert_eq!(
            w,
            vec![
                "docker-compose.yaml: service key `tty` has no proctor counterpart, not imported",
                "docker-compose.yaml: volumes ./:/app are not mounted: proctor's workspace comes from the image alone, so files the task expects from a mount are missing",
                "docker-compose.yaml: `deploy.resources.limits.pids` has no proctor counterpart, not imported",
                "docker-compose.yaml: `deploy.resources.reservations` has no proctor counterpart (only limits are read), not imported",
            ]
        );
    }

    /// Terminal-Bench's own template: nothing to report.
    #[test]
    fn the_harness_template_is_not_reported() {
        let (_, w, r) = compose(
            r#"services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"#,
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(r, Resources::default());
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
