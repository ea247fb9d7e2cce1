//! The assertion vocabulary: one-key inline tables whose key names the kind.
//!
//! Each kind carries the structure a scorer needs to record evidence (which file, which calls,
//! which pointer), so the types here are the contract between a suite and its results.

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

/// One rule over a trial's end state.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Assertion {
    /// The final answer matches the regex.
    AnswerMatches(Spanned<String>),
    /// The final answer does not match the regex.
    AnswerForbids(Spanned<String>),
    /// No file (or none under the globs) was added, changed or deleted.
    FilesUnchanged(FilesUnchanged),
    /// Some file matching the glob was added.
    FileAdded(Spanned<String>),
    /// Some file matching the glob was deleted.
    FileDeleted(Spanned<String>),
    /// Some file matching the glob was changed in content.
    FileChanged(Spanned<String>),
    /// The end-state file matches the regex.
    FileContains(FileContains),
    /// A validation command, run after holdouts are installed, exits as given.
    Check(Check),
    /// The number of interface calls of a verb is within bounds.
    Calls(Calls),
    /// A service's end state holds a value.
    State(StateAssertion),
    /// The inner assertion does not hold.
    Not(Box<Spanned<Assertion>>),
}

impl Assertion {
    /// The key that names this kind in `suite.toml`.
    pub fn kind(&self) -> &'static str {
        match self {
            Assertion::AnswerMatches(_) => "answer_matches",
            Assertion::AnswerForbids(_) => "answer_forbids",
            Assertion::FilesUnchanged(_) => "files_unchanged",
            Assertion::FileAdded(_) => "file_added",
            Assertion::FileDeleted(_) => "file_deleted",
            Assertion::FileChanged(_) => "file_changed",
            Assertion::FileContains(_) => "file_contains",
            Assertion::Check(_) => "check",
            Assertion::Calls(_) => "calls",
            Assertion::State(_) => "state",
            Assertion::Not(_) => "not",
        }
    }

    /// Every `check` in this assertion, including under `not`.
    pub fn checks(&self) -> Vec<&Check> {
        match self {
            Assertion::Check(c) => vec![c],
            Assertion::Not(inner) => inner.get_ref().checks(),
            _ => Vec::new(),
        }
    }
}

/// The names of every assertion kind, for suggestions in error messages.
pub const ASSERTION_KINDS: &[&str] = &[
    "answer_matches",
    "answer_forbids",
    "files_unchanged",
    "file_added",
    "file_deleted",
    "file_changed",
    "file_contains",
    "check",
    "calls",
    "state",
    "not",
];

/// `files_unchanged = true` or `files_unchanged = ["GLOB", ...]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FilesUnchanged {
    /// `true`: nothing changed anywhere; `false`: something changed somewhere.
    Everywhere(bool),
    /// Nothing changed under these globs.
    Under(Vec<String>),
}

impl<'de> Deserialize<'de> for FilesUnchanged {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FilesUnchanged;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`true` or a list of globs such as [\"src/**\"]")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(FilesUnchanged::Everywhere(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut globs = Vec::new();
                while let Some(g) = seq.next_element::<String>()? {
                    globs.push(g);
                }
                Ok(FilesUnchanged::Under(globs))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `file_contains = { path = "P", pattern = "RE" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileContains {
    /// Workspace-relative path of the end-state file.
    pub path: Spanned<String>,
    /// Regex the file must match.
    pub pattern: Spanned<String>,
}

/// A validation command: `check = "CMD"` or the table form.
#[derive(Debug, Clone)]
pub struct Check {
    /// Run with `sh -c` in the end-state workspace with holdouts laid over it.
    pub command: String,
    /// The exit status that makes it hold.
    pub exit: i32,
    /// A regex its stdout must match, if given.
    pub stdout_matches: Option<Spanned<String>>,
    /// Overrides the task's `validation_timeout_seconds`.
    pub timeout_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckTable {
    command: String,
    #[serde(default)]
    exit: i32,
    #[serde(default)]
    stdout_matches: Option<Spanned<String>>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Check;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a command string, or a table { command = \"CMD\", exit = 0, stdout_matches = \"RE\", timeout_seconds = N }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Check {
                    command: v.to_string(),
                    exit: 0,
                    stdout_matches: None,
                    timeout_seconds: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let t = CheckTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Check {
                    command: t.command,
                    exit: t.exit,
                    stdout_matches: t.stdout_matches,
                    timeout_seconds: t.timeout_seconds,
                })
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `calls = { verb = "V", min = N, max = M, args_match = "RE", exit = 0 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calls {
    /// The verb counted (the argv entry at the interface's `verb_arg`); all calls when absent.
    #[serde(default)]
    pub verb: Option<String>,
    /// At least this many.
    #[serde(default)]
    pub min: Option<u32>,
    /// At most this many.
    #[serde(default)]
    pub max: Option<u32>,
    /// Only calls whose arguments, joined by spaces, match this regex.
    #[serde(default)]
    pub args_match: Option<Spanned<String>>,
    /// Only calls that exited with this status.
    #[serde(default)]
    pub exit: Option<i32>,
}

/// `state = { service = "S", pointer = "/p", equals = V | matches = "RE" | exists = B }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateAssertion {
    /// The service whose state file is read.
    pub service: Spanned<String>,
    /// An RFC 6901 JSON pointer into the state.
    pub pointer: Spanned<String>,
    /// The value must equal this.
    #[serde(default)]
    pub equals: Option<toml::Value>,
    /// The value (as text) must match this regex.
    #[serde(default)]
    pub matches: Option<Spanned<String>>,
    /// The value must exist (or not).
    #[serde(default)]
    pub exists: Option<bool>,
}
