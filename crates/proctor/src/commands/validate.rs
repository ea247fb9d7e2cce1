//! `proctor validate SUITE`: every problem of a suite, or a short summary of a valid one.

use std::path::Path;

use proctor_suite::validate::{problems_with, Options};
use proctor_suite::{Problem, Suite};

use crate::cli::Format;
use crate::exit::{Error, Status};

/// Checks the suite; exits 2 with every problem when it is invalid.
///
/// Beyond what every command checks, bare `allow` names are looked up as the runner will (on
/// `PATH`, then beside proctor). With `tasks`, only those tasks need their scripted-agent and
/// model-script files; a task id the suite does not have is a usage error.
pub fn run(dir: &Path, format: Format, tasks: &[String]) -> Result<Status, Error> {
    let checked = match Suite::parse(dir) {
        Err(problem) => Err(vec![problem]),
        Ok(suite) => {
            known_tasks(&suite, tasks)?;
            let options = Options {
                search_path: Some(proctor_runner::allow::search_path()),
                tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
            };
            let problems = problems_with(&suite, &options);
            if problems.is_empty() {
                Ok(suite)
            } else {
                Err(problems)
            }
        }
    };
    match (checked, format) {
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
            let list: Vec<_> = problems.iter().map(problem_json).collect();
            let doc = serde_json::json!({ "valid": false, "problems": list });
            println!("{doc:#}");
            Ok(Status::Invalid)
        }
    }
}

/// Fails with a usage error when `--task` names a task the suite does not have.
fn known_tasks(suite: &Suite, tasks: &[String]) -> Result<(), Error> {
    let ids: Vec<&str> = suite
        .file
        .tasks
        .iter()
        .map(|t| t.id.get_ref().as_str())
        .collect();
    for task in tasks {
        if ids.contains(&task.as_str()) {
            continue;
        }
        let listed = ids.join(", ");
        let hint = match proctor_suite::problem::nearest(task, ids.iter().copied()) {
            Some(near) => format!("did you mean `--task {near}`? The tasks are: {listed}"),
            None => format!("the tasks of this suite are: {listed}"),
        };
        return Err(Error::usage(
            format!("suite `{}` has no task `{task}`", suite.id()),
            hint,
        ));
    }
    Ok(())
}

fn problem_json(p: &Problem) -> serde_json::Value {
    serde_json::json!({
        "kind": p.kind,
        "code": p.kind.code(),
        "file": p.file.display().to_string(),
        "line": p.location.as_ref().map(|l| l.line),
        "column": p.location.as_ref().map(|l| l.column),
        "message": p.message,
        "help": p.help,
    })
}
