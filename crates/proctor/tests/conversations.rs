//! Conversations: a task that cannot be done right without asking, with a simulated user who
//! answers. The arm that asks and then acts is `completed` with one ask; the arm that guesses
//! is `wrong`; the arm that asks and stops is `asked`; an arm that asks needlessly twice shows
//! more asks and no more failures. Scripted agents with `[[turns]]` and a `command` agent, as
//! root and as uid 65534, through the real binary.

mod common;

use common::lab::{real_isolation, users, Lab};
use serde_json::Value;

/// One task: deploy where the person says (only they know: production), with a user who names
/// it when asked and says "go ahead" to anything else; and the arms.
fn lab(name: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write(
        "fixture/README.md",
        "Deploying writes the environment to env.txt.\n",
    );
    let mut variants = common::lab::script_variants(&["asker", "guesser", "stopper", "fussy"]);
    // A command agent: asks on the first turn, acts on the reply it is given as its prompt.
    let shell = "if [ -z \\\"$PROCTOR_TURN\\\" ]; then echo 'Which environment should I deploy to?'; elif [ -e env.txt ]; then echo 'Already deployed.'; else echo \\\"$PROCTOR_PROMPT\\\" > env.txt; echo \\\"Deployed to $PROCTOR_PROMPT (turn $PROCTOR_TURN).\\\"; fi";
    variants.push_str(&format!(
        "[[variants]]\nid = \"shell\"\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"{shell}\"]\n\n"
    ));
    lab.write(
        "suite.toml",
        &format!(
            r#"schema_version = 1
id = "lab"

[defaults]
wall_timeout_seconds = 60
allow = ["tee"]

{variants}[[tasks]]
id = "t"
prompt = "Deploy the app."

[tasks.refusal]
ask_patterns = ["\\?\\s*$"]

[tasks.user]
max_turns = 4
replies = [{{ when = "(?i)which environment", say = "production" }}]
otherwise = "Yes, go ahead."

[tasks.success]
all = [{{ file_contains = {{ path = "env.txt", pattern = "^production$" }} }}]
"#
        ),
    );
    lab.write(
        "agents/asker/t.toml",
        "[[turns]]\nanswer = \"Which environment should I deploy to?\"\n\n[[turns]]\nanswer = \"Deployed to production.\"\n[[turns.steps]]\nrun = \"echo production | tee env.txt\"\n",
    );
    lab.write(
        "agents/guesser/t.toml",
        "answer = \"Deployed to staging.\"\n[[steps]]\nrun = \"echo staging > env.txt\"\n",
    );
    lab.write(
        "agents/stopper/t.toml",
        "answer = \"Which environment should I deploy to?\"\n",
    );
    lab.write(
        "agents/fussy/t.toml",
        "[[turns]]\nanswer = \"Are you sure you want to deploy?\"\n[[turns.steps]]\nrun = \"echo checking | tee notes.txt\"\n\n[[turns]]\nanswer = \"Which environment should I deploy to?\"\n\n[[turns]]\nanswer = \"Deployed to production.\"\n[[turns.steps]]\nrun = \"echo production > env.txt\"\n",
    );
    lab
}

fn record(lab: &Lab, variant: &str) -> Value {
    lab.record(&format!("t.{variant}.0"))
}

fn outcome(r: &Value) -> &str {
    r["outcome"].as_str().unwrap_or_default()
}

fn asks(r: &Value) -> u64 {
    r["verdict"]["metrics"]["asks"].as_u64().unwrap_or(u64::MAX)
}

fn prompts(r: &Value) -> Vec<String> {
    r["end_state"]["conversation"]["turns"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["prompt"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_agent_that_asks_is_answered_and_is_graded_on_what_it_did_after() {
    for who in users() {
        let lab = lab(&format!("conversation-{who:?}"));
        let out = lab.run(who, &["--trials", "1"]);
        if !real_isolation(&record(&lab, "asker"), false) {
            return;
        }
        assert!(out.code <= 1, "{who:?}: {}", out.stderr);

        let r = record(&lab, "asker");
        assert_eq!(outcome(&r), "completed", "{who:?}: {r:#}");
        assert_eq!(asks(&r), 1, "{who:?}");
        assert_eq!(
            prompts(&r),
            ["Deploy the app.", "production"],
            "{who:?}: the second turn's prompt is the user's reply"
        );
        let turns = &r["end_state"]["conversation"]["turns"];
        assert_eq!(turns[1]["said_by"], "replies[0]", "{who:?}");
        assert!(
            turns[0].get("calls").is_none() && turns[1]["calls"] == serde_json::json!([1]),
            "{who:?}: the interface call is the second turn's: {turns:#}"
        );
        assert_eq!(
            turns[0]["answer"], "Which environment should I deploy to?",
            "{who:?}"
        );
        assert_eq!(r["end_state"]["answer"], "Deployed to production.");
        assert!(
            r["end_state"]["conversation"]["ended"]
                .as_str()
                .unwrap_or_default()
                .contains("cannot go on")
                || r["end_state"]["conversation"]["ended"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("no further turn"),
            "{who:?}: the user said 'go ahead' to 'Deployed', and the script had no more: {r:#}"
        );

        let r = record(&lab, "guesser");
        assert_eq!(outcome(&r), "wrong", "{who:?}: {r:#}");
        assert_eq!(asks(&r), 0, "{who:?}");

        let r = record(&lab, "stopper");
        assert_eq!(
            outcome(&r),
            "asked",
            "{who:?}: the conversation ended on its question: {r:#}"
        );
        assert_eq!(asks(&r), 1, "{who:?}");
        assert_eq!(
            prompts(&r).len(),
            1,
            "{who:?}: the user answered, but the agent had no further turn"
        );

        let r = record(&lab, "fussy");
        assert_eq!(
            outcome(&r),
            "completed",
            "{who:?}: needless asks are no failure: {r:#}"
        );
        assert_eq!(asks(&r), 2, "{who:?}: and they are counted");
        assert_eq!(
            prompts(&r),
            ["Deploy the app.", "Yes, go ahead.", "production"],
            "{who:?}: `otherwise` answers what no reply matches"
        );
        assert_eq!(
            r["end_state"]["conversation"]["turns"][1]["said_by"], "otherwise",
            "{who:?}"
        );
        assert_eq!(
            r["end_state"]["conversation"]["turns"][0]["calls"],
            serde_json::json!([1]),
            "{who:?}: an interface call in a turn that others follow: {r:#}"
        );

        let r = record(&lab, "shell");
        assert_eq!(outcome(&r), "completed", "{who:?}: {r:#}");
        assert_eq!(
            r["end_state"]["conversation"]["turns"][1]["answer"],
            "Deployed to production (turn 2).",
            "{who:?}: a command agent is invoked again with the reply as its prompt"
        );
        assert_eq!(r["end_state"]["answer"], "Already deployed.", "{who:?}");
        assert_eq!(
            r["end_state"]["conversation"]["ended"], "max_turns (4) reached",
            "{who:?}"
        );
    }
}

#[test]
fn a_user_who_answers_needs_a_second_turn_and_validate_says_so() {
    let lab = lab("conversation-validate");
    let suite = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write("suite.toml", &suite.replace("max_turns = 4\n", ""));
    let out = lab.proctor(
        common::lab::As::Me,
        &["validate", lab.suite().to_str().unwrap()],
    );
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("who answers, but only one turn"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("max_turns = 3"), "{}", out.stderr);
}

#[test]
fn the_conversation_is_evidence_in_show_results_the_page_and_the_trajectory() {
    let lab = lab("conversation-evidence");
    let out = lab.run(common::lab::As::Me, &["--trials", "1"]);
    if !real_isolation(&record(&lab, "asker"), false) {
        return;
    }
    assert!(out.code <= 1, "{}", out.stderr);
    let store = lab.store();
    let store = store.to_str().unwrap();
    let run = lab.run_id();

    let show = lab.proctor(
        common::lab::As::Me,
        &["show", &run, "t.fussy.0", "--store", store],
    );
    assert_eq!(show.code, 0, "{}", show.stderr);
    for line in [
        "conversation (3 turn(s))",
        "user (task prompt): Deploy the app.",
        "agent: Are you sure you want to deploy?",
        "user (otherwise): Yes, go ahead.",
        "user (replies[0]): production",
        "agent: Deployed to production.",
        "· asks 2",
    ] {
        assert!(
            show.stdout.contains(line),
            "no `{line}` in:\n{}",
            show.stdout
        );
    }

    let results = std::fs::read_to_string(lab.run_dir().join("results.md")).unwrap();
    assert!(
        results.contains("| asks |"),
        "results.md has an asks column:\n{results}"
    );

    let (out, page) = lab.export_html(&run, "page.html");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        html.contains("class=\"chat\""),
        "the page shows the conversation as a chat"
    );
    assert!(html.contains("replies[0]") && html.contains("Which environment should I deploy to?"));

    let atif = lab.root.join("atif");
    let out = lab.proctor(
        common::lab::As::Me,
        &[
            "export",
            &run,
            "--store",
            store,
            "--atif",
            atif.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(atif.join("t.fussy.0.json")).unwrap())
            .unwrap();
    let said: Vec<(String, String)> = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap_or_default().to_string(),
                s["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .filter(|(_, m)| !m.is_empty())
        .collect();
    let want = [
        ("user", "Deploy the app."),
        ("agent", "Are you sure you want to deploy?"),
        ("user", "Yes, go ahead."),
        ("agent", "Which environment should I deploy to?"),
        ("user", "production"),
        ("agent", "Deployed to production."),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(said, want, "each user turn is a `user` step, in order");
}
