//! The suite's files and folders: paths that stay inside it, no special files, and `holdout/`,
//! `answers/` and `mutations/` named after the tasks (each mutation a patch that applies).

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use toml::Spanned;

use super::paths::{path_escape, suite_parts, Overlap};
use super::Validator;
use crate::patch::Patch;
use crate::problem::{Problem, ProblemKind, SourceFile};

fn line_offset(text: &str, line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    text.match_indices('\n')
        .nth(line - 2)
        .map_or(text.len(), |(i, _)| i + 1)
}

impl Validator<'_> {
    /// Regular files and folders only: no symlink, FIFO, socket or device file anywhere in the
    /// suite.
    pub(super) fn forbidden_files(&mut self) {
        let root = self.suite.root.clone();
        // A top-level `.git` or `.proctor` is skipped (version control, proctor's own store),
        // unless something the agent is given (the fixture, a variant's `files`, an `allow`
        // path) is, contains or lies inside it: then every file of it is checked like the rest.
        let laid = self.laid_paths();
        let skipped: BTreeSet<&str> = [".git", ".proctor"]
            .into_iter()
            .filter(|name| {
                !laid
                    .iter()
                    .filter_map(|p| suite_parts(p))
                    .any(|parts| Overlap::of(&parts, &[*name]).is_some())
            })
            .collect();
        let walker = walkdir::WalkDir::new(&root)
            .min_depth(1)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| {
                !(e.depth() == 1 && e.file_name().to_str().is_some_and(|n| skipped.contains(n)))
            });
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    let path = e.path().unwrap_or(&root).to_path_buf();
                    let p = self.file(ProblemKind::BadPath, &path, format!("cannot read: {e}"));
                    self.out.push(p);
                    continue;
                }
            };
            let ft = entry.file_type();
            let what = if ft.is_symlink() {
                "a symlink"
            } else if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device file"
            } else {
                continue;
            };
            let path = entry.path().to_path_buf();
            let p = self.file(
                ProblemKind::ForbiddenFile,
                &path,
                format!("{what} inside the suite"),
            ).with_help(
                "suites hold regular files and folders only, so that what an agent sees cannot reach outside them; replace it with a copy of the file it stands for",
            );
            self.out.push(p);
        }
    }

    /// Checks a path-valued field: relative, not climbing out, and (when `must_exist`) present.
    pub(super) fn suite_path(
        &mut self,
        field: &str,
        value: &Spanned<String>,
        must_exist: bool,
    ) -> bool {
        let v = value.get_ref();
        if let Some(why) = path_escape(v) {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    value.span(),
                    format!("`{field}` path `{v}` {why}"),
                )
                .with_label("must stay inside the suite")
                .with_help("write a path relative to the suite directory, without `..`");
            self.out.push(p);
            return false;
        }
        if must_exist && !self.suite.root.join(v).exists() {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    value.span(),
                    format!("`{field}` path `{v}` does not exist in the suite"),
                )
                .with_label("no such file")
                .with_help(format!(
                    "create {} or fix the path",
                    self.suite.root.join(v).display()
                ));
            self.out.push(p);
            return false;
        }
        true
    }

    /// `holdout/TASK_ID/`, `mutations/TASK_ID/` and `answers/TASK_ID.md` each name a task of the
    /// suite; each mutation is checked by [`Validator::mutations_of`].
    pub(super) fn suite_folders(&mut self) {
        let root = self.suite.root.clone();
        let tasks: BTreeSet<&str> = self
            .suite
            .file
            .tasks
            .iter()
            .map(|t| t.id.get_ref().as_str())
            .collect();
        let task_list = tasks.iter().copied().collect::<Vec<_>>().join(", ");
        for folder in ["holdout", "mutations"] {
            let dir = root.join(folder);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                if !path.is_dir() || path.is_symlink() {
                    let p = self.file(ProblemKind::UnknownReference, &path, format!("`{folder}/{name}` is referenced by no task")).with_help(format!("files under {folder}/ live in a folder named after their task: {folder}/TASK_ID/..."));
                    self.out.push(p);
                    continue;
                }
                if !tasks.contains(name.as_str()) {
                    let hint = crate::problem::nearest(&name, tasks.iter().copied())
                        .map(|n| format!("did you mean `{folder}/{n}`?"))
                        .unwrap_or_else(|| format!("tasks of this suite: {task_list}"));
                    let p = self
                        .file(
                            ProblemKind::UnknownReference,
                            &path,
                            format!("`{folder}/{name}` names no task of this suite"),
                        )
                        .with_help(hint);
                    self.out.push(p);
                    continue;
                }
                if folder == "mutations" {
                    self.mutations_of(&path);
                }
            }
        }
        let answers = root.join("answers");
        if let Ok(entries) = std::fs::read_dir(&answers) {
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let path = entry.path();
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !path.is_file() || !tasks.contains(stem.as_str()) {
                    let p = self
                        .file(
                            ProblemKind::UnknownReference,
                            &path,
                            format!(
                                "answer sheet `{}` names no task of this suite",
                                path.file_name()
                                    .map(|n| n.to_string_lossy().into_owned())
                                    .unwrap_or_default()
                            ),
                        )
                        .with_help(format!(
                            "answer sheets are answers/TASK_ID.md; tasks: {task_list}"
                        ));
                    self.out.push(p);
                }
            }
        }
    }

    /// A task's mutations folder: not empty, each entry a unified diff that applies to the
    /// fixture.
    fn mutations_of(&mut self, dir: &Path) {
        let fixture = self.suite.fixture_dir();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        if entries.is_empty() {
            let p = self.file(ProblemKind::BadMutation, dir, "an empty mutations folder").with_help("add one or more .patch files (unified diffs against the fixture), or remove the folder");
            self.out.push(p);
        }
        for entry in entries {
            let path = entry.path();
            if !path.is_file() {
                let p = self
                    .file(ProblemKind::BadMutation, &path, "not a patch file")
                    .with_help("a mutations/TASK_ID/ folder holds unified-diff files only");
                self.out.push(p);
                continue;
            }
            let text = match crate::parse::read_text(&path, "the patch") {
                Ok(t) => t,
                Err(p) => {
                    self.out.push(p);
                    continue;
                }
            };
            let patch = match Patch::parse(&text) {
                Ok(p) => p,
                Err(e) => {
                    let source = SourceFile::new(&path, text.clone());
                    let start = line_offset(&text, e.line);
                    let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
                    let p = Problem::at(ProblemKind::BadMutation, &source, start..end, format!("not a unified diff: {}", e.message))
                        .with_label("here")
                        .with_help("write mutations with `diff -u` or `git diff`: `--- a/PATH`, `+++ b/PATH`, then `@@ -l,n +l,n @@` hunks; a binary file's change with `git diff --binary`");
                    self.out.push(p);
                    continue;
                }
            };
            if fixture.is_dir() {
                let read = |rel: &str| std::fs::read(fixture.join(rel)).ok();
                if let Err(e) = patch.apply(read) {
                    let p = self.file(ProblemKind::BadMutation, &path, format!("does not apply to the fixture: {e}")).with_help("regenerate the patch against the current fixture with `diff -u` or `git diff --no-index`");
                    self.out.push(p);
                }
            }
        }
    }
}
