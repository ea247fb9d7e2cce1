//! Where a comparison's arms come from, read from the store: each arm's run, variant and
//! scoring; the suite its agents ran against and the suite whose rules scored it; which parts
//! of the suite differ between the arms (from the suites the runs and rescores keep); and the
//! other runs of the suite in the store that hold an arm's variant and are left out.

use std::collections::BTreeMap;
use std::path::Path;

use proctor_report::{ArmSource, Provenance, RunsLeftOut, Side, SuiteDifference, TrialRow};
use proctor_store::{KeptSuite, RunId, Scoring, Store};

use crate::error::{Context, RunError};

/// One arm as it was read: its run, the scoring read, and its rows (one variant).
pub(crate) struct ArmRead<'a> {
    /// The run.
    pub run: &'a RunId,
    /// The scoring read.
    pub scoring: &'a Scoring,
    /// The arm's rows.
    pub rows: &'a [TrialRow],
}

impl ArmRead<'_> {
    fn variant(&self) -> &str {
        self.rows.first().map_or("", |r| r.variant.as_str())
    }
}

/// The arm read from `rows` among the runs and scorings read (`scorings`).
pub(crate) fn arm_read<'a>(
    rows: &'a [TrialRow],
    scorings: &'a [(RunId, Scoring)],
) -> Option<ArmRead<'a>> {
    let run = &rows.first()?.run_id;
    let (id, scoring) = scorings.iter().find(|(id, _)| id.as_str() == run)?;
    Some(ArmRead {
        run: id,
        scoring,
        rows,
    })
}

/// The provenance of a comparison of arms `a` and `b` of suite `suite_id`.
pub(crate) fn provenance(
    store: &Store,
    suite_id: &str,
    a: &ArmRead<'_>,
    b: &ArmRead<'_>,
) -> Result<Provenance, RunError> {
    let source = |arm: &ArmRead<'_>| -> Result<ArmSource, RunError> {
        let meta = store
            .run_meta(arm.run)
            .with_context(|| format!("cannot read run {}", arm.run))?;
        Ok(ArmSource {
            run_id: arm.run.to_string(),
            variant: arm.variant().to_string(),
            scoring: arm.scoring.label(),
            rescored: arm.scoring.is_rescore(),
            scored_suite_hash: arm
                .rows
                .first()
                .map_or_else(|| meta.suite_hash.clone(), |r| r.suite_hash.clone()),
            ran_suite_hash: meta.suite_hash,
        })
    };
    let (sa, sb) = (source(a)?, source(b)?);
    let rules_differ = (sa.scored_suite_hash != sb.scored_suite_hash).then(|| {
        difference(
            (
                &sa.scored_suite_hash,
                &rules_dir(store, a.run, Some(a.scoring)),
                a,
            ),
            (
                &sb.scored_suite_hash,
                &rules_dir(store, b.run, Some(b.scoring)),
                b,
            ),
        )
    });
    // What the agents ran against, when it differs otherwise than the rules do (the rules'
    // difference already names the parts of runs never rescored).
    let ran_differ = (sa.ran_suite_hash != sb.ran_suite_hash
        && (&sa.ran_suite_hash, &sb.ran_suite_hash)
            != (&sa.scored_suite_hash, &sb.scored_suite_hash))
        .then(|| {
            difference(
                (&sa.ran_suite_hash, &rules_dir(store, a.run, None), a),
                (&sb.ran_suite_hash, &rules_dir(store, b.run, None), b),
            )
        });
    Ok(Provenance {
        runs_left_out: runs_left_out(store, suite_id, a, b)?,
        a: sa,
        b: sb,
        suite_id: suite_id.to_string(),
        rules_differ,
        ran_differ,
    })
}

/// Where the suite of `scoring` of `run` is kept (its own suite for `None`).
fn rules_dir(store: &Store, run: &RunId, scoring: Option<&Scoring>) -> std::path::PathBuf {
    let dir = store.run_dir(run);
    match scoring {
        Some(s) => s.rules_dir(&dir),
        None => dir,
    }
}

/// The other runs of suite `suite_id` holding finished trials of an arm's variant: for each
/// variant of the comparison (once when both arms have the same), the runs but the arms' own.
fn runs_left_out(
    store: &Store,
    suite_id: &str,
    a: &ArmRead<'_>,
    b: &ArmRead<'_>,
) -> Result<Vec<RunsLeftOut>, RunError> {
    let mut runs = store
        .list_runs()
        .context("cannot list the store's runs to find the ones left out")?;
    // Oldest first: ids made within one second do not sort by time.
    runs.sort_by(|x, y| {
        (x.meta.started_at, x.id.as_str()).cmp(&(y.meta.started_at, y.id.as_str()))
    });
    let mut wanted: Vec<(String, Vec<Side>, Vec<&RunId>)> = Vec::new();
    if a.variant() == b.variant() {
        wanted.push((
            a.variant().into(),
            vec![Side::A, Side::B],
            vec![a.run, b.run],
        ));
    } else {
        wanted.push((a.variant().into(), vec![Side::A], vec![a.run]));
        wanted.push((b.variant().into(), vec![Side::B], vec![b.run]));
    }
    let mut out = Vec::new();
    for (variant, arms, own) in wanted {
        let mut left = Vec::new();
        for listing in &runs {
            if listing.meta.suite_id != suite_id
                || own.contains(&&listing.id)
                || !listing.meta.variants.contains(&variant)
            {
                continue;
            }
            let counts = store
                .cell_counts(&listing.id)
                .with_context(|| format!("cannot count the trials of run {}", listing.id))?;
            if counts.iter().any(|c| c.variant == variant && c.n > 0) {
                left.push(listing.id.to_string());
            }
        }
        if !left.is_empty() {
            out.push(RunsLeftOut {
                variant,
                arms,
                runs: left,
            });
        }
    }
    Ok(out)
}

/// How the suites of hashes `a.0` and `b.0`, kept in the folders `a.1` and `b.1`, differ.
fn difference(a: (&str, &Path, &ArmRead<'_>), b: (&str, &Path, &ArmRead<'_>)) -> SuiteDifference {
    let read = |dir: &Path, arm: &ArmRead<'_>| -> Result<KeptSuite, String> {
        match proctor_store::kept_suite_list(dir) {
            Ok(Some(list)) => Ok(list),
            Ok(None) => Err(format!(
                "run {} keeps no copy of that suite (it was made or rescored before runs kept them)",
                arm.run
            )),
            Err(e) => Err(format!("cannot read run {}'s copy of it: {e}", arm.run)),
        }
    };
    let (parts, unknown) = match (read(a.1, a.2), read(b.1, b.2)) {
        (Ok(la), Ok(lb)) => (
            parts_that_differ(
                &la,
                &lb,
                &a.1.join(proctor_store::KEPT_SUITE_DIR),
                &b.1.join(proctor_store::KEPT_SUITE_DIR),
            ),
            None,
        ),
        (Err(why), _) | (_, Err(why)) => (Vec::new(), Some(why)),
    };
    SuiteDifference {
        a: a.0.to_string(),
        b: b.0.to_string(),
        parts,
        unknown,
    }
}

/// An entry's name: its text, and its exact bytes in hex when it is not UTF-8.
type EntryName<'a> = (&'a str, Option<&'a str>);

/// Each entry of a kept suite, by its exact name: its kind and its content hash or link target.
fn entries(list: &KeptSuite) -> BTreeMap<EntryName<'_>, (&str, Option<&str>, Option<&str>)> {
    list.entries
        .iter()
        .map(|e| {
            (
                (e.path.as_str(), e.path_hex.as_deref()),
                (
                    e.kind.as_str(),
                    e.blake3.as_deref().or(e.target.as_deref()),
                    e.target_hex.as_deref(),
                ),
            )
        })
        .collect()
}

/// The parts of two kept suites (lists `la`, `lb`, folders `da`, `db`) that differ, named as a
/// reader knows them, each once, in path order.
fn parts_that_differ(la: &KeptSuite, lb: &KeptSuite, da: &Path, db: &Path) -> Vec<String> {
    let (ea, eb) = (entries(la), entries(lb));
    let toml_a = std::fs::read_to_string(da.join("suite.toml")).unwrap_or_default();
    let toml_b = std::fs::read_to_string(db.join("suite.toml")).unwrap_or_default();
    let fixture = fixture_dir(&toml_a);
    let mut paths: Vec<&str> = ea
        .iter()
        .filter(|(p, v)| eb.get(*p) != Some(*v))
        .map(|(p, _)| p.0)
        .chain(eb.keys().filter(|p| !ea.contains_key(*p)).map(|p| p.0))
        .collect();
    paths.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut add = |part: String| {
        if !parts.contains(&part) {
            parts.push(part);
        }
    };
    for path in paths {
        if path == "suite.toml" {
            for part in suite_toml_parts(&toml_a, &toml_b) {
                add(part);
            }
            continue;
        }
        let mut parts_of = path.split('/');
        let top = parts_of.next().unwrap_or(path);
        let task = parts_of.next();
        let part = if path == fixture || path.starts_with(&format!("{fixture}/")) {
            "fixture".to_string()
        } else {
            match (top, task) {
                ("holdout", Some(t)) => format!("holdout of task `{}`", t),
                ("mutations", Some(t)) => format!("mutations of task `{}`", t),
                ("answers", _) => "answer sheets".to_string(),
                (dir, Some(_)) => format!("{dir}/"),
                (file, None) => file.to_string(),
            }
        };
        add(part);
    }
    parts
}

/// The fixture folder a suite.toml names (`fixture` by default).
fn fixture_dir(text: &str) -> String {
    text.parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("fixture")?.as_str().map(str::to_string))
        .map(|f| f.trim_start_matches("./").trim_end_matches('/').to_string())
        .unwrap_or_else(|| "fixture".to_string())
}

/// The keys of a task that decide its grading: its checks in the broad sense.
const GRADING_KEYS: &[&str] = &[
    "success",
    "refusal",
    "rubric",
    "caps",
    "integrity",
    "expect",
    "negative_control",
    "interface",
    "holdout_at",
];

/// The parts of two suite.toml texts that differ: per task its prompt, checks or settings
/// (`checks of task `t``), a task only one has, and each other top-level table or key.
fn suite_toml_parts(a: &str, b: &str) -> Vec<String> {
    let (Ok(ta), Ok(tb)) = (a.parse::<toml::Table>(), b.parse::<toml::Table>()) else {
        return vec!["suite.toml".to_string()];
    };
    let tasks = |t: &toml::Table| -> Vec<(String, toml::Table)> {
        t.get("tasks")
            .and_then(toml::Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|v| {
                        let table = v.as_table()?;
                        Some((table.get("id")?.as_str()?.to_string(), table.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (tasks_a, tasks_b) = (tasks(&ta), tasks(&tb));
    let mut out = Vec::new();
    for (id, task_a) in &tasks_a {
        let Some((_, task_b)) = tasks_b.iter().find(|(i, _)| i == id) else {
            out.push(format!("task `{id}` (only in A's suite)"));
            continue;
        };
        let mut keys: Vec<&String> = task_a.keys().chain(task_b.keys()).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut kinds: Vec<&str> = Vec::new();
        for key in keys {
            if task_a.get(key) == task_b.get(key) {
                continue;
            }
            let kind = if key == "prompt" {
                "prompt"
            } else if GRADING_KEYS.contains(&key.as_str()) {
                "checks"
            } else {
                "settings"
            };
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        for kind in ["prompt", "checks", "settings"] {
            if kinds.contains(&kind) {
                out.push(format!("{kind} of task `{id}`"));
            }
        }
    }
    for (id, _) in &tasks_b {
        if !tasks_a.iter().any(|(i, _)| i == id) {
            out.push(format!("task `{id}` (only in B's suite)"));
        }
    }
    let mut keys: Vec<&String> = ta.keys().chain(tb.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        if key != "tasks" && ta.get(key) != tb.get(key) {
            out.push(format!("`{key}` of suite.toml"));
        }
    }
    if out.is_empty() {
        // Only the text differs (comments, layout): the same rules.
        out.push("suite.toml (comments or layout only)".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_toml_parts_name_the_task_and_what_of_it_changed() {
        let a = "id = \"s\"\n[[tasks]]\nid = \"t\"\nprompt = \"Do it.\"\n[tasks.success]\nall = [{ file_added = \"a\" }]\n[[tasks]]\nid = \"u\"\nprompt = \"P\"\n[tasks.success]\nall = []\n";
        let laxer = a.replace("all = [{ file_added = \"a\" }]", "all = []");
        assert_eq!(suite_toml_parts(a, &laxer), vec!["checks of task `t`"]);
        let reworded = a.replace("Do it.", "Do it now.");
        assert_eq!(suite_toml_parts(a, &reworded), vec!["prompt of task `t`"]);
        let commented = format!("# a note\n{a}");
        assert_eq!(
            suite_toml_parts(a, &commented),
            vec!["suite.toml (comments or layout only)"]
        );
        let more = format!("{a}[report]\nunderpowered_below = 2\n");
        assert_eq!(suite_toml_parts(a, &more), vec!["`report` of suite.toml"]);
    }

    #[test]
    fn kept_files_are_named_by_part() {
        let list = |entries: &[(&str, &str)]| KeptSuite {
            schema_version: 1,
            source: "/s".into(),
            entries: entries
                .iter()
                .map(|(p, h)| proctor_store::KeptEntry {
                    path: (*p).into(),
                    path_hex: None,
                    kind: "file".into(),
                    blake3: Some((*h).into()),
                    target: None,
                    target_hex: None,
                })
                .collect(),
        };
        let a = list(&[
            ("fixture/a.txt", "1"),
            ("holdout/t/test.sh", "2"),
            ("mutations/t/m.patch", "3"),
            ("agents/b/t.sh", "4"),
        ]);
        let b = list(&[
            ("fixture/a.txt", "1"),
            ("holdout/t/test.sh", "9"),
            ("mutations/t/m.patch", "3"),
            ("agents/b/t.sh", "8"),
            ("holdout/u/new.sh", "5"),
        ]);
        let none = Path::new("/nonexistent");
        assert_eq!(
            parts_that_differ(&a, &b, none, none),
            vec!["agents/", "holdout of task `t`", "holdout of task `u`"]
        );
    }
}
