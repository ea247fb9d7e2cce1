//! `visual` assertions through the real binary and a real headless Chromium (Debian's
//! `chromium`, which CI installs): what a page shows after the agent stopped decides the trial.

mod common;

use std::io::Cursor;

use common::lab::{As, Lab};

/// A page whose status is written by its load handler, with a list of which one item is hidden.
const STATUS_PAGE: &str = r#"<!doctype html><html><body>
<div id="status">Loading</div>
<ul><li class="item">one</li><li class="item" style="display:none">two</li><li class="item">three</li></ul>
<script>addEventListener("load", () => { document.getElementById("status").textContent = "READY"; });</script>
</body></html>"#;

/// A page without text: a red 40×30 box, the same on every machine whatever its fonts.
const BOX_PAGE: &str = r#"<!doctype html><html><body style="margin:0">
<div id="box" style="width:40px;height:30px;background:rgb(200,0,0)"></div>
</body></html>"#;

/// An agent step that writes `page` as `index.html`.
fn write_page(page: &str) -> String {
    format!("cat > index.html <<'EOF'\n{page}\nEOF")
}

fn outcome_of(lab: &Lab) -> (String, String, serde_json::Value) {
    let r = lab.record("t.agent.0");
    (
        r["outcome"].as_str().unwrap_or_default().to_string(),
        r["reason"].as_str().unwrap_or_default().to_string(),
        r,
    )
}

#[test]
fn text_visible_and_count_hold_on_the_page_the_agent_wrote() {
    let lab = Lab::new("visual-pass");
    lab.one_task(
        "",
        r##"
  { visual = { page = "index.html", selector = "#status", text = "READY" } },
  { visual = { page = "index.html", selector = "#status", matches = "^READ" } },
  { visual = { page = "index.html", selector = "li.item", count = 3 } },
  { visual = { page = "index.html", selector = "#status", visible = true } },
  { not = { visual = { page = "index.html", selector = "li.item:nth-child(2)", visible = true } } },
  { visual = { page = "index.html", selector = ".absent", visible = false } },
"##,
        &[&write_page(STATUS_PAGE)],
        false,
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "completed", "{reason}\n{r:#}");
    // One look per page and selector, shared by the assertions that ask the same.
    let visuals = r["end_state"]["visuals"].as_object().unwrap();
    assert_eq!(visuals.len(), 4, "{visuals:#?}");
    let status = &visuals[r##"page = "index.html", selector = "#status""##];
    assert_eq!(status["count"], 1);
    assert_eq!(status["elements"][0]["text"], "READY");
    assert!(status["url"].as_str().unwrap().ends_with("/index.html"));
    // The evidence of each assertion says what was seen.
    let first = &r["verdict"]["success"]["assertions"][0];
    assert_eq!(first["kind"], "visual");
    assert_eq!(first["evidence"]["text"], "READY");
    // Each look's result is kept in the trial's folder.
    assert!(lab.trial_dir("t.agent.0").join("visual/0.json").is_file());
}

#[test]
fn a_page_that_shows_the_wrong_text_is_wrong() {
    let lab = Lab::new("visual-wrong");
    lab.one_task(
        "",
        r##"{ visual = { page = "index.html", selector = "#status", text = "Done" } }"##,
        &[&write_page(STATUS_PAGE)],
        false,
    );
    lab.run(As::Me, &["--trials", "1"]);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "wrong", "{reason}");
    assert!(
        reason
            .contains(r##"visual = { page = "index.html", selector = "#status", text = "Done" }"##),
        "{reason}"
    );
    assert_eq!(
        r["verdict"]["success"]["assertions"][0]["evidence"]["text"],
        "READY"
    );
    // A page the agent never wrote did not load: the assertion fails, it is not ungradeable.
    let lab = Lab::new("visual-nopage");
    lab.one_task(
        "",
        r##"{ visual = { page = "index.html", selector = "#status", text = "READY" } }"##,
        &["true"],
        false,
    );
    lab.run(As::Me, &["--trials", "1"]);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "wrong", "{reason}");
    let ev = &r["verdict"]["success"]["assertions"][0]["evidence"];
    assert!(
        ev["load_error"]
            .as_str()
            .unwrap()
            .contains("ERR_FILE_NOT_FOUND"),
        "{ev}"
    );
}

/// A `width`×`height` PNG, red like [`BOX_PAGE`]'s box except where `blue` says.
fn reference(width: u32, height: u32, blue: impl Fn(u32, u32) -> bool) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(width, height, |x, y| {
        if blue(x, y) {
            image::Rgba([0, 0, 200, 255])
        } else {
            image::Rgba([200, 0, 0, 255])
        }
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

fn screenshot_lab(name: &str, reference_png: &[u8], max_diff: &str) -> Lab {
    let lab = Lab::new(name);
    lab.one_task(
        "",
        &format!(
            r##"{{ visual = {{ page = "index.html", selector = "#box", screenshot = "holdout/t/ref.png", max_diff = {max_diff} }} }}"##
        ),
        &[&write_page(BOX_PAGE)],
        false,
    );
    let path = lab.suite().join("holdout/t/ref.png");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, reference_png).unwrap();
    lab
}

#[test]
fn a_screenshot_within_max_diff_holds_and_one_over_it_is_wrong() {
    // 3 rows of 30 differ: 10% of the pixels, within 20%.
    let lab = screenshot_lab("visual-within", &reference(40, 30, |_, y| y < 3), "0.2");
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "completed", "{reason}\n{r:#}");
    let ev = &r["verdict"]["success"]["assertions"][0]["evidence"];
    assert_eq!(ev["diff"]["differing"], 120, "{ev}");
    assert_eq!(ev["screenshot"], "visual/0.png");
    // `show` names the kept screenshot and how it differs.
    let run = lab.run_dir();
    let id = run.file_name().unwrap().to_str().unwrap();
    let store = lab.store();
    let show = lab.proctor(
        As::Me,
        &["show", id, "t.agent.0", "--store", store.to_str().unwrap()],
    );
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout
            .contains("differs from holdout/t/ref.png in 120 of 1200 pixels (10.00%)"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("/visual/0.png"), "{}", show.stdout);
    // The screenshot is kept: the box itself.
    let kept = std::fs::read(lab.trial_dir("t.agent.0").join("visual/0.png")).unwrap();
    let img = image::load_from_memory(&kept).unwrap().to_rgba8();
    assert_eq!(img.dimensions(), (40, 30));

    // Half the pixels differ: over 20%.
    let lab = screenshot_lab("visual-over", &reference(40, 30, |x, _| x < 20), "0.2");
    lab.run(As::Me, &["--trials", "1"]);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "wrong", "{reason}");
    let ev = &r["verdict"]["success"]["assertions"][0]["evidence"];
    assert_eq!(ev["diff"]["share"], 0.5, "{ev}");
}

/// A service that serves its state as a page: `POST /` stores the body as the status (in
/// `$PROCTOR_SERVICE_DIR/state.json`), `GET /` shows it.
const STATUS_SERVICE: &str = r#"import http.server, json, os
state = os.path.join(os.environ["PROCTOR_SERVICE_DIR"], "state.json")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status = json.load(open(state))["status"] if os.path.exists(state) else "empty"
        body = f'<!doctype html><p id="status">{status}</p>'.encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        text = self.rfile.read(int(self.headers["content-length"])).decode()
        json.dump({"status": text}, open(state, "w"))
        self.send_response(204)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8181), H).serve_forever()
"#;

#[test]
fn a_url_is_looked_at_on_the_suites_service_started_again_over_its_end_state() {
    let lab = Lab::new("visual-url");
    lab.write("services/status.py", STATUS_SERVICE);
    lab.write(
        "suite.toml",
        r##"schema_version = 1
id = "lab"

[defaults]
wall_timeout_seconds = 30

[[services]]
name = "web"
command = ["python3", "services/status.py"]
ready = { http = "http://127.0.0.1:8181/", timeout_seconds = 10 }
state = "state.json"

[[variants]]
id = "agent"
agent = "script"
script = "agents/agent"

[[tasks]]
id = "t"
prompt = "Publish the status."

[tasks.success]
all = [{ visual = { url = "http://127.0.0.1:8181/", selector = "#status", text = "published" } }]
"##,
    );
    lab.write(
        "agents/agent/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = '''python3 -c 'import urllib.request; urllib.request.urlopen(urllib.request.Request(\"http://127.0.0.1:8181/\", data=b\"published\"))' '''\n",
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "completed", "{reason}\n{r:#}");
    assert_eq!(
        r["verdict"]["success"]["assertions"][0]["evidence"]["text"],
        "published"
    );
}

#[test]
fn without_a_browser_the_trial_is_ungradeable_and_says_why() {
    let lab = Lab::new("visual-nobrowser");
    lab.one_task(
        "",
        r##"{ visual = { page = "index.html", selector = "#status", text = "READY" } }"##,
        &[&write_page(STATUS_PAGE)],
        false,
    );
    let config = lab.root.join("config.toml");
    std::fs::write(&config, "[browser]\npath = \"/nonexistent/chromium\"\n").unwrap();
    let suite = lab.suite();
    let store = lab.store();
    let out = lab.proctor_env(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            "1",
        ],
        &[("PROCTOR_CONFIG", config.to_str().unwrap())],
    );
    assert_ne!(out.code, 2, "{}", out.stderr);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "ungradeable", "{reason}");
    assert!(
        reason.starts_with(
            "the rules cannot tell: no browser: /nonexistent/chromium (set as [browser] path in "
        ),
        "{reason}\n{r:#}"
    );
}

#[test]
fn validate_refuses_a_bad_selector_and_a_missing_reference_image_where_they_are_written() {
    let lab = Lab::new("visual-validate");
    lab.one_task(
        "",
        r##"
  { visual = { page = "index.html", selector = "#status[", text = "READY" } },
  { visual = { page = "index.html", screenshot = "holdout/t/missing.png" } },
"##,
        &["true"],
        false,
    );
    let suite = lab.suite();
    let out = lab.proctor(
        As::Me,
        &["validate", suite.to_str().unwrap(), "--format", "json"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let problems: Vec<(String, u64, u64)> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["message"].as_str().unwrap().to_string(),
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            (
                "the selector `#status[` is not CSS: Unexpected EOL".to_string(),
                19,
                48
            ),
            (
                "the reference image `holdout/t/missing.png` does not exist".to_string(),
                20,
                50
            ),
        ]
    );
}

/// Every look keeps its screenshot, not only one with a `screenshot` test: of the element when
/// the selector matches one, else of the window; `show` names each and the viewer shows each.
/// A `screenshot` test on an element that is not there is not compared with the window's.
#[test]
fn every_look_keeps_its_screenshot_shown_by_show_and_the_viewer() {
    let lab = Lab::new("visual-every-look");
    lab.one_task(
        "",
        r##"
  { visual = { page = "index.html", selector = "#box", visible = true } },
  { visual = { page = "index.html", selector = ".absent", visible = false } },
"##,
        &[&write_page(BOX_PAGE)],
        false,
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "completed", "{reason}\n{r:#}");
    let visuals = r["end_state"]["visuals"].as_object().unwrap();
    let shot_of = |look: &str| {
        let rel = visuals[look]["screenshot"]
            .as_str()
            .unwrap_or_else(|| panic!("{look}: no screenshot kept\n{visuals:#?}"));
        let png = std::fs::read(lab.trial_dir("t.agent.0").join(rel)).unwrap();
        (
            rel.to_string(),
            image::load_from_memory(&png)
                .unwrap()
                .to_rgba8()
                .dimensions(),
        )
    };
    let (box_file, box_size) = shot_of(r##"page = "index.html", selector = "#box""##);
    assert_eq!(box_size, (40, 30), "the element's own box");
    let (absent_file, absent_size) = shot_of(r##"page = "index.html", selector = ".absent""##);
    assert_eq!(absent_size, (1280, 800), "no element: the window");
    let store = lab.store();
    let id = lab.run_id();
    let show = lab.proctor(
        As::Me,
        &["show", &id, "t.agent.0", "--store", store.to_str().unwrap()],
    );
    assert_eq!(show.code, 0, "{}", show.stderr);
    for f in [&box_file, &absent_file] {
        assert!(
            show.stdout.contains(&format!("/{f}")),
            "{f}\n{}",
            show.stdout
        );
    }
    let html = store.join("run.html");
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            &id,
            "--html",
            html.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("<img class=\"screenshot\"").count(),
        2,
        "each look's screenshot is shown"
    );
    assert!(page.contains("src=\"data:image/png;base64,iVBORw0KGgo"));

    // A screenshot test of an element the page does not have fails with no diff: the window's
    // screenshot is kept as evidence, never compared with the element's reference.
    let lab = Lab::new("visual-missing-element");
    lab.one_task(
        "",
        r##"{ visual = { page = "index.html", selector = "#nothing", screenshot = "holdout/t/ref.png" } }"##,
        &[&write_page(BOX_PAGE)],
        false,
    );
    let path = lab.suite().join("holdout/t/ref.png");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, reference(1280, 800, |_, _| false)).unwrap();
    lab.run(As::Me, &["--trials", "1"]);
    let (outcome, reason, r) = outcome_of(&lab);
    assert_eq!(outcome, "wrong", "{reason}");
    let ev = &r["verdict"]["success"]["assertions"][0]["evidence"];
    assert!(ev["diff"].is_null(), "{ev}");
    assert_eq!(ev["screenshot"], "visual/0.png", "{ev}");
}
