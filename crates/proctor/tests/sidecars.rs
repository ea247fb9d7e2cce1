//! Sidecar containers, through the real binary: a service with an `image` runs beside the
//! agent's container in the trial's network, in a root of its own (the test-built busybox
//! image), reached by its name; its healthcheck gates the agent; its log is kept and `show`
//! lists it; a healthcheck that never passes errors the trial (never counted against the
//! agent). A Harbor task of two containers imports with its sidecar and passes its oracle
//! while the null agent fails; a compose file that is only data imports.

mod common;

use std::path::Path;
use std::process::Command;

use common::lab::{real_isolation, As, Lab};
use common::registry::{Registry, MAKE_IMAGE};

/// Builds the test image (busybox, `/srv/index.html`, `WorkingDir` `/app` holding
/// `from-image.txt`) into `dir` as an OCI layout.
fn make_layout(dir: &Path) {
    assert!(
        Path::new("/bin/busybox").is_file(),
        "these tests need a static busybox at /bin/busybox: apt-get install busybox-static"
    );
    let status = Command::new("python3")
        .arg("-c")
        .arg(MAKE_IMAGE)
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The sidecar's command: it says it is up, lists what it sees at `/app` and of a file only
/// the agent's workspace has, writes the secret, then serves `/srv` (logging each request).
const WEB: &str = "echo sidecar up; ls /app > /srv/app-listing.txt; ls /app/fixture.txt >> /srv/app-listing.txt 2>&1; echo from-the-sidecar > /srv/secret.txt; exec httpd -f -v -p 8080 -h /srv";

/// A suite whose task runs in the image with a sidecar `web` (the same image), whose
/// healthcheck is `health`; the agent fetches from it by name.
fn sidecar_suite(lab: &Lab, health: &str) {
    make_layout(&lab.suite().join("images/bb"));
    lab.write("fixture/fixture.txt", "the agent's own\n");
    lab.write(
        "suite.toml",
        &format!(
            r#"schema_version = 1
id = "pod"

[environment]
image = "oci:images/bb"

[defaults]
wall_timeout_seconds = 30

[[variants]]
id = "agent"
agent = "script"
script = "agents/agent"

[[tasks]]
id = "t"
prompt = "Fetch the secret."

[[tasks.services]]
name = "web"
image = "oci:images/bb"
command = ["sh", "-c", "{WEB}"]
env = {{ ONLY_THE_SIDECAR = "1" }}
healthcheck = {{ command = {health}, timeout_seconds = 3 }}

[tasks.success]
all = [{{ file_contains = {{ path = "answer.txt", pattern = "^from-the-sidecar$" }} }}]
"#
        ),
    );
    lab.write(
        "agents/agent/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = '''wget -q -O answer.txt http://web:8080/secret.txt; wget -q -O listing.txt http://web:8080/app-listing.txt; env > env.txt; ls -R /run/proctor/sidecars > sidecars.txt 2>&1'''\n",
    );
}

#[test]
fn a_sidecar_runs_in_its_own_root_is_reached_by_name_and_its_log_is_kept() {
    let lab = Lab::new("sidecar-ok");
    sidecar_suite(
        &lab,
        r#"["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/secret.txt"]"#,
    );
    let cache = lab.root.join("image-cache");
    let out = lab.run(
        As::Me,
        &["--trials", "1", "--image-cache", cache.to_str().unwrap()],
    );
    let record = lab.record("t.agent.0");
    if !real_isolation(&record, false) {
        return;
    }
    assert_eq!(out.code, 0, "{}\n{record:#}", out.stderr);
    assert_eq!(record["outcome"], "completed", "{record:#}");
    let ws = lab.trial_dir("t.agent.0").join("changes/files");
    // The sidecar's root is its image: /app holds the image's file, not the agent's workspace.
    let listing = std::fs::read_to_string(ws.join("listing.txt")).unwrap();
    assert!(listing.contains("from-image.txt"), "{listing}");
    assert!(listing.contains("No such file"), "{listing}");
    // Its variables are its own; the agent sees no sidecar image.
    let env = std::fs::read_to_string(ws.join("env.txt")).unwrap();
    assert!(!env.contains("ONLY_THE_SIDECAR"), "{env}");
    let seen = std::fs::read_to_string(ws.join("sidecars.txt")).unwrap_or_default();
    assert!(
        !seen.contains("web") && !seen.contains("image") && !seen.contains("bin"),
        "{seen}"
    );
    // The sidecar's log is evidence: what it printed and the requests it served.
    let log = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("services/web.log")).unwrap();
    assert!(log.contains("sidecar up"), "{log}");
    assert!(log.contains("response:200"), "{log}");
    // run.json names the sidecar's image beside the task's.
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("run.json")).unwrap())
            .unwrap();
    let sidecar_image = &meta["extra"]["images"]["t/web"];
    assert_eq!(sidecar_image["reference"], "oci:images/bb", "{meta:#}");
    assert!(
        sidecar_image["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{meta:#}"
    );
    let run_id = lab.run_id();
    let show = lab.proctor(
        As::Me,
        &[
            "show",
            &run_id,
            "t.agent.0",
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert!(
        show.stdout.contains("service logs")
            && show.stdout.contains(&format!(
                "proctor show {run_id} t.agent.0 --service web.log"
            )),
        "{}",
        show.stdout
    );
    let page = lab.proctor(
        As::Me,
        &[
            "show",
            &run_id,
            "t.agent.0",
            "--service",
            "web.log",
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert!(page.stdout.contains("sidecar up"), "{}", page.stdout);
}

#[test]
fn a_healthcheck_that_never_passes_errors_the_trial_not_the_agent() {
    let lab = Lab::new("sidecar-unhealthy");
    sidecar_suite(
        &lab,
        r#"["sh", "-c", "echo probing; test -e /never-there"]"#,
    );
    let cache = lab.root.join("image-cache");
    let out = lab.run(
        As::Me,
        &["--trials", "1", "--image-cache", cache.to_str().unwrap()],
    );
    let record = lab.record("t.agent.0");
    if !real_isolation(&record, false) {
        return;
    }
    assert_eq!(out.code, 3, "{}\n{record:#}", out.stderr);
    assert_eq!(record["outcome"], "errored", "{record:#}");
    let error = record["reason"].as_str().unwrap();
    assert!(error.starts_with("service-guard: "), "{error}");
    assert!(
        error.contains("service web was not healthy")
            && error.contains("did not pass within 3.0s")
            && error.contains("test -e /never-there"),
        "{error}"
    );
    // The agent never started, and the sidecar's log (the healthcheck's output too) is kept.
    assert_eq!(record["end_state"]["agent"]["started"], false, "{record:#}");
    let log = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("services/web.log")).unwrap();
    assert!(
        log.contains("sidecar up") && log.contains("probing"),
        "{log}"
    );
}

/// A registry holding the test's busybox image as `library/busybox:latest`, made the mirror
/// of `docker.io` by the config file it gives.
fn mirror(lab: &Lab) -> (Registry, std::path::PathBuf) {
    let registry = Registry::start();
    let layout = lab.root.join("busybox-layout");
    make_layout(&layout);
    registry.push(&layout, ("library/busybox", "latest"));
    let config = lab.root.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[registries.\"{0}\"]\ninsecure = true\n\n[registries.\"docker.io\"]\nmirrors = [\"{0}\"]\n",
            registry.addr
        ),
    )
    .unwrap();
    (registry, config)
}

/// Writes `files` (path, text) under `dir`.
fn write_all(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// A Harbor task in busybox whose reward is 1 when `check` holds, solved by `solve`, with
/// `env` files laid in its `environment/`. Offline (`allow_internet = false`): the trial's own
/// network with only its loopback, where its sidecars listen.
fn harbor_task(dir: &Path, env: &[(&str, &str)], check: &str, solve: &str) {
    write_all(
        dir,
        &[
            (
                "task.toml",
                "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n[environment]\ndocker_image = \"busybox\"\nallow_internet = false\n",
            ),
            ("instruction.md", "Put the secret the web service holds in answer.txt.\n"),
            (
                "tests/test.sh",
                &format!(
                    "#!/bin/sh\nmkdir -p /logs/verifier\nif {check}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
                ),
            ),
            ("solution/solve.sh", &format!("#!/bin/sh\n{solve}\n")),
        ],
    );
    write_all(&dir.join("environment"), env);
}

#[test]
fn a_two_container_harbor_task_imports_with_its_sidecar_and_passes_its_oracle() {
    let lab = Lab::new("sidecar-harbor");
    let (_registry, config) = mirror(&lab);
    let tasks = lab.root.join("tasks");
    write_compose_tasks(&tasks);
    let suite = lab.root.join("imported");
    let cache = lab.root.join("image-cache");
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            tasks.to_str().unwrap(),
            "--out",
            suite.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("imported 3 task(s): data-yaml, data-yml, fetch-secret"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("1 sidecar container(s) (web) run beside the agent's"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "defines no service (no `services` mapping of containers): it is the task's data"
        ),
        "{}",
        out.stderr
    );
    let toml = assert_the_sidecar_in_the_suite(&suite);
    assert_every_oracle_passes(&lab, &suite, &cache, &config, &toml);
}

/// Task `fetch-secret`, whose compose file runs a web sidecar its oracle fetches from, beside
/// a docker-compose.yml of several services that is only the task's data, and a
/// docker-compose.yaml that is no compose file at all.
fn write_compose_tasks(tasks: &Path) {
    let compose = "services:\n  main:\n    build:\n      context: ${CONTEXT_DIR}\n    depends_on:\n      web:\n        condition: service_healthy\n  web:\n    image: busybox\n    command: [\"sh\", \"-c\", \"echo from-the-sidecar > /srv/secret.txt && exec httpd -f -v -p 8080 -h /srv\"]\n    ports:\n      - \"8080\"\n    healthcheck:\n      test: [\"CMD-SHELL\", \"wget -q -O /dev/null http://127.0.0.1:8080/secret.txt\"]\n      interval: 1s\n      retries: 10\n";
    harbor_task(
        &tasks.join("fetch-secret"),
        &[("docker-compose.yaml", compose)],
        "grep -qx from-the-sidecar /app/answer.txt",
        "mkdir -p /app && cd /app && wget -q -O answer.txt http://web:8080/secret.txt",
    );
    // A docker-compose.yml of several services that is only the task's data, and a
    // docker-compose.yaml that is no compose file at all.
    harbor_task(
        &tasks.join("data-yml"),
        &[(
            "docker-compose.yml",
            "services:\n  api:\n    image: example/api\n  db:\n    image: postgres\n",
        )],
        "test -s /app/answer.txt",
        "mkdir -p /app && echo x > /app/answer.txt",
    );
    harbor_task(
        &tasks.join("data-yaml"),
        &[("docker-compose.yaml", "- just\n- a list\n")],
        "test -s /app/answer.txt",
        "mkdir -p /app && echo x > /app/answer.txt",
    );
}

/// The imported suite (in `suite`) runs the one sidecar, with its healthcheck; gives
/// `suite.toml`'s text.
fn assert_the_sidecar_in_the_suite(suite: &Path) -> String {
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    assert!(
        toml.contains("[[tasks.services]]\nname = \"web\"\nimage = \"busybox\""),
        "{toml}"
    );
    assert_eq!(toml.matches("[[tasks.services]]").count(), 1, "{toml}");
    assert!(
        toml.contains("healthcheck = { command = [\"sh\", \"-c\", \"wget -q -O /dev/null http://127.0.0.1:8080/secret.txt\"], timeout_seconds = 310, interval_seconds = 1 }"),
        "{toml}"
    );

    toml
}

/// `validate --oracle`: every task's oracle completes and its null agent does not.
fn assert_every_oracle_passes(lab: &Lab, suite: &Path, cache: &Path, config: &Path, toml: &str) {
    let v = lab.proctor(
        As::Me,
        &[
            "validate",
            suite.to_str().unwrap(),
            "--oracle",
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let said = format!("{}{}", v.stdout, v.stderr);
    assert_eq!(v.code, 0, "{said}\n{toml}");
    assert!(
        said.contains("3 task(s), 1 variant(s), 1 service(s)"),
        "{said}"
    );
    for task in ["fetch-secret", "data-yml", "data-yaml"] {
        let row: Vec<&str> = said
            .lines()
            .find(|l| l.split_whitespace().next() == Some(task))
            .unwrap_or_else(|| panic!("no row for {task}: {said}"))
            .split_whitespace()
            .collect();
        // TASK, MUTATION, ORACLE, NULL AGENT, VERDICT.
        assert_eq!(row[..3], [task, "-", "completed"], "{said}");
        assert_ne!(row[3], "completed", "{said}");
        assert_eq!(row[4], "ok", "{said}");
    }
}

/// Whether Debian's buildah is installed; if not, the test is skipped (a failure under CI).
fn have_buildah() -> bool {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("buildah").is_file());
    if !found {
        common::skip("buildah is not installed (apt-get install buildah)");
    }
    found
}

#[test]
fn a_harbor_sidecar_built_from_its_dockerfile_starts_from_its_cmd() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("sidecar-built");
    let (_registry, config) = mirror(&lab);
    let tasks = lab.root.join("tasks");
    let compose = "services:\n  main:\n    build:\n      context: ${CONTEXT_DIR}\n  web:\n    build: ./web\n    healthcheck:\n      test: wget -q -O /dev/null http://127.0.0.1:8080/secret.txt\n";
    harbor_task(
        &tasks.join("built-web"),
        &[
            ("docker-compose.yaml", compose),
            (
                "web/Dockerfile",
                "FROM busybox\nRUN mkdir -p /www && echo built-into-the-sidecar > /www/secret.txt\nCMD [\"httpd\", \"-f\", \"-v\", \"-p\", \"8080\", \"-h\", \"/www\"]\n",
            ),
        ],
        "grep -qx built-into-the-sidecar /app/answer.txt",
        "mkdir -p /app && cd /app && wget -q -O answer.txt http://web:8080/secret.txt",
    );
    let suite = lab.root.join("imported");
    let cache = lab.root.join("image-cache");
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            tasks.to_str().unwrap(),
            "--out",
            suite.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("built-web/web: building environment/web/Dockerfile with buildah"),
        "{}",
        out.stderr
    );
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    assert!(
        toml.contains("name = \"web\"\nimage = \"oci-archive:images/built-web--web.tar\""),
        "{toml}"
    );
    assert!(suite.join("images/built-web--web.tar").is_file());
    let v = lab.proctor(
        As::Me,
        &[
            "validate",
            suite.to_str().unwrap(),
            "--oracle",
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let said = format!("{}{}", v.stdout, v.stderr);
    assert_eq!(v.code, 0, "{said}\n{toml}");
    let row: Vec<&str> = said
        .lines()
        .find(|l| l.split_whitespace().next() == Some("built-web"))
        .unwrap_or_else(|| panic!("no row: {said}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["built-web", "-", "completed"], "{said}");
    assert_ne!(row[3], "completed", "{said}");
}

/// An MCP server over streamable HTTP as a busybox CGI script: it answers `initialize`,
/// `tools/list` and a call of `get_secret` (with the secret); any other message (a
/// notification) gets an empty answer.
const MCP_CGI: &str = r#"#!/bin/sh
body=$(head -c "$CONTENT_LENGTH")
id=$(echo "$body" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
case "$body" in
*'"method":"initialize"'*) r='{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bb","version":"1"}}' ;;
*'"method":"tools/list"'*) r='{"tools":[{"name":"get_secret","description":"Returns a secret value.","inputSchema":{"type":"object","properties":{}}}]}' ;;
*'"method":"tools/call"'*) r='{"content":[{"type":"text","text":"cookbook-mcp-secret-42"}],"isError":false}' ;;
*) printf 'Content-Type: application/json\r\n\r\n'; exit 0 ;;
esac
printf 'Content-Type: application/json\r\n\r\n{"jsonrpc":"2.0","id":%s,"result":%s}' "$id" "$r"
"#;

#[test]
fn a_harbor_task_whose_mcp_server_is_its_sidecar_imports_and_its_calls_are_logged() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("sidecar-mcp");
    let (_registry, config) = mirror(&lab);
    let tasks = lab.root.join("tasks");
    write_mcp_task(&tasks.join("mcp-tools"));
    let suite = lab.root.join("imported");
    let cache = lab.root.join("image-cache");
    let common_args = [
        "--image-cache",
        cache.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    let toml = import_mcp_task(&lab, &tasks, &suite, &common_args);
    oracle_reaches_the_sidecar(&lab, &suite, &toml, &common_args);
    a_clients_call_is_logged(&lab, &suite, &toml, &common_args);
}

/// A cookbook-shaped task whose sidecar serves MCP over streamable HTTP (busybox `httpd` with
/// [`MCP_CGI`]); its oracle posts to the server straight, as Harbor's does.
fn write_mcp_task(task: &Path) {
    let compose = "services:\n  main:\n    depends_on:\n      mcp-server:\n        condition: service_healthy\n  mcp-server:\n    build:\n      context: ./mcp-server\n    expose:\n      - \"8000\"\n    healthcheck:\n      test: [\"CMD\", \"wget\", \"-q\", \"-O\", \"/dev/null\", \"http://127.0.0.1:8000/index.html\"]\n      interval: 1s\n      retries: 15\n";
    let post = "wget -q -O - --header 'Content-Type: application/json' --post-data '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"get_secret\",\"arguments\":{}}}' http://mcp-server:8000/cgi-bin/mcp";
    harbor_task(
        task,
        &[
            ("docker-compose.yaml", compose),
            (
                "mcp-server/Dockerfile",
                "FROM busybox\nCOPY mcp /srv/cgi-bin/mcp\nRUN chmod 755 /srv/cgi-bin/mcp && echo up > /srv/index.html\nCMD [\"httpd\", \"-f\", \"-p\", \"8000\", \"-h\", \"/srv\"]\n",
            ),
            ("mcp-server/mcp", MCP_CGI),
        ],
        "grep -q cookbook-mcp-secret-42 /app/secret.txt",
        // As Harbor's oracle does: straight to the server, not through an MCP client.
        &format!("mkdir -p /app && {post} > /app/secret.txt"),
    );
    let toml_path = task.join("task.toml");
    let text = std::fs::read_to_string(&toml_path).unwrap();
    std::fs::write(
        &toml_path,
        format!("{text}\n[[environment.mcp_servers]]\nname = \"mcp-server\"\ntransport = \"streamable-http\"\nurl = \"http://mcp-server:8000/cgi-bin/mcp\"\n"),
    )
    .unwrap();
}

/// Imports the task into `suite`: its server is an `[[mcp_servers]]` entry on the sidecar's
/// loopback, served by the sidecar. Gives the suite's `suite.toml`.
fn import_mcp_task(lab: &Lab, tasks: &Path, suite: &Path, common_args: &[&str]) -> String {
    let mut args = vec![
        "import",
        "harbor",
        tasks.to_str().unwrap(),
        "--out",
        suite.to_str().unwrap(),
    ];
    args.extend(common_args);
    let out = lab.proctor(As::Me, &args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    assert!(
        toml.contains("[[mcp_servers]]\nname = \"mcp-server\"\nurl = \"http://127.0.0.1:8000/cgi-bin/mcp\"\nservice = \"mcp-server\""),
        "{toml}"
    );
    toml
}

/// `validate --oracle` warns that a sidecar-served server is reachable directly, and the
/// oracle completes while the null agent does not.
fn oracle_reaches_the_sidecar(lab: &Lab, suite: &Path, toml: &str, common_args: &[&str]) {
    let mut args = vec!["validate", suite.to_str().unwrap(), "--oracle"];
    args.extend(common_args);
    let v = lab.proctor(As::Me, &args);
    let said = format!("{}{}", v.stdout, v.stderr);
    assert_eq!(v.code, 0, "{said}\n{toml}");
    assert!(
        said.contains("is a sidecar: it shares the trial's network"),
        "{said}"
    );
    let row: Vec<&str> = said
        .lines()
        .find(|l| l.split_whitespace().next() == Some("mcp-tools"))
        .unwrap_or_else(|| panic!("no row: {said}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["mcp-tools", "-", "completed"], "{said}");
    assert_ne!(row[3], "completed", "{said}");
}

/// An agent's MCP client reaches the same server through proctor's shim: the call is logged
/// with the server's answer.
fn a_clients_call_is_logged(lab: &Lab, suite: &Path, toml: &str, common_args: &[&str]) {
    std::fs::write(
        suite.join("suite.toml"),
        format!("{toml}\n[[variants]]\nid = \"client\"\nagent = \"script\"\nscript = \"agents/client\"\n"),
    )
    .unwrap();
    std::fs::create_dir_all(suite.join("agents/client")).unwrap();
    std::fs::write(
        suite.join("agents/client/mcp-tools.toml"),
        "answer = \"done\"\n\n[[steps]]\nmcp = { server = \"mcp-server\", tool = \"get_secret\" }\n",
    )
    .unwrap();
    let store = lab.root.join("store");
    let mut args = vec![
        "run",
        suite.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--variant",
        "client",
        "--trials",
        "1",
    ];
    args.extend(common_args);
    let run = lab.proctor(As::Me, &args);
    assert!(run.code <= 1, "{}", run.stderr);
    let runs: Vec<_> = std::fs::read_dir(store.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let log = std::fs::read_to_string(runs[0].join("trials/mcp-tools.client.0/mcp.jsonl"))
        .unwrap_or_default();
    let call = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["tool"] == "get_secret")
        .unwrap_or_else(|| panic!("no logged call: {log}\n{}", run.stderr));
    assert_eq!(
        call["content"][0]["text"], "cookbook-mcp-secret-42",
        "{call:#}"
    );
    assert_eq!(call["answered"], true);
}
