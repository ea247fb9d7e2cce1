//! Which folders are tasks: each argument is one task folder, or a folder of task folders.

use std::path::{Path, PathBuf};

use crate::error::ImportError;
use crate::model::Format;

/// Whether `dir` is a task folder of `format`.
fn is_task(format: Format, dir: &Path) -> bool {
    dir.join(format.marker()).is_file()
}

/// The task folders named by `inputs`, in order, each once. Folders inside a dataset folder
/// that are not tasks are described in `notes`.
pub(crate) fn task_dirs(
    format: Format,
    inputs: &[PathBuf],
    notes: &mut Vec<String>,
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
    for input in inputs {
        if !input.exists() {
            return Err(ImportError::MissingInput(input.clone()));
        }
        if is_task(format, input) {
            push(input.clone(), &mut out);
            continue;
        }
        let not_found = || ImportError::NoTasksFound {
            path: input.clone(),
            format: format.name(),
            marker: format.marker(),
        };
        if !input.is_dir() {
            return Err(not_found());
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
            return Err(not_found());
        }
        for other in others {
            notes.push(format!(
                "{}: not a {} task folder (no {}), ignored",
                other.display(),
                format.name(),
                format.marker()
            ));
        }
        for task in tasks {
            push(task, &mut out);
        }
    }
    Ok(out)
}
