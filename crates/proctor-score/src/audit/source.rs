//! What the audit reads in source files: the Python module a file would be imported as, the
//! modules a Python file imports, and statements that end the process as soon as a file is
//! loaded (in Python and JavaScript).

/// The top-level module name a workspace file would be imported as from its folder, with the
/// folder that must be on `sys.path` for that: `json.py`, `json.pyc`, `json.cpython-311.so`,
/// `json/__init__.py` are `json`. `None` for a file Python would not import as a module.
pub fn python_module(path: &str) -> Option<(&str, &str)> {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    // A package's `__init__` in any form Python imports: source, bytecode, an extension.
    if file == "__init__.py"
        || file == "__init__.pyc"
        || (file.starts_with("__init__.") && (file.ends_with(".so") || file.ends_with(".pyd")))
    {
        let (above, package) = dir.rsplit_once('/').unwrap_or(("", dir));
        return (!package.is_empty()).then_some((package, above));
    }
    let stem = match file.split_once('.') {
        Some((stem, "py" | "pyc" | "pyw" | "so" | "pyd")) => stem,
        Some((stem, ext)) if ext.ends_with(".so") || ext.ends_with(".pyd") => stem,
        _ => return None,
    };
    let valid = !stem.is_empty()
        && !stem.starts_with(|c: char| c.is_ascii_digit())
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((stem, dir))
}

/// Whether a file is one Python's start-up runs from a folder on its path: `sitecustomize`,
/// `usercustomize`, or a `.pth` file.
pub fn python_startup_hook(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    matches!(
        file,
        "sitecustomize.py" | "usercustomize.py" | "sitecustomize.pyc" | "usercustomize.pyc"
    ) || file.ends_with(".pth")
}

/// The top-level modules a Python source imports (`import a.b, c`, `from d.e import f`), in
/// order of first appearance, relative imports left out.
pub fn python_imports(source: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        let top = name.trim().split('.').next().unwrap_or_default().trim();
        let valid = !top.is_empty() && top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid && !out.iter().any(|o| o == top) {
            out.push(top.to_string());
        }
    };
    for line in source.lines() {
        let line = line.trim_start();
        let line = line.split('#').next().unwrap_or_default();
        if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split(',') {
                add(part.split(" as ").next().unwrap_or_default());
            }
        } else if let Some(rest) = line.strip_prefix("from ") {
            let module = rest.split(" import").next().unwrap_or_default();
            if !module.starts_with('.') {
                add(module);
            }
        }
    }
    // `importlib.import_module("x")` and `__import__("x")` with a literal name.
    for marker in ["import_module(", "__import__("] {
        for (i, _) in source.match_indices(marker) {
            let rest = &source[i + marker.len()..];
            let rest = rest.trim_start();
            if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
                if let Some(end) = rest[1..].find(q) {
                    add(&rest[1..1 + end]);
                }
            }
        }
    }
    out
}

/// A statement that ends the process, or hooks its end, when a file is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlyExit {
    /// 1-based line.
    pub line: u32,
    /// The statement, trimmed (at most 120 characters).
    pub statement: String,
}

/// The first statement of a Python source that runs when the module is imported (not inside a
/// `def`, a `class` or an `if __name__ == "__main__":` block) and ends the process with success
/// or hooks its end: `os._exit(...)`, `sys.exit()`/`exit()`/`quit()` with no status or a zero,
/// `False` or `None` status, `raise SystemExit` likewise, `atexit.register(...)`,
/// `signal.signal(...)` with a handler of its own, `os.kill(...)`, `os.abort()`.
/// `sys.exit(main())` is not one: its status is the program's own.
pub fn python_early_exit(source: &str) -> Option<EarlyExit> {
    first_at_import(source, &PYTHON_EXIT_WORDS, python_exit_statement)
}

/// The first statement of a Python source that runs when the module is imported and patches a
/// test framework: an assignment to, or `setattr` on, `unittest`, `pytest`, `_pytest`,
/// `builtins` or `sys.modules` (a subject that makes `assertEqual` a no-op when the hidden test
/// imports it).
pub fn python_test_patch(source: &str) -> Option<EarlyExit> {
    first_at_import(source, &TEST_FRAMEWORKS, |body| {
        let code = body.split('#').next().unwrap_or_default();
        let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        TEST_FRAMEWORKS.iter().any(|m| {
            compact.contains(&format!("setattr({m}"))
                || compact.match_indices(m).any(|(at, _)| {
                    let starts = compact[..at]
                        .chars()
                        .last()
                        .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'));
                    let rest = &compact[at + m.len()..];
                    // `unittest.TestCase.assertEqual=...`, `sys.modules["x"]=...`, not `==`.
                    let target: String = rest
                        .chars()
                        .take_while(|c| {
                            c.is_ascii_alphanumeric()
                                || matches!(c, '_' | '.' | '[' | ']' | '"' | '\'')
                        })
                        .collect();
                    let after = &rest[target.len()..];
                    starts
                        && (target.starts_with('.') || target.starts_with('['))
                        && after.starts_with('=')
                        && !after.starts_with("==")
                })
        })
    })
}

/// Test framework modules a subject must not patch.
const TEST_FRAMEWORKS: [&str; 5] = ["unittest", "pytest", "_pytest", "builtins", "sys.modules"];

/// The first line of `source` that runs at import (not inside a `def`, a `class` or the main
/// guard; a decorator line counts) and that `hit` says is one, looking only at lines that hold
/// one of `words` (and not at all at a source that holds none).
fn first_at_import(source: &str, words: &[&str], hit: impl Fn(&str) -> bool) -> Option<EarlyExit> {
    if !words.iter().any(|w| source.contains(w)) {
        return None;
    }
    let mut guarded = false;
    let mut in_string: Option<&str> = None;
    for (n, raw) in source.lines().enumerate() {
        let line = raw.trim_end();
        if let Some(q) = in_string {
            if line.contains(q) {
                in_string = None;
            }
            continue;
        }
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indented = body.len() < line.len();
        if !indented {
            guarded = is_guard(body);
        }
        if let Some(q) = opens_string(body) {
            in_string = Some(q);
        }
        let runs = !guarded || (!indented && body.starts_with('@'));
        if runs && words.iter().any(|w| body.contains(w)) && hit(body) {
            return Some(EarlyExit {
                line: u32::try_from(n + 1).unwrap_or(u32::MAX),
                statement: body.chars().take(120).collect(),
            });
        }
    }
    None
}

/// Words every statement [`python_exit_statement`] recognises holds one of.
const PYTHON_EXIT_WORDS: [&str; 6] = ["exit", "quit", "Exit", "signal", "abort", "kill"];

/// Whether a top-level line opens a block whose body does not run at import: a function, a
/// class (its methods), a decorator line, or the main guard.
fn is_guard(body: &str) -> bool {
    body.starts_with("def ")
        || body.starts_with("async def ")
        || body.starts_with("class ")
        || (body.starts_with('@') && !python_exit_statement(body))
        || (body.starts_with("if ") && body.contains("__name__") && body.contains("__main__"))
}

/// The triple quote a line leaves open (a docstring spanning lines), if any.
fn opens_string(body: &str) -> Option<&'static str> {
    ["\"\"\"", "'''"]
        .into_iter()
        .find(|q| body.matches(q).count() % 2 == 1)
}

/// Whether a Python line is a statement that ends the process with success, or hooks its end.
fn python_exit_statement(body: &str) -> bool {
    let code = body.split('#').next().unwrap_or_default();
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if calls(&compact, "_exit(") || compact.contains("os.abort(") {
        return true;
    }
    if compact.contains("atexit.register") || compact.contains("os.kill(") {
        return true;
    }
    if compact.contains("signal.signal(") {
        return !(compact.contains("SIG_DFL") || compact.contains("SIG_IGN"));
    }
    for call in ["sys.exit(", "exit(", "quit(", "raiseSystemExit("] {
        let mut from = 0;
        while let Some(i) = compact[from..].find(call) {
            let at = from + i;
            from = at + call.len();
            let before = compact[..at].chars().last();
            if call != "sys.exit("
                && before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                continue;
            }
            let arg = compact[from..].split(')').next().unwrap_or_default();
            if matches!(arg, "" | "0" | "None" | "False" | "0x0") {
                return true;
            }
        }
    }
    compact == "raiseSystemExit"
}

/// Whether `compact` calls `name` (which ends in `(`) as a name of its own or as an attribute
/// (`os._exit(`), not as the end of a longer name (`on_exit(`).
fn calls(compact: &str, name: &str) -> bool {
    compact.match_indices(name).any(|(at, _)| {
        compact[..at]
            .chars()
            .last()
            .is_none_or(|c| c == '.' || !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

/// The first top-level statement of a JavaScript or TypeScript source that ends the process
/// when the file is loaded: `process.exit(...)`, `process.kill(...)` or
/// `process.on("exit", ...)` at no indentation.
pub fn js_early_exit(source: &str) -> Option<EarlyExit> {
    if !source.contains("process") {
        return None;
    }
    for (n, line) in source.lines().enumerate() {
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.starts_with("//") {
            continue;
        }
        if compact.contains("process.exit(")
            || compact.contains("process.kill(")
            || compact.contains("process.on('exit'")
            || compact.contains("process.on(\"exit\"")
            || compact.contains("process.reallyExit(")
        {
            return Some(EarlyExit {
                line: u32::try_from(n + 1).unwrap_or(u32::MAX),
                statement: line.trim().chars().take(120).collect(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_as_the_modules_python_would_import() {
        assert_eq!(python_module("json.py"), Some(("json", "")));
        assert_eq!(python_module("a/b/unittest.pyc"), Some(("unittest", "a/b")));
        assert_eq!(
            python_module("re.cpython-311-x86_64-linux-gnu.so"),
            Some(("re", ""))
        );
        assert_eq!(python_module("pkg/json/__init__.py"), Some(("json", "pkg")));
        assert_eq!(python_module("notes.txt"), None);
        assert_eq!(python_module("my-tool.py"), None, "not an importable name");
        assert!(python_startup_hook("sitecustomize.py") && python_startup_hook("x/evil.pth"));
        assert!(!python_startup_hook("site.py"));
    }

    #[test]
    fn imports_are_read_with_their_top_level_names() {
        let src = "import os, sys as s\nfrom numpy.linalg import norm\nfrom . import sibling\n    import json  # late\nm = importlib.import_module('yaml.loader')\n";
        assert_eq!(python_imports(src), ["os", "sys", "numpy", "json", "yaml"]);
    }

    #[test]
    fn an_exit_at_import_is_found_and_one_under_a_guard_is_not() {
        let found = |src: &str| python_early_exit(src).map(|e| (e.line, e.statement));
        assert_eq!(
            found("import os; os._exit(0)\n"),
            Some((1, "import os; os._exit(0)".into()))
        );
        assert_eq!(found("import sys\n\nsys.exit()\n").unwrap().0, 3);
        assert_eq!(
            found("try:\n    raise SystemExit(0)\nexcept Exception:\n    pass\n")
                .unwrap()
                .0,
            2
        );
        assert_eq!(
            found("import atexit\n@atexit.register\ndef bye():\n    pass\n")
                .unwrap()
                .0,
            2
        );
        assert_eq!(found("__import__('os')._exit(0)\n").unwrap().0, 1);
        assert_eq!(
            found("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
                .unwrap()
                .0,
            2
        );
        // Not at import: in a function, a method, under the main guard, in a docstring.
        assert_eq!(found("def f():\n    sys.exit(0)\n"), None);
        assert_eq!(
            found("class C:\n    def m(self):\n        os._exit(0)\n"),
            None
        );
        assert_eq!(
            found("if __name__ == \"__main__\":\n    sys.exit(0)\n"),
            None
        );
        assert_eq!(found("\"\"\"Usage:\nsys.exit(0)\n\"\"\"\nx = 1\n"), None);
        // The program's own status is no early success; nor is a default signal handler.
        assert_eq!(found("sys.exit(main())\n"), None);
        assert_eq!(
            found("signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"),
            None
        );
        assert_eq!(found("sys.exit(1)\n"), None);
        assert_eq!(found("exit_code = compute_exit(0)\n"), None);
    }

    #[test]
    fn a_subject_that_patches_the_test_framework_at_import_is_found() {
        let found = |src: &str| python_test_patch(src).map(|e| e.line);
        assert_eq!(
            found("import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"),
            Some(2)
        );
        assert_eq!(found("import sys\nsys.modules['json'] = None\n"), Some(2));
        assert_eq!(
            found("import builtins\nsetattr(builtins, 'print', id)\n"),
            Some(2)
        );
        assert_eq!(
            found("import unittest\nok = unittest.TestCase == object\n"),
            None
        );
        assert_eq!(found("my_unittest.x = 1\n"), None);
        assert_eq!(
            found("import pytest\n\ndef f():\n    pytest.skip = None\n"),
            None,
            "in a function, not at import"
        );
    }

    #[test]
    fn a_js_exit_at_load_is_found() {
        assert_eq!(
            js_early_exit("const a = 1;\nprocess.exit(0);\n")
                .unwrap()
                .line,
            2
        );
        assert_eq!(
            js_early_exit("function f() {\n  process.exit(0);\n}\n"),
            None
        );
    }
}
