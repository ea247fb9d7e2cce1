//! `check` assertions: a command that runs, and the file of its own it runs present where the
//! check runs.

use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use super::Validator;
use crate::assertion::Check;
use crate::model::Task;
use crate::problem::ProblemKind;

/// Interpreters whose first operand is the script they run.
const INTERPRETERS: &[&str] = &["python3", "python", "sh", "bash", "node", "ruby", "perl"];

/// Extensions that mark an interpreter's operand as a script file.
const SCRIPT_EXTENSIONS: &[&str] = &[".py", ".sh", ".js", ".rb", ".pl"];

/// Interpreter options after which the code is given inline, not as a file.
const INLINE_CODE_FLAGS: &[&str] = &["-c", "-m", "-e", "-E", "-p", "--eval", "--print"];

/// A file a `check` command needs from the workspace before the agent could have made it: the
/// program itself when it is a relative path (`./verify.sh`, `bin/check`), or the script an
/// interpreter runs (`python3 check_fix.py`). Returns the word as written and the path it names
/// relative to the workspace; `None` when the command names no such file or is too dynamic to
/// read (variables, globs, an operator glued to the word, `python3 -c ...`).
fn check_file(command: &str) -> Option<(String, String)> {
    let words = first_command_words(command)?;
    let mut words = words
        .into_iter()
        .skip_while(|w| w.split_once('=').is_some_and(|(k, _)| is_var_name(k)));
    let program = words.next()?;
    let word = if program.contains('/') {
        program
    } else if INTERPRETERS.contains(&program.as_str()) {
        let mut operand = None;
        for w in words {
            if INLINE_CODE_FLAGS.contains(&w.as_str()) {
                return None;
            }
            if !w.starts_with('-') {
                operand = Some(w);
                break;
            }
        }
        let operand = operand?;
        if !SCRIPT_EXTENSIONS.iter().any(|e| operand.ends_with(e)) {
            return None;
        }
        operand
    } else {
        return None;
    };
    let path = Path::new(&word);
    if word.contains(['$', '`', '*', '?', '[', '{', '~'])
        || word.contains(OPERATORS)
        || path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir))
    {
        return None;
    }
    let rel: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let rel = rel.to_str()?.to_string();
    (!rel.is_empty()).then_some((word, rel))
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Characters that end a simple command (or redirect it) where the shell reads them unquoted.
const OPERATORS: &[char] = &[';', '&', '|', '<', '>', '(', ')'];

/// The words of the first simple command of a shell command line, with quotes removed (split by
/// `shlex` as `sh` splits words, a `#` word starting a comment); `None` when a quote is not
/// closed on the first line. The command ends at the first line's end or at the first word that
/// starts with an operator (`&&`, `;`, `|`, `>`, ...). Words the shell expands keep their `$`,
/// `*`, ..., and a word with an operator inside it (`./check.sh;true`) keeps it: the caller sets
/// such words aside as too dynamic to read.
fn first_command_words(command: &str) -> Option<Vec<String>> {
    let first_line = command.split('\n').next().unwrap_or_default();
    let words = shlex::split(first_line)?;
    Some(
        words
            .into_iter()
            .take_while(|w| !w.starts_with(OPERATORS))
            .collect(),
    )
}

impl Validator<'_> {
    /// A `check` assertion: a command, a regex that compiles, and the program it runs.
    pub(super) fn check(&mut self, task: &Task, span: Range<usize>, c: &Check) {
        if c.command.trim().is_empty() {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    span.clone(),
                    "a `check` with an empty command",
                )
                .with_label("empty")
                .with_help("give a shell command such as \"python3 check.py\"");
            self.out.push(p);
        }
        if let Some(re) = &c.stdout_matches {
            self.regex(re);
        }
        self.check_program(task, span, &c.command);
    }

    /// A `check` that runs a file of its own (`./verify.sh`, `python3 check_fix.py`) needs it
    /// in the workspace the check runs in: the fixture, with `holdout/TASK_ID/` laid over it
    /// (or a file every variant copies in).
    fn check_program(&mut self, task: &Task, span: Range<usize>, command: &str) {
        let Some((word, rel)) = check_file(command) else {
            return;
        };
        let id = task.id.get_ref();
        let holdout = self.suite.root.join("holdout").join(id);
        let variants = &self.suite.file.variants;
        let copied_in = !variants.is_empty()
            && variants.iter().all(|v| {
                v.files.keys().any(|dest| {
                    Path::new(dest)
                        .components()
                        .eq(Path::new(&rel).components())
                })
            });
        if holdout.join(&rel).is_file()
            || self.suite.fixture_dir().join(&rel).is_file()
            || copied_in
        {
            return;
        }
        // Point at the word itself when it is written verbatim inside the assertion.
        let text = self.src.text();
        let span = text
            .get(span.clone())
            .and_then(|t| t.find(word.as_str()))
            .map_or(span.clone(), |at| {
                span.start + at..span.start + at + word.len()
            });
        let fixture = self.suite.file.fixture.get_ref();
        let p = self
            .at(
                ProblemKind::BadPath,
                span,
                format!("a `check` of task `{id}` runs `{word}`, which is neither in holdout/{id}/ nor in the fixture"),
            )
            .with_label("no such file")
            .with_help(format!(
                "checks run in the end-state workspace with holdout/{id}/ laid over it: write holdout/{id}/{rel}, or add {rel} to `{fixture}/`, or fix the path"
            ));
        self.out.push(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(command: &str) -> Option<String> {
        check_file(command).map(|(_, rel)| rel)
    }

    #[test]
    fn check_files_are_read_off_relative_programs_and_interpreter_scripts() {
        assert_eq!(
            needed("python3 check_fix.py").as_deref(),
            Some("check_fix.py")
        );
        assert_eq!(needed("./verify.sh").as_deref(), Some("verify.sh"));
        assert_eq!(needed("bin/check --all").as_deref(), Some("bin/check"));
        assert_eq!(
            needed("sh ./t/run.sh && echo ok").as_deref(),
            Some("t/run.sh")
        );
        assert_eq!(
            needed("python3 -u 'check me.py'").as_deref(),
            Some("check me.py")
        );
        assert_eq!(needed("LANG=C perl check.pl").as_deref(), Some("check.pl"));
        assert_eq!(
            needed("node  check.js 2>/dev/null").as_deref(),
            Some("check.js")
        );
        assert_eq!(
            needed("ruby \"spec/check.rb\"").as_deref(),
            Some("spec/check.rb")
        );
        // Only the first line's first command: what follows runs after the check's file.
        assert_eq!(
            needed("python3 check.py\n./later.sh").as_deref(),
            Some("check.py")
        );
        assert_eq!(
            needed("./verify.sh # then nothing").as_deref(),
            Some("verify.sh")
        );
        assert_eq!(needed("./verify.sh|tee log").as_deref(), None);
        assert_eq!(
            needed("./verify.sh | tee log").as_deref(),
            Some("verify.sh")
        );
    }

    #[test]
    fn check_commands_that_name_no_file_of_their_own_are_left_alone() {
        for command in [
            "python3 -c 'import sys; sys.exit(0)'",
            "python3 -m pytest -q",
            "grep -q foo file.txt",
            "test -f out.txt",
            "cd sub && python3 check.py",
            "python3 $CHECK.py",
            "sh -c './x.sh'",
            "bash -e",
            "python3 -W ignore check.py",
            "/usr/bin/env python3 check.py",
            "../outside.sh",
            "python3 ../outside.py",
            "python3 check_*.py",
            "node -e 'x.js'",
            "perl -E 'say 1' x.pl",
            "python3 'unclosed.py",
            "# ./commented.sh",
            "",
            "./check.sh;true",
            "python3 check.py>out.txt",
            "python3 'multi\nline.py'",
            "(cd t && ./run.sh)",
            "python3 -u > log check.py",
        ] {
            assert_eq!(needed(command), None, "{command}");
        }
    }
}
