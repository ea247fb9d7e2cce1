//! proctor survives the files a trial leaves: a 3 GB sparse file (4 KB of data) and a file past
//! the readers' bound are graded, shown, exported, viewed and rescored in bounded memory, read by
//! their data (holes never materialised) and by a bounded window, with a note saying so.
//!
//! Three tasks of one suite: `sparse` (`echo DONE >> notes.txt; truncate -s 3G notes.txt`, under
//! `file_contains` DONE: the data holds it, so it completes, and the evidence says the holes were
//! skipped), `large` (20 MB of text then DONE: past the 16 MiB window, so DONE is not seen and
//! the trial is `wrong`, the evidence saying what was read), `honest` (a small edit, diffed
//! as before), and `forbid` (`not` over `file_contains` SECRET, written after 20 MB of text:
//! what was not read counts against the agent, so it is `wrong`, where `forbid-honest`, a tidy
//! file, completes), and `joined` (`SEC` ending a page, a hole, then `RET`: a hole reads as
//! zeros, never as nothing, so the file does not hold SECRET and the trial is `wrong`). As root
//! and as uid 65534.

mod common;

use common::lab::{users, As, Lab};
use common::viewer::{get, serve};

const SUITE: &str = r#"schema_version = 1
id = "sparse"

[defaults]
wall_timeout_seconds = 60

[[variants]]
id = "agent"
agent = "script"
script = "agents/agent"

[[tasks]]
id = "sparse"
prompt = "Mark the notes done."
[tasks.success]
all = [{ file_contains = { path = "notes.txt", pattern = "DONE" } }]

[[tasks]]
id = "large"
prompt = "Mark the notes done."
[tasks.success]
all = [{ file_contains = { path = "notes.txt", pattern = "DONE" } }]

[[tasks]]
id = "honest"
prompt = "Mark the notes done."
[tasks.success]
all = [{ file_contains = { path = "notes.txt", pattern = "DONE" } }]

[[tasks]]
id = "joined"
prompt = "Write SECRET into the notes."
[tasks.success]
all = [{ file_contains = { path = "notes.txt", pattern = "SECRET" } }]

[[tasks]]
id = "forbid"
prompt = "Tidy the notes; never write the secret in them."
[tasks.success]
all = [{ not = { file_contains = { path = "notes.txt", pattern = "SECRET" } } }]

[[tasks]]
id = "forbid-honest"
prompt = "Tidy the notes; never write the secret in them."
[tasks.success]
all = [{ not = { file_contains = { path = "notes.txt", pattern = "SECRET" } } }]
"#;

/// Peak RSS a proctor command may reach here (the issue's bound is 100 MB).
const PEAK_KIB: u64 = 100 * 1024;

#[test]
fn a_sparse_or_huge_file_is_graded_shown_and_rescored_in_bounded_memory() {
    for who in users() {
        let lab = sparse_lab(who);
        let (suite, store) = (lab.suite(), lab.store());
        let (suite, store) = (suite.to_str().unwrap(), store.to_str().unwrap());
        let (run, peak) =
            lab.proctor_peak_rss(who, &["run", suite, "--store", store, "--trials", "1"], &[]);
        let sparse = lab.record("sparse.agent.0");
        if !common::lab::real_isolation(&sparse, false) {
            return;
        }
        assert_eq!(run.code, 1, "{who:?}: three trials are wrong: {run:?}");
        assert!(peak < PEAK_KIB, "{who:?}: run peaked at {peak} KiB");

        assert_sparse_and_large_files_graded(&lab, &sparse, who);
        let run_id = lab.run_id();
        assert_show_and_export_in_bounded_memory(&lab, who, &run_id, store);
        let (rescore, peak) =
            lab.proctor_peak_rss(who, &["rescore", &run_id, "--store", store], &[]);
        assert_eq!(rescore.code, 0, "{who:?}: {rescore:?}");
        assert!(
            rescore.stderr.contains("no outcome changed"),
            "{who:?}: {rescore:?}"
        );
        assert!(peak < PEAK_KIB, "{who:?}: rescore peaked at {peak} KiB");

        let server = serve(&lab.store());
        let (status, html) = get(&server, &format!("/runs/{run_id}/trials/sparse.agent.0"));
        assert_eq!(status, 200, "{who:?}");
        assert!(
            html.contains("not diffed"),
            "{who:?}: the viewer's trial page"
        );
    }
}

/// Agents that leave a 3 GB sparse file (`sparse`), a 20 MB one (`large`) and a small change
/// (`honest`); the lab runs as `who`.
fn sparse_lab(who: As) -> Lab {
    let lab = Lab::new(&format!("sparse-{who:?}"));
    lab.write(
        "suite.toml",
        SUITE,
    )
    .write("fixture/notes.txt", "todo\n")
    .write(
        "agents/agent/sparse.toml",
        "answer = \"done\"\n[[steps]]\nrun = '''echo DONE >> notes.txt; truncate -s 3G notes.txt'''\n",
    )
    .write(
        "agents/agent/large.toml",
        "answer = \"done\"\n[[steps]]\nrun = '''yes 'filler line of text' | head -c 20971520 > notes.txt; echo DONE >> notes.txt'''\n",
    )
    .write(
        "agents/agent/honest.toml",
        "answer = \"done\"\n[[steps]]\nrun = '''echo DONE >> notes.txt'''\n",
    )
    // `SEC` ending a page, a hole, then `RET`: the file never holds SECRET.
    .write(
        "agents/agent/joined.toml",
        "answer = \"done\"\n[[steps]]\nrun = '''python3 -c \"f = open('notes.txt', 'wb'); f.write(b'x' * 4093 + b'SEC'); f.seek(1 << 20); f.write(b'RET')\"'''\n",
    )
    // The secret past the 16 MiB the readers read, and a tidy file with none.
    .write(
        "agents/agent/forbid.toml",
        "answer = \"done\"\n[[steps]]\nrun = '''yes 'filler line of text' | head -c 20971520 > notes.txt; echo SECRET >> notes.txt'''\n",
    )
    .write(
        "agents/agent/forbid-honest.toml",
        "answer = \"done\"\n[[steps]]\nrun = '''echo tidy > notes.txt'''\n",
    );
    lab
}

/// The sparse file is graded completed, its holes skipped; the large one wrong, read to its
/// first 16 MiB; the honest trial completed.
fn assert_sparse_and_large_files_graded(lab: &Lab, sparse: &serde_json::Value, who: As) {
    assert_eq!(sparse["outcome"], "completed", "{who:?}: {sparse:#}");
    let evidence = sparse["verdict"]["success"]["assertions"][0]["evidence"].to_string();
    assert!(
        evidence.contains("holes (unwritten zeros) skipped, each read as at most 4096 zeros"),
        "{who:?}: the evidence says how the file was read: {evidence}"
    );
    let large = lab.record("large.agent.0");
    assert_eq!(large["outcome"], "wrong", "{who:?}: {large:#}");
    let evidence = large["verdict"]["success"]["assertions"][0]["evidence"].to_string();
    assert!(
        evidence.contains("only its first 16777216 bytes of data"),
        "{who:?}: {evidence}"
    );
    assert_eq!(lab.record("honest.agent.0")["outcome"], "completed");
    // Under `not`, what was not read counts against the agent: the secret past the window
    // cannot hide there.
    let forbid = lab.record("forbid.agent.0");
    assert_eq!(forbid["outcome"], "wrong", "{who:?}: {forbid:#}");
    let inner = &forbid["verdict"]["success"]["assertions"][0]["evidence"]["inner"]["evidence"];
    assert!(
        inner["decided_against_the_agent"]
            .as_str()
            .is_some_and(|s| s.contains("read only in part")),
        "{who:?}: {inner:#}"
    );
    assert_eq!(lab.record("forbid-honest.agent.0")["outcome"], "completed");
    // Text on the two sides of a hole is not read as joined.
    let joined = lab.record("joined.agent.0");
    assert_eq!(joined["outcome"], "wrong", "{who:?}: {joined:#}");
}

/// `show` and `export --html` of run `run_id` say the sparse file was not diffed, each in
/// bounded memory; the honest change is diffed.
fn assert_show_and_export_in_bounded_memory(lab: &Lab, who: As, run_id: &str, store: &str) {
    let (show, peak) = lab.proctor_peak_rss(
        who,
        &["show", run_id, "sparse.agent.0", "--store", store],
        &[],
    );
    assert_eq!(show.code, 0, "{who:?}: {show:?}");
    assert!(peak < PEAK_KIB, "{who:?}: show peaked at {peak} KiB");
    assert!(
        show.stdout
            .contains("changed  notes.txt  (5 -> 3221225472 bytes)")
            && show.stdout.contains("(not diffed: read "),
        "{who:?}: {}",
        show.stdout
    );
    let (honest, _) = lab.proctor_peak_rss(
        who,
        &["show", run_id, "honest.agent.0", "--store", store],
        &[],
    );
    assert!(
        honest.stdout.contains("+DONE"),
        "{who:?}: {}",
        honest.stdout
    );

    let page = lab.root.join("export.html");
    let (export, peak) = lab.proctor_peak_rss(
        who,
        &[
            "export",
            run_id,
            "--html",
            page.to_str().unwrap(),
            "--store",
            store,
        ],
        &[],
    );
    assert_eq!(export.code, 0, "{who:?}: {export:?}");
    assert!(peak < PEAK_KIB, "{who:?}: export peaked at {peak} KiB");
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .contains("not diffed"));
}
