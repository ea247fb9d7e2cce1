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
    let asked = Checks {
        format,
        tasks,
        config,
        image_cache,
    };
    let Found { suite, warnings } = match Suite::parse_all(dir) {
        Err(problems) => Found {
            suite: Err(problems),
            warnings: Vec::new(),
        },
        Ok(suite) => check_parsed(suite, &asked)?,
    };
    if format == Format::Text {
        for w in &warnings {
            eprint!("{}", crate::render::problem(w));
        }
    }
    report(dir, &asked, suite, &warnings)
}

/// What the checks found: the suite when it is valid, else its problems; and the warnings.
struct Found {
    suite: Result<Suite, Vec<Problem>>,
    warnings: Vec<Problem>,
}

/// What `validate` was asked: its output format, the tasks to check, the user's model
/// configuration and the image cache to pull into.
struct Checks<'a> {
    format: Format,
    tasks: &'a [String],
    config: Option<&'a Path>,
    image_cache: Option<&'a Path>,
}

/// Every check of a parsed suite, in order, each only when the ones before found nothing: the
/// suite's own, its variants' models, then (with an image cache) its images. Gives the suite or
/// its problems, and the warnings.
fn check_parsed(suite: Suite, asked: &Checks) -> Result<Found, Error> {
    let tasks = asked.tasks;
    proctor_runner::opening::known_tasks(&suite, tasks)?;
    let options = Options {
        search_path: Some(proctor_runner::allow::search_path()),
        tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
        history: true,
    };
    let checked = check(&suite, &options);
    let mut problems = checked.problems;
    if problems.is_empty() {
        problems = access::model_problems(&suite, asked.config)?;
    }
    if problems.is_empty() && asked.image_cache.is_some() {
        pull_images(&suite, asked)?;
    }
    Ok(Found {
        suite: if problems.is_empty() {
            Ok(suite)
        } else {
            Err(problems)
        },
        warnings: checked.warnings,
    })
}

/// Pulls and unpacks the image of every task that will run into the image cache, as `run`
/// does before any trial (built from a task's `build` folder when it cannot be pulled); the
/// tasks whose image cannot be had are a usage error that names every one with its reason.
fn pull_images(suite: &Suite, asked: &Checks) -> Result<(), Error> {
    let ids: Vec<&str> = suite
        .file
        .tasks
        .iter()
        .map(|t| t.id.get_ref().as_str())
        .filter(|t| asked.tasks.is_empty() || asked.tasks.iter().any(|x| x == t))
        .collect();
    let images = proctor_runner::provision::Images {
        cache: asked.image_cache,
        config: asked.config,
    };
    let provisioned = proctor_runner::provision::each_task(suite, &ids, images, false)?;
    if asked.format == Format::Text {
        for (task, image) in &provisioned.images {
            let how = image.note.as_deref().unwrap_or("unpacked");
            eprintln!(
                "task `{task}`: image {} {how} ({})",
                image.reference, image.digest
            );
        }
    }
    if provisioned.failed.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = provisioned
        .failed
        .iter()
        .map(|(task, f)| format!("task `{task}`: image `{}`: {}", f.image, f.reason))
        .collect();
    Err(Error::usage(
        format!(
            "{} task(s) whose image cannot be had:\n{}",
            lines.len(),
            lines.join("\n")
        ),
        "check the references (docs/environments.md); `proctor images pull IMAGE` tries one alone, and `validate --oracle` runs the other tasks",
    ))
}

/// Says what was found: a valid suite's summary (with the warnings of missing provider keys),
/// or every problem; the exit status follows.
fn report(
    dir: &Path,
    asked: &Checks,
    checked: Result<Suite, Vec<Problem>>,
    warnings: &[Problem],
) -> Result<Status, Error> {
    let warning_lines = warnings.iter().map(|w| w.to_string());
    match (checked, asked.format) {
        (Ok(suite), Format::Text) => {
            for w in access::key_warnings(&suite, asked.config) {
                eprintln!("warning: {w}");
            }
            println!("{}", valid_line(dir, &suite));
            Ok(Status::Success)
        }
        (Ok(suite), Format::Json) => {
            let warnings: Vec<String> = warning_lines
                .chain(access::key_warnings(&suite, asked.config))
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

/// The one line a valid suite gets: its id and how many tasks, variants, services and hidden
/// mutations it has.
fn valid_line(dir: &Path, suite: &Suite) -> String {
    let mutations: usize = suite
        .file
        .tasks
        .iter()
        .map(|t| suite.mutations(t.id.get_ref()).map_or(0, |m| m.len()))
        .sum();
    format!(
        "{}: valid suite `{}`: {} task(s), {} variant(s), {} service(s), {} mutation(s)",
        dir.display(),
        suite.id(),
        suite.file.tasks.len(),
        suite.file.variants.len(),
        // The suite's services and every task's own (its sidecars, most often).
        suite.file.services.len()
            + suite
                .file
                .tasks
                .iter()
                .map(|t| t.services.len())
                .sum::<usize>(),
        mutations
    )
}

/// A problem as `validate --format json` lists it.
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
