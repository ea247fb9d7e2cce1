//! Claims verified against evidence, through the real binary: `proctor verify` on Markdown files
//! whose `verify:fileLine(PATH, /REGEX/)` citations hold, fail, name a missing file or are
//! malformed; and `proctor cite` on a real run of a bundled example, whose citations, written
//! into a Markdown file, hold until the run's results.md says something else.

mod common;

use std::path::Path;

use common::lab::{As, Lab, RunOut};

/// Writes `rel` under the lab's root.
fn put(lab: &Lab, rel: &str, content: &str) {
    let path = lab.root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// `proctor verify ARGS...` in the lab's root.
fn verify(lab: &Lab, args: &[&str]) -> RunOut {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    lab.proctor(As::Me, &all)
}

const EVIDENCE: &str =
    "| variant | task | success |\n|---|---|---|\n| text | send | 2/2 (100%) |\n";

#[test]
fn a_citation_that_holds_exits_0() {
    let lab = Lab::new("claims-holds");
    put(&lab, "evidence.md", EVIDENCE);
    put(
        &lab,
        "docs/claim.md",
        "# Decision\n\nWith `--text` the sends pass 2/2 \
         `verify:fileLine(../evidence.md, /^\\| text \\| send \\| 2\\/2 \\(100%\\) \\|$/)`.\n",
    );
    let out = verify(&lab, &["docs/claim.md"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "1 citation(s) in 1 file(s): 1 hold, 0 fail, 0 malformed\n"
    );
    assert_eq!(out.stderr, "");
}

#[test]
fn a_citation_that_fails_exits_1_naming_file_line_path_and_regex() {
    let lab = Lab::new("claims-fails");
    put(&lab, "evidence.md", EVIDENCE);
    put(
        &lab,
        "docs/claim.md",
        "# Decision\n\nholds: verify:fileLine(../evidence.md, /2\\/2/)\n\
         fails: verify:fileLine(../evidence.md, /^\\| text \\| send \\| 3\\/3/)\n",
    );
    let out = verify(&lab, &["docs/claim.md"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "docs/claim.md:4: ../evidence.md has no line matching /^\\| text \\| send \\| 3\\/3/\n"
    );
    assert_eq!(
        out.stdout,
        "2 citation(s) in 1 file(s): 1 hold, 1 fail, 0 malformed\n"
    );
}

#[test]
fn a_missing_path_fails_with_its_own_message() {
    let lab = Lab::new("claims-missing");
    put(&lab, "claim.md", "verify:fileLine(gone.md, /x/)\n");
    // The lab lies wherever the target folder is (inside this repository's clone, or not):
    // the ceiling keeps the search for a repository root inside the lab, as git's does.
    let ceiling = lab.root.parent().unwrap().to_str().unwrap().to_string();
    let out = lab.proctor_env(
        As::Me,
        &["verify", "claim.md"],
        &[("GIT_CEILING_DIRECTORIES", &ceiling)],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let first = out.stderr.lines().next().unwrap();
    assert_eq!(first, "claim.md:1: gone.md does not exist");
    assert!(
        out.stderr.contains("in no git repository"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_path_not_beside_the_citing_file_is_looked_up_at_the_repository_root() {
    let lab = Lab::new("claims-root");
    put(&lab, "evidence.md", EVIDENCE);
    put(
        &lab,
        "docs/deep/claim.md",
        "verify:fileLine(evidence.md, /2\\/2/)\n",
    );
    // Outside git there is no root to fall back on.
    let out = verify(&lab, &["docs/deep/claim.md"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out
        .stderr
        .starts_with("docs/deep/claim.md:1: evidence.md does not exist\n"));
    // With the lab a git repository (a `.git` folder at its root), PATH is found there.
    std::fs::create_dir(lab.root.join(".git")).unwrap();
    let out = verify(&lab, &["docs/deep/claim.md"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // A file beside the citing file wins over the root's.
    put(&lab, "docs/deep/evidence.md", "nothing here\n");
    let out = verify(&lab, &["docs/deep/claim.md"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "docs/deep/claim.md:1: evidence.md has no line matching /2\\/2/\n"
    );
}

#[test]
fn a_malformed_citation_exits_2_at_file_line_column_with_what_to_write() {
    let lab = Lab::new("claims-malformed");
    put(&lab, "evidence.md", EVIDENCE);
    put(
        &lab,
        "claim.md",
        "fine: verify:fileLine(evidence.md, /2\\/2/)\nbad: verify:fileLine(evidence.md, /2/2/)\n",
    );
    let out = verify(&lab, &["claim.md"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("claim.md:2:38: expected `)` after the regex, found `2`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("help: a `/` inside the regex must be written `\\/`"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stdout,
        "2 citation(s) in 1 file(s): 1 hold, 0 fail, 1 malformed\n"
    );

    put(&lab, "claim.md", "verify:fileLine(evidence.md, /(2/)\n");
    let out = verify(&lab, &["claim.md"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("claim.md:1:31: this citation's regex does not compile: unclosed group"),
        "{}",
        out.stderr
    );
}

#[test]
fn folders_are_walked_for_markdown_as_git_sees_them_and_code_blocks_are_skipped() {
    let lab = Lab::new("claims-walk");
    std::fs::create_dir(lab.root.join(".git")).unwrap();
    put(&lab, ".gitignore", "ignored/\n");
    put(&lab, "evidence.md", EVIDENCE);
    put(
        &lab,
        "docs/a.md",
        "verify:fileLine(evidence.md, /send/)\n\n```text\nverify:fileLine(example.md, /x/)\n```\n",
    );
    put(&lab, "docs/b.md", "no citation here\n");
    put(&lab, "docs/ignored/c.md", "verify:fileLine(gone.md, /x/)\n");
    put(&lab, "docs/.hidden/d.md", "verify:fileLine(gone.md, /x/)\n");
    put(&lab, "docs/notes.txt", "verify:fileLine(gone.md, /x/)\n");
    let out = verify(&lab, &["docs"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "1 citation(s) in 2 file(s): 1 hold, 0 fail, 0 malformed\n"
    );
    // A file named on the command line is read whatever its name.
    let out = verify(&lab, &["docs", "docs/notes.txt"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out
        .stderr
        .starts_with("docs/notes.txt:1: gone.md does not exist\n"));
}

#[test]
fn a_file_argument_that_does_not_exist_is_a_usage_error() {
    let lab = Lab::new("claims-noarg");
    let out = verify(&lab, &["nope.md"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.starts_with("error: nope.md does not exist\n"),
        "{}",
        out.stderr
    );
}

#[test]
fn json_output_lists_every_citation_with_its_status() {
    let lab = Lab::new("claims-json");
    put(&lab, "evidence.md", EVIDENCE);
    put(
        &lab,
        "claim.md",
        "verify:fileLine(evidence.md, /send/) verify:fileLine(evidence.md, /recv/)\n",
    );
    let out = verify(&lab, &["claim.md", "--format", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["holds"], 1);
    assert_eq!(doc["fails"], 1);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results[0]["status"], "holds");
    assert_eq!(results[0]["matched_line"], 3);
    assert_eq!(results[1]["status"], "no-match");
    assert_eq!(results[1]["column"], 38);
}

/// Runs the bundled `traps` example's `assess` task once per variant into the lab's store.
fn traps_run(lab: &Lab) {
    let suite = common::repo_root().join("examples/traps");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--task",
            "assess",
            "--trials",
            "1",
        ],
    );
    // The trapped variant fails the task by design.
    assert_eq!(out.code, 1, "{}", out.stderr);
}

/// `proctor cite ARGS... --store STORE`, which must succeed; its stdout.
fn cite(lab: &Lab, args: &[&str]) -> String {
    let store = lab.store();
    let mut all = vec!["cite"];
    all.extend_from_slice(args);
    all.extend(["--store", store.to_str().unwrap()]);
    let out = lab.proctor(As::Me, &all);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

/// The citation lines of `cite`'s output (each row's is the line after it).
fn citations(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("`verify:fileLine("))
        .collect()
}

#[test]
fn citations_printed_by_cite_hold_until_the_results_change() {
    let lab = Lab::new("claims-cite");
    traps_run(&lab);
    let results = lab.run_dir().join("results.md");
    let run_id = lab
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    // The rows and their citations, to be written in docs/.
    std::fs::create_dir_all(lab.root.join("docs")).unwrap();
    let printed = cite(&lab, &["latest", "--task", "assess", "--from", "docs"]);
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines[0].starts_with("| oracle | assess | 1 | 1/1 (100%) |"),
        "{printed}"
    );
    assert_eq!(
        lines[1],
        format!(
            "`verify:fileLine(../store/runs/{run_id}/results.md, /^\\|\\s*oracle\\s*\\|\\s*assess\
             \\s*\\|\\s*1\\s*\\|\\s*1\\/1 \\(100%\\)\\s*\\|\\s*1\\/1 \\(100%\\)\\s*\\|\\s*0\\/1 \\(0%\\)\
             \\s*\\|\\s*0\\/1 \\(0%\\)\\s*\\|\\s*0\\/1 \\(0%\\)\\s*\\|\\s*0\\/1 \\(0%\\)\\s*\\|\\s*0\\/1 \
             \\(0%\\)\\s*\\|\\s*0\\/1 \\(0%\\)\\s*\\|\\s*0\\s*\\|\\s*0\\s*\\|\\s*\\|\\s*$/)`"
        )
    );
    let all_rows = citations(&printed);
    assert_eq!(all_rows.len(), 2, "{printed}");
    // Only the success column pinned, from the (default) repository root.
    std::fs::create_dir(lab.root.join(".git")).unwrap();
    let pinned = cite(
        &lab,
        &[
            "latest",
            "--variant",
            "oracle",
            "--task",
            "assess",
            "--column",
            "success",
        ],
    );
    let pinned = citations(&pinned);
    assert_eq!(pinned.len(), 1);
    assert!(pinned[0].starts_with(&format!(
        "`verify:fileLine(store/runs/{run_id}/results.md, /"
    )));

    let mut doc = String::from("# Decisions\n\nThe oracle passes the assess task:\n");
    for c in all_rows.iter().chain(&pinned) {
        doc.push_str(&format!("- {c}\n"));
    }
    put(&lab, "docs/decisions.md", &doc);
    let out = verify(&lab, &["docs"]);
    assert_eq!(out.code, 0, "{}\n{doc}", out.stderr);
    assert_eq!(
        out.stdout,
        "3 citation(s) in 1 file(s): 3 hold, 0 fail, 0 malformed\n"
    );

    // The oracle's row changes: the whole-row citation and the pinned one both fail.
    edit(
        &results,
        "| oracle | assess | 1 | 1/1 (100%) | 1/1 (100%) | 0/1 (0%) | 0/1 (0%) |",
        "| oracle | assess | 1 | 0/1 (0%) | 0/1 (0%) | 1/1 (100%) | 1/1 (100%) |",
    );
    let out = verify(&lab, &["docs"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let failing: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(failing.len(), 2, "{}", out.stderr);
    assert!(failing[0].starts_with(&format!(
        "docs/decisions.md:4: ../store/runs/{run_id}/results.md has no line matching /^\\|\\s*oracle"
    )));
    assert!(failing[1].starts_with(&format!(
        "docs/decisions.md:6: store/runs/{run_id}/results.md has no line matching /^\\|\\s*oracle"
    )));
}

/// Replaces `from` (which must be there) by `to` in `file`.
fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.contains(from),
        "{} has no {from:?}:\n{text}",
        file.display()
    );
    std::fs::write(file, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn pinned_columns_hold_while_the_other_cells_change() {
    let lab = Lab::new("claims-pinned");
    traps_run(&lab);
    let results = lab.run_dir().join("results.md");
    let printed = cite(
        &lab,
        &[
            "latest",
            "--variant",
            "trapped",
            "--task",
            "assess",
            "--column",
            "success",
            "--from",
            ".",
        ],
    );
    put(&lab, "claim.md", &format!("{}\n", citations(&printed)[0]));
    assert_eq!(verify(&lab, &["claim.md"]).code, 0);
    // The trapped trial counted as abandoned instead of wrong: success is still 0/1.
    edit(&results, "| trapped | assess | 1 | 0/1 (0%) | 0/1 (0%) | 1/1 (100%) | 1/1 (100%) | 0/1 (0%) | 0/1 (0%) | 0/1 (0%) | 0/1 (0%) |",
        "| trapped | assess | 1 | 0/1 (0%) | 0/1 (0%) | 1/1 (100%) | 0/1 (0%) | 0/1 (0%) | 0/1 (0%) | 0/1 (0%) | 1/1 (100%) |");
    assert_eq!(verify(&lab, &["claim.md"]).code, 0);
    edit(
        &results,
        "| trapped | assess | 1 | 0/1 (0%) |",
        "| trapped | assess | 1 | 1/1 (100%) |",
    );
    let out = verify(&lab, &["claim.md"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
}

#[test]
fn cite_names_what_it_cannot_cite() {
    let lab = Lab::new("claims-cite-errors");
    traps_run(&lab);
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "cite",
            "latest",
            "--task",
            "asess",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        "error: the Rates table has no task `asess`\n  help: its tasks are: assess, (all tasks)\n"
    );
    let out = lab.proctor(
        As::Me,
        &[
            "cite",
            "latest",
            "--table",
            "cost",
            "--task",
            "assess",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("has no task column"), "{}", out.stderr);
    // A results.md named by its path (e.g. a copy kept in the repository) is cited the same way.
    let copy = lab.root.join("kept/results.md");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(lab.run_dir().join("results.md"), &copy).unwrap();
    let out = lab.proctor(
        As::Me,
        &[
            "cite",
            "kept/results.md",
            "--variant",
            "(all variants)",
            "--from",
            ".",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("| (all variants) | (all tasks) | 2 | 1/2 (50%) |"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("`verify:fileLine(kept/results.md, /^\\|\\s*\\(all variants\\)"),
        "{}",
        out.stdout
    );
}

#[test]
fn cite_warns_when_git_ignores_the_cited_results() {
    let lab = Lab::new("claims-ignored");
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&lab.root)
        .status();
    if !init.is_ok_and(|s| s.success()) {
        common::skip("git is not installed");
        return;
    }
    traps_run(&lab);
    put(&lab, ".gitignore", "store/\n");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "cite",
            "latest",
            "--task",
            "assess",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("warning: git ignores ")
            && out
                .stderr
                .contains("copy it into the repository and cite the copy"),
        "{}",
        out.stderr
    );
    put(&lab, ".gitignore", "");
    let out = lab.proctor(
        As::Me,
        &[
            "cite",
            "latest",
            "--task",
            "assess",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

#[test]
fn the_repository_s_own_claims_hold() {
    let root = common::repo_root();
    let out = assert_cmd::Command::cargo_bin("proctor")
        .unwrap()
        .current_dir(&root)
        .args(["verify", "README.md", "docs", "examples"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    // The examples' READMEs cite the golden results the golden test compares with real runs.
    let count: usize = stdout.split(' ').next().unwrap().parse().unwrap();
    assert!(count >= 4, "{stdout}");
}
