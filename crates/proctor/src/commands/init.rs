//! `proctor init DIR`: a commented starter suite that `validate` accepts.

use std::path::Path;

use anyhow::Context;

use crate::exit::{Error, Status};

/// The starter suite's files: path inside the suite, content.
const FILES: &[(&str, &str)] = &[
    (
        "suite.toml",
        include_str!("../../templates/init/suite.toml"),
    ),
    (
        "fixture/greet.py",
        include_str!("../../templates/init/fixture/greet.py"),
    ),
    (
        "holdout/fix-greeting/check_greet.py",
        include_str!("../../templates/init/holdout/fix-greeting/check_greet.py"),
    ),
    (
        "agents/oracle/fix-greeting.toml",
        include_str!("../../templates/init/agents/oracle/fix-greeting.toml"),
    ),
    (
        "agents/null/fix-greeting.toml",
        include_str!("../../templates/init/agents/null/fix-greeting.toml"),
    ),
    (
        "answers/fix-greeting.md",
        include_str!("../../templates/init/answers/fix-greeting.md"),
    ),
];

/// Writes the starter suite into `dir`, refusing to overwrite anything.
pub fn run(dir: &Path) -> Result<Status, Error> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_none();
        if !empty {
            return Err(Error::usage(
                format!("{} exists and is not empty", dir.display()),
                "choose a new folder name; init never overwrites files",
            ));
        }
    }
    for (rel, content) in FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, content)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    eprintln!("wrote a starter suite to {}", dir.display());
    eprintln!(
        "next: proctor validate {0} && proctor run {0} --dry-run",
        dir.display()
    );
    Ok(Status::Success)
}
