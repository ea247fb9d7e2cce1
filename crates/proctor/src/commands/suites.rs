//! `proctor suites [DIR]`: the suites under a folder, with their task and variant counts.

use std::path::Path;

use proctor_report::Table;
use proctor_suite::Suite;
use walkdir::WalkDir;

use crate::exit::{Error, Status};

/// Folders never searched: build output, dependencies, version control and stores.
const SKIPPED: &[&str] = &["target", "node_modules", ".git", ".proctor"];

/// Lists every folder under `dir` holding a `suite.toml`.
pub fn run(dir: &Path) -> Result<Status, Error> {
    if !dir.is_dir() {
        return Err(Error::usage(
            format!("{} is not a directory", dir.display()),
            "pass a folder to search for suites",
        ));
    }
    let mut table = Table::new(&["SUITE", "ID", "TASKS", "VARIANTS", "STATUS"]);
    let mut found = 0;
    let walker = WalkDir::new(dir)
        .max_depth(6)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !e.file_name().to_str().is_some_and(|n| SKIPPED.contains(&n)));
    for entry in walker.filter_map(Result::ok) {
        if entry.file_name() != "suite.toml" || !entry.file_type().is_file() {
            continue;
        }
        let Some(suite_dir) = entry.path().parent() else {
            continue;
        };
        found += 1;
        let shown = suite_dir.display().to_string();
        match Suite::parse(suite_dir) {
            Ok(suite) => {
                let status = match proctor_suite::validate::problems(&suite).len() {
                    0 => "valid".to_string(),
                    n => format!("{n} problem(s): run `proctor validate {shown}`"),
                };
                table.row([
                    shown,
                    suite.id().to_string(),
                    suite.file.tasks.len().to_string(),
                    suite.file.variants.len().to_string(),
                    status,
                ]);
            }
            Err(p) => table.row([
                shown.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!(
                    "does not parse ({}): run `proctor validate {shown}`",
                    p.kind.code()
                ),
            ]),
        }
    }
    if found == 0 {
        eprintln!("no suite.toml found under {}", dir.display());
    } else {
        print!("{}", table.text());
    }
    Ok(Status::Success)
}
