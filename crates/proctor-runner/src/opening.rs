//! Opening the suite a run executes: validated (a fixture's history audited when asked), every
//! problem named, only the tasks that run needing their files; and its `--task`s known. What
//! setting a run up, `validate`, a worker and `collect` share.

use std::path::Path;

use proctor_suite::{Problem, Suite};

use crate::error::RunError;

/// Opens and validates the suite; with `tasks`, only those tasks need their scripted-agent and
/// model-script files.
pub fn open_for_run(dir: &Path, tasks: &[String]) -> Result<Suite, RunError> {
    open_checked(dir, tasks, false).map(|(suite, _)| suite)
}

/// [`open_for_run`], with the warnings found. With `history`, the fixture's `.git` folders are
/// audited too (a leak in them refuses the run; the rest are warnings).
pub fn open_checked(
    dir: &Path,
    tasks: &[String],
    history: bool,
) -> Result<(Suite, Vec<Problem>), RunError> {
    let options = proctor_suite::validate::Options {
        tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
        history,
        ..Default::default()
    };
    let invalid = |problems| RunError::InvalidSuite {
        suite: dir.display().to_string(),
        problems,
    };
    let suite = Suite::parse_all(dir).map_err(invalid)?;
    let checked = proctor_suite::validate::check(&suite, &options);
    if checked.problems.is_empty() {
        Ok((suite, checked.warnings))
    } else {
        Err(invalid(checked.problems))
    }
}

/// Fails with a usage error when `--task` names a task the suite does not have.
pub fn known_tasks(suite: &Suite, tasks: &[String]) -> Result<(), RunError> {
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
        return Err(RunError::usage(
            format!("suite `{}` has no task `{task}`", suite.id()),
            hint,
        ));
    }
    Ok(())
}
