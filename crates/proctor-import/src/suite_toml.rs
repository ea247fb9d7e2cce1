//! The text of the generated `suite.toml`.

use std::fmt::Write as _;

use crate::model::SidecarPlan;
use crate::model::{Format, TaskPlan};
use crate::text::{basic_string, toml_key, toml_string};
use crate::verify::{CHECK, CHECK_METRICS};

/// The rubric levels of a metric: its value in tenths, 1 to 10.
const METRIC_MAX: u32 = 10;

/// `suite.toml` for `tasks`.
pub(crate) fn render(
    format: Format,
    suite_id: &str,
    name: Option<&str>,
    tasks: &[TaskPlan],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Written by `proctor import {}` from {} task(s); docs/import.md says how each field was mapped.",
        format.command(),
        tasks.len()
    );
    s.push_str(
        "# Every task's workspace comes from its image ([tasks.environment]), so fixture/ is empty.\n",
    );
    s.push_str("schema_version = 1\n");
    let _ = writeln!(s, "id = {}", basic_string(suite_id));
    if let Some(name) = name {
        let _ = writeln!(s, "name = {}", basic_string(name));
    }
    s.push_str("fixture = \"fixture\"\n\n");

    s.push_str("[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n");
    s.push_str("purpose = \"The tasks' own reference solutions, for `proctor validate --oracle`; add the agents to compare as more variants.\"\n");

    render_mcp_servers(&mut s, tasks);
    for task in tasks {
        s.push('\n');
        render_task(&mut s, task);
    }
    s
}

/// The tasks' stdio MCP servers as the suite's `[[mcp_servers]]`: one entry per name (a second
/// task's server of the same name and argv is the same server); a server whose name another
/// task already gave a different argv is renamed `NAME-TASK_ID`, and says so.
fn render_mcp_servers(s: &mut String, tasks: &[TaskPlan]) {
    use crate::model::McpTransport;
    let mut seen: std::collections::BTreeMap<String, &McpTransport> = Default::default();
    for t in tasks {
        for m in &t.mcp_servers {
            let name = match seen.get(&m.name) {
                Some(how) if **how == m.transport => continue,
                Some(_) => format!("{}-{}", m.name, t.id),
                None => m.name.clone(),
            };
            if seen.contains_key(&name) {
                continue;
            }
            seen.insert(name.clone(), &m.transport);
            s.push('\n');
            match &m.transport {
                McpTransport::Stdio(argv) => {
                    let _ = writeln!(s, "# The MCP server `{}` of task {} (stdio).", m.name, t.id);
                    let _ = writeln!(s, "[[mcp_servers]]\nname = {}", basic_string(&name));
                    let argv: Vec<String> = argv.iter().map(|a| basic_string(a)).collect();
                    let _ = writeln!(s, "command = [{}]", argv.join(", "));
                }
                McpTransport::Http {
                    url,
                    service,
                    legacy_sse,
                } => {
                    let _ = writeln!(
                        s,
                        "# The MCP server `{}` of task {} ({}, served by its container `{service}`).",
                        m.name,
                        t.id,
                        if *legacy_sse { "HTTP+SSE" } else { "streamable HTTP" }
                    );
                    let _ = writeln!(s, "[[mcp_servers]]\nname = {}", basic_string(&name));
                    let _ = writeln!(
                        s,
                        "url = {}\nservice = {}",
                        basic_string(url),
                        basic_string(service)
                    );
                    if *legacy_sse {
                        let _ = writeln!(s, "transport = \"sse\"");
                    }
                }
            }
        }
    }
}

/// Where in the suite the Dockerfile a task's prebuilt image is built from (when it cannot be
/// pulled) is kept.
pub(crate) fn fallback_folder(id: &str) -> String {
    format!("environments/{id}")
}

fn render_task(s: &mut String, t: &TaskPlan) {
    let _ = writeln!(
        s,
        "# ---- {} (from {})",
        t.id,
        crate::files::shown_path(&t.source).display()
    );
    for line in &t.comments {
        let _ = writeln!(s, "# {line}");
    }
    let image = t.image.reference(&t.id);
    let _ = writeln!(s, "# image: {image}");
    s.push_str("[[tasks]]\n");
    let _ = writeln!(s, "id = {}", basic_string(&t.id));
    if let Some(d) = &t.difficulty {
        let _ = writeln!(s, "difficulty = {}", basic_string(d));
    }
    if let Some(secs) = t.wall_timeout {
        let _ = writeln!(s, "wall_timeout_seconds = {secs}");
    }
    if let Some(secs) = t.validation_timeout {
        let _ = writeln!(s, "validation_timeout_seconds = {secs}");
    }
    render_network(s, &t.network);
    // The verifier runs in the agent's container, where it sees what the agent installed; a
    // separate verifier, in a fresh container of the image with the agent's workspace.
    if t.verifier.separate {
        s.push_str("# the verifier runs apart from the agent's container ([verifier] environment_mode = \"separate\")\n");
        s.push_str("check_root = \"image\"\n");
    } else {
        s.push_str("check_root = \"agent\"\n");
    }
    let _ = writeln!(s, "prompt = {}", toml_string(&t.prompt));
    match &t.steps {
        Some(steps) => {
            let _ = writeln!(s, "step_reward = {}", basic_string(&steps.strategy));
        }
        // The tests are laid where the task expects them, never in the agent's workspace.
        None => {
            let _ = writeln!(s, "holdout_at = {}", basic_string(crate::verify::TESTS_AT));
        }
    }

    render_environment(s, t, &image);
    for sidecar in &t.sidecars {
        render_sidecar(
            s,
            sidecar,
            &sidecar.image.reference(&sidecar.image_key(&t.id)),
        );
    }
    if let Some(steps) = &t.steps {
        crate::harbor_steps::render(s, steps);
        return;
    }

    s.push_str("\n[tasks.success]\n");
    if t.verifier.metrics.is_empty() {
        let _ = writeln!(s, "all = [{{ check = {} }}]", basic_string(CHECK));
    } else {
        let _ = writeln!(
            s,
            "all = [{{ check = {{ command = {}, stdout_matches = {} }} }}]",
            basic_string(CHECK_METRICS),
            basic_string("(?m)^proctor-verdict: pass$")
        );
        let mut ids = crate::ident::Ids::default();
        for metric in &t.verifier.metrics {
            let id = ids.unique(&crate::ident::sanitize(metric, "metric"));
            render_metric(s, metric, &id);
        }
    }
}

/// A task's two networks, where they come from, and its allowed hosts.
fn render_network(s: &mut String, n: &crate::model::Networks) {
    let _ = writeln!(s, "# network: {}", n.why);
    let _ = writeln!(s, "network = \"{}\"", n.agent.as_str());
    let _ = writeln!(s, "check_network = \"{}\"", n.checks.as_str());
    if !n.allowed_hosts.is_empty() {
        let hosts: Vec<String> = n.allowed_hosts.iter().map(|h| basic_string(h)).collect();
        let _ = writeln!(s, "allowed_hosts = [{}]", hosts.join(", "));
    }
}

/// A task's `[tasks.environment]`: its image and what the task says of its container.
fn render_environment(s: &mut String, t: &TaskPlan, image: &str) {
    s.push_str("\n[tasks.environment]\n");
    let _ = writeln!(s, "image = {}", basic_string(image));
    if let Some(wd) = &t.workdir {
        let _ = writeln!(s, "workdir = {}", basic_string(wd));
    }
    if let Some(cpus) = t.resources.cpus {
        // A whole number is written as an integer (`cpus = 2`); the suite reads either.
        if cpus.fract() == 0.0 && cpus.abs() < 1e15 {
            let _ = writeln!(s, "cpus = {}", cpus as i64);
        } else {
            let _ = writeln!(s, "cpus = {cpus}");
        }
    }
    if let Some(mb) = t.resources.memory_mb {
        let _ = writeln!(s, "memory_mb = {mb}");
    }
    if let Some(mb) = t.resources.storage_mb {
        let _ = writeln!(s, "storage_mb = {mb}");
    }
    if t.fallback_build.is_some() {
        let _ = writeln!(s, "build = {}", basic_string(&fallback_folder(&t.id)));
        if let Some(secs) = t.build_timeout {
            let _ = writeln!(s, "build_timeout_sec = {secs}");
        }
    }
    if !t.env.is_empty() {
        let pairs: Vec<String> = t
            .env
            .iter()
            .map(|(k, v)| format!("{} = {}", toml_key(k), basic_string(v)))
            .collect();
        let _ = writeln!(s, "env = {{ {} }}", pairs.join(", "));
    }
}

/// A sidecar container: `[[tasks.services]]` with its `image` (the suite's reference to it).
fn render_sidecar(s: &mut String, c: &SidecarPlan, image: &str) {
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|i| basic_string(i)).collect();
        format!("[{}]", quoted.join(", "))
    };
    s.push_str("\n[[tasks.services]]\n");
    let _ = writeln!(s, "name = {}", basic_string(&c.name));
    let _ = writeln!(s, "image = {}", basic_string(image));
    if let Some(command) = &c.command {
        let _ = writeln!(s, "command = {}", list(command));
    }
    if let Some(wd) = &c.workdir {
        let _ = writeln!(s, "workdir = {}", basic_string(wd));
    }
    if !c.env.is_empty() {
        let pairs: Vec<String> = c
            .env
            .iter()
            .map(|(k, v)| format!("{} = {}", toml_key(k), basic_string(v)))
            .collect();
        let _ = writeln!(s, "env = {{ {} }}", pairs.join(", "));
    }
    if !c.depends_on.is_empty() {
        let _ = writeln!(s, "depends_on = {}", list(&c.depends_on));
    }
    if let Some(h) = &c.healthcheck {
        let _ = writeln!(
            s,
            "healthcheck = {{ command = {}, timeout_seconds = {}, interval_seconds = {} }}",
            list(&h.argv),
            h.timeout_seconds,
            h.interval_seconds
        );
    }
}

/// A rubric criterion scoring `metric` of reward.json in tenths.
fn render_metric(s: &mut String, metric: &str, id: &str) {
    let _ = writeln!(
        s,
        "\n# reward.json `{metric}`, scored in tenths: {METRIC_MAX} for 1.0 or more, 0 for less than 0.1."
    );
    s.push_str("[[tasks.rubric]]\n");
    let _ = writeln!(s, "id = {}", basic_string(id));
    let _ = writeln!(s, "max = {METRIC_MAX}");
    s.push_str("levels = [\n");
    for score in (1..=METRIC_MAX).rev() {
        let pattern = format!("(?m)^proctor-metric {} {score}$", regex::escape(metric));
        let _ = writeln!(
            s,
            "  {{ score = {score}, all = [{{ check = {{ command = {}, stdout_matches = {} }} }}] }},",
            basic_string(CHECK_METRICS),
            basic_string(&pattern)
        );
    }
    s.push_str("]\n");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::image::ImageSource;
    use crate::model::{OraclePlan, Resources, Verdict, VerifierPlan};

    fn plan(resources: Resources) -> TaskPlan {
        let cwd = std::env::current_dir().expect("cwd");
        TaskPlan {
            source: cwd.join("tasks").join("hello-world"),
            id: "hello-world".into(),
            prompt: "Say hello.\n".into(),
            image: ImageSource::Reference("alexgshaw/hello-world:20251031".into()),
            fallback_build: None,
            build_timeout: None,
            workdir: Some("/app".into()),
            env: BTreeMap::from([("GREETING_STYLE".to_string(), "plain".to_string())]),
            wall_timeout: Some(300),
            validation_timeout: Some(120),
            network: crate::model::Networks {
                agent: crate::model::Net::None,
                checks: crate::model::Net::Internet,
                why: "[verifier] network_mode = \"public\"".into(),
                allowed_hosts: Vec::new(),
            },
            difficulty: None,
            resources,
            comments: vec!["name: terminal-bench/hello-world".into()],
            metadata: toml::Table::new(),
            descriptions: Vec::new(),
            verifier: VerifierPlan {
                verdict: Verdict::Reward,
                files: Vec::new(),
                entry: "test.sh".into(),
                env: BTreeMap::new(),
                metrics: Vec::new(),
                separate: false,
            },
            oracle: OraclePlan {
                files: Vec::new(),
                entry: None,
                expected_dir: None,
                env: BTreeMap::new(),
                missing: Some("none".into()),
            },
            sidecars: Vec::new(),
            steps: None,
            mcp_servers: Vec::new(),
        }
    }

    #[test]
    fn a_separate_verifier_checks_over_the_image_and_the_workspace_alone() {
        let mut p = plan(Resources::default());
        p.verifier.separate = true;
        let mut s = String::new();
        render_task(&mut s, &p);
        assert!(
            s.contains("environment_mode = \"separate\")\ncheck_root = \"image\"\n"),
            "{s}"
        );
        assert!(!s.contains("check_root = \"agent\""), "{s}");
    }

    #[test]
    fn resources_are_written_into_the_environment_table() {
        let mut s = String::new();
        render_task(
            &mut s,
            &plan(Resources {
                cpus: Some(1.0),
                memory_mb: Some(2048),
                storage_mb: Some(10240),
            }),
        );
        assert_eq!(
            s,
            r#"# ---- hello-world (from tasks/hello-world)
# name: terminal-bench/hello-world
# image: alexgshaw/hello-world:20251031
[[tasks]]
id = "hello-world"
wall_timeout_seconds = 300
validation_timeout_seconds = 120
# network: [verifier] network_mode = "public"
network = "none"
check_network = "internet"
check_root = "agent"
prompt = '''
Say hello.
'''
holdout_at = "/tests"

[tasks.environment]
image = "alexgshaw/hello-world:20251031"
workdir = "/app"
cpus = 1
memory_mb = 2048
storage_mb = 10240
env = { GREETING_STYLE = "plain" }

[tasks.success]
all = [{ check = "bash /tests/proctor-verify.sh" }]
"#
        );
    }

    #[test]
    fn fractional_cpus_and_no_resources() {
        let mut s = String::new();
        render_task(
            &mut s,
            &plan(Resources {
                cpus: Some(0.5),
                memory_mb: None,
                storage_mb: None,
            }),
        );
        assert!(s.contains("workdir = \"/app\"\ncpus = 0.5\nenv = "), "{s}");
        let mut s = String::new();
        render_task(&mut s, &plan(Resources::default()));
        assert!(s.contains("workdir = \"/app\"\nenv = "), "{s}");
        assert!(!s.contains("cpus") && !s.contains("_mb"), "{s}");
    }

    #[test]
    fn a_source_outside_the_current_folder_is_shown_as_it_is() {
        use crate::files::shown_path;
        assert_eq!(
            shown_path(Path::new("/nonexistent-proctor/x")),
            PathBuf::from("/nonexistent-proctor/x")
        );
        assert_eq!(shown_path(Path::new("a/b")), PathBuf::from("a/b"));
    }
}
