//! No verdict from noise, end to end through the real binary: two scripted variants equally
//! good on a suite (each wins some tasks the other loses) are `no clear difference` with the
//! counts, never better or worse, and `compare` exits 0, and the viewer shows it in the neutral
//! colour of `same`; a lopsided variant is `better` (and the other way round `worse`).
//! docs/metrics.md has the rule and its table.

mod common;

use common::lab::{As, Lab};
use serde_json::Value;

/// Tasks t01..t12, one trial each; each variant's scripted agent succeeds on its [`wins`].
const TASKS: usize = 12;

/// The tasks each variant succeeds on (1-based).
fn wins(variant: &str) -> Vec<usize> {
    match variant {
        // Control wins t01..t06.
        "control" => (1..=6).collect(),
        // Peer wins t05..t08: against control, A alone on t01..t04 (4), B alone on t07, t08
        // (2), both on t05, t06, neither on t09..t12. The 4 vs 2: a fair coin does
        // that 69% of the time.
        "peer" => (5..=8).collect(),
        // Strong wins all 12: against control, B alone on t07..t12 (6), both on t01..t06.
        "strong" => (1..=TASKS).collect(),
        // Weak wins none: against strong, B alone on all 12.
        _ => Vec::new(),
    }
}

fn lab(name: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write("fixture/README.md", "x\n");
    let mut toml = String::from(
        "schema_version = 1\nid = \"noise\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[report]\nunderpowered_below = 8\n\n",
    );
    for v in ["control", "peer", "strong", "weak"] {
        toml.push_str(&format!(
            "[[variants]]\nid = \"{v}\"\nagent = \"script\"\nscript = \"agents/{v}\"\n\n"
        ));
    }
    for t in 1..=TASKS {
        toml.push_str(&format!(
            "[[tasks]]\nid = \"t{t:02}\"\nprompt = \"Write done.txt.\"\n\n[tasks.success]\nall = [{{ file_added = \"done.txt\" }}]\n\n"
        ));
    }
    lab.write("suite.toml", &toml);
    for v in ["control", "peer", "strong", "weak"] {
        let w = wins(v);
        for t in 1..=TASKS {
            let step = if w.contains(&t) {
                "echo ok > done.txt"
            } else {
                "true"
            };
            lab.write(
                &format!("agents/{v}/t{t:02}.toml"),
                &format!("answer = \"Done.\"\n\n[[steps]]\nrun = '''{step}'''\n"),
            );
        }
    }
    lab
}

fn compare(lab: &Lab, variants: &str, json: bool) -> (i32, String) {
    let store = lab.store();
    let mut args = vec![
        "compare",
        "latest",
        "--variants",
        variants,
        "--store",
        store.to_str().unwrap(),
    ];
    if json {
        args.extend(["--format", "json"]);
    }
    let out = lab.proctor(As::Me, &args);
    assert!(
        out.stderr.contains("scored by the run itself"),
        "{}",
        out.stderr
    );
    (out.code, out.stdout)
}

#[test]
fn equal_arms_are_no_clear_difference_and_a_lopsided_arm_is_called() {
    let lab = lab("noise");
    let out = lab.run(As::Me, &["--trials", "1"]);
    // Some graded trials fail: exit 1.
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);

    // Control against peer: 4 vs 2 discordant pairs over 12 graded pairs.
    let (code, json) = compare(&lab, "control,peer", true);
    assert_eq!(code, 0, "{json}");
    let doc: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let overall = &doc["comparison"]["overall"];
    assert_eq!(overall["discordance"]["a_only"], 4, "{overall:#}");
    assert_eq!(overall["discordance"]["b_only"], 2, "{overall:#}");
    assert_eq!(overall["verdict"], "no_clear_difference", "{overall:#}");
    let success = &overall["differences"]["success"];
    assert_eq!(success["assessment"], "no_clear_difference");
    assert_eq!(
        (&success["b_higher"], &success["b_lower"], &success["needs"]),
        (&Value::from(2), &Value::from(4), &Value::from(6))
    );
    // Each task alone has one pair: underpowered, never a direction.
    for t in doc["comparison"]["tasks"].as_array().unwrap() {
        assert_eq!(t["comparison"]["verdict"], "underpowered", "{t:#}");
    }

    // In text: the words and the counts, and no direction anywhere in the verdicts.
    let (code, text) = compare(&lab, "control,peer", false);
    assert_eq!(code, 0, "{text}");
    let all = text
        .lines()
        .find(|l| l.starts_with("(all tasks)") && l.contains("no clear difference"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        all.contains(
            "2 vs 4 discordant pairs (B vs A); a direction needs at least 6 of 6 on one side"
        ),
        "{all}"
    );
    assert!(!text.contains("no_clear_difference"), "{text}");
    let verdicts: String = text
        .lines()
        .skip_while(|l| !l.starts_with("Verdicts"))
        .take_while(|l| !l.starts_with("Matched pairs by success"))
        .collect::<Vec<_>>()
        .join("\n");
    for word in [" better ", " worse "] {
        assert!(!verdicts.contains(word), "{verdicts}");
    }

    // The viewer's compare page: the same verdict in words, in the neutral colour of `same`
    // (never red), with the counts.
    let run = lab.run_id();
    let server = common::viewer::serve(&lab.store());
    let (status, page) =
        common::viewer::get(&server, &format!("/compare?a={run}/control&b={run}/peer"));
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<span class=\"badge other\">no clear difference</span>"),
        "{page}"
    );
    assert!(!page.contains("badge bad"), "{page}");
    assert!(page.contains("2 vs 4 (needs 6)"), "{page}");
    let (_, page) =
        common::viewer::get(&server, &format!("/compare?a={run}/strong&b={run}/control"));
    assert!(
        page.contains("<span class=\"badge bad\">worse</span>"),
        "{page}"
    );
    drop(server);

    // Control against strong: 6 vs 0 discordant pairs, 6 of 6: better; and the other way round
    // worse.
    let (code, json) = compare(&lab, "control,strong", true);
    assert_eq!(code, 0, "{json}");
    let doc: Value = serde_json::from_str(&json).unwrap();
    let overall = &doc["comparison"]["overall"];
    assert_eq!(overall["verdict"], "better", "{overall:#}");
    assert_eq!(overall["differences"]["success"]["b_higher"], 6);
    let (_, json) = compare(&lab, "strong,control", true);
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["comparison"]["overall"]["verdict"], "worse");

    // Weak against strong: 12 vs 0, needs 10 of 12: better, and the text says how many it
    // needed.
    let (code, text) = compare(&lab, "weak,strong", false);
    assert_eq!(code, 0, "{text}");
    let all = text
        .lines()
        .find(|l| l.starts_with("(all tasks)") && l.contains("better"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        all.contains(
            "12 vs 0 discordant pairs (B vs A); a direction needs at least 10 of 12 on one side"
        ),
        "{all}"
    );
}
