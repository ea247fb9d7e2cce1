//! The mock model's script format (`model_script` in a suite, `proctor mock-model SCRIPT`): a
//! TOML list of model turns. It lives here, with the suite format that names it, so reading a
//! suite needs no model server; `proctor-mock-model` serves what this module parses.
//!
//! ```toml
//! model = "mock-model"            # optional: the model name reported when a request names none
//! main_requests = "tools"         # optional: "tools" (default) | "all", see below
//!
//! [[turns]]                       # turn 1: call the request's shell tool
//! calls = [{ role = "shell", command = "echo hi > hello.txt" }]
//! usage = { input = 120, output = 30, cache_read = 1000, cache_write = 0 }
//!
//! [[turns]]                       # turn 2: a tool chosen by exact name, with exact arguments
//! text = "Looking at the file."   # optional text said before the calls
//! calls = [{ name = "Read", arguments = { file_path = "hello.txt" } }]
//!
//! [[turns]]                       # turn 3: the final answer
//! text = "done"
//! usage = { input = 200, output = 5 }
//! ```
//!
//! A turn is either tool calls (with an optional text before them) or a final text. A call names
//! its tool by `role` (resolved against the request's own `tools` by the mock model) or by
//! exact `name`; `command` is turned into the arguments the resolved tool's schema asks for
//! (`{"command": ...}`, `{"cmd": ...}`, `["bash", "-lc", ...]`), and `arguments` (a table) is
//! merged over them verbatim. Every turn declares the usage it reports; missing categories are 0.
//!
//! `main_requests` says which requests advance the script. With `"tools"` only requests that offer
//! tools do; requests without tools (title generation, command-prefix checks, topic detection)
//! are side requests. With `"all"` every request does, for agents that never send tools (aider).
//! In both modes a request asking for at most one output token (a quota probe) or for a
//! JSON-schema answer (a classifier, a next-speaker check) is a side request.

use serde::{Deserialize, Serialize};

/// A parsed and validated script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The model name reported when a request names none.
    #[serde(default = "default_model")]
    pub model: String,
    /// Which requests advance the script.
    #[serde(default)]
    pub main_requests: MainRequests,
    /// The turns, in order.
    #[serde(default)]
    pub turns: Vec<Turn>,
}

fn default_model() -> String {
    "mock-model".into()
}

/// Which requests advance the script (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MainRequests {
    /// Only requests that offer tools.
    #[default]
    Tools,
    /// Every request that is not a quota probe or a structured-output request.
    All,
}

/// One model turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The text of the turn: the final answer, or what is said before the calls.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls; when empty the turn is a final text.
    #[serde(default)]
    pub calls: Vec<Call>,
    /// The usage this turn reports on the wire.
    #[serde(default)]
    pub usage: Usage,
}

/// A role a tool can be chosen by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Whatever shell-like tool the request offers (`Bash`, `exec_command`, `shell`, ...).
    Shell,
}

/// One tool call of a turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The tool chosen by role.
    #[serde(default)]
    pub role: Option<Role>,
    /// The tool chosen by its exact name.
    #[serde(default)]
    pub name: Option<String>,
    /// A shell command, placed where the tool's schema wants it.
    #[serde(default)]
    pub command: Option<String>,
    /// Arguments merged over the built ones, verbatim.
    #[serde(default)]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Token usage one turn reports, in the Anthropic categories.
///
/// `input` counts uncached input tokens. On OpenAI and Gemini wires the prompt total is
/// `input + cache_read + cache_write` with `cache_read` as the cached part (those APIs have no
/// cache-write category).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input: u64,
    /// Output tokens.
    #[serde(default)]
    pub output: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write: u64,
}

impl Usage {
    /// The prompt total on wires that fold cache tokens into the input count.
    pub fn prompt_total(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    /// Adds another usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
    }
}

/// Why a script cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file cannot be read.
    #[error("cannot read the script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown keys; the message carries line and column.
    #[error("script {origin}: {message}")]
    Parse {
        /// The file, or `<string>`.
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A turn or call is inconsistent.
    #[error("script {origin}: turn {turn}: {message}")]
    Invalid {
        /// The file, or `<string>`.
        origin: String,
        /// The 1-based turn number.
        turn: usize,
        /// What is wrong.
        message: String,
    },
}

impl Script {
    /// Parses and validates a script from TOML text.
    pub fn parse(text: &str) -> Result<Script, ScriptError> {
        Script::parse_named(text, "<string>")
    }

    /// Reads, parses and validates a script file.
    pub fn load(path: &std::path::Path) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Script::parse_named(&text, &path.display().to_string())
    }

    fn parse_named(text: &str, origin: &str) -> Result<Script, ScriptError> {
        let script: Script = toml::from_str(text).map_err(|e| ScriptError::Parse {
            origin: origin.into(),
            message: e.to_string().trim_end().to_string(),
        })?;
        script.validate(origin)?;
        Ok(script)
    }

    /// Checks every turn: each needs a text or calls, each call exactly one of `role` and
    /// `name`, and a `role = "shell"` call its `command`.
    pub fn validate(&self, origin: &str) -> Result<(), ScriptError> {
        let invalid = |turn: usize, message: String| ScriptError::Invalid {
            origin: origin.into(),
            turn,
            message,
        };
        for (i, turn) in self.turns.iter().enumerate() {
            let n = i + 1;
            if turn.text.is_none() && turn.calls.is_empty() {
                return Err(invalid(n, "a turn needs `text` or `calls`".into()));
            }
            for (j, call) in turn.calls.iter().enumerate() {
                let c = j + 1;
                match (&call.role, &call.name) {
                    (Some(_), Some(_)) => {
                        return Err(invalid(
                            n,
                            format!("call {c}: give `role` or `name`, not both"),
                        ))
                    }
                    (None, None) => {
                        return Err(invalid(
                            n,
                            format!("call {c}: needs `role` (e.g. \"shell\") or `name`"),
                        ))
                    }
                    (Some(Role::Shell), None) if call.command.is_none() => {
                        return Err(invalid(
                            n,
                            format!("call {c}: `role = \"shell\"` needs `command`"),
                        ))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The sum of every turn's declared usage.
    pub fn total_usage(&self) -> Usage {
        let mut u = Usage::default();
        for t in &self.turns {
            u.add(&t.usage);
        }
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let s = Script::parse(
            r#"
            [[turns]]
            calls = [{ role = "shell", command = "echo hi > hello.txt" }]
            usage = { input = 120, output = 30, cache_read = 1000 }
            [[turns]]
            text = "done"
            usage = { input = 200, output = 5 }
            "#,
        )
        .unwrap();
        assert_eq!(s.turns.len(), 2);
        assert_eq!(s.main_requests, MainRequests::Tools);
        assert_eq!(s.turns[0].calls[0].role, Some(Role::Shell));
        assert_eq!(s.total_usage().input, 320);
        assert_eq!(s.total_usage().cache_read, 1000);
        assert_eq!(s.model, "mock-model");
    }

    #[test]
    fn unknown_keys_are_errors_with_a_position() {
        let e = Script::parse("[[turns]]\ntext = \"a\"\nusage = { inptu = 3 }\n").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("inptu"), "{m}");
        assert!(m.contains("line 3"), "{m}");
    }

    #[test]
    fn inconsistent_turns_are_named() {
        let e = Script::parse("[[turns]]\ntext = \"a\"\n[[turns]]\nusage = { input = 1 }\n")
            .unwrap_err();
        assert!(e.to_string().contains("turn 2"), "{e}");
        let e = Script::parse("[[turns]]\ncalls = [{ role = \"shell\" }]\n").unwrap_err();
        assert!(e.to_string().contains("needs `command`"), "{e}");
        let e = Script::parse(
            "[[turns]]\ncalls = [{ role = \"shell\", name = \"x\", command = \"ls\" }]\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
        let e = Script::parse("[[turns]]\ncalls = [{ role = \"editor\", command = \"ls\" }]\n")
            .unwrap_err();
        assert!(e.to_string().contains("editor"), "{e}");
    }
}
