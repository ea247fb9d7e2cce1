//! `proctor validate SUITE`: every problem of a suite, or a short summary of a valid one.

use std::path::Path;

use proctor_suite::Suite;

use crate::cli::Format;
use crate::exit::{Error, Status};

/// Checks the suite; exits 2 with every problem when it is invalid.
pub fn run(dir: &Path, format: Format) -> Result<Status, Error> {
    match (Suite::open(dir), format) {
        (Ok(suite), Format::Text) => {
            let mutations: usize = suite
                .file
                .tasks
                .iter()
                .map(|t| suite.mutations(t.id.get_ref()).map_or(0, |m| m.len()))
                .sum();
            println!(
                "{}: valid suite `{}`: {} task(s), {} variant(s), {} service(s), {} mutation(s)",
                dir.display(),
                suite.id(),
                suite.file.tasks.len(),
                suite.file.variants.len(),
                suite.file.services.len(),
                mutations
            );
            Ok(Status::Success)
        }
        (Ok(suite), Format::Json) => {
            let doc = serde_json::json!({ "suite": suite.id(), "valid": true, "problems": [] });
            println!("{doc:#}");
            Ok(Status::Success)
        }
        (Err(problems), Format::Text) => Err(Error::InvalidSuite {
            suite: dir.display().to_string(),
            problems,
        }),
        (Err(problems), Format::Json) => {
            let list: Vec<_> = problems
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "kind": p.kind,
                        "code": p.kind.code(),
                        "file": p.file.display().to_string(),
                        "line": p.location.as_ref().map(|l| l.line),
                        "column": p.location.as_ref().map(|l| l.column),
                        "message": p.message,
                        "help": p.help,
                    })
                })
                .collect();
            let doc = serde_json::json!({ "valid": false, "problems": list });
            println!("{doc:#}");
            Ok(Status::Invalid)
        }
    }
}
