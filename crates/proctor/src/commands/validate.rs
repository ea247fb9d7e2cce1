//! `proctor validate SUITE`: every problem of a suite, or a short summary of a valid one.

use std::path::Path;

use proctor_runner::gateway;
use proctor_suite::validate::{check, Options};
use proctor_suite::{Problem, ProblemKind, Suite};

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
            known_tasks(&suite, tasks)?;
            let options = Options {
                search_path: Some(proctor_runner::allow::search_path()),
                tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
                history: true,
            };
            let checked = check(&suite, &options);
            warnings = checked.warnings;
            let mut problems = checked.problems;
            if problems.is_empty() {
                problems = model_problems(&suite, config)?;
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
            for w in key_warnings(&suite, config) {
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
            let warnings: Vec<String> = warning_lines.chain(key_warnings(&suite, config)).collect();
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

/// The variants whose model is reached through the model gateway, checked against the user's
/// configuration: a model that is not `PROVIDER/MODEL` of a known provider, and a CLI whose wire
/// API the provider does not serve, are problems at the variant. The configuration (`config`,
/// else the default) is read only when some variant needs it.
fn model_problems(suite: &Suite, config: Option<&Path>) -> Result<Vec<Problem>, Error> {
    let variants: Vec<_> = suite
        .file
        .variants
        .iter()
        .filter(|v| gateway::uses_gateway(v))
        .collect();
    if variants.is_empty() {
        return Ok(Vec::new());
    }
    let config = proctor_runner::access::load_config(config)?;
    Ok(variants
        .into_iter()
        .filter_map(|v| gateway::variant_model(v, &config).err().map(|e| (v, e)))
        .map(|(v, e)| {
            Problem::at(ProblemKind::Inconsistent, &suite.source, v.id.span(), e.to_string())
                .with_help("see docs/models.md: models are PROVIDER/MODEL, and each agent CLI needs a provider that serves its wire API")
        })
        .collect())
}

/// The key variables of the providers the suite's variants use that are not set here: a run
/// would stop before any trial, naming them.
fn key_warnings(suite: &Suite, config: Option<&Path>) -> Vec<String> {
    let Ok(config) = proctor_runner::access::load_config(config) else {
        return Vec::new();
    };
    let models: std::collections::BTreeMap<String, _> = suite
        .file
        .variants
        .iter()
        .filter_map(|v| {
            Some((
                v.id.get_ref().clone(),
                gateway::variant_model(v, &config).ok()??,
            ))
        })
        .collect();
    match gateway::keys_for(&config, &models) {
        Err(e) => vec![format!("{e}: `proctor run` would stop before any trial")],
        Ok(_) => Vec::new(),
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
