//! Converts [Harbor](https://harborframework.com/docs/tasks) tasks and the older
//! Terminal-Bench tasks into a proctor suite folder.
//!
//! A Harbor task is a folder with `task.toml`, `instruction.md`, `environment/`, `tests/test.sh`
//! (which writes `/logs/verifier/reward.txt` or `reward.json`) and `solution/solve.sh`. A
//! Terminal-Bench task is a folder with `task.yaml`, `docker-compose.yaml` and a `Dockerfile`,
//! `run-tests.sh`, `tests/` and `solution.sh`. Each imported task becomes a `[[tasks]]` entry of
//! the suite: its instruction is the prompt, its image the `[tasks.environment]`, its tests a
//! holdout run by a generated `proctor-verify.sh` check, and its solution the scripted oracle
//! `agents/oracle/TASK_ID.toml`. What cannot be carried over is said in the [`ImportReport`];
//! nothing is guessed or dropped silently. `docs/import.md` describes the mapping field by field.
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! use proctor_import::{import_harbor, ImportOptions};
//!
//! let report = import_harbor(
//!     &[PathBuf::from("terminal-bench-2/tasks")],
//!     Path::new("suites/tb2"),
//!     &ImportOptions::default(),
//! )?;
//! print!("{report}");
//! # Ok::<(), proctor_import::ImportError>(())
//! ```

mod build;
mod compose;
mod discover;
mod error;
mod fields;
mod files;
mod harbor;
mod harbor_steps;
mod harbor_values;
mod ident;
mod image;
mod leak;
mod metadata;
mod model;
mod oracle;
mod parsers;
mod report;
mod scan;
mod settings;
mod start;
mod suite_toml;
mod tbench;
mod text;
mod verify;
mod write;
mod yaml;

use std::path::{Path, PathBuf};

pub use build::{BuildImages, BuildStats, Progress};
pub use error::ImportError;
pub use report::{ImportReport, NotTask, Skipped, TaskId, Warning};

use model::Format;

/// Choices a caller may make about the generated suite. The default derives everything from the
/// tasks and the output folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The suite's `id`. Default: the output folder's name, with every character other than
    /// letters, digits, `-` and `_` replaced by `-`.
    pub suite_id: Option<String>,
    /// The suite's human-readable `name`. Default: none.
    pub name: Option<String>,
    /// How to build the images of tasks that have only a Dockerfile (Harbor's
    /// `environment/Dockerfile`, Terminal-Bench's `Dockerfile` or compose `build:`). Default:
    /// none, and such a task is skipped with the commands that build its image.
    pub build: Option<BuildImages>,
    /// Terminal-Bench: the key of the `descriptions` entry each task is prompted with
    /// (`--description KEY`); a task without that entry is skipped. Default: the entry the
    /// task's `instruction` names, else its `instruction`, else its `base` entry, else its
    /// first.
    pub description: Option<String>,
}

/// Imports Harbor tasks into a new suite folder `out`.
///
/// Each path in `tasks` is either one task folder (it holds a `task.toml`) or a folder of task
/// folders (a dataset such as Terminal-Bench 2's `tasks/`). `out` must not exist, or be an empty
/// folder; the suite is written next to it first and moved into place whole, so a failed import
/// leaves nothing behind.
///
/// A task whose image is only a Dockerfile is built into the image cache when
/// [`ImportOptions::build`] says how (a failed build skips it with the builder's error), else
/// skipped with the commands that build it.
///
/// Returns what was imported, skipped (with the reason), what the builds did, and every
/// warning. A task that cannot be imported is
/// skipped, not an error; the import fails only when no task at all can be imported
/// ([`ImportError::NothingImported`], which carries the report), when an input path is not a
/// task folder, or when the output cannot be written.
pub fn import_harbor(
    tasks: &[PathBuf],
    out: &Path,
    options: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    write::import(Format::Harbor, tasks, out, options)
}

/// Imports older Terminal-Bench tasks (`task.yaml`, `run-tests.sh`, `solution.sh`) into a new
/// suite folder `out`.
///
/// Each path in `tasks` is either one task folder (it holds a `task.yaml`) or a folder of task
/// folders (Terminal-Bench's `tasks/`). Everything else is as for [`import_harbor`]. Most
/// Terminal-Bench tasks build their image from a `Dockerfile` at run time; the import builds
/// it when [`ImportOptions::build`] says how, else skips the task with the commands that build
/// and save the image.
pub fn import_terminal_bench(
    tasks: &[PathBuf],
    out: &Path,
    options: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    write::import(Format::TerminalBench, tasks, out, options)
}
