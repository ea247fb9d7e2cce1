//! The model gateway end to end through the real binary: a `command` agent written like an SDK
//! client (plain HTTP from Python) reaches its model from a trial with `network = "none"`
//! through the trial's relay and the run's gateway, to a real upstream on the host's loopback
//! (`proctor mock-model --require-key-env`, which refuses any request without the real key).
//! Also: the real key is nowhere the agent can read nor in the store; upstream faults and limits
//! become typed records; a missing key stops the run before any trial.

mod common;

use std::path::Path;
use std::process::Command;

use common::lab::{As, Lab};
use common::upstream::{files_containing, Upstream, REAL_KEY};
use serde_json::Value;

/// An agent like one written with an SDK: it reads the endpoint, key and model from the
/// environment, asks the model (offering one tool, so the upstream serves its scripted turns)
/// up to `ASK` times or until refused, writes the answers to `out.txt`, and leaves behind what it
/// could read of its own and every process's environment in `seen.txt`.
const AGENT: &str = r#"
import glob, json, os, sys, urllib.error, urllib.request
if sys.argv[1:] != [os.environ["PROCTOR_MODEL"]]:
    sys.exit("{model} did not expand to the model id: %r" % sys.argv[1:])
seen = []
for p in glob.glob("/proc/[0-9]*/environ"):
    try:
        seen.append(open(p, "rb").read().decode("latin-1"))
    except OSError:
        pass  # the agent init's is closed to it, whatever its mode says
seen.append(json.dumps(dict(os.environ)))
open("seen.txt", "w").write("\n".join(seen))
base, key, model = os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"], os.environ["PROCTOR_MODEL"]
answers = []
for _ in range(int(os.environ.get("ASK", "1"))):
    body = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": os.environ["PROCTOR_PROMPT"]}],
            "tools": [{"name": "noop", "description": "does nothing", "input_schema": {"type": "object"}}]}
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(), method="POST",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"})
    try:
        reply = json.load(urllib.request.urlopen(req, timeout=20))
    except urllib.error.HTTPError as e:
        answers.append("refused %d %s" % (e.code, e.read().decode()))
        break
    answers.append("".join(b.get("text", "") for b in reply["content"]))
open("out.txt", "w").write("\n".join(answers) + "\n")
print(answers[0])
"#;

/// Two turns of 11 input and 7 output tokens each.
const TURNS: &str = "[[turns]]\ntext = \"hello from the model\"\nusage = { input = 11, output = 7 }\n\n[[turns]]\ntext = \"hello again\"\nusage = { input = 11, output = 7 }\n";

/// A lab with the SDK-style agent as variant `sdk` on `anthropic/claude-test`, `task_extra` in
/// its task, and a configuration pointing the `anthropic` provider at `upstream`.
fn lab(name: &str, upstream: Option<&Upstream>, task_extra: &str, config_extra: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write("fixture/README.md", "x\n");
    lab.write("agents/agent.py", AGENT);
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"gw\"\n\n[defaults]\nnetwork = \"none\"\nwall_timeout_seconds = 60\n\n[[variants]]\nid = \"sdk\"\nagent = \"command\"\nmodel = \"anthropic/claude-test\"\ncommand = [\"python3\", \"agent.py\", \"{{model}}\"]\nfiles = {{ \"agent.py\" = \"agents/agent.py\" }}\n\n[[tasks]]\nid = \"hello\"\nprompt = \"Say hello.\"\n{task_extra}\n[tasks.success]\nall = [{{ file_contains = {{ path = \"out.txt\", pattern = \"hello\" }} }}]\n"
        ),
    );
    let url = upstream.map_or("http://127.0.0.1:9".to_string(), |u| u.url.clone());
    std::fs::write(
        lab.root.join("config.toml"),
        format!("[providers.anthropic]\nbase_url = \"{url}\"\nkey_env = \"UPSTREAM_KEY\"\n\n[retries]\nattempts = 3\nbase_delay_ms = 5\nmax_delay_ms = 20\n{config_extra}"),
    )
    .unwrap();
    lab
}

/// `proctor run` of the lab with its configuration and `env`.
fn run(lab: &Lab, env: &[(&str, &str)], extra: &[&str]) -> common::lab::RunOut {
    let suite = lab.suite();
    let store = lab.store();
    let config = lab.root.join("config.toml");
    let mut args = vec![
        "run",
        suite.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--trials",
        "1",
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    lab.proctor_env(As::Me, &args, env)
}

#[test]
fn a_command_agent_reaches_its_model_with_network_none_and_never_sees_the_key() {
    let up = Upstream::start(TURNS, &[]);
    let lab = lab("gw-sdk", Some(&up), "", "");
    let out = run(&lab, &[("UPSTREAM_KEY", REAL_KEY)], &[]);
    let id = "hello.sdk.0";
    let record = lab.record(id);
    assert_eq!(out.code, 0, "{}\n{record:#}", out.stderr);
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert_eq!(record["settings"]["network"], "none");
    // The upstream saw the real key on every request (it refuses any other), and one request.
    let lines = up.lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines.iter().all(|l| l["key"] == "ok"), "{lines:#?}");
    // The wire ledger is the usage the upstream sent.
    let w = &record["ledgers"]["wire"];
    assert_eq!(w["source"], "wire");
    assert_eq!(
        (w["input"].as_u64(), w["output"].as_u64()),
        (Some(11), Some(7)),
        "{w}"
    );
    assert_eq!(w["requests"], 1);
    assert!(
        record["ledgers"]["cost_usd"].is_null(),
        "no price: incomplete, not zero"
    );
    // The model evidence: one line, and the bodies kept compressed.
    let dir = lab.trial_dir(id);
    let model = std::fs::read_to_string(dir.join("model.jsonl")).unwrap();
    assert_eq!(model.lines().count(), 1, "{model}");
    let line: Value = serde_json::from_str(model.lines().next().unwrap()).unwrap();
    assert_eq!(
        line["ending"], "complete",
        "the agent read the whole answer: {line}"
    );
    assert_eq!(line["status"], 200);
    assert!(dir.join("model/0001.request.json.gz").is_file());
    // The viewer reads the line as the gateway's own record: a request, with its figures.
    let server = common::viewer::serve(&lab.store());
    let (status, body) = common::viewer::get(
        &server,
        &format!("/api/runs/latest/trials/{id}/transcript?source=model&count=10"),
    );
    assert_eq!(status, 200, "{body}");
    let shown: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["source"]["file"], "model.jsonl", "{body}");
    let first = &shown["lines"][0];
    assert_eq!(first["kind"], "request", "{body}");
    let text = first["text"].as_str().unwrap();
    assert!(
        text.starts_with("#1 anthropic-messages ")
            && text.contains(" → 200, ")
            && text.contains(", 11 in / 7 out tokens")
            && text.contains(", ending complete"),
        "{text}"
    );
    // The agent ran, and read every environment it could: the real key is in none of them.
    let seen = dir.join("changes/files/seen.txt");
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert!(seen.contains("PROCTOR_MODEL_API_KEY"), "{seen}");
    assert!(
        !seen.contains(REAL_KEY),
        "the agent could read the real key"
    );
    // Nothing in the store holds the real key.
    let leaks = files_containing(&lab.store(), REAL_KEY);
    assert!(leaks.is_empty(), "the real key is in {leaks:?}");
}

#[test]
fn an_upstream_that_keeps_answering_429_makes_the_trial_errored_rate_limit() {
    let up = Upstream::start(TURNS, &["--fault", "anthropic=rate_limit"]);
    let lab = lab("gw-429", Some(&up), "", "");
    let out = run(&lab, &[("UPSTREAM_KEY", REAL_KEY)], &[]);
    let record = lab.record("hello.sdk.0");
    assert_eq!(out.code, 3, "errored is unfinished: {}", out.stderr);
    assert_eq!(record["outcome"], "errored", "{record:#}");
    let reason = record["reason"].as_str().unwrap();
    assert!(reason.starts_with("rate-limit:"), "{reason}");
    // The configured 3 attempts reached the upstream, then the agent got the error.
    assert_eq!(up.lines().len(), 3, "{:#?}", up.lines());
}

#[test]
fn a_rejected_key_makes_the_trial_errored_credential_loss() {
    let up = Upstream::start(TURNS, &[]);
    let lab = lab("gw-401", Some(&up), "", "");
    let out = run(&lab, &[("UPSTREAM_KEY", "sk-not-the-right-one")], &[]);
    let record = lab.record("hello.sdk.0");
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(record["outcome"], "errored", "{record:#}");
    let reason = record["reason"].as_str().unwrap();
    assert!(reason.starts_with("credential-loss:"), "{reason}");
    assert!(up.lines().iter().all(|l| l["kind"] == "auth_rejected"));
}

#[test]
fn a_token_limit_refuses_further_requests_and_is_recorded() {
    let up = Upstream::start(TURNS, &[]);
    // 18 tokens per request: the first reaches the limit, the second is refused.
    let lab = lab("gw-limit", Some(&up), "limits = { tokens = 10 }\n", "");
    let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &toml.replace(
            "agent = \"command\"\n",
            "agent = \"command\"\nenv = { ASK = \"3\" }\n",
        ),
    );
    let out = run(&lab, &[("UPSTREAM_KEY", REAL_KEY)], &[]);
    let id = "hello.sdk.0";
    let record = lab.record(id);
    assert_eq!(record["limit_reached"], "tokens", "{record:#}");
    // Graded from its end state as usual: the first answer was written.
    assert_eq!(
        record["outcome"], "completed",
        "{}: {}",
        record["reason"], out.stderr
    );
    assert_eq!(
        up.lines().len(),
        1,
        "the refused request never went upstream"
    );
    let answers = std::fs::read_to_string(lab.trial_dir(id).join("changes/files/out.txt")).unwrap();
    assert!(answers.contains("refused"), "{answers}");
    let show = lab.proctor(
        As::Me,
        &[
            "show",
            "latest",
            id,
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert!(
        show.stdout.contains("limit reached: tokens"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_missing_key_stops_the_run_before_any_trial_naming_the_variable() {
    let lab = lab("gw-nokey", None, "", "");
    let out = run(&lab, &[], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("UPSTREAM_KEY"), "{}", out.stderr);
    assert!(
        !lab.store().join("runs").exists()
            || std::fs::read_dir(lab.store().join("runs"))
                .unwrap()
                .next()
                .is_none(),
        "no run was created"
    );
}

#[test]
fn a_cli_whose_api_the_provider_does_not_serve_is_refused_naming_both() {
    let lab = lab("gw-api", None, "", "");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"gw\"\n\n[[variants]]\nid = \"cc\"\nagent = \"claude-code\"\nmodel = \"openai/gpt-5\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n[tasks.success]\nall = [{ file_contains = { path = \"x\", pattern = \"x\" } }]\n",
    );
    let out = run(&lab, &[("OPENAI_API_KEY", "k")], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("claude-code speaks anthropic-messages"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("provider `openai` serves openai-responses"),
        "{}",
        out.stderr
    );
}

#[test]
fn several_models_make_a_matrix_with_the_model_in_each_variant_id() {
    let lab = lab("gw-matrix", None, "", "");
    let out = run(
        &lab,
        &[],
        &[
            "--model",
            "anthropic/claude-a",
            "--model",
            "openai/gpt-5.1",
            "--dry-run",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plan: Value = serde_json::from_str(&out.stdout).unwrap();
    let variants: Vec<&str> = plan["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["variant"].as_str().unwrap())
        .collect();
    assert_eq!(
        variants,
        ["sdk--anthropic-claude-a", "sdk--openai-gpt-5-1"],
        "{plan:#}"
    );
}

/// The real agents' folder (`agents/install.sh` installs the CLIs there).
fn agents_bin(cli: &str) -> std::path::PathBuf {
    std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        })
        .join("bin")
        .join(cli)
}

/// Runs the bundled chat-ax suite's `read` task with a real CLI on `model` through the gateway
/// (no `model_script`), against the scripted turns of `agents/model/read.toml` served by a real
/// upstream that requires the real key.
fn real_cli_through_the_gateway(agent: &str, cli: &str, model: &str) {
    real_cli_on(
        agent,
        cli,
        model,
        "agents/model/read.toml",
        (550, 100, 1500),
    );
}

/// [`real_cli_through_the_gateway`] with the model script `script` of chat-ax and the usage
/// (input, output, cache read) it declares.
fn real_cli_on(agent: &str, cli: &str, model: &str, script: &str, usage: (u64, u64, u64)) {
    assert!(
        agents_bin(cli).exists(),
        "{cli} is not installed: run agents/install.sh (these tests drive the real CLIs)"
    );
    let example = common::repo_root().join("examples/chat-ax");
    let up = Upstream::start(&std::fs::read_to_string(example.join(script)).unwrap(), &[]);
    let lab = Lab::new(&format!("gw-{agent}"));
    let copied = Command::new("cp")
        .arg("-rT")
        .arg(&example)
        .arg(lab.suite())
        .status()
        .unwrap();
    assert!(copied.success());
    let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &format!("{toml}\n[[variants]]\nid = \"gw\"\nagent = \"{agent}\"\nmodel = \"{model}\"\n"),
    );
    std::fs::write(
        lab.root.join("config.toml"),
        format!(
            "[providers.anthropic]\nbase_url = \"{u}\"\nkey_env = \"UPSTREAM_KEY\"\n\n[providers.openai]\nbase_url = \"{u}/v1\"\nkey_env = \"UPSTREAM_KEY\"\n\n[providers.google]\nbase_url = \"{u}\"\nkey_env = \"UPSTREAM_KEY\"\n",
            u = up.url
        ),
    )
    .unwrap();
    let out = run(
        &lab,
        &[("UPSTREAM_KEY", REAL_KEY)],
        &["--task", "read", "--variant", "gw"],
    );
    let id = "read.gw.0";
    let record = lab.record(id);
    assert_eq!(out.code, 0, "{agent}: {}\n{record:#}", out.stderr);
    assert_eq!(
        record["outcome"], "completed",
        "{agent}: {}",
        record["reason"]
    );
    assert_eq!(
        record["settings"]["network"], "none",
        "chat-ax runs with no network"
    );
    let lines = up.lines();
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|l| l["key"] == "ok"),
        "{agent}: a request reached the upstream without the real key: {lines:#?}"
    );
    // The wire ledger is what the upstream reported: the script's declared usage.
    let w = &record["ledgers"]["wire"];
    assert_eq!(
        (
            w["input"].as_u64(),
            w["output"].as_u64(),
            w["cache_read"].as_u64()
        ),
        (Some(usage.0), Some(usage.1), Some(usage.2)),
        "{agent}: {w}"
    );
    let leaks = files_containing(&lab.store(), REAL_KEY);
    assert!(leaks.is_empty(), "{agent}: the real key is in {leaks:?}");
}

#[test]
fn claude_code_runs_on_a_model_through_the_gateway() {
    real_cli_through_the_gateway("claude-code", "claude", "anthropic/claude-sonnet-4-5");
}

#[test]
fn codex_runs_on_a_model_through_the_gateway() {
    real_cli_through_the_gateway("codex", "codex", "openai/mock-model");
}

#[test]
fn gemini_runs_on_a_model_through_the_gateway() {
    real_cli_through_the_gateway("gemini", "gemini", "google/gemini-2.5-flash");
}

#[test]
fn copilot_runs_on_a_model_through_the_gateway() {
    real_cli_through_the_gateway("copilot", "copilot", "anthropic/claude-sonnet-4-5");
}

#[test]
fn opencode_runs_on_a_model_through_the_gateway() {
    real_cli_through_the_gateway("opencode", "opencode", "anthropic/claude-sonnet-4-5");
}

#[test]
fn aider_runs_on_a_model_through_the_gateway() {
    real_cli_on(
        "aider",
        "aider",
        "openai/gpt-4o",
        "agents/model-aider/read.toml",
        (400, 120, 0),
    );
}

#[test]
fn validate_warns_of_a_missing_key_and_refuses_an_api_mismatch() {
    let lab = lab("gw-validate", None, "", "");
    let config = lab.root.join("config.toml");
    let suite = lab.suite();
    let env = [("PROCTOR_CONFIG", config.to_str().unwrap())];
    let out = lab.proctor_env(As::Me, &["validate", suite.to_str().unwrap()], &env);
    assert_eq!(out.code, 0, "a missing key is a warning: {}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: no API key in the environment: set UPSTREAM_KEY"),
        "{}",
        out.stderr
    );
    let with_key = [env[0], ("UPSTREAM_KEY", "k")];
    let out = lab.proctor_env(As::Me, &["validate", suite.to_str().unwrap()], &with_key);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &toml.replace("agent = \"command\"\n", "agent = \"codex\"\n"),
    );
    let out = lab.proctor_env(As::Me, &["validate", suite.to_str().unwrap()], &with_key);
    assert_eq!(out.code, 2, "{}", out.stderr);
    // The message names both. The diagnostic wraps its lines where the path's length puts them
    // (even inside `anthropic-messages`), so the words are compared without any whitespace or
    // the gutter.
    let flat: String = out
        .stderr
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '│')
        .collect();
    assert!(
        flat.contains("codexspeaksopenai-responses,butprovider`anthropic`servesanthropic-messages"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("suite.toml:"),
        "the problem points into the suite: {}",
        out.stderr
    );
}

#[test]
fn route_faults_are_injected_on_real_traffic_without_reaching_the_provider() {
    for (fault, kind) in [
        ("credential_loss", "credential-loss"),
        ("rate_limit", "rate-limit"),
        ("timeout", "timeout"),
    ] {
        let up = Upstream::start(TURNS, &[]);
        let extra = format!("route_faults = {{ anthropic = \"{fault}\" }}\n");
        let lab = lab(&format!("gw-fault-{fault}"), Some(&up), &extra, "");
        let out = run(&lab, &[("UPSTREAM_KEY", REAL_KEY)], &[]);
        let record = lab.record("hello.sdk.0");
        assert_eq!(out.code, 3, "{fault}: {}", out.stderr);
        assert_eq!(record["outcome"], "errored", "{fault}: {record:#}");
        let reason = record["reason"].as_str().unwrap();
        assert!(reason.starts_with(&format!("{kind}:")), "{fault}: {reason}");
        assert!(up.lines().is_empty(), "{fault}: the provider was contacted");
        let model =
            std::fs::read_to_string(lab.trial_dir("hello.sdk.0").join("model.jsonl")).unwrap();
        assert!(
            model.contains(&format!("\"fault\":\"{kind}\"")),
            "{fault}: {model}"
        );
    }
}

/// A throwaway CA (PEM) and a server certificate chain and key for 127.0.0.1 signed by it,
/// written into `dir`: `ca.pem`, `server.pem`, `server.key`.
fn test_pki(dir: &Path) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "proctor test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(
        dir.join("server.pem"),
        format!("{}{}", leaf.pem(), ca.pem()),
    )
    .unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

/// Adds `ca_file = CA` to the lab configuration's `anthropic` provider.
fn trust(lab: &Lab, ca: &Path) {
    let config = lab.root.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "key_env = \"UPSTREAM_KEY\"\n",
        &format!(
            "key_env = \"UPSTREAM_KEY\"\nca_file = \"{}\"\n",
            ca.display()
        ),
    );
    std::fs::write(&config, text).unwrap();
}

#[test]
fn the_gateway_reaches_an_https_upstream_trusting_the_providers_ca_file() {
    let pki = tempfile::tempdir().unwrap();
    test_pki(pki.path());
    let cert = pki.path().join("server.pem");
    let key = pki.path().join("server.key");
    let up = Upstream::start(
        TURNS,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(up.url.starts_with("https://127.0.0.1:"), "{}", up.url);
    let ca = pki.path().join("ca.pem");
    let lab = lab("gw-tls", Some(&up), "", "");
    trust(&lab, &ca);
    let out = run(&lab, &[("UPSTREAM_KEY", REAL_KEY)], &[]);
    let record = lab.record("hello.sdk.0");
    assert_eq!(out.code, 0, "{}\n{record:#}", out.stderr);
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let lines = up.lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["key"], "ok");
    // Without the CA the provider is not trusted: the request fails as a provider error.
    let lab = self::lab("gw-tls-untrusted", Some(&up), "", "");
    let out = run(&lab, &[("UPSTREAM_KEY", REAL_KEY)], &[]);
    let record = lab.record("hello.sdk.0");
    assert_eq!(out.code, 3, "{}", out.stderr);
    let reason = record["reason"].as_str().unwrap();
    assert!(reason.starts_with("provider-error:"), "{reason}");
    assert_eq!(lines.len(), up.lines().len(), "no request got through");
}

/// An agent that sends 16 requests of 60 MB each at once (a long user message, like a huge
/// pasted file) and writes each one's status to `statuses.txt`.
const FLOOD_AGENT: &str = r#"
import json, os, threading, urllib.error, urllib.request
base, key, model = os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"], os.environ["PROCTOR_MODEL"]
n, mb = 16, 60
body = json.dumps({"model": model, "max_tokens": 8,
    "messages": [{"role": "user", "content": "x" * (mb * 1000 * 1000 - 200)}]}).encode()
statuses = [None] * n
def ask(i):
    req = urllib.request.Request(base + "/v1/messages", data=body, method="POST",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=240) as r:
            r.read()
            statuses[i] = r.status
    except urllib.error.HTTPError as e:
        statuses[i] = e.code
    except Exception as e:
        statuses[i] = repr(e)
threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
for t in threads: t.start()
for t in threads: t.join()
open("statuses.txt", "w").write(" ".join(str(s) for s in statuses) + "\n")
"#;

#[test]
fn sixteen_concurrent_60_mb_requests_keep_proctor_under_300_mib() {
    let up = Upstream::start_unlogged(TURNS);
    let lab = lab("gw-flood", Some(&up), "", "");
    lab.write("agents/agent.py", FLOOD_AGENT);
    let toml = lab.suite().join("suite.toml");
    std::fs::write(
        &toml,
        std::fs::read_to_string(&toml)
            .unwrap()
            .replace("wall_timeout_seconds = 60", "wall_timeout_seconds = 600")
            .replace("\"out.txt\"", "\"statuses.txt\"")
            .replace("pattern = \"hello\"", "pattern = \"200\""),
    )
    .unwrap();
    let suite = lab.suite();
    let store = lab.store();
    let config = lab.root.join("config.toml");
    let args = [
        "run",
        suite.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--trials",
        "1",
    ];
    let env = [("UPSTREAM_KEY", REAL_KEY)];
    let (out, peak_kib) = lab.proctor_peak_rss(As::Me, &args, &env);
    let id = "hello.sdk.0";
    let record = lab.record(id);
    let statuses =
        std::fs::read_to_string(lab.trial_dir(id).join("changes/files/statuses.txt")).unwrap();
    // Every request was served, none refused: the budget made them wait their turn.
    assert_eq!(
        statuses.trim(),
        ["200"; 16].join(" "),
        "{}\n{record:#}",
        out.stderr
    );
    assert_eq!(record["ledgers"]["wire"]["requests"], 16, "{record:#}");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let peak_mib = peak_kib / 1024;
    eprintln!("peak RSS of proctor run: {peak_mib} MiB for 16 x 60 MB requests");
    assert!(
        peak_mib < 300,
        "proctor reached {peak_mib} MiB under 16 concurrent 60 MB requests"
    );
}
