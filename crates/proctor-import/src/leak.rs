//! Whether an imported task's image could already hold its tests or solution: what can be seen
//! without building or opening the image.
//!
//! Two things are reported, each as a warning of the task:
//!
//! - a `COPY` or `ADD` of the task's Dockerfile whose sources take in a file of the task's tests
//!   or solution (`COPY tests/ /app/tests`, `COPY . /app` in a Terminal-Bench task, whose build
//!   context is the task folder that holds `tests/`, `run-tests.sh` and `solution.sh`);
//! - a file of the build context (Harbor's `environment/`, Terminal-Bench's task folder, leaving
//!   out the tests and solution themselves) whose content equals a test or solution file's, or
//!   that quotes one inside other text, found by the same code as `proctor validate` finds them
//!   in a fixture ([`proctor_suite::validate::leak::Secrets`]): a Dockerfile may copy it in.
//!
//! What the image's own layers hold (an image pulled by reference, a saved archive) is not read.

use std::path::{Path, PathBuf};

use proctor_suite::validate::leak::{describe_quote, Secret, Secrets};

use crate::files::FileEntry;
use crate::model::TaskPlan;

/// The warnings for `plan`, whose image is built from the folder `context` (shown as
/// `context_shown`, relative to the task folder: `environment` or `.`).
pub(crate) fn warnings(plan: &TaskPlan, context: &Path, context_shown: &str) -> Vec<String> {
    let secrets: Vec<(String, &FileEntry)> = plan
        .verifier
        .files
        .iter()
        .chain(&plan.oracle.files)
        .map(|f| (shown(&plan.source, &f.src), f))
        .collect();
    if secrets.is_empty() || !context.is_dir() {
        return Vec::new();
    }
    let mut out = dockerfile_copies(context, context_shown, &secrets);
    out.extend(context_copies(plan, context, &secrets));
    out
}

/// `path` relative to the task folder `root`, with `/`.
fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// The `COPY` and `ADD` instructions of `context/Dockerfile` that take in a secret.
fn dockerfile_copies(
    context: &Path,
    context_shown: &str,
    secrets: &[(String, &FileEntry)],
) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(context.join("Dockerfile")) else {
        return Vec::new();
    };
    let dockerfile = if context_shown == "." {
        "Dockerfile".to_string()
    } else {
        format!("{context_shown}/Dockerfile")
    };
    // Secrets as paths inside the build context; those outside it cannot be copied.
    let inside: Vec<(String, &str)> = secrets
        .iter()
        .filter_map(|(name, f)| {
            let rel = f.src.strip_prefix(context).ok()?;
            Some((rel.to_string_lossy().replace('\\', "/"), name.as_str()))
        })
        .collect();
    let mut out = Vec::new();
    for (line, instruction) in instructions(&text) {
        let Some(sources) = copy_sources(&instruction) else {
            continue;
        };
        let taken: Vec<&str> = inside
            .iter()
            .filter(|(rel, _)| sources.iter().any(|s| covers(s, rel)))
            .map(|(_, name)| *name)
            .collect();
        if taken.is_empty() {
            continue;
        }
        out.push(format!(
            "{dockerfile} line {line} (`{}`) copies {} into the image: the agent can read the task's tests or solution in its environment; build the image without them (the verifier is given tests/ by itself)",
            instruction.trim(),
            list(&taken)
        ));
    }
    out
}

/// `names` joined, at most five, then how many more.
fn list(names: &[&str]) -> String {
    let mut shown: Vec<String> = names.iter().take(5).map(|n| n.to_string()).collect();
    if names.len() > 5 {
        shown.push(format!("{} more", names.len() - 5));
    }
    shown.join(", ")
}

/// The instructions of a Dockerfile with the line each starts on, continuation lines (ending
/// in `\`) joined, comments and blank lines left out.
pub(crate) fn instructions(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if current.is_none() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        let (start, mut acc) = current.take().unwrap_or((n + 1, String::new()));
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                acc.push_str(part.trim_end());
                acc.push(' ');
                current = Some((start, acc));
            }
            None => {
                acc.push_str(trimmed);
                out.push((start, acc));
            }
        }
    }
    out.extend(current);
    out
}

/// The sources of a `COPY` or `ADD` instruction from the build context (not `--from` another
/// stage or image), with `./` and a trailing `/` removed; `None` for other instructions.
fn copy_sources(instruction: &str) -> Option<Vec<String>> {
    let (keyword, rest) = instruction.split_once(char::is_whitespace)?;
    if !keyword.eq_ignore_ascii_case("COPY") && !keyword.eq_ignore_ascii_case("ADD") {
        return None;
    }
    let mut words: Vec<String> = Vec::new();
    let rest = rest.trim();
    if rest.starts_with('[') {
        // The JSON form: ["src", ..., "dest"].
        words = rest
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|w| w.trim().trim_matches('"').to_string())
            .collect();
    } else {
        for w in rest.split_whitespace() {
            if w.starts_with("--from") {
                return None;
            }
            if !w.starts_with("--") {
                words.push(w.to_string());
            }
        }
    }
    words.pop()?;
    Some(
        words
            .into_iter()
            .map(|w| {
                let w = w.trim_start_matches("./").trim_end_matches('/');
                if w.is_empty() {
                    ".".to_string()
                } else {
                    w.to_string()
                }
            })
            .collect(),
    )
}

/// Whether the source `src` (a path or `*` pattern in the build context) takes in the file
/// `rel` of the context.
fn covers(src: &str, rel: &str) -> bool {
    if src == "." || src == "*" || src == rel {
        return true;
    }
    if rel
        .strip_prefix(src)
        .is_some_and(|rest| rest.starts_with('/'))
    {
        return true;
    }
    if src.contains(['*', '?']) {
        // A pattern matches a path inside the context, or a folder holding the file.
        let parts = src.split('/').count();
        let head: Vec<&str> = rel.split('/').take(parts).collect();
        return head.len() == parts && glob_match(src, &head.join("/"));
    }
    false
}

/// `*` and `?` matching within one path component, as Docker's sources match.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Positions in the pattern and text to go back to after the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' && t[j] != '/' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star.filter(|_| t[mark] != '/') {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// The files of the build context, other than the secrets themselves and `.git`, that have a
/// secret's content or quote one inside other text, found as `proctor validate` finds them in a
/// fixture ([`Secrets::examine`]).
fn context_copies(
    plan: &TaskPlan,
    context: &Path,
    secrets: &[(String, &FileEntry)],
) -> Vec<String> {
    let mut index = Secrets::default();
    for (name, f) in secrets {
        let Ok(bytes) = std::fs::read(&f.src) else {
            continue;
        };
        index.add(
            &bytes,
            Secret {
                description: name.clone(),
                lays_over: None,
            },
        );
    }
    if index.is_empty() {
        return Vec::new();
    }
    let own: Vec<&PathBuf> = secrets.iter().map(|(_, f)| &f.src).collect();
    let mut out = Vec::new();
    let walker = walkdir::WalkDir::new(context)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git");
    for entry in walker.filter_map(Result::ok) {
        if !entry.file_type().is_file() || own.contains(&&entry.path().to_path_buf()) {
            continue;
        }
        let size = entry.metadata().map_or(0, |m| m.len());
        let found = index.examine(entry.path(), size);
        let path = shown(&plan.source, entry.path());
        if let Some(names) = found.copy_of {
            let names: Vec<&str> = names.iter().map(|s| s.description.as_str()).collect();
            out.push(format!(
                "{path}, in the image's build context, has the content of {}: if the Dockerfile copies it in, the agent can read it in its environment; remove it from the build context",
                list(&names)
            ));
        }
        for (quote, names) in &found.quotes {
            out.push(format!(
                "{path}, in the image's build context, {}: if the Dockerfile copies it in, the agent can read it in its environment; remove the quoted lines",
                describe_quote(quote, names)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_sources_are_read_from_both_forms_and_stages_are_left_out() {
        assert_eq!(
            copy_sources("COPY ./tests/ /app/tests"),
            Some(vec!["tests".to_string()])
        );
        assert_eq!(
            copy_sources("add --chown=1:1 a.txt b/ /dst/"),
            Some(vec!["a.txt".to_string(), "b".to_string()])
        );
        assert_eq!(
            copy_sources(r#"COPY ["solution.sh", "/app/"]"#),
            Some(vec!["solution.sh".to_string()])
        );
        assert_eq!(copy_sources("COPY . ."), Some(vec![".".to_string()]));
        assert_eq!(copy_sources("COPY --from=build /out /app"), None);
        assert_eq!(copy_sources("RUN cp tests /app"), None);
    }

    #[test]
    fn sources_cover_files_by_path_folder_and_pattern() {
        assert!(covers(".", "tests/test_outputs.py"));
        assert!(covers("tests", "tests/test_outputs.py"));
        assert!(covers("solution.sh", "solution.sh"));
        assert!(covers("*.sh", "solution.sh"));
        assert!(covers("te*", "tests/test_outputs.py"));
        assert!(!covers("*.sh", "tests/run.py"));
        assert!(!covers("test", "tests/test_outputs.py"));
        assert!(!covers("app", "tests/test_outputs.py"));
    }

    #[test]
    fn instructions_join_continuations_and_skip_comments() {
        let text = "FROM x\n# COPY tests /t\nCOPY a \\\n  tests \\\n  /app\nRUN true\n";
        let got = instructions(text);
        assert_eq!(got[1].0, 3);
        assert_eq!(
            copy_sources(&got[1].1),
            Some(vec!["a".into(), "tests".into()])
        );
        assert_eq!(got.len(), 3);
    }
}
