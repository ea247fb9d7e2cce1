//! The viewer through the real binary: `proctor view` serves a store made by running the bundled
//! chat-ax suite; every route and its JSON twin answer with what the store holds; the pages load
//! in headless Chromium (Debian's `chromium`) without console errors, with their scripts run;
//! `proctor export --html` writes one self-contained page that renders from `file://`.
//! Screenshots of the main pages are left in the test's target folder (`viewer-shots/`).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::lab::{As, Lab};
use common::viewer::{get, serve, Server};

/// GET `path` from the server with the `Host` header `host`: (status, response head).
fn head_for_host(server: &Server, path: &str, host: &str) -> (u16, String) {
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, _) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase())
}

/// A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own name
/// as `Host`: the viewer refuses it before reading the store, and answers its own names; every
/// answer carries the security headers.
#[test]
fn a_request_for_another_host_is_refused_and_every_answer_carries_the_security_headers() {
    let lab = Lab::new("viewer-hosts");
    store(&lab);
    let server = serve(&lab.store());
    let own = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let port = own.rsplit(':').next().unwrap().to_string();
    for path in ["/", "/api/runs"] {
        let (status, _) = head_for_host(&server, path, &format!("rebind.evil.example:{port}"));
        assert_eq!(status, 421, "{path}");
        let (status, _) = head_for_host(&server, path, "127.0.0.1:1");
        assert_eq!(status, 421, "another port is another origin: {path}");
        for host in [
            own.clone(),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ] {
            let (status, head) = head_for_host(&server, path, &host);
            assert_eq!(status, 200, "{host} {path}");
            for h in [
                "content-security-policy: default-src 'none'; script-src 'sha256-",
                "x-frame-options: deny",
                "x-content-type-options: nosniff",
                "referrer-policy: no-referrer",
            ] {
                assert!(head.contains(h), "{h} missing from {path}:\n{head}");
            }
            assert!(head.contains("frame-ancestors 'none'"), "{head}");
        }
    }
    // The page carries its policy too, so that the exported file keeps it.
    let (_, page) = get(&server, "/");
    assert!(
        page.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'"),
        "{page}"
    );
}

/// Runs the bundled example `suite` into the lab's store with one trial per cell and `extra`
/// arguments; its exit code.
fn run_example(lab: &Lab, suite: &str, extra: &[&str]) -> i32 {
    let suite = common::repo_root().join("examples").join(suite);
    let store = lab.store();
    let mut args = vec![
        "run",
        suite.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--trials",
        "1",
    ];
    args.extend_from_slice(extra);
    let out = lab.proctor(As::Me, &args);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    out.code
}

/// A store with one finished run of chat-ax (naive and oracle, one trial each); its run id.
fn store(lab: &Lab) -> String {
    let code = run_example(
        lab,
        "chat-ax",
        &["--variant", "naive", "--variant", "oracle"],
    );
    assert_eq!(code, 1, "naive fails its tasks");
    lab.run_dir()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn every_route_and_its_json_shows_what_the_store_holds() {
    let lab = Lab::new("viewer-routes");
    let run = store(&lab);
    let server = serve(&lab.store());
    assert_runs_list(&server, &run);
    assert_run_page_and_its_json(&server, &run, &lab);
    assert_trial_table_paged_and_filtered(&server, &run);
    assert_trial_page_and_its_json(&server, &run);
    assert_changed_files_diff_and_checks(&server, &lab);
    assert_trial_page_carries_transcript_head(&server, &run);
    assert_comparison_and_gates(&server, &run);
    assert_unlike_or_unknown_arms_refused(&server, &run);
    assert_unknown_pages_are_404(&server, &run);
}

/// The runs list, as a page and as JSON: the run with its counts.
fn assert_runs_list(server: &Server, run: &str) {
    let (status, runs) = get(server, "/");
    assert_eq!(status, 200);
    assert!(runs.contains(run) && runs.contains("chat-ax"), "{runs}");
    let (status, api) = get(server, "/api/runs");
    assert_eq!(status, 200);
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api[0]["run"], run);
    assert_eq!(
        (api[0]["finished"].as_u64(), api[0]["planned"].as_u64()),
        (Some(10), Some(10))
    );
    assert_eq!(api[0]["outcomes"]["completed"], 5);
}

/// The run page (by id and as `latest`): rates with n from the results, the grid, the trials;
/// its JSON, whose report (like `results.report.json`) lists no trials.
fn assert_run_page_and_its_json(server: &Server, run: &str, lab: &Lab) {
    // The run page: rates with n from the results, the grid, the trials.
    for path in [format!("/runs/{run}"), "/runs/latest".to_string()] {
        let (status, page) = get(server, &path);
        assert_eq!(status, 200, "{path}");
        assert!(page.contains("Rates by variant"), "{page}");
        assert!(page.contains("<h2>Cost ledgers</h2>"), "{page}");
        assert!(page.contains("not applicable (no priced model)"), "{page}");
        assert!(page.contains("Every finished trial was graded."), "{page}");
        assert!(
            page.contains("<td>5/5 (100%)</td>"),
            "oracle's success with its n: {page}"
        );
        assert!(
            page.contains("<span class=\"cell bad\">0/1</span>"),
            "{page}"
        );
        assert!(
            page.contains("href=\"/runs/") && page.contains("/trials/draft.naive.0\""),
            "{page}"
        );
    }
    let (_, api) = get(server, &format!("/api/runs/{run}"));
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["trials"].as_array().unwrap().len(), 10);
    assert_eq!(
        (api["total"].as_u64(), api["finished"].as_u64()),
        (Some(10), Some(10))
    );
    assert_eq!(api["report"]["variants"].as_array().unwrap().len(), 2);
    // The report the page reads does not grow with the run: it lists no trials.
    let alone: serde_json::Value =
        serde_json::from_slice(&std::fs::read(lab.run_dir().join("results.report.json")).unwrap())
            .unwrap();
    assert!(alone.get("trials").is_none() && alone.get("variants").is_some());
    assert!(api["report"].get("trials").is_none());
}

/// The trial table is paged and filtered by the server; a bad filter is refused.
fn assert_trial_table_paged_and_filtered(server: &Server, run: &str) {
    // The trial table is paged and filtered by the server.
    let (_, api) = get(server, &format!("/api/runs/{run}?limit=3&offset=3"));
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let ids: Vec<&str> = api["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trial_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["edit.oracle.0", "read.naive.0", "read.oracle.0"]);
    assert_eq!(
        (api["total"].as_u64(), api["offset"].as_u64()),
        (Some(10), Some(3))
    );
    let (_, api) = get(
        server,
        &format!("/api/runs/{run}?outcome=completed&variant=oracle"),
    );
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["total"], 5);
    // An outcome that is none of the eight is refused by name, not shown as an empty page.
    let (status, page) = get(server, &format!("/runs/{run}?outcome=passed"));
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("is not an outcome"), "{page}");
    let (_, page) = get(
        server,
        &format!("/runs/{run}?limit=4&outcome=&task=&variant=naive"),
    );
    assert!(page.contains("showing 1–4 of 5"), "{page}");
    assert!(
        page.contains(
            "<a rel=\"next\" href=\"?variant=naive&amp;limit=4&amp;offset=4\">next 1</a>"
        ),
        "{page}"
    );
    assert!(page.contains("<option selected>naive</option>"), "{page}");
    // Rows are reachable by keyboard (the script moves focus with j/k and the arrow keys).
    assert!(
        page.contains("<table id=\"trials\" aria-labelledby=\"trials-heading\" data-keys>"),
        "{page}"
    );
    assert!(page.contains("<tr tabindex=\"-1\">"), "{page}");
    let (_, page) = get(
        server,
        &format!("/runs/{run}?variant=naive&limit=4&offset=4"),
    );
    assert!(page.contains("showing 5–5 of 5"), "{page}");
    assert!(page.contains("rel=\"prev\""), "{page}");
    // Naive fails every task that oracle passes: every trial differs between the variants.
    let (_, api) = get(server, &format!("/api/runs/{run}?differs=1&task=wait"));
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["total"], 2);
    assert_eq!(get(server, &format!("/api/runs/{run}?offset=x")).0, 400);
    assert_eq!(get(server, &format!("/api/runs/{run}?nonsense=1")).0, 400);
}

/// A trial page: outcome and reason, each assertion with its verdict and evidence, the calls;
/// and its JSON.
fn assert_trial_page_and_its_json(server: &Server, run: &str) {
    let (status, page) = get(server, &format!("/runs/{run}/trials/draft.naive.0"));
    assert_eq!(status, 200);
    assert!(page.contains("a forbidden effect happened"), "{page}");
    assert!(
        page.contains("calls = { verb = &quot;send&quot;, min = 0, max = 0 }"),
        "{page}"
    );
    assert!(
        page.contains("<span class=\"badge bad\">fails</span>"),
        "{page}"
    );
    assert!(page.contains("<code>chat send"), "the calls log: {page}");
    let (status, api) = get(server, &format!("/api/runs/{run}/trials/draft.naive.0"));
    assert_eq!(status, 200);
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["record"]["outcome"], "wrong");
}

/// A trial that changed files (a traps run, now `latest`) shows its diff against the start
/// state, highlighted, and its checks.
fn assert_changed_files_diff_and_checks(server: &Server, lab: &Lab) {
    let code = run_example(
        lab,
        "traps",
        &["--variant", "oracle", "--task", "spec-test"],
    );
    assert_eq!(code, 0);
    let (_, page) = get(server, "/runs/latest/trials/spec-test.oracle.0");
    assert!(page.contains("<pre class=\"diff\">"), "{page}");
    assert!(
        page.contains("<span class=\"add\">"),
        "an added line: {page}"
    );
    // Text is highlighted by language (the Python check's keywords), sizes are for people.
    assert!(page.contains("<span class=\"hl-k\">"), "{page}");
    assert!(
        page.contains(" B</span>)") || page.contains(" KiB</span>)"),
        "{page}"
    );
    assert!(page.contains("check_spec.py"), "the checks: {page}");
}

/// The trial page carries the head of the transcript (the scripted agent's steps), and the
/// script's hook to ask for the rest.
fn assert_trial_page_carries_transcript_head(server: &Server, run: &str) {
    let (_, page) = get(server, &format!("/runs/{run}/trials/draft.naive.0"));
    assert!(page.contains("<code>transcript.jsonl</code>"), "{page}");
    assert!(
        page.contains(&format!(
            "data-transcript=\"/api/runs/{run}/trials/draft.naive.0/transcript?source=agent\""
        )),
        "{page}"
    );
    assert!(page.contains("chat send --to @mei"), "{page}");
}

/// The comparison of two variants, trial by trial, with the underpowered verdicts marked, and
/// the suite's promotion gates as `compare --gate` applies them.
fn assert_comparison_and_gates(server: &Server, run: &str) {
    // The comparison of two variants, trial by trial, with the underpowered verdicts marked.
    let (status, page) = get(server, &format!("/compare?a={run}/naive&b={run}/oracle"));
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Verdicts") && page.contains("Matched differences"),
        "{page}"
    );
    assert!(
        page.contains("<span class=\"badge void\">underpowered</span>"),
        "{page}"
    );
    assert!(
        page.contains("<td>0/5 (0%)</td><td>5/5 (100%)</td>"),
        "success A then B: {page}"
    );
    let (status, api) = get(
        server,
        &format!("/api/compare?a={run}/naive&b={run}/oracle"),
    );
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["comparison"]["matched"], 5);
    assert_eq!(api["comparison"]["overall"]["verdict"], "underpowered");
    // The suite's promotion gates, as `compare --gate` applies them: one trial per cell is
    // below the power threshold, so the sample size gate fails and nothing is promoted.
    assert_eq!(api["gates"]["candidate"], "oracle");
    assert_eq!(api["gates"]["passed"], false);
    assert_eq!(api["gates"]["gates"][0]["name"], "sample_size");
    assert_eq!(api["gates"]["gates"][0]["passed"], false);
    let (_, page) = get(server, &format!("/compare?a={run}/naive&b={run}/oracle"));
    assert!(page.contains("<h2>Promotion gates</h2>"), "{page}");
    assert!(
        page.contains("<tr data-gate=\"sample_size\"><td><code>sample_size</code></td><td><span class=\"badge bad\">failed</span> <span class=\"badge void\">underpowered</span>"),
        "{page}"
    );
    assert!(page.contains("a gate failed: not promoted"), "{page}");
}

/// Arms of two different suites, or of a variant with no trial, cannot be compared; the run
/// page offers the comparison of its variants.
fn assert_unlike_or_unknown_arms_refused(server: &Server, run: &str) {
    // Arms of two different suites (`latest` is the traps run) cannot be compared.
    let (status, body) = get(
        server,
        &format!("/api/compare?a={run}/oracle&b=latest/oracle"),
    );
    assert_eq!(status, 404);
    assert!(body.contains("unlike suites"), "{body}");
    let (status, body) = get(
        server,
        &format!("/api/compare?a={run}/naive&b={run}/nobody"),
    );
    assert_eq!(status, 404);
    assert!(
        body.contains("no finished trial of variant `nobody`"),
        "{body}"
    );
    assert_eq!(get(server, "/compare?a=x").0, 404);
    // The run page offers the comparison of its variants.
    let (_, page) = get(server, &format!("/runs/{run}"));
    assert!(page.contains("<form action=\"/compare\""), "{page}");
}

/// Unknown runs, trials and paths are 404s, as pages and as JSON.
fn assert_unknown_pages_are_404(server: &Server, run: &str) {
    assert_eq!(get(server, "/runs/19990101-000000-0000").0, 404);
    assert_eq!(
        get(server, &format!("/runs/{run}/trials/nope.naive.0")).0,
        404
    );
    let (status, body) = get(server, &format!("/api/runs/{run}/trials/nope.naive.0"));
    assert_eq!(status, 404);
    assert!(body.contains("\"error\""), "{body}");
    assert_eq!(get(server, "/no/such/page").0, 404);
}

#[test]
fn a_trial_shows_its_metrics_services_and_transcript_in_slices() {
    let lab = Lab::new("viewer-trial");
    let run = store(&lab);
    let trial = lab.run_dir().join("trials").join("send.naive.0");
    let service = add_a_users_undo(&trial);
    write_a_50_mb_transcript(&trial);
    let server = serve(&lab.store());
    let path =
        assert_trial_page_shows_metrics_services_and_a_transcript_head(&server, &run, &service);
    assert_transcript_api_serves_any_slice(&server, &run);
    // In a browser, the script shows the window asked for (#tx-agent-N), not the whole file.
    let (dom, errors) = chromium_after(
        &format!(
            "{}{}#tx-agent-300000",
            server.url,
            path.trim_start_matches('/')
        ),
        None,
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        dom.contains("echo line 299999"),
        "line 300,000 is shown: {dom}"
    );
    let rows = dom.matches("class=\"tx-row\"").count();
    assert!(rows > 0 && rows < 100, "{rows} rows in the page");
    assert!(dom.contains("of 400000"), "{dom}");
}

/// The services' events of the trial in `trial`: the user takes back the agent's first event,
/// 12.5 s after it. Gives the service's name.
fn add_a_users_undo(trial: &Path) -> String {
    let file = trial.join("trial.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let services = doc["record"]["end_state"]["services"]
        .as_object_mut()
        .unwrap();
    let (service, end) = services.iter_mut().next().unwrap();
    let service = service.clone();
    let events = end["events"].as_array_mut().unwrap();
    let first = events
        .iter()
        .find(|e| e["actor"] == "agent")
        .cloned()
        .expect("the naive agent's send is logged");
    let at = first["at"].as_f64().unwrap() + 12.5;
    events.push(serde_json::json!({"at": at, "actor": "user", "op": "undo", "id": "e-user", "target": first["id"]}));
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    service
}

/// A 50 MB transcript: 400,000 JSON lines.
fn write_a_50_mb_transcript(trial: &Path) {
    let mut big = String::with_capacity(52 * 1024 * 1024);
    for i in 0..400_000u32 {
        big.push_str(&format!(
            "{{\"type\":\"step\",\"step\":{i},\"run\":\"echo line {i}\",\"stdout\":\"{}\"}}\n",
            "x".repeat(64)
        ));
    }
    std::fs::write(trial.join("transcript.jsonl"), &big).unwrap();
    drop(big);
}

/// The trial page: the interface metrics, each with its definition (the words of
/// docs/metrics.md); the service's state and events as tables, the reversal marked with the
/// undo window; only the transcript's first lines, however long it is. Gives the page's path.
fn assert_trial_page_shows_metrics_services_and_a_transcript_head(
    server: &Server,
    run: &str,
    service: &str,
) -> String {
    let path = format!("/runs/{run}/trials/send.naive.0");
    let (status, page) = get(server, &path);
    assert_eq!(status, 200);
    // The interface metrics, each with its definition (the words of docs/metrics.md).
    assert!(page.contains("<tr id=\"metric-repeats\"><td><code>repeats</code></td><td><b>1</b></td><td>Calls identical to the call right before them"), "{page}");
    assert!(
        page.contains("<code>errors + repeats + undone + denied</code>"),
        "{page}"
    );
    // The service's state and events as tables, the reversal marked with the undo window.
    assert!(
        page.contains(&format!("<table id=\"events-{service}\">")),
        "{page}"
    );
    assert_eq!(page.matches("<tr class=\"reversal\">").count(), 2, "{page}");
    assert!(page.contains("12.5 s after it, inside the "), "{page}");
    assert!(
        !page.contains("<pre class=\"json\">{\n  \"state\""),
        "{page}"
    );
    // The page holds only the transcript's first lines, however long it is.
    assert!(page.len() < 1024 * 1024, "{} bytes", page.len());
    assert!(
        page.contains("The first 200 lines are shown here"),
        "{page}"
    );
    path
}

/// The transcript API serves any slice, the file never read whole; with no model involved
/// there is no model side; an unknown source or trial is a 404.
fn assert_transcript_api_serves_any_slice(server: &Server, run: &str) {
    let api = format!("/api/runs/{run}/trials/send.naive.0/transcript");
    let (status, body) = get(server, &format!("{api}?from=250000&count=3"));
    assert_eq!(status, 200, "{body}");
    let slice: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(slice["total"], 400_000);
    assert_eq!(slice["source"]["file"], "transcript.jsonl");
    assert_eq!(slice["lines"][0]["n"], 250_001);
    assert_eq!(slice["lines"][0]["kind"], "step");
    assert!(
        slice["lines"][2]["text"]
            .as_str()
            .unwrap()
            .starts_with("echo line 250002 · x"),
        "{body}"
    );
    let (_, body) = get(server, &format!("{api}?from=399999&count=1000"));
    let slice: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(slice["lines"].as_array().unwrap().len(), 1);
    // No model was involved: there is no model side; an unknown source or trial is a 404.
    let (status, body) = get(server, &format!("{api}?source=model"));
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no `model` transcript"), "{body}");
    assert_eq!(
        get(server, &format!("/api/runs/{run}/trials/nope/transcript")).0,
        404
    );
    assert_eq!(
        get(server, &format!("/api/runs/{run}/trials/../transcript")).0,
        404
    );
}

#[test]
fn a_real_cli_trial_shows_the_agents_and_the_models_side() {
    // Claude Code (installed by agents/install.sh) against the scripted mock model.
    let lab = Lab::new("viewer-cli");
    let code = run_example(
        &lab,
        "chat-ax",
        &["--variant", "claude-code", "--task", "send"],
    );
    assert_eq!(code, 0, "the scripted model sends the notice once");
    let server = serve(&lab.store());
    let api = "/api/runs/latest/trials/send.claude-code.0/transcript";
    let (status, body) = get(&server, &format!("{api}?count=1000"));
    assert_eq!(status, 200, "{body}");
    let agent: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(agent["source"]["file"], "agent.stdout");
    let lines = agent["lines"].as_array().unwrap();
    assert!(
        lines.iter().any(|l| l["kind"] == "assistant"
            && l["text"]
                .as_str()
                .unwrap()
                .contains("chat send --to launch")),
        "{body}"
    );
    let (status, body) = get(&server, &format!("{api}?source=model&count=1000"));
    assert_eq!(status, 200, "{body}");
    let model: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(model["source"]["file"], "services/__model/wire.jsonl");
    assert!(
        model["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["kind"] == "main POST /v1/messages"
                && l["text"].as_str().unwrap().contains(" → 200, ")),
        "{body}"
    );
    let (_, page) = get(&server, "/runs/latest/trials/send.claude-code.0");
    assert!(
        page.contains("<b>The agent's side</b>: <code>agent.stdout</code>"),
        "{page}"
    );
    assert!(
        page.contains("<b>The model's side</b>: <code>services/__model/wire.jsonl</code>"),
        "{page}"
    );
    // The wire's tokens are drawn: success against tokens has the variant's point, and the
    // spread has a tokens panel with the trial in it.
    let tokens = lab.record("send.claude-code.0")["ledgers"].clone();
    let (_, api) = get(&server, "/api/runs/latest");
    // The index's summary carries the trial's tokens (the run page's table shows them).
    let summary: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(
        summary["trials"][0]["input_tokens"], tokens["wire"]["input"],
        "{api}\n{tokens}"
    );
    assert!(
        summary["trials"][0]["output_tokens"].as_u64().unwrap() > 0,
        "{api}"
    );
    let (status, cost) = get(&server, "/runs/latest/cost.svg");
    assert_eq!(status, 200, "{api}");
    assert!(
        cost.contains("claude-code: success 1/1 (100%), median "),
        "{cost}\n{tokens}\n{api}"
    );
    assert!(cost.contains(" tokens over 1 trial(s)"), "{cost}");
    let (status, spread) = get(&server, "/runs/latest/spread.svg");
    assert_eq!(status, 200, "{spread}");
    assert!(spread.contains("data-quantity=\"tokens\""), "{spread}");
    assert!(spread.contains("send.claude-code.0: "), "{spread}");
}

#[test]
fn the_trial_table_shows_the_limit_a_trial_reached() {
    // A real trial that reaches its output limit (as in tests/limits.rs).
    let lab = Lab::new("viewer-limit");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\nlimits = { output_mb = 1 }\n\n[[variants]]\nid = \"agent\"\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"echo first; yes '{}' | head -c 30000000; echo last\"]\n\n[[tasks]]\nid = \"t\"\nprompt = \"Talk.\"\n\n[tasks.success]\nall = [{ answer_matches = \"last\" }]\n",
    );
    let out = lab.run(As::Me, &[]);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    let server = serve(&lab.store());
    let (_, api) = get(&server, "/api/runs/latest");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["trials"][0]["limit_reached"], "output", "{api:#}");
    let (_, page) = get(&server, "/runs/latest");
    assert!(
        page.contains("<th scope=\"col\">Limit reached</th>"),
        "{page}"
    );
    assert!(page.contains("<td><b>output</b></td></tr>"), "{page}");
}

/// A headless Chromium page driven over the DevTools protocol (key presses, script results);
/// the browser is killed when dropped.
struct Browser {
    child: Child,
    socket: tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    next: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Opens `url` in a new headless Chromium and waits until it has loaded.
    fn open(url: &str, profile: &Path) -> Browser {
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1280,1000",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("these tests need a real browser: apt-get install chromium");
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"; the rest of its
        // stderr is drained, so that the browser never blocks on it.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut port = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(rest) = line.split("ws://127.0.0.1:").nth(1) {
                port = rest.split('/').next().map(str::to_string);
                break;
            }
        }
        std::thread::spawn(move || lines.for_each(drop));
        let port = port.expect("Chromium says where DevTools listens");
        let pages: serde_json::Value = serde_json::from_str(&devtools_list(&port)).unwrap();
        let ws = pages
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["type"] == "page")
            .and_then(|p| p["webSocketDebuggerUrl"].as_str())
            .unwrap()
            .to_string();
        let (socket, _) = tungstenite::connect(ws).unwrap();
        let mut b = Browser {
            child,
            socket,
            next: 1,
        };
        b.wait_for("document.readyState === 'complete'");
        // A headless window has no focus of its own: the page is given it, as a person's is.
        b.call("Page.bringToFront", serde_json::json!({}));
        b.call(
            "Emulation.setFocusEmulationEnabled",
            serde_json::json!({"enabled": true}),
        );
        b
    }

    /// Sends one DevTools command and returns its result.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        let msg = serde_json::json!({"id": id, "method": method, "params": params});
        self.socket
            .send(tungstenite::Message::text(msg.to_string()))
            .unwrap();
        loop {
            let reply = self.socket.read().unwrap();
            let Ok(text) = reply.to_text() else { continue };
            let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expr: &str) -> serde_json::Value {
        let r = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": expr, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits (up to 10 s) until `expr` is true in the page.
    fn wait_for(&mut self, expr: &str) {
        for _ in 0..100 {
            if self.eval(expr) == serde_json::Value::Bool(true) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("never true: {expr}");
    }

    /// Presses and releases a key (`j`, `k`, `ArrowDown`, `Enter`, ...).
    fn press(&mut self, key: &str) {
        let (code, vk, text) = match key {
            "Enter" => ("Enter", 13, "\r"),
            "ArrowDown" => ("ArrowDown", 40, ""),
            "ArrowUp" => ("ArrowUp", 38, ""),
            "Tab" => ("Tab", 9, ""),
            k => (k, k.to_ascii_uppercase().as_bytes()[0] as i64, k),
        };
        let mut down = serde_json::json!({"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk});
        if !text.is_empty() {
            down["text"] = text.into();
        }
        self.call("Input.dispatchKeyEvent", down);
        self.call(
            "Input.dispatchKeyEvent",
            serde_json::json!({"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk}),
        );
    }
}

/// The body of DevTools' `/json/list` (its HTTP server keeps the connection open: the body is
/// read by its length).
fn devtools_list(port: &str) -> String {
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    write!(
        s,
        "GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

#[test]
fn the_trial_rows_are_reached_and_opened_with_the_keyboard() {
    let lab = Lab::new("viewer-keys");
    let run = store(&lab);
    let server = serve(&lab.store());
    let mut b = Browser::open(
        &format!("{}runs/{run}", server.url),
        &lab.root.join("chromium-profile"),
    );
    b.wait_for("document.querySelector('table[data-keys]') !== null");
    let focused = "document.activeElement.tagName + ' ' + (document.activeElement.querySelector('a') || {}).textContent";
    b.press("j");
    assert_eq!(b.eval(focused), "TR draft.naive.0");
    b.press("j");
    b.press("j");
    assert_eq!(b.eval(focused), "TR edit.naive.0");
    b.press("k");
    assert_eq!(b.eval(focused), "TR draft.oracle.0");
    b.press("ArrowDown");
    assert_eq!(b.eval(focused), "TR edit.naive.0");
    // The focused row is drawn with an outline, not only a colour.
    assert_ne!(
        b.eval("getComputedStyle(document.activeElement).outlineStyle"),
        "none"
    );
    b.press("Enter");
    b.wait_for("location.pathname.endsWith('/trials/edit.naive.0')");
    b.wait_for("document.readyState === 'complete'");
    assert_eq!(
        b.eval("document.querySelector('h1').textContent"),
        "Trial edit.naive.0"
    );
}

/// Headless Chromium's DOM of `url` after its scripts ran, and its console errors.
fn chromium(url: &str, screenshot: Option<&Path>) -> (String, Vec<String>) {
    chromium_with(url, screenshot, &[])
}

/// As [`chromium`], but the page's scripts get up to 10 s of virtual time after it loaded, for
/// what they ask the server for.
fn chromium_after(url: &str, screenshot: Option<&Path>) -> (String, Vec<String>) {
    chromium_with(url, screenshot, &["--virtual-time-budget=10000"])
}

fn chromium_with(url: &str, screenshot: Option<&Path>, extra: &[&str]) -> (String, Vec<String>) {
    let exe = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("these tests need a real browser: apt-get install chromium");
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1280,1000",
    ];
    let out = Command::new(exe)
        .args(base)
        .args(extra)
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let errors = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .map(str::to_string)
        .collect();
    if let Some(shot) = screenshot {
        let status = Command::new(exe)
            .args(base)
            .args(extra)
            .arg(format!("--screenshot={}", shot.display()))
            .arg(url)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(
            status.success() && shot.is_file(),
            "no screenshot at {}",
            shot.display()
        );
    }
    (String::from_utf8_lossy(&out.stdout).into_owned(), errors)
}

fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-shots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_pages_load_in_a_real_browser_without_console_errors() {
    let lab = Lab::new("viewer-browser");
    let run = store(&lab);
    let server = serve(&lab.store());
    let (dom, errors) = chromium(&server.url, Some(&shots().join("runs.png")));
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(dom.contains(&run), "{dom}");
    let (dom, errors) = chromium(
        &format!("{}runs/{run}", server.url),
        Some(&shots().join("run.png")),
    );
    assert!(errors.is_empty(), "{errors:#?}");
    // The server counts the rows it shows; the table has the limit reached column.
    assert!(dom.contains("showing 1–10 of 10"), "{dom}");
    assert!(dom.contains("Limit reached"), "{dom}");
    let (dom, errors) = chromium(
        &format!("{}runs/{run}/trials/draft.naive.0", server.url),
        Some(&shots().join("trial.png")),
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(dom.contains("a forbidden effect happened"), "{dom}");
    assert!(dom.contains("chat send"), "{dom}");
    let (dom, errors) = chromium(
        &format!("{}compare?a={run}/naive&b={run}/oracle", server.url),
        Some(&shots().join("compare.png")),
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(dom.contains("underpowered"), "{dom}");
}

#[test]
fn the_export_is_one_self_contained_page_that_renders_from_a_file() {
    let lab = Lab::new("viewer-export");
    let run = store(&lab);
    let (out, file) = lab.export_html(&run, "run.html");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&file).unwrap();
    // Nothing is fetched: no external script, style, image or frame.
    for attr in ["src=", "<link", "@import", "url("] {
        assert!(
            !html.contains(attr),
            "the export fetches something ({attr})"
        );
    }
    // Every trial is in it, under the anchor the trial table links to.
    for t in ["draft.naive.0", "wait.oracle.0"] {
        assert!(html.contains(&format!("href=\"#trial-{t}\"")), "{t}");
        assert!(html.contains(&format!("<section id=\"trial-{t}\"")), "{t}");
    }
    let (dom, errors) = chromium(
        &format!("file://{}", file.display()),
        Some(&shots().join("export.png")),
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(dom.contains("10 of 10 shown") && dom.contains("a forbidden effect happened"));
    // An unknown run is a usage error.
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            "nope",
            "--html",
            file.to_str().unwrap(),
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn the_trial_page_shows_each_calls_stdin_and_its_command_line_quoted() {
    let lab = Lab::new("viewer-stdin");
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", "#!/bin/sh\ncat > /dev/null\necho ok\n");
    lab.one_task(
        "allow = [\"bin/tool\"]\n[tasks.interface]\ncommand = \"tool\"",
        "{ calls = { stdin_matches = \"INSERT\", min = 1 } }",
        &["echo 'INSERT INTO t VALUES (1);' | tool exec 'shop db'"],
        false,
    );
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let server = serve(&lab.store());
    let (status, page) = get(&server, &format!("/runs/{}/trials/t.agent.0", lab.run_id()));
    assert_eq!(status, 200);
    assert!(
        page.contains("<th scope=\"col\">Stdin (head)</th>"),
        "{page}"
    );
    assert!(page.contains("<code>tool exec 'shop db'</code>"), "{page}");
    assert!(
        page.contains("26 bytes<pre>INSERT INTO t VALUES (1);\n</pre>"),
        "{page}"
    );
}

#[test]
fn the_compare_page_says_which_tasks_it_left_out_and_why() {
    let lab = Lab::new("viewer-left-out");
    lab.write("fixture/README.md", "x\n");
    let task = |id: &str| {
        format!("[[tasks]]\nid = \"{id}\"\nprompt = \"Write {id}.txt.\"\n\n[tasks.success]\nall = [{{ file_added = \"{id}.txt\" }}]\n\n")
    };
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[variants]]\nid = \"control\"\nagent = \"script\"\nscript = \"agents/control\"\n\n[[variants]]\nid = \"method\"\nagent = \"script\"\nscript = \"agents/method\"\ntasks = [\"a\"]\n\n{}{}",
            task("a"),
            task("b")
        ),
    );
    for (v, t) in [("control", "a"), ("control", "b"), ("method", "a")] {
        lab.write(
            &format!("agents/{v}/{t}.toml"),
            &format!("answer = \"done\"\n\n[[steps]]\nrun = \"echo x > {t}.txt\"\n"),
        );
    }
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run = lab.run_id();
    let server = serve(&lab.store());
    let (status, page) = get(&server, &format!("/compare?a={run}/control&b={run}/method"));
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<li>task <code>b</code> is left out: only arm A ran it (1 trial(s)); arm B's variant `method` runs only task(s) `a`</li>"),
        "{page}"
    );
}

#[test]
fn a_service_state_too_large_for_the_record_is_paged_and_nothing_else_is_reached() {
    let lab = Lab::new("viewer-service-pages");
    let run = store(&lab);
    let (state, events) = leave_service_files_past_the_bounds(&lab);
    let server = serve(&lab.store());
    assert_trial_page_links_the_pages(&server, &run);
    assert_api_pages_are_the_files(&server, &run, &state, &events);
    assert_nothing_else_is_reached(&server, &run);
}

/// The service's files of trial `send.naive.0` as a trial that hit the bounds leaves them: a
/// state of 3 MB and an event log of 40,000 lines, both left out of the record (as capture does
/// past its bounds); beside them, what the agent could leave to reach past the folder: a link
/// and a FIFO. Gives the state's and the events' text.
fn leave_service_files_past_the_bounds(lab: &Lab) -> (String, String) {
    let trial = lab.run_dir().join("trials").join("send.naive.0");
    let folder = trial.join("services/chat-api");
    let state: String = format!(
        "{{\"sent\": [{}]}}\n",
        (0..60_000)
            .map(|i| format!("{{\"to\": \"dana\", \"n\": {i}, \"text\": \"é ✓ hello\"}}"))
            .collect::<Vec<_>>()
            .join(",\n")
    );
    std::fs::write(folder.join("state.json"), &state).unwrap();
    let events: String = (0..40_000)
        .map(|i| {
            format!("{{\"at\": {i}.0, \"actor\": \"agent\", \"op\": \"send\", \"id\": \"e{i}\"}}\n")
        })
        .collect();
    std::fs::write(folder.join("events.jsonl"), &events).unwrap();
    // What the agent could leave in a service's folder to reach past it: a link and a FIFO.
    std::os::unix::fs::symlink("/etc/passwd", folder.join("passwd")).unwrap();
    std::os::unix::fs::symlink("/etc", folder.join("etc")).unwrap();
    nix::unistd::mkfifo(
        &folder.join("pipe"),
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
    let file = trial.join("trial.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let end = &mut doc["record"]["end_state"]["services"]["chat-api"];
    end["state"] = serde_json::Value::Null;
    end["state_omitted_bytes"] = serde_json::json!(state.len());
    end["state_file"] = serde_json::json!("state.json");
    end["events_omitted"] = serde_json::json!(39_990);
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();

    (state, events)
}

/// The trial page links the state's and the events' pages; the state's first page is its
/// first 64 KiB, escaped, with a link to the next.
fn assert_trial_page_links_the_pages(server: &Server, run: &str) {
    let page_url = format!("/runs/{run}/trials/send.naive.0/services/chat-api/state.json");
    let (status, page) = get(server, &format!("/runs/{run}/trials/send.naive.0"));
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("<a href=\"{page_url}\">read it page by page</a>")),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "<a href=\"/runs/{run}/trials/send.naive.0/services/chat-api/events.jsonl\">every event, page by page</a>"
        )),
        "{page}"
    );
    // The page of the state: its first 64 KiB, escaped, with a link to the next.
    let (status, first) = get(server, &page_url);
    assert_eq!(status, 200, "{first}");
    assert!(
        first.contains("<pre class=\"service-file\">{&quot;sent&quot;: ["),
        "{first}"
    );
    assert!(first.contains("rel=\"next\""), "{first}");
    assert!(first.len() < 200 * 1024, "{} bytes", first.len());
}

/// Through the API, the pages put back together are the files (`state`, `events`), byte for
/// byte, every page ending on a line.
fn assert_api_pages_are_the_files(server: &Server, run: &str, state: &str, events: &str) {
    for (name, whole) in [("state.json", state), ("events.jsonl", events)] {
        let mut offset = 0u64;
        let mut joined = String::new();
        let mut pages = 0;
        loop {
            let (status, body) = get(
                server,
                &format!("/api/runs/{run}/trials/send.naive.0/services/chat-api/{name}?offset={offset}&bytes=100000"),
            );
            assert_eq!(status, 200, "{body}");
            let page: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(page["total_bytes"], whole.len() as u64);
            let text = page["text"].as_str().unwrap();
            assert!(text.len() <= 100_000);
            joined.push_str(text);
            pages += 1;
            match page["next_offset"].as_u64() {
                Some(next) => {
                    assert!(text.ends_with('\n'), "a page ends on a line");
                    offset = next;
                }
                None => break,
            }
        }
        assert_eq!(joined, whole, "{name}");
        assert!(pages > 10, "{name}: {pages} pages");
    }
}

/// Nothing but the trial's own regular files: links, FIFOs and paths out are refused; an
/// unfinished or unknown trial has no pages.
fn assert_nothing_else_is_reached(server: &Server, run: &str) {
    for path in [
        "chat-api/passwd",
        "chat-api/etc/passwd",
        "chat-api/pipe",
        "chat-api/..%2F..%2Ftrial.json",
        "chat-api/%2E%2E/%2E%2E/trial.json",
        "chat-api/nothing.json",
    ] {
        let (status, body) = get(
            server,
            &format!("/api/runs/{run}/trials/send.naive.0/services/{path}"),
        );
        assert_eq!(status, 404, "{path}: {body}");
        assert!(!body.contains("root:"), "{path}: {body}");
        assert!(!body.contains("\"record\""), "{path}: {body}");
    }
    let (status, body) = get(
        server,
        &format!("/api/runs/{run}/trials/send.naive.0/services/chat-api/passwd"),
    );
    assert_eq!(status, 404);
    assert!(body.contains("not a regular file"), "{body}");
    // An unfinished or unknown trial has no pages.
    let (status, _) = get(
        server,
        &format!("/api/runs/{run}/trials/nope.naive.0/services/chat-api/state.json"),
    );
    assert_eq!(status, 404);
}

#[test]
fn the_pictures_draw_one_mark_per_trial_and_the_comparisons_own_discordant_pairs() {
    let lab = Lab::new("viewer-pictures");
    let run = store(&lab);
    let server = serve(&lab.store());
    let trials = trials_and_outcomes(&server, &run);
    assert_run_page_draws_one_mark_per_trial(&server, &run, &trials);
    assert_compare_page_draws_the_discordant_pairs(&server, &run);
    assert_export_holds_the_pictures_inline(&lab, &run, &trials);
}

/// Every trial of `run` with its outcome, as the API lists them (10).
fn trials_and_outcomes(server: &Server, run: &str) -> Vec<(String, String)> {
    let (status, body) = get(server, &format!("/api/runs/{run}?limit=1000"));
    assert_eq!(status, 200, "{body}");
    let api: serde_json::Value = serde_json::from_str(&body).unwrap();
    let trials: Vec<(String, String)> = api["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["trial_id"].as_str().unwrap().to_string(),
                t["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(trials.len(), 10);
    trials
}

/// The run page, rendered by a real browser: one mark per trial, each with its id and outcome
/// as its title and a link to its page; the same grid alone, at its stable URL, an SVG
/// document.
fn assert_run_page_draws_one_mark_per_trial(
    server: &Server,
    run: &str,
    trials: &[(String, String)],
) {
    let (dom, errors) = chromium(
        &format!("{}runs/{run}", server.url),
        Some(&shots().join("run-pictures.png")),
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(
        dom.matches("<a class=\"mark\"").count(),
        trials.len(),
        "{dom}"
    );
    for (id, outcome) in trials {
        let mark =
            format!("<a class=\"mark\" href=\"/runs/{run}/trials/{id}\"><title>{id}: {outcome}");
        assert_eq!(dom.matches(&mark).count(), 1, "{mark}\n{dom}");
    }
    assert!(dom.contains("id=\"spread-picture\""), "{dom}");
    // Scripted agents report no tokens or money: the page says there is no cost picture.
    assert!(!dom.contains("id=\"cost-picture\""), "{dom}");
    assert!(dom.contains("no trial reported tokens or money"), "{dom}");
    // The same grid alone, at its stable URL, an SVG document.
    let (status, grid) = get(server, &format!("/runs/{run}/grid.svg"));
    assert_eq!(status, 200);
    assert!(
        grid.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{grid}"
    );
    assert_eq!(grid.matches("<a class=\"mark\"").count(), trials.len());
    let (status, _) = get(server, &format!("/runs/{run}/nothing.svg"));
    assert_eq!(status, 404);
}

/// The comparison page counts the discordant pairs the comparison counts, and outlines as many
/// cells.
fn assert_compare_page_draws_the_discordant_pairs(server: &Server, run: &str) {
    let (status, body) = get(
        server,
        &format!("/api/compare?a={run}/naive&b={run}/oracle"),
    );
    assert_eq!(status, 200, "{body}");
    let cmp: serde_json::Value = serde_json::from_str(&body).unwrap();
    let d = &cmp["comparison"]["overall"]["discordance"];
    let (a_only, b_only) = (d["a_only"].as_u64().unwrap(), d["b_only"].as_u64().unwrap());
    assert!(
        a_only + b_only > 0,
        "the oracle wins some pairs the naive loses: {d}"
    );
    let pairs = cmp["comparison"]["pairs"].as_array().unwrap();
    assert_eq!(
        pairs.len() as u64,
        cmp["comparison"]["matched"].as_u64().unwrap()
    );
    let (dom, errors) = chromium(
        &format!("{}compare?a={run}/naive&b={run}/oracle", server.url),
        Some(&shots().join("compare-pictures.png")),
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        dom.contains(&format!(
            "{} discordant pair(s): A only {a_only}, B only {b_only}",
            a_only + b_only
        )),
        "{dom}"
    );
    assert_eq!(
        dom.matches("data-discordant=\"b_only\"").count() as u64,
        b_only,
        "{dom}"
    );
    assert_eq!(
        dom.matches("data-discordant=\"a_only\"").count() as u64,
        a_only,
        "{dom}"
    );
    assert_eq!(dom.matches("<g class=\"pair\"").count(), pairs.len());
    let (status, svg) = get(
        server,
        &format!("/compare/pairs.svg?a={run}/naive&b={run}/oracle"),
    );
    assert_eq!(status, 200);
    assert!(svg.starts_with("<svg xmlns="), "{svg}");
}

/// The export holds the same pictures inline, each mark linking to the trial's anchor.
fn assert_export_holds_the_pictures_inline(lab: &Lab, run: &str, trials: &[(String, String)]) {
    let (export, out) = lab.export_html(run, "export.html");
    assert_eq!(export.code, 0, "{export:?}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(html.matches("<a class=\"mark\"").count(), trials.len());
    for (id, _) in trials {
        assert!(
            html.contains(&format!(
                "<a class=\"mark\" href=\"#trial-{id}\"><title>{id}: "
            )),
            "{id}"
        );
    }
    assert!(
        !html.contains("href=\"/runs/"),
        "an export links nowhere outside itself"
    );
}

/// An agent writes markup wherever the record keeps its words: its answer, a file's name, a
/// command line and its output, its transcript. Every page that shows them (the trial's page,
/// the run's page, the export) shows them as text: the markup arrives escaped, never as an
/// element of the page.
#[test]
fn an_agents_markup_arrives_escaped_on_every_page() {
    let lab = Lab::new("viewer-hostile");
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", "#!/bin/sh\necho \"$@\"\n");
    lab.one_task(
        "allow = [\"bin/tool\"]\n[tasks.interface]\ncommand = \"tool\"",
        "{ file_added = \"<script>pwn().txt\" }, { calls = { min = 1 } }",
        &[
            "echo hi > '<script>pwn().txt'",
            "tool '<script>pwn()</script>' '<img src=x onerror=pwn()>'",
            "echo '<script>pwn()</script>'",
        ],
        true,
    );
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert!(
        record["end_state"]["answer"]
            .as_str()
            .unwrap()
            .contains("<script>pwn()</script>"),
        "{record:#}"
    );
    let run = lab.run_id();
    let server = serve(&lab.store());
    let (status, trial) = get(&server, &format!("/runs/{run}/trials/t.agent.0"));
    assert_eq!(status, 200, "{trial}");
    let (status, run_page) = get(&server, &format!("/runs/{run}"));
    assert_eq!(status, 200, "{run_page}");
    let (out, file) = lab.export_html(&run, "run.html");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let export = std::fs::read_to_string(&file).unwrap();
    for (name, page) in [("trial", &trial), ("export", &export)] {
        // The answer, the call's command line and output, the file's name in the diff.
        for shown in [
            "<pre class=\"answer\">&lt;script&gt;pwn()&lt;/script&gt;",
            "&lt;img src=x onerror=pwn()&gt;",
            "&lt;script&gt;pwn().txt",
        ] {
            assert!(page.contains(shown), "{name}: {shown} missing:\n{page}");
        }
    }
    for (name, page) in [("trial", &trial), ("run", &run_page), ("export", &export)] {
        assert!(!page.contains("<script>pwn"), "{name}:\n{page}");
        assert!(!page.contains("<img src=x"), "{name}:\n{page}");
    }
}

/// A `trial.json` whose summary reads but whose record is not a trial record (another tool's
/// file, a hand edit) is an error on its own page, and the export names it in its place and
/// exports the rest, as it does a torn one.
#[test]
fn a_record_that_is_not_a_trial_record_is_named_not_rendered() {
    let lab = Lab::new("viewer-not-a-record");
    lab.write("fixture/README.md", "x\n");
    lab.one_task("", "{ file_added = \"a.txt\" }", &["echo a > a.txt"], false);
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let path = lab.trial_dir("t.agent.0").join("trial.json");
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file["record"]["end_state"] = serde_json::json!("<b>not an end state</b>");
    std::fs::write(&path, file.to_string()).unwrap();
    let run = lab.run_id();
    let server = serve(&lab.store());
    let (status, page) = get(&server, &format!("/runs/{run}/trials/t.agent.0"));
    assert_eq!(status, 500, "{page}");
    assert!(page.contains("<h1>Cannot show this page</h1>"), "{page}");
    // Why, with the record's own words as text.
    assert!(
        page.contains("&quot;&lt;b&gt;not an end state&lt;/b&gt;&quot;, expected struct EndState"),
        "{page}"
    );
    let (out, html) = lab.export_html(&run, "run.html");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "warning: trial t.agent.0 was not exported: its record does not read as a trial record"
        ),
        "{}",
        out.stderr
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("id=\"trial-t.agent.0\"")
            && page.contains("damaged: its record does not read as a trial record"),
        "{page}"
    );
    assert!(!page.contains("<b>not an end state"), "{page}");
}
