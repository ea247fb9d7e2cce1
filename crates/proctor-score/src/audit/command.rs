//! What a check command runs, read from its shell text without running it: the programs of each
//! simple command, the folder each runs in, the scripts it names, and what that tells about the
//! places a check's interpreter or test runner loads files from.
//!
//! The reading is deliberately simple (the words of `sh -c` after quoting, split at `&&`, `||`,
//! `;`, `|`, `&` and newlines, with `cd DIR` followed); where it cannot tell (a `cd` to a
//! variable or an absolute path, a program it does not know), it answers "anywhere in the
//! workspace", which makes the audit stricter, never blind.

/// A workspace folder, `/`-separated and relative (`""` is the workspace root), or anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// This folder and no other.
    Dir(String),
    /// This folder and every folder below it.
    Tree(String),
    /// The reading could not tell: every folder.
    Anywhere,
}

impl Place {
    /// Whether a file in the workspace folder `dir` is at this place.
    pub fn holds_dir(&self, dir: &str) -> bool {
        match self {
            Place::Dir(d) => d == dir,
            Place::Tree(t) => t.is_empty() || dir == t || dir.starts_with(&format!("{t}/")),
            Place::Anywhere => true,
        }
    }
}

/// A family of test runner: which files count as its tests and its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RunnerFamily {
    /// pytest, unittest, nose2, tox, nox.
    Python,
    /// npm/yarn/pnpm test, jest, vitest, mocha.
    JavaScript,
    /// `go test`.
    Go,
    /// `cargo test`.
    Rust,
    /// `make` (its Makefile decides what runs).
    Make,
}

/// A test runner a check starts, and the folders it collects tests from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    /// The runner, as written (`pytest`, `python3 -m unittest`, `npm test`).
    pub name: String,
    /// Its family.
    pub family: RunnerFamily,
    /// Where it collects.
    pub collects: Place,
}

/// What one check command runs, as far as its text tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReading {
    /// Folders a Python interpreter of the check puts first on `sys.path` (the folder of a
    /// script it runs, the working folder for `-m`, `-c` and pytest).
    pub python_path: Vec<Place>,
    /// Python modules the check runs with `-m`.
    pub python_modules: Vec<String>,
    /// Test runners the check starts.
    pub runners: Vec<Runner>,
    /// Workspace paths of the scripts the check runs (`sh run.sh`, `python3 check.py`,
    /// `./verify`).
    pub scripts: Vec<String>,
    /// Whether it runs Node.js tooling (npm, npx, yarn, pnpm, node), which puts
    /// `node_modules/.bin` on `PATH`.
    pub node: bool,
    /// Whether it runs Python at all.
    pub python: bool,
}

impl CheckReading {
    /// Adds what `other` (a script the check runs) reads as.
    pub fn absorb(&mut self, other: CheckReading) {
        self.python_path.extend(other.python_path);
        self.python_modules.extend(other.python_modules);
        self.runners.extend(other.runners);
        self.scripts.extend(other.scripts);
        self.node |= other.node;
        self.python |= other.python;
    }
}

/// Reads a shell command (a check's, or a line of a script a check runs) whose working folder is
/// `start` (`Some("")` for the workspace root, `None` when unknown).
pub fn read_command(text: &str, start: Option<&str>) -> CheckReading {
    let mut out = CheckReading::default();
    let mut cwd: Option<String> = start.map(str::to_string);
    for words in simple_commands(text) {
        let words = strip_prefix_words(&words);
        let Some(program) = words.first() else {
            continue;
        };
        let base = program.rsplit('/').next().unwrap_or(program);
        if base == "cd" {
            cwd = match words.get(1) {
                Some(d) => cwd.as_deref().and_then(|c| join(c, d)),
                None => None,
            };
            continue;
        }
        read_program(base, program, &words[1..], cwd.as_deref(), &mut out);
    }
    out
}

/// What one simple command (`program args...`) run in `cwd` adds to `out`.
fn read_program(
    base: &str,
    program: &str,
    args: &[String],
    cwd: Option<&str>,
    out: &mut CheckReading,
) {
    let here = || cwd.map_or(Place::Anywhere, |c| Place::Dir(c.to_string()));
    let tree = |args: &[String]| collection_place(args, cwd);
    if is_python(base) {
        out.python = true;
        read_python(args, cwd, out);
    } else if base == "pytest" || base == "py.test" {
        out.python = true;
        out.python_path.push(tree(args));
        out.runners.push(Runner {
            name: base.into(),
            family: RunnerFamily::Python,
            collects: tree(args),
        });
    } else if matches!(base, "tox" | "nox" | "nose2" | "nosetests") {
        out.python = true;
        out.runners.push(Runner {
            name: base.into(),
            family: RunnerFamily::Python,
            collects: cwd.map_or(Place::Anywhere, |c| Place::Tree(c.to_string())),
        });
    } else if matches!(
        base,
        "npm" | "npx" | "yarn" | "pnpm" | "node" | "bun" | "deno"
    ) {
        out.node = true;
        let verb = args.first().map(String::as_str).unwrap_or_default();
        let runs_tests = matches!(verb, "test" | "t" | "run" | "exec")
            || matches!(verb, "jest" | "vitest" | "mocha");
        if base == "node" {
            if let Some(script) = args.iter().find(|a| !a.starts_with('-')) {
                push_script(script, cwd, out);
            }
        } else if runs_tests {
            out.runners.push(Runner {
                name: format!("{base} {verb}"),
                family: RunnerFamily::JavaScript,
                collects: cwd.map_or(Place::Anywhere, |c| Place::Tree(c.to_string())),
            });
        }
    } else if matches!(base, "jest" | "vitest" | "mocha") {
        out.node = true;
        out.runners.push(Runner {
            name: base.into(),
            family: RunnerFamily::JavaScript,
            collects: tree(args),
        });
    } else if base == "go" && args.first().is_some_and(|a| a == "test") {
        out.runners.push(Runner {
            name: "go test".into(),
            family: RunnerFamily::Go,
            collects: cwd.map_or(Place::Anywhere, |c| Place::Tree(c.to_string())),
        });
    } else if base == "cargo" && args.first().is_some_and(|a| a == "test" || a == "nextest") {
        out.runners.push(Runner {
            name: "cargo test".into(),
            family: RunnerFamily::Rust,
            collects: cwd.map_or(Place::Anywhere, |c| Place::Tree(c.to_string())),
        });
    } else if base == "make" {
        out.runners.push(Runner {
            name: "make".into(),
            family: RunnerFamily::Make,
            collects: here(),
        });
    } else if matches!(
        base,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "source" | "."
    ) {
        if let Some(script) = args.iter().find(|a| !a.starts_with('-')) {
            push_script(script, cwd, out);
        }
    } else if program.contains('/') {
        push_script(program, cwd, out);
    }
}

/// `python3 ARGS`: the script or module it runs and what that puts on `sys.path`.
fn read_python(args: &[String], cwd: Option<&str>, out: &mut CheckReading) {
    let here = || cwd.map_or(Place::Anywhere, |c| Place::Dir(c.to_string()));
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            // Isolated or safe-path mode: neither the script's folder nor the working folder
            // is put on `sys.path`.
            _ if a.starts_with('-')
                && !a.starts_with("--")
                && (a.contains('I') || a.contains('P'))
                && a != "-m"
                && a != "-c" =>
            {
                return;
            }
            "-m" => {
                let Some(module) = args.get(i + 1) else {
                    return;
                };
                out.python_path.push(here());
                out.python_modules.push(module.clone());
                match module.as_str() {
                    "pytest" | "py.test" => out.runners.push(Runner {
                        name: format!("python -m {module}"),
                        family: RunnerFamily::Python,
                        collects: collection_place(&args[i + 2..], cwd),
                    }),
                    "unittest" | "nose2" | "tox" | "nox" => out.runners.push(Runner {
                        name: format!("python -m {module}"),
                        family: RunnerFamily::Python,
                        collects: unittest_place(&args[i + 2..], cwd),
                    }),
                    _ => {}
                }
                return;
            }
            "-c" | "-" => {
                out.python_path.push(here());
                return;
            }
            "-W" | "-X" | "--check-hash-based-pycs" => i += 2,
            _ if a.starts_with('-') => i += 1,
            script => {
                if let Some(path) = cwd.and_then(|c| join(c, script)) {
                    out.python_path.push(Place::Dir(parent(&path).to_string()));
                } else {
                    out.python_path.push(Place::Anywhere);
                }
                push_script(script, cwd, out);
                return;
            }
        }
    }
    // `python3` alone reads a program from stdin, with the working folder on its path.
    out.python_path.push(here());
}

/// Where `unittest discover` collects: `-s DIR` or the first positional folder, else the
/// working folder's tree.
fn unittest_place(args: &[String], cwd: Option<&str>) -> Place {
    let Some(cwd) = cwd else {
        return Place::Anywhere;
    };
    let mut start: Option<&str> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-s" | "--start-directory" => {
                start = args.get(i + 1).map(String::as_str);
                i += 2;
            }
            "-p" | "--pattern" | "-t" | "--top-level-directory" | "-k" => i += 2,
            "discover" => i += 1,
            a if a.starts_with('-') => i += 1,
            a => {
                start = start.or(Some(a));
                i += 1;
            }
        }
    }
    match start {
        // `unittest test_x` names a module, not a folder: its tests are found from the cwd.
        Some(s) if !s.contains('/') && s.contains('.') => Place::Tree(cwd.to_string()),
        Some(s) => join(cwd, s).map_or(Place::Anywhere, Place::Tree),
        None => Place::Tree(cwd.to_string()),
    }
}

/// Where a runner given `args` collects: the folder of its first path argument, else the
/// working folder's tree.
fn collection_place(args: &[String], cwd: Option<&str>) -> Place {
    let Some(cwd) = cwd else {
        return Place::Anywhere;
    };
    let first = args
        .iter()
        .map(|a| a.split("::").next().unwrap_or(a))
        .find(|a| !a.starts_with('-'));
    match first {
        Some(p) => match join(cwd, p) {
            Some(path) if p.ends_with(".py") => Place::Tree(parent(&path).to_string()),
            Some(path) => Place::Tree(path),
            None => Place::Anywhere,
        },
        None => Place::Tree(cwd.to_string()),
    }
}

/// Records `script` (relative to `cwd`) as a script the check runs.
fn push_script(script: &str, cwd: Option<&str>, out: &mut CheckReading) {
    if let Some(path) = cwd.and_then(|c| join(c, script)) {
        if !out.scripts.contains(&path) {
            out.scripts.push(path);
        }
    }
}

/// Whether `base` names a Python interpreter (`python`, `python3`, `python3.11`, `pypy3`).
fn is_python(base: &str) -> bool {
    let rest = base
        .strip_prefix("python")
        .or_else(|| base.strip_prefix("pypy"));
    rest.is_some_and(|r| r.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The words after environment assignments and wrappers that run the rest (`env`, `exec`,
/// `timeout 30`, `nice`, `time`, `command`, `xvfb-run`).
fn strip_prefix_words(words: &[String]) -> Vec<String> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let assignment = w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if assignment
            || matches!(
                w,
                "env" | "exec" | "nice" | "time" | "command" | "xvfb-run" | "stdbuf" | "nohup"
            )
        {
            i += 1;
        } else if w == "timeout" {
            i += 1;
            while i < words.len() && words[i].starts_with('-') {
                i += 1;
            }
            i += 1;
        } else if w.starts_with('-') && i > 0 {
            // An option of a wrapper (`env -i`, `nice -n 5`).
            i += 1;
        } else {
            break;
        }
    }
    words[i..].to_vec()
}

/// `rel` joined to the workspace folder `cwd`, normalised; `None` when it leaves the workspace,
/// is absolute, or holds a variable.
fn join(cwd: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') || rel.contains('$') || rel.contains('`') || rel.starts_with('~') {
        return None;
    }
    let mut parts: Vec<&str> = cwd.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The folder of a workspace path (`""` for the root).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The simple commands of a shell text: words after quoting, split at control operators, with
/// redirections, comments and subshell parentheses dropped.
pub fn simple_commands(text: &str) -> Vec<Vec<String>> {
    let mut s = Split::default();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                s.in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    s.word.push(q);
                }
            }
            '"' => {
                s.in_word = true;
                double_quoted(&mut chars, &mut s.word);
            }
            '\\' => {
                if let Some(n) = chars.next() {
                    if n != '\n' {
                        s.in_word = true;
                        s.word.push(n);
                    }
                }
            }
            '#' if !s.in_word => {
                for q in chars.by_ref() {
                    if q == '\n' {
                        break;
                    }
                }
                s.end_command();
            }
            ' ' | '\t' => s.finish_word(),
            ';' | '&' | '|' | '\n' | '(' | ')' | '{' | '}'
                if !(c == '&' && s.word.ends_with('>')) =>
            {
                s.end_command()
            }
            '>' | '<' => s.redirection(&mut chars),
            c => {
                s.in_word = true;
                s.word.push(c);
            }
        }
    }
    s.end_command();
    s.commands
}

/// What [`simple_commands`] has read so far: the commands, the current one's words, the word
/// being read, and whether the next word is a redirection's target (no word of the command).
#[derive(Default)]
struct Split {
    commands: Vec<Vec<String>>,
    words: Vec<String>,
    word: String,
    in_word: bool,
    skip_next_word: bool,
}

impl Split {
    /// Ends the word being read: a word of the command, unless it is a redirection's target.
    fn finish_word(&mut self) {
        if self.in_word {
            if self.skip_next_word {
                self.skip_next_word = false;
            } else {
                self.words.push(std::mem::take(&mut self.word));
            }
            self.word.clear();
            self.in_word = false;
        }
    }

    /// Ends the word and the command being read.
    fn end_command(&mut self) {
        self.finish_word();
        if !self.words.is_empty() {
            self.commands.push(std::mem::take(&mut self.words));
        }
    }

    /// After `>` or `<`: a redirection (`>f`, `2>&1`, `> f`), whose target is no word of the
    /// command.
    fn redirection(&mut self, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        if self.in_word && self.word.chars().all(|d| d.is_ascii_digit()) {
            self.word.clear();
            self.in_word = false;
        } else {
            self.finish_word();
        }
        while chars.peek().is_some_and(|n| matches!(n, '>' | '<' | '&')) {
            chars.next();
        }
        if chars
            .peek()
            .is_some_and(|n| n.is_ascii_digit() || *n == '-')
        {
            // `>&1`, `>&-`: the descriptor is no word either.
            while chars
                .peek()
                .is_some_and(|n| n.is_ascii_digit() || *n == '-')
            {
                chars.next();
            }
        } else {
            self.skip_next_word = true;
        }
    }
}

/// Reads a double-quoted string's content (after its opening quote) into `word`: up to the
/// closing quote, a backslash taking the next character as it is.
fn double_quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, word: &mut String) {
    while let Some(q) = chars.next() {
        match q {
            '"' => break,
            '\\' => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            q => word.push(q),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<String>> {
        simple_commands(text)
    }

    #[test]
    fn simple_commands_split_at_operators_and_drop_redirections() {
        assert_eq!(
            words("cd pricing && python3 -B -m unittest 2>&1 | tail -n 3 > out.txt; echo 'a b'"),
            vec![
                vec!["cd", "pricing"],
                vec!["python3", "-B", "-m", "unittest"],
                vec!["tail", "-n", "3"],
                vec!["echo", "a b"],
            ]
        );
        assert_eq!(
            words("# only a comment\npytest -q # trailing"),
            vec![vec!["pytest", "-q"]]
        );
    }

    #[test]
    fn a_script_puts_its_own_folder_first_on_the_import_path() {
        let r = read_command("python3 check_fix.py", Some(""));
        assert_eq!(r.python_path, [Place::Dir(String::new())]);
        assert_eq!(r.scripts, ["check_fix.py"]);
        let r = read_command("cd sub && python3 -B tools/check.py --tests", Some(""));
        assert_eq!(r.python_path, [Place::Dir("sub/tools".into())]);
        assert_eq!(r.scripts, ["sub/tools/check.py"]);
    }

    #[test]
    fn modules_and_runners_are_read_with_where_they_collect() {
        let r = read_command("python3 -m unittest discover -s tests", Some(""));
        assert_eq!(r.python_modules, ["unittest"]);
        assert_eq!(r.runners[0].collects, Place::Tree("tests".into()));
        let r = read_command("timeout 60 pytest -q tests/test_api.py::test_one", Some(""));
        assert_eq!(r.runners[0].name, "pytest");
        assert_eq!(r.runners[0].collects, Place::Tree("tests".into()));
        let r = read_command("CI=1 npm test", Some("web"));
        assert!(r.node);
        assert_eq!(r.runners[0].collects, Place::Tree("web".into()));
        let r = read_command("cd $DIR && go test ./...", Some(""));
        assert_eq!(
            r.runners[0].collects,
            Place::Anywhere,
            "a cd it cannot follow is anywhere"
        );
    }

    #[test]
    fn isolated_python_puts_nothing_of_the_workspace_on_its_path() {
        assert!(read_command("python3 -I check.py", Some(""))
            .python_path
            .is_empty());
        assert!(read_command("python3 -P -m unittest", Some(""))
            .python_path
            .is_empty());
    }

    #[test]
    fn shell_scripts_are_named_and_paths_that_leave_the_workspace_are_not() {
        let r = read_command(
            "sh run_checks.sh && bash ./t/x.sh && ./verify && sh /tests/test.sh",
            Some(""),
        );
        assert_eq!(r.scripts, ["run_checks.sh", "t/x.sh", "verify"]);
        assert_eq!(join("a", "../../b"), None);
    }
}
