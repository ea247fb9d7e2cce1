//! `proctor validate SUITE`: every problem of a suite, or a short summary of a valid one.

use std::path::Path;

use proctor_runner::access;
use proctor_suite::validate::{check, Options};
use proctor_suite::{Problem, Suite};

use crate::cli::Format;
use crate::exit::{Error, Status};

/// Checks the suite; exits 2 with every problem when it is invalid.
///
/// Beyond what every command checks, bare `allow` names are looked up as the runner will (on
/// `PATH`, then beside proctor). With `tasks`, only those tasks need their scripted-agent and
/// model-script files; a task id the suite does not have is a usage error. Variants on real
/// models are checked against the user's configuration (`$PROCTOR_CONFIG`, else the default
/// file, or `config` when given, as `run --config`), and a provider key missing from the
/// environment is a warning. With `image_cache` (as `run --image-cache`), the image of every
/// task that will run is pulled and unpacked there, as `run` does before any trial, so an image
/// that cannot be had is a usage error now (exit 2, naming the task and the image).
pub fn run(
    dir: &Path,
    format: Format,
    tasks: &[String],
    config: Option<&Path>,
    image_cache: Option<&Path>,
) -> Result<Status, Error> {
    let mut warnings = Vec::new();
    let checked = match Suite::parse(dir) {
        Err(problem) => Err(vec![problem]),
        Ok(suite) => {
            proctor_runner::request::known_tasks(&suite, tasks)?;
            let options = Options {
                search_path: Some(proctor_runner::allow::search_path()),
                tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
                history: true,
            };
            let checked = check(&suite, &options);
            warnings = checked.warnings;
            let mut problems = checked.problems;
            if problems.is_empty() {
                problems = access::model_problems(&suite, config)?;
            }
            if problems.is_empty() && image_cache.is_some() {
                let ids: Vec<&str> = suite
                    .file
                    .tasks
                    .iter()
                    .map(|t| t.id.get_ref().as_str())
                    .filter(|t| tasks.is_empty() || tasks.iter().any(|x| x == t))
                    .collect();
                let images =
                    proctor_runner::provision::for_tasks(&suite, &ids, config, image_cache)?;
                for (task, image) in &images {
                    if format == Format::Text {
                        eprintln!(
                            "task `{task}`: image {} unpacked ({})",
                            image.reference, image.digest
                        );
                    }
                }
            }
            if problems.is_empty() {
                Ok(suite)
            } else {
                Err(problems)
            }
        }
    };
    if format == Format::Text {
        for w in &warnings {
            eprint!("{}", crate::render::problem(w));
        }
    }
    let warning_lines = warnings.iter().map(|w| w.to_string());
    match (checked, format) {
        (Ok(suite), Format::Text) => {
            for w in access::key_warnings(&suite, config) {
                eprintln!("warning: {w}");
            }
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
            let warnings: Vec<String> = warning_lines
                .chain(access::key_warnings(&suite, config))
                .collect();
            let doc = serde_json::json!({ "suite": suite.id(), "valid": true, "problems": [], "warnings": warnings });
            println!("{doc:#}");
            Ok(Status::Success)
        }
        (Err(problems), Format::Text) => Err(Error::InvalidSuite {
            suite: dir.display().to_string(),
            problems,
        }),
        (Err(problems), Format::Json) => {
            let list: Vec<_> = problems.iter().map(problem_json).collect();
            let warnings: Vec<String> = warning_lines.collect();
            let doc = serde_json::json!({ "valid": false, "problems": list, "warnings": warnings });
            println!("{doc:#}");
            Ok(Status::Invalid)
        }
    }
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
