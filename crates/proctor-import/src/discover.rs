//! Which folders are tasks: each argument is one task folder, or a folder of task folders.

use std::path::{Path, PathBuf};

use crate::error::ImportError;
use crate::model::Format;
use crate::report::NotTask;

/// Whether `dir` is a task folder of `format`.
fn is_task(format: Format, dir: &Path) -> bool {
    dir.join(format.marker()).is_file()
}

/// The task folders named by `inputs`, in order, each once. A folder that is not a task and
/// holds none (an input, or a folder inside a dataset folder) is added to `not_tasks` and
/// skipped: it never stops the import of the others. An error only when there is no input, an
/// input does not exist, or no input holds any task at all.
pub(crate) fn task_dirs(
    format: Format,
    inputs: &[PathBuf],
    not_tasks: &mut Vec<NotTask>,
) -> Result<Vec<PathBuf>, ImportError> {
    if inputs.is_empty() {
        return Err(ImportError::NoInput);
    }
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = Vec::new();
    let mut push = |dir: PathBuf, out: &mut Vec<PathBuf>| {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if !seen.contains(&key) {
            seen.push(key);
            out.push(dir);
        }
    };
    let no_marker = || {
        format!(
            "not a {} task folder (no {})",
            format.name(),
            format.marker()
        )
    };
    let mut first_empty: Option<PathBuf> = None;
    for input in inputs {
        if !input.exists() {
            return Err(ImportError::MissingInput(input.clone()));
        }
        if is_task(format, input) {
            push(input.clone(), &mut out);
            continue;
        }
        if !input.is_dir() {
            first_empty.get_or_insert_with(|| input.clone());
            not_tasks.push(NotTask {
                folder: input.clone(),
                why: format!("{}, and not a folder", no_marker()),
            });
            continue;
        }
        let mut children: Vec<PathBuf> = std::fs::read_dir(input)
            .map_err(|e| ImportError::io(input, e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('.'))
            })
            .collect();
        children.sort();
        let (tasks, others): (Vec<PathBuf>, Vec<PathBuf>) =
            children.into_iter().partition(|p| is_task(format, p));
        if tasks.is_empty() {
            first_empty.get_or_insert_with(|| input.clone());
            not_tasks.push(NotTask {
                folder: input.clone(),
                why: format!("{}, and no folder in it is one", no_marker()),
            });
            continue;
        }
        for other in others {
            not_tasks.push(NotTask {
                folder: other,
                why: no_marker(),
            });
        }
        for task in tasks {
            push(task, &mut out);
        }
    }
    match first_empty {
        Some(path) if out.is_empty() => Err(ImportError::NoTasksFound {
            path,
            format: format.name(),
            marker: format.marker(),
        }),
        _ => Ok(out),
    }
}
