//! The assertion vocabulary: one-key inline tables whose key names the kind.
//!
//! Each kind carries the structure a scorer needs to record evidence (which file, which calls,
//! which pointer), so the types here are the contract between a suite and its results.
//!
//! Their doc comments are also the descriptions of `proctor schema suite`, shown by editors while
//! a suite is written.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use toml::Spanned;

use crate::timeouts;

/// One rule over a trial's end state: a one-key inline table whose key names the kind, e.g.
/// `{ check = "pytest -q" }` or `{ not = { file_added = "*.bak" } }`.
// Read by hand (`AssertionVisitor`), so that a second key is named as an unknown key at its
// place, at any depth under `not`; the `serde` attributes are for the schema.
#[derive(Debug, Clone, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(transform = describe_keys)]
pub enum Assertion {
    /// `answer_matches = "RE"`: the agent's final answer matches the regex.
    AnswerMatches(#[schemars(with = "String")] Spanned<String>),
    /// `answer_forbids = "RE"`: the agent's final answer does not match the regex.
    AnswerForbids(#[schemars(with = "String")] Spanned<String>),
    /// `files_unchanged = true` or `files_unchanged = ["GLOB", ...]`: no file in the workspace
    /// (or none matching the globs) was added, changed or deleted.
    FilesUnchanged(FilesUnchanged),
    /// `file_added = "GLOB"`: some file matching the glob was added.
    FileAdded(#[schemars(with = "String")] Spanned<String>),
    /// `file_deleted = "GLOB"`: some file matching the glob was deleted.
    FileDeleted(#[schemars(with = "String")] Spanned<String>),
    /// `file_changed = "GLOB"`: some file matching the glob was changed in content.
    FileChanged(#[schemars(with = "String")] Spanned<String>),
    /// `file_contains = { path = "P", pattern = "RE" }`: the end-state file P matches the regex.
    FileContains(FileContains),
    /// `check = "CMD"` or `check = { command = "CMD", exit = 0, stdout_matches = "RE",
    /// timeout_seconds = N }`: a validation command, run after the holdout files are laid over
    /// the end state, exits as given (default 0).
    Check(Check),
    /// `calls = { verb = "V", min = N, max = M, args_match = "RE", stdin_matches = "RE", exit =
    /// 0 }`: the number of interface calls (of that verb, arguments, stdin and exit status) is
    /// within bounds.
    Calls(Calls),
    /// `mcp_calls = { server = "S", tool = "T", min = N, max = M, args_match = "RE", error =
    /// false }`: the number of logged `tools/call`s of that MCP server (and tool, arguments and
    /// failure) is within bounds.
    McpCalls(McpCalls),
    /// `state = { service = "S", pointer = "/json/pointer", equals = VALUE }` (or
    /// `matches = "RE"`, or `exists = true`): a service's end state holds that value.
    State(StateAssertion),
    /// `visual = { page = "index.html", selector = "#status", text = "Ready" }` (or `url =
    /// "http://127.0.0.1:PORT/"`; `matches`, `visible`, `count`, or `screenshot =
    /// "holdout/TASK/ref.png"` within `max_diff`): what a page shows in headless Chromium after
    /// the agent stopped.
    Visual(Visual),
    /// `steps = { min_reward = R }`: in a task in steps (`[[tasks.steps]]`), the trial's reward
    /// (its steps' rewards combined as `step_reward` says) is at least R.
    Steps(StepsRule),
    /// `not = { ... }`: the inner assertion does not hold.
    Not(#[schemars(with = "Assertion")] Box<Spanned<Assertion>>),
}

/// Copies each alternative's description onto its one key, so an editor completing the key
/// shows what the kind does.
fn describe_keys(schema: &mut Schema) {
    let Some(Value::Array(alternatives)) = schema.get_mut("oneOf") else {
        return;
    };
    for alternative in alternatives {
        let Some(description) = alternative.get("description").cloned() else {
            continue;
        };
        let Some(Value::Object(properties)) = alternative.get_mut("properties") else {
            continue;
        };
        for property in properties.values_mut() {
            if let Value::Object(p) = property {
                p.entry("description").or_insert(description.clone());
            }
        }
    }
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
            Assertion::McpCalls(_) => "mcp_calls",
            Assertion::State(_) => "state",
            Assertion::Visual(_) => "visual",
            Assertion::Steps(_) => "steps",
            Assertion::Not(_) => "not",
        }
    }

    /// Every `visual` in this assertion, including under `not`.
    pub fn visuals(&self) -> Vec<&Visual> {
        match self {
            Assertion::Visual(v) => vec![v],
            Assertion::Not(inner) => inner.get_ref().visuals(),
            _ => Vec::new(),
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

/// The key of an assertion table: which kind it is. Read from the key itself, so an unknown
/// kind is named at its place with the kinds to choose from.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    AnswerMatches,
    AnswerForbids,
    FilesUnchanged,
    FileAdded,
    FileDeleted,
    FileChanged,
    FileContains,
    Check,
    Calls,
    McpCalls,
    State,
    Visual,
    Steps,
    Not,
}

impl<'de> Deserialize<'de> for Assertion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AssertionVisitor)
    }
}

/// Reads one assertion table: its one key, its value as that kind's, and no other key.
struct AssertionVisitor;

impl<'de> Visitor<'de> for AssertionVisitor {
    type Value = Assertion;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an assertion: a one-key table such as `{ check = \"make test\" }`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Assertion, A::Error> {
        let Some(kind) = map.next_key::<Kind>()? else {
            return Err(de::Error::custom(
                "an empty assertion: an assertion is a one-key table such as `{ check = \"make test\" }`",
            ));
        };
        let assertion = match kind {
            Kind::AnswerMatches => Assertion::AnswerMatches(map.next_value()?),
            Kind::AnswerForbids => Assertion::AnswerForbids(map.next_value()?),
            Kind::FilesUnchanged => Assertion::FilesUnchanged(map.next_value()?),
            Kind::FileAdded => Assertion::FileAdded(map.next_value()?),
            Kind::FileDeleted => Assertion::FileDeleted(map.next_value()?),
            Kind::FileChanged => Assertion::FileChanged(map.next_value()?),
            Kind::FileContains => Assertion::FileContains(map.next_value()?),
            Kind::Check => Assertion::Check(map.next_value()?),
            Kind::Calls => Assertion::Calls(map.next_value()?),
            Kind::McpCalls => Assertion::McpCalls(map.next_value()?),
            Kind::State => Assertion::State(map.next_value()?),
            Kind::Visual => Assertion::Visual(map.next_value()?),
            Kind::Steps => Assertion::Steps(map.next_value()?),
            Kind::Not => Assertion::Not(map.next_value()?),
        };
        // A second key is refused as it is read, so the problem points at it.
        map.next_key_seed(NoSecondKey(assertion.kind()))?;
        Ok(assertion)
    }
}

/// Refuses any key after an assertion's first: an unknown key of that assertion, whose one valid
/// key is its kind.
struct NoSecondKey(&'static str);

impl<'de> de::DeserializeSeed<'de> for NoSecondKey {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let key = String::deserialize(deserializer)?;
        let kind = ASSERTION_KINDS
            .iter()
            .position(|k| *k == self.0)
            .map_or(&ASSERTION_KINDS[..0], |i| &ASSERTION_KINDS[i..=i]);
        Err(de::Error::unknown_field(&key, kind))
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
    "mcp_calls",
    "state",
    "visual",
    "steps",
    "not",
];

/// `steps = { min_reward = R }`: the trial's reward over its steps is at least R.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepsRule {
    /// The least reward that holds (a step's reward is 0 to 1 as its check says). Required.
    pub min_reward: f64,
}

/// `files_unchanged = true` or `files_unchanged = ["GLOB", ...]`.
///
/// Its schema is written by hand to match its hand-written `Deserialize`: a boolean or a list of
/// strings.
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

impl JsonSchema for FilesUnchanged {
    fn schema_name() -> Cow<'static, str> {
        "FilesUnchanged".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "`true`: no file anywhere in the workspace was added, changed or deleted (`false`: some file was); or a list of globs: no file matching them was.",
            "anyOf": [
                {
                    "type": "boolean",
                    "description": "`true`: no file anywhere in the workspace was added, changed or deleted; `false`: some file was.",
                },
                {
                    "type": "array",
                    "items": { "type": "string" },
                    "description": "Globs, e.g. `[\"src/**\"]`: no file matching any of them was added, changed or deleted.",
                },
            ],
        })
    }
}

/// `file_contains = { path = "P", pattern = "RE" }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileContains {
    /// Workspace-relative path of the end-state file. Required.
    #[schemars(with = "String")]
    pub path: Spanned<String>,
    /// Regex the file's content must match. Required.
    #[schemars(with = "String")]
    pub pattern: Spanned<String>,
}

/// A validation command: `check = "CMD"` or the table form.
///
/// Its schema is written by hand to match its hand-written `Deserialize`: a command string
/// or the table form.
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

/// The table form of `check`: `{ command = "CMD", exit = 0, stdout_matches = "RE",
/// timeout_seconds = N }`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckTable {
    /// The command, run with `sh -c` in the end-state workspace with the holdout files laid over
    /// it. Required.
    command: String,
    /// The exit status that makes the check hold. Default: 0.
    #[serde(default)]
    exit: i32,
    /// A regex the command's stdout must also match. Default: none.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    stdout_matches: Option<Spanned<String>>,
    /// Seconds the command may run (1 to 86400); overrides the task's
    /// `validation_timeout_seconds`.
    #[serde(default, deserialize_with = "check_seconds")]
    #[schemars(range(min = timeouts::MIN_SECONDS, max = timeouts::MAX_SECONDS))]
    timeout_seconds: Option<u64>,
}

/// A check's `timeout_seconds`: 1 second to a day, refused at its value otherwise.
fn check_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = u64::deserialize(d)?;
    if timeouts::in_range(v) {
        Ok(Some(v))
    } else {
        Err(de::Error::custom(format!(
            "`timeout_seconds` must be between {} and {} seconds (a day), not {v}",
            timeouts::MIN_SECONDS,
            timeouts::MAX_SECONDS
        )))
    }
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

impl JsonSchema for Check {
    fn schema_name() -> Cow<'static, str> {
        "Check".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let table = CheckTable::json_schema(generator);
        json_schema!({
            "description": "A validation command, run after the agent stopped, in the end-state workspace with the holdout files laid over it: a command string (it must exit 0), or a table { command, exit, stdout_matches, timeout_seconds }.",
            "anyOf": [
                {
                    "type": "string",
                    "description": "The command, run with `sh -c`; it must exit 0.",
                },
                table,
            ],
        })
    }
}

/// `calls = { verb = "V", min = N, max = M, args_match = "RE", stdin_matches = "RE", exit = 0 }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Calls {
    /// The verb counted (by the interface's `verb` rule: by default the argv entry at its
    /// `verb_arg`). Default: every call.
    #[serde(default)]
    pub verb: Option<String>,
    /// At least this many calls. Default: no lower bound.
    #[serde(default)]
    pub min: Option<u32>,
    /// At most this many calls. Default: no upper bound.
    #[serde(default)]
    pub max: Option<u32>,
    /// Only calls whose arguments, joined by spaces, match this regex.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub args_match: Option<Spanned<String>>,
    /// Only calls whose stdin matches this regex: the head the calls log keeps of what the
    /// call read from stdin (its first 2 KiB), as text. A call that read nothing has an empty
    /// stdin. A call whose stdin is longer than its head, was a terminal, or that never
    /// finished may match past what is kept: where that could change the result, the assertion
    /// cannot tell.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub stdin_matches: Option<Spanned<String>>,
    /// Only calls that exited with this status.
    #[serde(default)]
    pub exit: Option<i32>,
}

/// `mcp_calls = { server = "S", tool = "T", min = N, max = M, args_match = "RE", error = B }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpCalls {
    /// The MCP server (of `[[mcp_servers]]`) whose `tools/call`s are counted. Required.
    #[schemars(with = "String")]
    pub server: Spanned<String>,
    /// Only calls of this tool. Default: every tool.
    #[serde(default)]
    pub tool: Option<String>,
    /// At least this many calls. Default: no lower bound.
    #[serde(default)]
    pub min: Option<u32>,
    /// At most this many calls. Default: no upper bound.
    #[serde(default)]
    pub max: Option<u32>,
    /// Only calls whose arguments, as compact JSON (`{"title":"Milk"}`), match this regex.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub args_match: Option<Spanned<String>>,
    /// Only calls that failed (`true`: a JSON-RPC error, an `isError` result, refused by
    /// `allow_tools`, or no answer) or only those that did not (`false`). Default: either.
    #[serde(default)]
    pub error: Option<bool>,
}

/// `state = { service = "S", pointer = "/p", equals = V | matches = "RE" | exists = B }`:
/// exactly one of `equals`, `matches` and `exists`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    { "required": ["equals"] },
    { "required": ["matches"] },
    { "required": ["exists"] },
]))]
pub struct StateAssertion {
    /// The `name` of the service whose state file is read. Required.
    #[schemars(with = "String")]
    pub service: Spanned<String>,
    /// An RFC 6901 JSON pointer into the state, e.g. `"/sent/0/to"`. Required.
    #[schemars(with = "String")]
    pub pointer: Spanned<String>,
    /// The value there must equal this (any TOML value).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub equals: Option<toml::Value>,
    /// The value there, as text, must match this regex.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub matches: Option<Spanned<String>>,
    /// The value there must exist (`true`) or be absent (`false`).
    #[serde(default)]
    pub exists: Option<bool>,
}

/// `visual = { page = "P" | url = "U", selector = "CSS", text = "T" | matches = "RE" |
/// visible = B | count = N | screenshot = "holdout/..png", max_diff = F }`: exactly one of
/// `page` and `url`, and exactly one test.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("allOf" = [
    { "oneOf": [ { "required": ["page"] }, { "required": ["url"] } ] },
    { "oneOf": [
        { "required": ["text"] },
        { "required": ["matches"] },
        { "required": ["visible"] },
        { "required": ["count"] },
        { "required": ["screenshot"] },
    ] },
]))]
pub struct Visual {
    /// A workspace-relative HTML file of the end state, opened as `file://`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub page: Option<Spanned<String>>,
    /// An `http://127.0.0.1:PORT/...` URL served by one of the suite's services, which are
    /// started again over their end state for the check.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub url: Option<Spanned<String>>,
    /// A CSS selector: the elements looked at. Required, except for a screenshot of the whole
    /// window.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub selector: Option<Spanned<String>>,
    /// The first matching element's rendered text, trimmed, with runs of white space read as
    /// one space, equals this.
    #[serde(default)]
    pub text: Option<String>,
    /// The first matching element's rendered text matches this regex.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub matches: Option<Spanned<String>>,
    /// `true`: the first matching element is rendered (it has a layout box and is not
    /// `display: none`, `visibility: hidden` or fully transparent); `false`: no matching element
    /// is.
    #[serde(default)]
    pub visible: Option<bool>,
    /// Exactly this many elements match the selector.
    #[serde(default)]
    pub count: Option<u64>,
    /// A PNG in the suite's hidden parts (`holdout/...`): the screenshot (of the first matching
    /// element, or of the window without a selector) differs from it in at most `max_diff` of
    /// its pixels.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub screenshot: Option<Spanned<String>>,
    /// With `screenshot`: the share of pixels (0 to 1) allowed to differ. Default: 0.
    #[serde(default)]
    #[schemars(with = "Option<f64>", range(min = 0.0, max = 1.0))]
    pub max_diff: Option<Spanned<f64>>,
    /// Seconds the page may take to load and be looked at (1 to 86400); overrides the task's
    /// `validation_timeout_seconds`.
    #[serde(default, deserialize_with = "check_seconds")]
    #[schemars(range(min = timeouts::MIN_SECONDS, max = timeouts::MAX_SECONDS))]
    pub timeout_seconds: Option<u64>,
}

impl Visual {
    /// What is looked at, as a key: the page or URL, the selector, the reference image.
    /// Assertions that look at the same thing share one look.
    pub fn look_key(&self) -> String {
        let mut parts = vec![self.target_rule()];
        if let Some(s) = &self.selector {
            parts.push(format!("selector = {:?}", s.get_ref()));
        }
        if let Some(s) = &self.screenshot {
            parts.push(format!("screenshot = {:?}", s.get_ref()));
        }
        parts.join(", ")
    }

    /// `page = "P"` or `url = "U"`.
    fn target_rule(&self) -> String {
        match (&self.page, &self.url) {
            (Some(p), _) => format!("page = {:?}", p.get_ref()),
            (None, Some(u)) => format!("url = {:?}", u.get_ref()),
            (None, None) => "page = \"\"".to_string(),
        }
    }

    /// The assertion as written, compactly.
    pub fn rule(&self) -> String {
        let mut parts = vec![self.target_rule()];
        if let Some(s) = &self.selector {
            parts.push(format!("selector = {:?}", s.get_ref()));
        }
        if let Some(t) = &self.text {
            parts.push(format!("text = {t:?}"));
        }
        if let Some(m) = &self.matches {
            parts.push(format!("matches = {:?}", m.get_ref()));
        }
        if let Some(v) = self.visible {
            parts.push(format!("visible = {v}"));
        }
        if let Some(c) = self.count {
            parts.push(format!("count = {c}"));
        }
        if let Some(s) = &self.screenshot {
            parts.push(format!("screenshot = {:?}", s.get_ref()));
        }
        if let Some(d) = &self.max_diff {
            parts.push(format!("max_diff = {}", d.get_ref()));
        }
        format!("visual = {{ {} }}", parts.join(", "))
    }
}
