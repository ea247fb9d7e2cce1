//! What an import did, for a person to read: at the scale of a dataset, a summary by reason.

use std::fmt;
use std::path::PathBuf;

/// A task's id in the generated suite: its folder name, with every character other than
/// letters, digits, `-` and `_` replaced by `-` (and a `-2`, `-3`, ... suffix when two folders
/// would get the same id).
pub type TaskId = String;

/// A task the import did not write into the suite, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The id it would have had.
    pub id: TaskId,
    /// Its task folder.
    pub folder: PathBuf,
    /// Why it was skipped; may span several lines (e.g. the commands that build its image).
    /// Its first line is the same for every task skipped for the same reason.
    pub reason: String,
}

/// Something of a task (imported or skipped) that was carried over inexactly or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The task it is about.
    pub task: TaskId,
    /// What; the same text for every task it applies to (an unknown field names the field).
    pub message: String,
}

/// A folder given to the import (or found in a dataset folder) that holds no task: reported and
/// skipped, never a reason to stop the import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotTask {
    /// The folder.
    pub folder: PathBuf,
    /// Why it is not a task folder (`no task.toml`).
    pub why: String,
}

/// What an import did: the tasks it wrote into the suite, the tasks it skipped and why, the
/// folders that held no task, and everything it could not carry over exactly. Its `Display` is
/// the text a command line prints: skipped tasks and warnings grouped by reason, each group with
/// its count, then its tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The tasks written into the suite, in the order they were found.
    pub imported: Vec<TaskId>,
    /// The tasks not written, each with its folder and the reason.
    pub skipped: Vec<Skipped>,
    /// The folders that hold no task of the format, skipped.
    pub not_tasks: Vec<NotTask>,
    /// What was imported inexactly or not at all, for imported and skipped tasks alike: unknown
    /// fields (one warning per task and field), settings proctor has no counterpart for,
    /// verifiers that fetch with no network, missing solutions.
    pub warnings: Vec<Warning>,
    /// What building the images of tasks with only a Dockerfile did.
    pub builds: crate::BuildStats,
}

impl ImportReport {
    /// Adds a warning about task `id`.
    pub(crate) fn warn(&mut self, id: &str, message: impl fmt::Display) {
        self.warnings.push(Warning {
            task: id.to_string(),
            message: message.to_string(),
        });
    }

    /// The skipped tasks grouped by the first line of their reason, the largest group first
    /// (then in the order found).
    pub fn skipped_by_reason(&self) -> Vec<(&str, Vec<&Skipped>)> {
        groups(self.skipped.iter(), |s| {
            s.reason.lines().next().unwrap_or("")
        })
    }

    /// The warnings grouped by their text, the largest group first (then in the order found).
    pub fn warnings_by_kind(&self) -> Vec<(&str, Vec<&Warning>)> {
        groups(self.warnings.iter(), |w| w.message.as_str())
    }
}

/// `items` grouped by `key`, the largest group first, ties in the order of first appearance.
fn groups<'a, T>(
    items: impl Iterator<Item = &'a T>,
    key: impl Fn(&'a T) -> &'a str,
) -> Vec<(&'a str, Vec<&'a T>)> {
    let mut out: Vec<(&str, Vec<&T>)> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for item in items {
        let k = key(item);
        match index.get(k) {
            Some(&i) => out[i].1.push(item),
            None => {
                index.insert(k, out.len());
                out.push((k, vec![item]));
            }
        }
    }
    // A stable sort keeps the order of first appearance among equal counts.
    out.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    out
}

/// Writes `text` with every line after the first indented by `indent`.
fn indented(f: &mut fmt::Formatter<'_>, text: &str, indent: &str) -> fmt::Result {
    let mut lines = text.lines();
    if let Some(first) = lines.next() {
        f.write_str(first)?;
    }
    for line in lines {
        writeln!(f)?;
        if !line.is_empty() {
            write!(f, "{indent}{line}")?;
        }
    }
    Ok(())
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.imported.is_empty() {
            writeln!(f, "imported 0 task(s)")?;
        } else {
            writeln!(
                f,
                "imported {} task(s): {}",
                self.imported.len(),
                self.imported.join(", ")
            )?;
        }
        self.write_skipped(f)?;
        if self.builds.any() {
            writeln!(f, "images from Dockerfiles: {}", self.builds)?;
        }
        self.write_not_tasks(f)?;
        self.write_warnings(f)
    }
}

impl ImportReport {
    /// The skipped tasks, grouped by the first line of their reason.
    fn write_skipped(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.skipped.is_empty() {
            return Ok(());
        }
        writeln!(f, "skipped {} task(s), by reason:", self.skipped.len())?;
        for (first, tasks) in self.skipped_by_reason() {
            writeln!(f, "  {} task(s): {first}", tasks.len())?;
            // The rest of the reason (the commands that build an image), as written for the
            // first task of the group.
            let rest: Vec<&str> = tasks[0].reason.lines().skip(1).collect();
            if !rest.is_empty() {
                for line in &rest {
                    writeln!(f, "      {line}")?;
                }
                if tasks.len() > 1 {
                    writeln!(
                        f,
                        "      (written for {}; for each task below, with its own id)",
                        tasks[0].id
                    )?;
                }
            }
            let width = tasks.iter().map(|t| t.id.len()).max().unwrap_or(0).min(40);
            for t in tasks {
                writeln!(
                    f,
                    "    {:<width$}  {}",
                    t.id,
                    crate::files::shown_path(&t.folder).display()
                )?;
            }
        }
        Ok(())
    }

    /// The folders that held no task.
    fn write_not_tasks(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.not_tasks.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "skipped {} folder(s) that hold no task:",
            self.not_tasks.len()
        )?;
        for n in &self.not_tasks {
            writeln!(
                f,
                "  {}: {}",
                crate::files::shown_path(&n.folder).display(),
                n.why
            )?;
        }
        Ok(())
    }

    /// The warnings, grouped by kind, each with its tasks.
    fn write_warnings(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.warnings.is_empty() {
            return Ok(());
        }
        let mut tasks: Vec<&str> = self.warnings.iter().map(|w| w.task.as_str()).collect();
        tasks.sort_unstable();
        tasks.dedup();
        writeln!(
            f,
            "{} warning(s) about {} task(s), by kind:",
            self.warnings.len(),
            tasks.len()
        )?;
        for (message, group) in self.warnings_by_kind() {
            write!(f, "  {} task(s): ", group.len())?;
            indented(f, message, "      ")?;
            writeln!(f)?;
            let ids: Vec<&str> = group.iter().map(|w| w.task.as_str()).collect();
            writeln!(f, "    {}", ids.join(", "))?;
        }
        Ok(())
    }
}

/// The counts of the images built from Dockerfiles, as the report's one line says them.
impl fmt::Display for crate::build::BuildStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per_build = if self.built > 0 {
            self.build_millis as f64 / 1000.0 / self.built as f64
        } else {
            0.0
        };
        write!(
            f,
            "{} built ({:.1} s, {per_build:.1} s per build), {} cache hit(s) (built before from the same Dockerfile and context)",
            self.built,
            self.build_millis as f64 / 1000.0,
            self.cache_hits
        )?;
        if self.base_only > 0 {
            write!(
                f,
                ", {} only FROM with WORKDIR/ENV (the base image is used)",
                self.base_only
            )?;
        }
        if self.failed > 0 {
            write!(f, ", {} failed (those tasks are skipped)", self.failed)?;
        }
        if self.fallbacks > 0 {
            write!(
                f,
                ", {} prebuilt image(s) with their Dockerfile kept (built from it when the image cannot be pulled)",
                self.fallbacks
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_import_says_task_s_as_the_rest_does() {
        let report = ImportReport::default();
        assert_eq!(report.to_string(), "imported 0 task(s)\n");
    }

    #[test]
    fn skips_and_warnings_are_grouped_by_reason_with_counts_then_their_tasks() {
        let skip = |id: &str, reason: &str| Skipped {
            id: id.into(),
            folder: PathBuf::from(format!("/nonexistent-proctor/tasks/{id}")),
            reason: reason.into(),
        };
        let warn = |task: &str, message: &str| Warning {
            task: task.into(),
            message: message.into(),
        };
        let report = ImportReport {
            imported: vec!["a".into(), "b".into()],
            skipped: vec![
                skip("c", "no tests"),
                skip("dd", "built from a Dockerfile\nbuild dd like this"),
                skip("e", "built from a Dockerfile\nbuild e like this"),
            ],
            not_tasks: vec![NotTask {
                folder: PathBuf::from("/nonexistent-proctor/empty"),
                why: "no task.toml".into(),
            }],
            warnings: vec![
                warn("a", "unknown field `x`"),
                warn("c", "no solution"),
                warn("dd", "no solution"),
                warn("e", "two lines\nsecond"),
            ],
            builds: crate::BuildStats {
                built: 2,
                build_millis: 5000,
                cache_hits: 3,
                base_only: 0,
                failed: 1,
                fallbacks: 0,
            },
        };
        assert_eq!(
            report.to_string(),
            "imported 2 task(s): a, b
skipped 3 task(s), by reason:
  2 task(s): built from a Dockerfile
      build dd like this
      (written for dd; for each task below, with its own id)
    dd  /nonexistent-proctor/tasks/dd
    e   /nonexistent-proctor/tasks/e
  1 task(s): no tests
    c  /nonexistent-proctor/tasks/c
images from Dockerfiles: 2 built (5.0 s, 2.5 s per build), 3 cache hit(s) (built before from the same Dockerfile and context), 1 failed (those tasks are skipped)
skipped 1 folder(s) that hold no task:
  /nonexistent-proctor/empty: no task.toml
4 warning(s) about 4 task(s), by kind:
  2 task(s): no solution
    c, dd
  1 task(s): unknown field `x`
    a
  1 task(s): two lines
      second
    e
"
        );
    }
}
