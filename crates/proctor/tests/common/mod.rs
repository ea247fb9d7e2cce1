//! A small DSL for integration tests: build a suite in a temporary folder, run the real
//! `proctor` binary on it, and snapshot what it printed with paths redacted.

#![allow(dead_code)]

pub mod lab;
pub mod outcomes;
pub mod registry;
pub mod upstream;
pub mod viewer;

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// Skips the rest of a test whose real part this machine lacks, saying why; under `CI` a missing
/// real part fails the test instead, so a green CI never hides lost coverage.
pub fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "under CI every real part must run: {why}"
    );
    eprintln!("SKIPPED: {why}");
}

/// Whether Debian's sqlite3 is here; when not, the test is skipped (a failure under CI).
pub fn have_sqlite3() -> bool {
    let found = std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        skip("sqlite3 is not installed (Debian's sqlite3: .ci/run installs it)");
    }
    found
}

/// A minimal valid suite; tests change one thing in it.
pub const MINIMAL: &str = r#"schema_version = 1
id = "mini"

[defaults]
wall_timeout_seconds = 30

[[variants]]
id = "oracle"
agent = "script"
script = "agents/oracle"

[[tasks]]
id = "hello"
prompt = "Create hello.txt containing hi."

[tasks.success]
all = [
  { file_contains = { path = "hello.txt", pattern = "hi" } },
]
"#;

/// A suite being built in a temporary folder.
pub struct TestSuite {
    dir: tempfile::TempDir,
}

impl TestSuite {
    /// The minimal valid suite, with its fixture and oracle script.
    pub fn minimal() -> TestSuite {
        TestSuite::with_toml(MINIMAL)
    }

    /// A suite whose suite.toml is `toml`, with the minimal fixture and oracle.
    pub fn with_toml(toml: &str) -> TestSuite {
        let dir = tempfile::Builder::new()
            .prefix("proctortest")
            .tempdir()
            .unwrap();
        let s = TestSuite { dir };
        s.write("suite.toml", toml);
        s.write(
            "fixture/README.md",
            "a tiny fixture\nline two\nline three\n",
        );
        s.write(
            "agents/oracle/hello.toml",
            "answer = \"done\"\n\n[[steps]]\nrun = \"echo hi > hello.txt\"\n",
        );
        s
    }

    /// Replaces `from` by `to` in suite.toml (which must contain it).
    pub fn edit(self, from: &str, to: &str) -> TestSuite {
        let text = std::fs::read_to_string(self.path().join("suite.toml")).unwrap();
        assert!(text.contains(from), "suite.toml does not contain {from:?}");
        self.write("suite.toml", &text.replacen(from, to, 1));
        self
    }

    /// Writes a file inside the suite, creating folders.
    pub fn write(&self, rel: &str, content: &str) -> &TestSuite {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        self
    }

    /// The suite folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `proctor validate` on this suite.
    pub fn validate(&self) -> Output {
        proctor(&["validate", self.path().to_str().unwrap()], self.path())
    }
}

/// What a run of the binary printed.
pub struct Output {
    /// Exit status.
    pub code: i32,
    /// stdout, paths redacted.
    pub stdout: String,
    /// stderr, paths redacted.
    pub stderr: String,
}

/// Runs `proctor ARGS` and redacts `redact` (a temporary folder) to `[SUITE]`.
pub fn proctor(args: &[&str], redact: &Path) -> Output {
    let out = Command::cargo_bin("proctor")
        .unwrap()
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let clean = |b: &[u8]| {
        let s = String::from_utf8_lossy(b).into_owned();
        s.replace(redact.to_str().unwrap(), "[SUITE]")
    };
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: clean(&out.stdout),
        stderr: clean(&out.stderr),
    }
}

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A diagnostic's text with its line wrapping undone, for searching its messages.
///
/// The report wraps at 100 columns, and where it wraps depends on the length of the lab's path;
/// it may break inside a word (after `/`), so whitespace and the gutter's `│` are dropped from the
/// text and from the needle alike.
pub struct Unwrapped(String);

/// `text` with the diagnostics' line wrapping undone (see [`Unwrapped`]).
pub fn unwrapped(text: &str) -> Unwrapped {
    Unwrapped(squash(text))
}

fn squash(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '│')
        .collect()
}

impl Unwrapped {
    /// Whether the text says `needle`, wherever the report wrapped it.
    pub fn contains(&self, needle: &str) -> bool {
        self.0.contains(&squash(needle))
    }
}

impl std::fmt::Display for Unwrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
