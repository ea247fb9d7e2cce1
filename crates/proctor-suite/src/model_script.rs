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
//! [[turns]]                       # turn 3: a tool of the suite's MCP server `notes`
//! calls = [{ role = "mcp", server = "notes", tool = "add_note", arguments = { title = "Milk" } }]
//!
//! [[turns]]                       # turn 4: the final answer
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
//!
//! Instead of `turns`, a script may hold weighted `[[alternatives]]`, each a whole list of turns,
//! one of which the trial's seed chooses (see [`Script::choose`]):
//!
//! ```toml
//! [[alternatives]]                # chosen for 9 seeds in 10: avoids the trap
//! name = "careful"                # optional, for the reader and the mock's log
//! weight = 9
//! [[alternatives.turns]]
//! calls = [{ role = "shell", command = "make test" }]
//! [[alternatives.turns]]
//! text = "done"
//!
//! [[alternatives]]                # chosen for 1 seed in 10: falls into it
//! weight = 1
//! [[alternatives.turns]]
//! text = "done"
//! ```

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
    /// The turns, in order (none when the script holds `alternatives`).
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Weighted alternatives, each a whole list of turns, one chosen by the trial's seed.
    #[serde(default)]
    pub alternatives: Vec<Alternative>,
}

/// One `[[alternatives]]` entry: a list of turns and how often the seed chooses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alternative {
    /// A label for the reader and the mock model's log.
    #[serde(default)]
    pub name: Option<String>,
    /// The alternative's share: it is chosen for `weight` of every `sum of weights` seeds (1 to
    /// 1,000,000). Required.
    pub weight: u64,
    /// The turns, in order.
    #[serde(default)]
    pub turns: Vec<Turn>,
}

/// The largest `weight` an alternative may have.
pub const MAX_WEIGHT: u64 = 1_000_000;

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
    /// The tool `tool` of MCP server `server`, under whatever name the agent CLI offers it
    /// (`mcp__notes__add_note` for Claude Code, ...).
    Mcp,
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
    /// With `role = "mcp"`: the MCP server, by its name in the suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// With `role = "mcp"`: the server's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
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
    /// An alternative, or a turn of one, is inconsistent.
    #[error("script {origin}: alternative {alternative}{}: {message}", turn.map(|t| format!(", turn {t}")).unwrap_or_default())]
    InvalidAlternative {
        /// The file, or `<string>`.
        origin: String,
        /// The 1-based alternative number.
        alternative: usize,
        /// The 1-based turn number within it, when a turn is at fault.
        turn: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The script holds both top-level `turns` and `alternatives`.
    #[error("script {origin}: it has both `[[turns]]` and `[[alternatives]]`: put every turn inside an alternative")]
    TurnsAndAlternatives {
        /// The file, or `<string>`.
        origin: String,
    },
    /// The script holds `alternatives` and no seed was given to choose one.
    #[error("script {origin}: it holds [[alternatives]], which a seed chooses among, and no seed was given (pass --seed N)")]
    NoSeed {
        /// The file, or `<string>`.
        origin: String,
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

    /// Checks every turn (see [`Script::validate_turns`]), and the alternatives: not next to
    /// top-level `turns`, each with a `weight` from 1 to [`MAX_WEIGHT`] and valid turns.
    pub fn validate(&self, origin: &str) -> Result<(), ScriptError> {
        if self.alternatives.is_empty() {
            return Script::validate_turns(&self.turns, origin);
        }
        if !self.turns.is_empty() {
            return Err(ScriptError::TurnsAndAlternatives {
                origin: origin.into(),
            });
        }
        for (i, alt) in self.alternatives.iter().enumerate() {
            let invalid = |turn: Option<usize>, message: String| ScriptError::InvalidAlternative {
                origin: origin.into(),
                alternative: i + 1,
                turn,
                message,
            };
            if !(1..=MAX_WEIGHT).contains(&alt.weight) {
                return Err(invalid(
                    None,
                    format!(
                        "`weight = {}`: a weight is a whole number from 1 to {MAX_WEIGHT}",
                        alt.weight
                    ),
                ));
            }
            if let Err(ScriptError::Invalid { turn, message, .. }) =
                Script::validate_turns(&alt.turns, origin)
            {
                return Err(invalid(Some(turn), message));
            }
        }
        Ok(())
    }

    /// The script to serve for a trial whose seed is `seed`: this one when it has no
    /// alternatives; otherwise the alternative the seed chooses (with its 1-based number), its
    /// turns as the script's. Alternative `k` is chosen when `seed % W` (W the sum of weights)
    /// falls in its share: the first `weight_1` values choose the first, the next `weight_2` the
    /// second, and so on.
    pub fn choose(
        mut self,
        seed: Option<u64>,
        origin: &str,
    ) -> Result<(Script, Option<usize>), ScriptError> {
        if self.alternatives.is_empty() {
            return Ok((self, None));
        }
        let Some(seed) = seed else {
            return Err(ScriptError::NoSeed {
                origin: origin.into(),
            });
        };
        let k = choose_weighted(&self.alternatives, seed);
        let alternatives = std::mem::take(&mut self.alternatives);
        self.turns = alternatives
            .into_iter()
            .nth(k)
            .map(|a| a.turns)
            .unwrap_or_default();
        Ok((self, Some(k + 1)))
    }

    /// Checks turns: each needs a text or calls, each call exactly one of `role` and `name`,
    /// and a `role = "shell"` call its `command`.
    fn validate_turns(turns: &[Turn], origin: &str) -> Result<(), ScriptError> {
        let invalid = |turn: usize, message: String| ScriptError::Invalid {
            origin: origin.into(),
            turn,
            message,
        };
        for (i, turn) in turns.iter().enumerate() {
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
                    (Some(Role::Mcp), None) if call.server.is_none() || call.tool.is_none() => {
                        return Err(invalid(
                            n,
                            format!("call {c}: `role = \"mcp\"` needs `server` and `tool`"),
                        ))
                    }
                    (role, _)
                        if role != &Some(Role::Mcp)
                            && (call.server.is_some() || call.tool.is_some()) =>
                    {
                        return Err(invalid(
                            n,
                            format!("call {c}: `server` and `tool` go with `role = \"mcp\"`"),
                        ))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The sum of every turn's declared usage (of every alternative's too).
    pub fn total_usage(&self) -> Usage {
        let mut u = Usage::default();
        for t in self
            .turns
            .iter()
            .chain(self.alternatives.iter().flat_map(|a| &a.turns))
        {
            u.add(&t.usage);
        }
        u
    }
}

/// The 0-based index of the alternative `seed` chooses (see [`Script::choose`]).
fn choose_weighted(alternatives: &[Alternative], seed: u64) -> usize {
    let total: u64 = alternatives.iter().map(|a| a.weight).sum();
    let mut at = seed % total.max(1);
    for (i, alt) in alternatives.iter().enumerate() {
        if at < alt.weight {
            return i;
        }
        at -= alt.weight;
    }
    alternatives.len().saturating_sub(1)
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

    const WEIGHTED: &str = r#"
        [[alternatives]]
        name = "careful"
        weight = 9
        [[alternatives.turns]]
        calls = [{ role = "shell", command = "make test" }]
        [[alternatives.turns]]
        text = "careful"

        [[alternatives]]
        weight = 1
        [[alternatives.turns]]
        text = "careless"
    "#;

    #[test]
    fn alternatives_are_chosen_by_the_seed_in_proportion_to_their_weights() {
        let s = Script::parse(WEIGHTED).unwrap();
        assert_eq!(s.alternatives.len(), 2);
        assert_eq!(s.alternatives[0].name.as_deref(), Some("careful"));
        // seed % 10: 0..=8 choose the first, 9 the second.
        for (seed, want) in [(0, 1), (8, 1), (9, 2), (19, 2), (20, 1)] {
            let (chosen, k) = s.clone().choose(Some(seed), "w").unwrap();
            assert_eq!(k, Some(want), "seed {seed}");
            assert!(chosen.alternatives.is_empty());
            let last = chosen.turns.last().and_then(|t| t.text.clone());
            let want_text = if want == 1 { "careful" } else { "careless" };
            assert_eq!(last.as_deref(), Some(want_text), "seed {seed}");
        }
        let firsts = (0..1000u64)
            .filter(|&seed| s.clone().choose(Some(seed), "w").unwrap().1 == Some(1))
            .count();
        assert_eq!(firsts, 900);
        // A script without alternatives is served as it is, seed or not.
        let plain = Script::parse("[[turns]]\ntext = \"a\"\n").unwrap();
        assert_eq!(plain.clone().choose(None, "p").unwrap(), (plain, None));
    }

    #[test]
    fn alternatives_need_a_seed_a_weight_and_no_top_level_turns() {
        let s = Script::parse(WEIGHTED).unwrap();
        let e = s.choose(None, "w.toml").unwrap_err();
        assert!(e.to_string().contains("no seed was given"), "{e}");
        let e =
            Script::parse("[[alternatives]]\n[[alternatives.turns]]\ntext = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("missing field `weight`"), "{e}");
        let e = Script::parse("[[alternatives]]\nweight = 0\n").unwrap_err();
        assert!(e.to_string().contains("alternative 1: `weight = 0`"), "{e}");
        let e = Script::parse("[[alternatives]]\nweight = 1\nwieght = 2\n").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("wieght") && m.contains("line 3"), "{m}");
        let e = Script::parse(
            "[[turns]]\ntext = \"a\"\n[[alternatives]]\nweight = 1\n[[alternatives.turns]]\ntext = \"b\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("both"), "{e}");
        let e = Script::parse(
            "[[alternatives]]\nweight = 1\n[[alternatives]]\nweight = 2\n[[alternatives.turns]]\nusage = { input = 1 }\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("alternative 2, turn 1"), "{e}");
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
