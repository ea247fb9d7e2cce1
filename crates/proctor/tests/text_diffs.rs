//! Readable diffs of binary files (`[diff] "*.db" = ["sqlite3", "{}", ".dump"]`), through the
//! real binary with Debian's `sqlite3`: a changed database is kept and shown as a text diff (by
//! `show` and the viewer),
//! `file_contains` reads it through its converter (and a rescore the same way), and an agent
//! that forges the text in a file that is no database gets none of it through the converter.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use common::lab::{As, Lab};
use serde_json::Value;

/// The viewer's page of a trial of the store's latest run, served by `proctor view`.
fn viewer_page(store: &std::path::Path, trial: &str) -> String {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(["view", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let addr = url
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let run = std::fs::read_dir(store.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .to_string_lossy()
        .into_owned();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "GET /runs/{run}/trials/{trial} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_string();
    }
    // Chunked: the chunks joined, so that no needle is split at a chunk's edge.
    let (mut rest, mut out) = (body, String::new());
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
}

/// A one-task lab over `fixture/shop.db` (one order, a pen), with `diff` as its `[diff]` table
/// (empty for none), `success`, and an agent running `steps`.
fn lab(name: &str, diff: &str, success: &str, steps: &[&str]) -> Lab {
    let lab = Lab::new(name);
    let made = std::process::Command::new("sqlite3")
        .arg(lab.suite().join("fixture/shop.db"))
        .arg("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT); INSERT INTO orders (item) VALUES ('pen');")
        .status()
        .unwrap();
    assert!(made.success());
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\nallow = [\"sqlite3\"]\n\n{diff}\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Add an order for a notebook.\"\n\n[tasks.success]\nall = [{success}]\n"
        ),
    );
    let mut script = String::from("answer = \"done\"\n");
    for s in steps {
        script.push_str(&format!("\n[[steps]]\nrun = '''{s}'''\n"));
    }
    lab.write("agents/agent/t.toml", &script);
    lab
}

const DUMP: &str = "[diff]\n\"*.db\" = [\"sqlite3\", \"{}\", \".dump\"]";
const NOTEBOOK: &str =
    "{ file_contains = { path = \"shop.db\", pattern = \"INSERT INTO orders VALUES\\\\(2,'notebook'\\\\);\" } }";
const INSERT: &str = "sqlite3 shop.db \"INSERT INTO orders (item) VALUES ('notebook')\"";

fn show(lab: &Lab) -> String {
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.agent.0",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

#[test]
fn a_changed_database_is_a_text_diff_and_file_contains_reads_it_as_text() {
    if !common::have_sqlite3() {
        return;
    }
    let with = lab("text-diff", DUMP, NOTEBOOK, &[INSERT]);
    let Some(record) = with.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let t: &Value = &record["text_diffs"][0];
    assert_eq!(t["path"], "shop.db");
    let diff = t["diff"].as_str().unwrap();
    assert!(
        diff.starts_with("--- a/shop.db\n+++ b/shop.db\n@@")
            && diff.contains("\n INSERT INTO orders VALUES(1,'pen');\n+INSERT INTO orders VALUES(2,'notebook');\n"),
        "{diff}"
    );
    let kept = with.trial_dir("t.agent.0").join("text/shop.db.diff");
    assert_eq!(std::fs::read_to_string(kept).unwrap(), diff);
    let text = show(&with);
    assert!(
        text.contains(
            "  shop.db as text (sqlite3 {} .dump):\n    --- a/shop.db\n    +++ b/shop.db\n"
        ) && text.contains("    +INSERT INTO orders VALUES(2,'notebook');\n"),
        "{text}"
    );
    // The viewer's trial page shows the same diff, marked line by line.
    let page = viewer_page(&with.store(), "t.agent.0");
    assert!(
        page.contains("<section class=\"diff-file text-diff\"><p class=\"file\"><b>as text</b> <code>shop.db</code> (<code>sqlite3 {} .dump</code>)</p><pre class=\"diff\">")
            && page.contains("<span class=\"add\">+INSERT INTO orders VALUES(2,'notebook');</span>"),
        "{page}"
    );
    // A rescore reads the file through the text the trial kept: the same outcome.
    let store = with.store();
    let out = with.proctor(
        As::Me,
        &["rescore", "latest", "--store", store.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("no outcome changed"), "{}", out.stderr);

    // In copy mode too.
    let copied = lab("text-diff-copy", DUMP, NOTEBOOK, &[INSERT]);
    let Some(record) = copied.run_graded(As::Me, true, &[]) else {
        return;
    };
    assert_eq!(record["isolation"]["workspace"], "bind", "{record:#}");
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert_eq!(record["text_diffs"][0]["diff"].as_str(), Some(diff));
    // Without a converter the same rule reads the database's bytes, which hold no such line.
    let without = lab("text-diff-none", "", NOTEBOOK, &[INSERT]);
    let Some(record) = without.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_ne!(record["outcome"], "completed", "{record:#}");
    assert!(record.get("text_diffs").is_none(), "{record:#}");
}

#[test]
fn a_forged_text_in_a_file_that_is_no_database_is_not_read_through_the_converter() {
    if !common::have_sqlite3() {
        return;
    }
    // The trick: replace the database with the line the rule looks for.
    let forged = lab(
        "text-diff-forged",
        DUMP,
        NOTEBOOK,
        &["printf \"INSERT INTO orders VALUES(2,'notebook');\\n\" > shop.db"],
    );
    let Some(record) = forged.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_ne!(record["outcome"], "completed", "{record:#}");
    // The converter reads the file as sqlite3 does: no database, so none of the forged text.
    let diff = record["text_diffs"][0]["diff"].as_str().unwrap();
    assert!(
        diff.contains("+/**** ERROR: (26) file is not a database *****/\n")
            && diff.contains("-INSERT INTO orders VALUES(1,'pen');\n")
            && !diff.contains("notebook"),
        "{diff}"
    );
    let text = show(&forged);
    assert!(
        text.contains("    +/**** ERROR: (26) file is not a database *****/\n"),
        "{text}"
    );
}

#[test]
fn a_converter_that_fails_is_recorded_and_gives_file_contains_no_text() {
    if !common::have_sqlite3() {
        return;
    }
    let lab = lab(
        "text-diff-fails",
        "[diff]\n\"*.db\" = [\"sh\", \"-c\", \"echo cannot read >&2; exit 3\", \"{}\"]",
        NOTEBOOK,
        &[INSERT],
    );
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_ne!(record["outcome"], "completed", "{record:#}");
    let t = &record["text_diffs"][0];
    assert!(t.get("diff").is_none(), "{t:#}");
    assert_eq!(
        t["error"],
        "`sh -c 'echo cannot read >&2; exit 3' shop.db` exited 3: cannot read"
    );
    let text = show(&lab);
    assert!(
        text.contains("  shop.db as text (sh -c echo cannot read >&2; exit 3 {}): not converted: `sh -c 'echo cannot read >&2; exit 3' shop.db` exited 3: cannot read\n"),
        "{text}"
    );
}

#[test]
fn a_diff_converter_without_a_program_or_a_path_is_refused_where_it_is_written() {
    let suite = common::TestSuite::minimal().edit(
        "[[variants]]",
        "[diff]\n\"*.db\" = [\"sqlite3\", \".dump\"]\n\"[\" = [\"cat\", \"{}\"]\n\n[[variants]]",
    );
    let out = suite.validate();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 2, "{text}");
    let flat = common::unwrapped(&text);
    assert!(
        flat.contains(
            "suite.toml:8:10: `[diff]` converter of `*.db` needs a program and `{}` for the file's path"
        ),
        "{text}"
    );
    assert!(
        flat.contains("suite.toml:9:7: `[diff]` glob `[` does not compile"),
        "{text}"
    );
}
