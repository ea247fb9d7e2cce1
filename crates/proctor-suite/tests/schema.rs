//! The JSON Schema of `suite.toml` (`proctor schema suite`): it accepts the real suites, rejects
//! what the parser rejects (unknown keys, misspelled assertion kinds), and agrees with the parser
//! on the hand-written forms, the enum spellings and the defaults.

use std::path::{Path, PathBuf};

use proctor_suite::assertion::ASSERTION_KINDS;
use proctor_suite::model::{self, SuiteFile};
use proctor_suite::Suite;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    model::json_schema()
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&schema()).expect("the suite schema compiles")
}

/// `suite.toml` text as the JSON document an editor validates.
fn as_json(toml_text: &str) -> Value {
    let value: toml::Value = toml::from_str(toml_text).expect("valid TOML");
    serde_json::to_value(value).expect("TOML converts to JSON")
}

/// The schema's errors for `toml_text`, as text.
fn errors(toml_text: &str) -> Vec<String> {
    let v = validator();
    let instance = as_json(toml_text);
    v.iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn parses(toml_text: &str) -> bool {
    toml::from_str::<SuiteFile>(toml_text).is_ok()
}

/// A small valid suite with one task whose `success` is `assertions`, plus `extra` top-level
/// text (which must come before any table).
fn suite_with(extra: &str, assertions: &str) -> String {
    format!(
        "schema_version = 1\nid = \"t\"\n{extra}\n\n[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n\n[[tasks]]\nid = \"a\"\nprompt = \"do it\"\n\n[tasks.success]\nall = [{assertions}]\n"
    )
}

#[test]
fn the_schema_is_a_valid_draft_2020_12_schema_with_a_title_and_no_id() {
    let s = schema();
    assert!(jsonschema::draft202012::meta::is_valid(&s));
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["title"], "proctor suite.toml");
    assert!(s.get("$id").is_none());
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(schema(), s, "the schema is the same every time");
}

#[test]
fn the_bundled_suites_and_the_init_template_are_valid() {
    let root = repo_root();
    for path in [
        "examples/traps/suite.toml",
        "examples/chat-ax/suite.toml",
        "crates/proctor/templates/init/suite.toml",
    ] {
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        assert!(parses(&text), "{path} does not parse");
        let errs = errors(&text);
        assert!(errs.is_empty(), "{path}: {errs:#?}");
    }
}

#[test]
fn an_unknown_key_is_rejected_like_the_parser_does() {
    for (what, text) in [
        (
            "top level",
            suite_with("colour = \"blue\"", "{ files_unchanged = true }"),
        ),
        (
            "[defaults]",
            suite_with(
                "[defaults]\nwall_timeout_secs = 10",
                "{ files_unchanged = true }",
            ),
        ),
        (
            "check table",
            suite_with("", "{ check = { command = \"true\", exit_code = 0 } }"),
        ),
        (
            "state",
            suite_with(
                "",
                "{ state = { service = \"s\", pointer = \"/a\", equal = 1 } }",
            ),
        ),
    ] {
        assert!(!parses(&text), "{what}: the parser accepts it");
        assert!(!errors(&text).is_empty(), "{what}: the schema accepts it");
    }
}

#[test]
fn a_misspelled_assertion_kind_is_rejected_like_the_parser_does() {
    for assertion in [
        "{ answer_match = \"ok\" }",
        "{ file_unchanged = true }",
        "{ not = { chek = \"true\" } }",
        "{ answer_matches = \"ok\", file_added = \"x\" }",
        "{}",
    ] {
        let text = suite_with("", assertion);
        assert!(!parses(&text), "{assertion}: the parser accepts it");
        assert!(
            !errors(&text).is_empty(),
            "{assertion}: the schema accepts it"
        );
    }
}

#[test]
fn every_assertion_form_the_parser_accepts_is_valid() {
    for assertion in [
        "{ answer_matches = \"(?i)done\" }",
        "{ answer_forbids = \"sorry\" }",
        "{ files_unchanged = true }",
        "{ files_unchanged = false }",
        "{ files_unchanged = [\"src/**\", \"*.md\"] }",
        "{ files_unchanged = [] }",
        "{ file_added = \"*.txt\" }",
        "{ file_deleted = \"*.txt\" }",
        "{ file_changed = \"*.txt\" }",
        "{ file_contains = { path = \"a.txt\", pattern = \"x\" } }",
        "{ check = \"true\" }",
        "{ check = { command = \"true\" } }",
        "{ check = { command = \"false\", exit = 1, stdout_matches = \"x\", timeout_seconds = 5 } }",
        "{ calls = {} }",
        "{ calls = { verb = \"send\", min = 1, max = 1, args_match = \"x\", exit = 0 } }",
        "{ state = { service = \"s\", pointer = \"/a\", equals = \"dana\" } }",
        "{ state = { service = \"s\", pointer = \"/a\", equals = { n = [1, 2.5, true] } } }",
        "{ state = { service = \"s\", pointer = \"/a\", matches = \"^d\" } }",
        "{ state = { service = \"s\", pointer = \"/a\", exists = false } }",
        "{ not = { file_added = \"*.bak\" } }",
        "{ not = { not = { check = { command = \"true\" } } } }",
    ] {
        let text = suite_with("", assertion);
        assert!(parses(&text), "{assertion}: the parser rejects it");
        let errs = errors(&text);
        assert!(errs.is_empty(), "{assertion}: {errs:#?}");
    }
}

#[test]
fn the_hand_written_forms_reject_what_their_deserializers_reject() {
    for assertion in [
        "{ files_unchanged = \"src/**\" }",
        "{ files_unchanged = [1] }",
        "{ check = 1 }",
        "{ check = [\"true\"] }",
        "{ check = { exit = 0 } }",
    ] {
        let text = suite_with("", assertion);
        assert!(!parses(&text), "{assertion}: the parser accepts it");
        assert!(
            !errors(&text).is_empty(),
            "{assertion}: the schema accepts it"
        );
    }
}

#[test]
fn value_checks_of_validate_are_in_the_schema() {
    // Parsed fine, but `proctor validate` rejects them; so does the schema.
    for (what, extra, assertion) in [
        (
            "unknown metric",
            "[promotion]\nbaseline = \"a\"\ncandidate = \"b\"\nprimary_metric = \"vibes\"",
            "{ files_unchanged = true }",
        ),
        (
            "unknown no_regression metric",
            "[promotion]\nbaseline = \"a\"\ncandidate = \"b\"\nno_regression = [\"wrong_turn\"]",
            "{ files_unchanged = true }",
        ),
        (
            "both all and any",
            "",
            "{ files_unchanged = true }]\nany = [{ files_unchanged = true }",
        ),
        (
            "state with two tests",
            "",
            "{ state = { service = \"s\", pointer = \"/a\", exists = true, matches = \"x\" } }",
        ),
        (
            "state with no test",
            "",
            "{ state = { service = \"s\", pointer = \"/a\" } }",
        ),
    ] {
        let text = suite_with(extra, assertion);
        assert!(parses(&text), "{what}: the parser rejects it");
        assert!(!errors(&text).is_empty(), "{what}: the schema accepts it");
    }
    let faults = |table: &str| {
        format!(
            "{}\n[tasks.route_faults]\n{table}\n",
            suite_with("", "{ files_unchanged = true }")
        )
    };
    for good in [
        "\"*\" = \"rate_limit\"",
        "anthropic = \"credential_loss\"\ngemini = \"timeout\"",
    ] {
        let errs = errors(&faults(good));
        assert!(errs.is_empty(), "{good}: {errs:#?}");
    }
    for bad in ["openai = \"timeout\"", "chat = \"slow\""] {
        assert!(parses(&faults(bad)));
        assert!(!errors(&faults(bad)).is_empty(), "{bad}: accepted");
    }
    for metric in model::METRICS {
        let text = suite_with(
            &format!("[promotion]\nbaseline = \"a\"\ncandidate = \"b\"\nprimary_metric = \"{metric}\"\nno_regression = [\"{metric}\"]"),
            "{ files_unchanged = true }",
        );
        let errs = errors(&text);
        assert!(errs.is_empty(), "{metric}: {errs:#?}");
    }
    let version_2 = suite_with("", "{ files_unchanged = true }")
        .replace("schema_version = 1", "schema_version = 2");
    assert!(!errors(&version_2).is_empty());
}

#[test]
fn every_assertion_kind_is_an_alternative_with_a_description() {
    let s = schema();
    let alternatives = s["$defs"]["Assertion"]["oneOf"].as_array().unwrap();
    let mut kinds = Vec::new();
    for a in alternatives {
        let properties = a["properties"].as_object().unwrap();
        assert_eq!(properties.len(), 1, "{a}");
        let (kind, property) = properties.iter().next().unwrap();
        assert!(
            a["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{kind}"
        );
        assert!(property["description"].is_string(), "{kind}");
        assert_eq!(a["additionalProperties"], false, "{kind}");
        kinds.push(kind.clone());
    }
    assert_eq!(kinds, ASSERTION_KINDS);
}

#[test]
fn every_enum_value_of_the_schema_parses() {
    let s = schema();
    let d = &s["$defs"];
    // The string enums are inlined, so that an editor shows the key's own description.
    let values = |enum_schema: &Value| -> Vec<String> {
        let values: Vec<String> = enum_schema["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("not a string enum: {enum_schema}"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(enum_schema["type"], "string");
        let docs = enum_schema["x-taplo"]["docs"]["enumValues"].as_array();
        if let Some(docs) = docs {
            assert_eq!(docs.len(), values.len(), "{enum_schema}");
            assert!(docs.iter().all(Value::is_string), "{enum_schema}");
        }
        values
    };
    let agents = values(&d["Variant"]["properties"]["agent"]);
    let networks = values(&d["TaskSettings"]["properties"]["network"]);
    let expects = values(&d["Task"]["properties"]["expect"]);
    let directions = values(&d["Promotion"]["properties"]["direction"]);
    assert_eq!(values(&d["Task"]["properties"]["network"]), networks);
    for agent in &agents {
        let text = suite_with("", "{ files_unchanged = true }")
            .replace("agent = \"script\"", &format!("agent = \"{agent}\""));
        assert!(parses(&text), "agent = {agent}");
    }
    for network in &networks {
        let text = suite_with(
            &format!("[defaults]\nnetwork = \"{network}\""),
            "{ files_unchanged = true }",
        );
        assert!(parses(&text), "network = {network}");
    }
    for expect in &expects {
        let text = suite_with("", "{ files_unchanged = true }").replace(
            "prompt = \"do it\"",
            &format!("prompt = \"do it\"\nexpect = \"{expect}\""),
        );
        assert!(parses(&text), "expect = {expect}");
    }
    for direction in &directions {
        let text = suite_with(
            &format!(
                "[promotion]\nbaseline = \"a\"\ncandidate = \"b\"\ndirection = \"{direction}\""
            ),
            "{ files_unchanged = true }",
        );
        assert!(parses(&text), "direction = {direction}");
    }
    assert_eq!(agents.len(), 9);
    assert_eq!(networks, ["none", "loopback", "host", "internet"]);
    assert_eq!(expects, ["complete", "refuse", "ask"]);
    assert_eq!(directions, ["higher", "lower"]);
    let promotion = &d["Promotion"]["properties"];
    // Every metric, then each per-trial metric with each statistic (`calls:median`, ...).
    let spellings = model::metric_spellings();
    assert_eq!(spellings[..model::METRICS.len()], *model::METRICS);
    assert_eq!(
        spellings.len(),
        model::METRICS.len() + 3 * model::PER_TRIAL_METRICS.len()
    );
    assert!(spellings.iter().any(|s| s == "wrong_turns:total"));
    assert_eq!(values(&promotion["primary_metric"]), spellings);
    assert_eq!(values(&promotion["no_regression"]["items"]), spellings);
    let routes = d["Task"]["properties"]["route_faults"]["properties"]
        .as_object()
        .unwrap();
    let mut route_names: Vec<&str> = routes.keys().map(String::as_str).collect();
    let mut expected_routes = model::FAULT_ROUTES.to_vec();
    route_names.sort_unstable();
    expected_routes.sort_unstable();
    assert_eq!(route_names, expected_routes);
    for route in routes.values() {
        assert_eq!(values(route), model::FAULT_KINDS);
    }
}

#[test]
fn the_defaults_in_the_schema_are_the_ones_the_parser_and_the_settings_use() {
    let s = schema();
    let minimal: SuiteFile = toml::from_str(&suite_with("", "{ files_unchanged = true }")).unwrap();
    let top = &s["properties"];
    assert_eq!(
        top["fixture"]["default"],
        minimal.fixture.get_ref().as_str()
    );
    assert_eq!(
        top["development_trials"]["default"],
        minimal.development_trials
    );
    assert_eq!(top["release_trials"]["default"], minimal.release_trials);
    assert_eq!(
        s["$defs"]["ReportConfig"]["properties"]["underpowered_below"]["default"],
        minimal.report.underpowered_below
    );
    assert_eq!(
        s["$defs"]["Task"]["properties"]["expect"]["default"],
        "complete"
    );

    // [defaults]: what a trial gets when neither [defaults] nor the task sets a key.
    let mut suite = Suite::open(&repo_root().join("examples/traps")).expect("traps is valid");
    suite.file.defaults = model::TaskSettings::default();
    let mut task = suite.file.tasks[0].clone();
    task.wall_timeout_seconds = None;
    task.validation_timeout_seconds = None;
    task.network = None;
    task.check_network = None;
    task.allow = None;
    task.offline_user = None;
    task.undo_window_seconds = None;
    let mut variant = suite.file.variants[0].clone();
    variant.allow = None;
    let settings = suite.settings(&task, &variant);
    let d = &s["$defs"]["TaskSettings"]["properties"];
    assert_eq!(
        d["wall_timeout_seconds"]["default"],
        settings.wall_timeout.as_secs()
    );
    assert_eq!(
        d["validation_timeout_seconds"]["default"],
        settings.validation_timeout.as_secs()
    );
    assert_eq!(d["network"]["default"], settings.network.as_str());
    assert_eq!(
        d["check_network"]["default"],
        settings.check_network.as_str()
    );
    assert_eq!(d["allow"]["default"], serde_json::json!(settings.allow));
    assert_eq!(d["offline_user"]["default"], settings.offline_user);
    assert_eq!(
        d["undo_window_seconds"]["default"],
        settings.undo_window.as_secs()
    );
}

#[test]
fn the_schema_has_no_null_since_toml_has_none() {
    let text = schema().to_string();
    assert!(!text.contains("\"null\""), "a null type or value is left");
    assert!(!text.contains(":null"), "a null default is left");
}
