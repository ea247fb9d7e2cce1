//! Where `show`, `compare` and the viewer must say the same thing, through the real binary:
//! `show RUN --task/--outcome` filter the trial list; a rule's glob list is printed once, not
//! in every trial's reason; `compare --pass-k-max K` caps the pass@k lines and says how many
//! it left out; the viewer's trial page names the hidden mutation `show RUN TRIAL` names; the
//! viewer writes "not measured" in words, as the CLI does.

mod common;

use std::path::Path;

use common::lab::{As, Lab, RunOut};
use serde_json::Value;

/// The glob list of the `files_unchanged` rule every task has.
const GLOBS: &str = r#"["README.md", "docs/**", "tests/**"]"#;

/// A hidden mutation of task `a`: README.md's line changed.
const PATCH: &str = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+hello, mutated\n";

/// Tasks `a` (with one hidden mutation) and `b`; variant `good` writes done.txt, `meddler`
/// writes it and edits README.md (wrong: the `files_unchanged` rule fails); 6 trials each.
fn lab() -> Lab {
    let lab = Lab::new("show-views");
    lab.write("fixture/README.md", "hello\n")
        .write("fixture/docs/guide.md", "guide\n")
        .write("mutations/a/01-greeting.patch", PATCH);
    let mut toml = String::from(
        "schema_version = 1\nid = \"views\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n",
    );
    for v in ["good", "meddler"] {
        toml.push_str(&format!(
            "[[variants]]\nid = \"{v}\"\nagent = \"script\"\nscript = \"agents/{v}\"\n\n"
        ));
    }
    for t in ["a", "b"] {
        toml.push_str(&format!(
            "[[tasks]]\nid = \"{t}\"\nprompt = \"Write done.txt; leave the rest.\"\n\n[tasks.success]\nall = [{{ file_added = \"done.txt\" }}, {{ files_unchanged = {GLOBS} }}]\n\n"
        ));
    }
    lab.write("suite.toml", &toml);
    for t in ["a", "b"] {
        for (v, step) in [
            ("good", "echo ok > done.txt"),
            ("meddler", "echo ok > done.txt; echo more >> README.md"),
        ] {
            lab.write(
                &format!("agents/{v}/{t}.toml"),
                &format!("answer = \"Done.\"\n\n[[steps]]\nrun = '''{step}'''\n"),
            );
        }
    }
    lab
}

/// The trial rows of `show RUN` text: the lines after the `TRIAL` header, up to a blank line.
fn trial_rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("TRIAL "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

#[test]
fn show_filters_names_lists_once_compare_caps_pass_k_and_the_viewer_agrees() {
    let lab = lab();
    let out = lab.run(As::Me, &["--trials", "6"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let store = lab.store();
    let s = store.to_str().unwrap();
    let run = lab.run_id();
    assert_show_lists_every_trial_and_each_list_once(&lab, &run, s);
    assert_show_filters_by_task_and_outcome(&lab, &run, s);
    assert_compare_caps_pass_k(&lab, &run, s);
    assert_mutation_named_and_the_viewer_agrees(&lab, &run, s);
}

/// `show RUN` (in store `s`) with `extra` arguments.
fn show_run(lab: &Lab, run: &str, s: &str, extra: &[&str]) -> RunOut {
    let mut args = vec!["show", run, "--store", s];
    args.extend_from_slice(extra);
    lab.proctor(As::Me, &args)
}

/// `compare RUN --variants good,meddler` (in store `s`) with `extra` arguments.
fn compare_arms(lab: &Lab, run: &str, s: &str, extra: &[&str]) -> RunOut {
    let mut args = vec!["compare", run, "--variants", "good,meddler", "--store", s];
    args.extend_from_slice(extra);
    lab.proctor(As::Me, &args)
}

/// Every trial listed; the meddler's reasons name the list, printed once under the table; JSON
/// keeps every reason whole.
fn assert_show_lists_every_trial_and_each_list_once(lab: &Lab, run: &str, s: &str) {
    let all = show_run(lab, run, s, &[]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let rows = trial_rows(&all.stdout);
    assert_eq!(rows.len(), 24, "{}", all.stdout);
    let wrong: Vec<&&str> = rows.iter().filter(|r| r.contains(" wrong ")).collect();
    assert_eq!(wrong.len(), 12, "{}", all.stdout);
    for r in &wrong {
        assert!(r.contains("files_unchanged = [list 1]"), "{r}");
        assert!(!r.contains("docs/**"), "{r}");
    }
    assert_eq!(
        all.stdout
            .lines()
            .filter(|l| *l == format!("[list 1] = {GLOBS}"))
            .count(),
        1,
        "{}",
        all.stdout
    );
    assert_eq!(all.stdout.matches("docs/**").count(), 1, "{}", all.stdout);
    // JSON keeps every reason whole.
    let json = show_run(lab, run, s, &["--format", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let reasons: Vec<&str> = doc["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["reason"].as_str())
        .filter(|r| r.contains("files_unchanged"))
        .collect();
    assert_eq!(reasons.len(), 12);
    assert!(reasons.iter().all(|r| r.contains(GLOBS)), "{reasons:?}");
}

/// --task: only that task's trials and cells; --outcome: only that outcome; with --task, both;
/// a task the run does not have is refused, with the tasks it has; an unknown outcome too.
fn assert_show_filters_by_task_and_outcome(lab: &Lab, run: &str, s: &str) {
    let a = show_run(lab, run, s, &["--task", "a"]);
    assert_eq!(a.code, 0, "{}", a.stderr);
    let rows = trial_rows(&a.stdout);
    assert_eq!(rows.len(), 12, "{}", a.stdout);
    assert!(rows.iter().all(|r| r.starts_with("a.")), "{}", a.stdout);
    assert!(
        !a.stdout.lines().any(|l| l.starts_with("b ")),
        "{}",
        a.stdout
    );
    // --outcome: only that outcome; with --task, both.
    let wrong = show_run(lab, run, s, &["--outcome", "wrong"]);
    let rows = trial_rows(&wrong.stdout);
    assert_eq!(rows.len(), 12, "{}", wrong.stdout);
    assert!(rows
        .iter()
        .all(|r| r.contains(".meddler.") && r.contains(" wrong ")));
    let both = show_run(
        lab,
        run,
        s,
        &["--task", "b", "--outcome", "completed", "--format", "json"],
    );
    let doc: Value = serde_json::from_str(&both.stdout).unwrap();
    let ids: Vec<&str> = doc["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trial_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(ids.iter().all(|i| i.starts_with("b.good.")), "{ids:?}");
    // A task the run does not have is refused, with the tasks it has; an unknown outcome too.
    let none = show_run(lab, run, s, &["--task", "nope"]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(
        none.stderr.contains("no trial of task `nope`"),
        "{}",
        none.stderr
    );
    assert!(none.stderr.contains("a, b"), "{}", none.stderr);
    let bad = show_run(lab, run, s, &["--outcome", "great"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

/// compare: 6 graded trials per task, so k goes to 6; by default 5 are listed and the text
/// says 1 is left out; --pass-k-max 2 lists 2 and says 4; the words, never the JSON value, of
/// what is not measured.
fn assert_compare_caps_pass_k(lab: &Lab, run: &str, s: &str) {
    let pass_k_rows = |text: &str| {
        text.lines()
            .skip_while(|l| !l.starts_with("pass@k and pass^k"))
            .skip_while(|l| !l.starts_with("task "))
            .skip(2)
            .take_while(|l| !l.trim().is_empty())
            .count()
    };
    let default = compare_arms(lab, run, s, &[]);
    assert_eq!(default.code, 0, "{}", default.stderr);
    assert!(
        default
            .stdout
            .contains("Shown for k = 1..5: 1 value(s) of k (k = 6..6) left out; --pass-k-max 6 lists them all."),
        "{}",
        default.stdout
    );
    // Three cells (a, b, all tasks), five values of k each.
    assert_eq!(pass_k_rows(&default.stdout), 15, "{}", default.stdout);
    let two = compare_arms(lab, run, s, &["--pass-k-max", "2"]);
    assert!(
        two.stdout.contains("4 value(s) of k (k = 3..6) left out"),
        "{}",
        two.stdout
    );
    assert_eq!(pass_k_rows(&two.stdout), 6, "{}", two.stdout);
    let every = compare_arms(lab, run, s, &["--pass-k-max", "6"]);
    assert!(!every.stdout.contains("left out;"), "{}", every.stdout);
    assert_eq!(pass_k_rows(&every.stdout), 18, "{}", every.stdout);
    let json = compare_arms(lab, run, s, &["--pass-k-max", "2", "--format", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let c = &doc["comparison"];
    assert_eq!(
        (&c["pass_k_max"], &c["pass_k_left_out"]),
        (&6.into(), &4.into())
    );
    assert_eq!(c["overall"]["a"]["pass_at_k"].as_array().unwrap().len(), 2);
    assert_eq!(
        c["tasks"][0]["comparison"]["b"]["pass_pow_k"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(compare_arms(lab, run, s, &["--pass-k-max", "0"]).code, 2);
    // Human text says "not measured" (no interface, so no wrong turns), never the JSON value.
    assert!(
        default.stdout.contains("not measured"),
        "{}",
        default.stdout
    );
    assert!(
        !default.stdout.contains("not_measured"),
        "{}",
        default.stdout
    );
}

/// The hidden mutation: `show RUN TRIAL` names it, and so does the viewer's trial page; the
/// compare page gives assessments in words, the JSON value only in the row's data.
fn assert_mutation_named_and_the_viewer_agrees(lab: &Lab, run: &str, s: &str) {
    let trial = show_run(lab, run, s, &["a.good.0"]);
    let line = trial
        .stdout
        .lines()
        .find(|l| l.starts_with("mutation "))
        .unwrap_or_else(|| panic!("{}", trial.stdout));
    assert!(line.contains("01-greeting.patch"), "{line}");
    let server = common::viewer::serve(Path::new(s));
    let (status, page) = common::viewer::get(&server, &format!("/runs/{run}/trials/a.good.0"));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-field=\"mutation\""), "{page}");
    assert!(
        page.contains("Hidden mutation: <code>01-greeting.patch</code>"),
        "{page}"
    );
    // Task b has no mutation, and its page says none.
    let (_, page) = common::viewer::get(&server, &format!("/runs/{run}/trials/b.good.0"));
    assert!(!page.contains("data-field=\"mutation\""), "{page}");
    // The compare page: assessments in words, the JSON value only in the row's data.
    let (status, page) =
        common::viewer::get(&server, &format!("/compare?a={run}/good&b={run}/meddler"));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<td>not measured</td>"), "{page}");
    assert!(!page.contains(">not_measured<"), "{page}");
    assert!(page.contains("data-assessment=\"not_measured\""), "{page}");
}
