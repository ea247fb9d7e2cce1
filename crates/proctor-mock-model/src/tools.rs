//! Choosing a tool from the request's own `tools` and building its arguments from its schema.
//!
//! Each wire API lists tools differently; the API modules turn them into [`ToolSpec`]s (a name and
//! the JSON schema of the arguments). A call by `name` must match a listed tool exactly. A call by
//! `role = "shell"` takes the first tool found in [`SHELL_TOOL_NAMES`] order (`Bash` for Claude
//! Code, `exec_command` for Codex, `bash` for Copilot, `run_shell_command` for Gemini CLI, ...),
//! then any tool whose name holds "shell", "bash", "exec_" or "execute", then any tool whose
//! schema has a `command` or `cmd` property. A call by `role = "mcp"` takes the tool an agent
//! CLI offers for the MCP server's tool ([`mcp_tool`]).
//!
//! Codex 0.169.0's default model runs in "code mode": its tools come in an `additional_tools`
//! input item and the shell is reached only through a freeform JavaScript `exec` tool, which needs
//! Codex's separate code-mode host (not in its npm package). The mock does not script that; name
//! a model Codex has no metadata for (e.g. `mock-model`) and Codex offers `exec_command` itself.

use serde_json::{Map, Value};

use crate::script::{Call, Role};

/// Shell-like tool names, in the order they are preferred when a request offers several.
pub const SHELL_TOOL_NAMES: &[&str] = &[
    "Bash",
    "exec_command",
    "shell",
    "bash",
    "run_shell_command",
    "shell_command",
    "local_shell",
    "execute_command",
    "run_command",
    "terminal",
];

/// Property names that carry the command line, in order of preference.
const COMMAND_PROPERTIES: &[&str] = &["command", "cmd", "commands", "script"];

/// A tool offered by a request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// The JSON schema of its arguments (`Value::Null` when the request gave none).
    pub schema: Value,
    /// The namespace the request groups it in (a Responses `namespace` tool: Codex's MCP
    /// servers, `mcp__SERVER`); a call of it names both.
    pub namespace: Option<String>,
}

/// A call resolved against a request: the tool name and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedCall {
    /// The tool's name as offered by the request.
    pub name: String,
    /// Its namespace, when the request grouped it in one.
    pub namespace: Option<String>,
    /// The arguments, an object.
    pub arguments: Value,
}

/// Picks the tool for a call and builds its arguments; the error says what was offered.
pub fn resolve(call: &Call, tools: &[ToolSpec]) -> Result<ResolvedCall, String> {
    let offered = || {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        if names.is_empty() {
            "the request offers no tools".to_string()
        } else {
            format!("the request offers: {}", names.join(", "))
        }
    };
    let tool = match (&call.role, &call.name) {
        (_, Some(name)) => match tools.iter().find(|t| &t.name == name) {
            Some(t) => t.clone(),
            // A named tool the request does not list is still called: the agent's own
            // permission layer or tool router then reports it, which is what a test may want.
            None => ToolSpec {
                name: name.clone(),
                ..ToolSpec::default()
            },
        },
        (Some(Role::Shell), None) => {
            shell_tool(tools).ok_or_else(|| format!("no shell-like tool: {}", offered()))?
        }
        (Some(Role::Mcp), None) => {
            let (server, tool) = (
                call.server.as_deref().unwrap_or_default(),
                call.tool.as_deref().unwrap_or_default(),
            );
            mcp_tool(tools, server, tool).ok_or_else(|| {
                format!("no tool `{tool}` of MCP server `{server}`: {}", offered())
            })?
        }
        (None, None) => return Err("a call needs `role` or `name`".into()),
    };
    let mut args = Map::new();
    if let Some(cmd) = &call.command {
        args = shell_arguments(&tool.schema, cmd);
    }
    if let Some(extra) = &call.arguments {
        for (k, v) in extra {
            args.insert(k.clone(), v.clone());
        }
    }
    Ok(ResolvedCall {
        name: tool.name,
        namespace: tool.namespace,
        arguments: Value::Object(args),
    })
}

/// The offered tool that is MCP server `server`'s `tool`, under the names agent CLIs give
/// such tools, in this order: `mcp__SERVER__TOOL` (Claude Code; Codex: tool `TOOL` in namespace
/// `mcp__SERVER`), `mcp_SERVER_TOOL` (Gemini CLI), `SERVER__TOOL`,
/// `SERVER_TOOL` (opencode), `SERVER-TOOL` (Copilot), `SERVER.TOOL`, then `TOOL` itself.
pub fn mcp_tool(tools: &[ToolSpec], server: &str, tool: &str) -> Option<ToolSpec> {
    let names = [
        format!("mcp__{server}__{tool}"),
        format!("mcp_{server}_{tool}"),
        format!("{server}__{tool}"),
        format!("{server}_{tool}"),
        format!("{server}-{tool}"),
        format!("{server}.{tool}"),
        tool.to_string(),
    ];
    let qualified = |t: &ToolSpec| match &t.namespace {
        Some(ns) => format!("{ns}__{}", t.name),
        None => t.name.clone(),
    };
    names
        .iter()
        .find_map(|n| tools.iter().find(|t| &qualified(t) == n))
        .cloned()
}

/// The shell-like tool among those offered, if any.
pub fn shell_tool(tools: &[ToolSpec]) -> Option<ToolSpec> {
    for name in SHELL_TOOL_NAMES {
        if let Some(t) = tools.iter().find(|t| t.name == *name) {
            return Some(t.clone());
        }
    }
    if let Some(t) = tools.iter().find(|t| {
        let n = t.name.to_ascii_lowercase();
        n.contains("shell") || n.contains("bash") || n.contains("exec_") || n.contains("execute")
    }) {
        return Some(t.clone());
    }
    tools
        .iter()
        .find(|t| command_property(&t.schema).is_some())
        .cloned()
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn command_property(schema: &Value) -> Option<String> {
    let props = properties(schema)?;
    COMMAND_PROPERTIES
        .iter()
        .find(|p| props.contains_key(**p))
        .map(|p| (*p).to_string())
}

fn type_is(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(s)) => s.eq_ignore_ascii_case(ty),
        Some(Value::Array(a)) => a
            .iter()
            .any(|t| t.as_str().is_some_and(|s| s.eq_ignore_ascii_case(ty))),
        _ => false,
    }
}

/// Arguments for running `cmd` with a tool of this schema: the command goes into its command
/// property (as a string, or as `["bash", "-lc", cmd]` where the schema wants an array), and every
/// other required property gets a plain value (its default, first enum value, or an empty value).
pub fn shell_arguments(schema: &Value, cmd: &str) -> Map<String, Value> {
    let mut args = Map::new();
    let key = command_property(schema).unwrap_or_else(|| "command".into());
    let prop = properties(schema).and_then(|p| p.get(&key));
    let value = match prop {
        Some(p) if type_is(p, "array") => Value::Array(vec![
            Value::String("bash".into()),
            Value::String("-lc".into()),
            Value::String(cmd.into()),
        ]),
        _ => Value::String(cmd.into()),
    };
    args.insert(key.clone(), value);
    if let Some(props) = properties(schema) {
        if props.contains_key("description") {
            args.insert(
                "description".into(),
                Value::String("Run a scripted command".into()),
            );
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in required {
            if args.contains_key(name) {
                continue;
            }
            let p = props.get(name).cloned().unwrap_or(Value::Null);
            args.insert(name.into(), instance(&p, 0));
        }
    }
    args
}

/// A plain value that satisfies a JSON schema as far as its `default`, `const`, `enum`, `type`,
/// `required` and `properties` tell; used for required arguments and structured side answers.
pub fn instance(schema: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(d) = schema.get("default") {
        return d.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return instance(first, depth + 1);
        }
    }
    if type_is(schema, "object") || schema.get("properties").is_some() {
        let mut obj = Map::new();
        if let Some(props) = properties(schema) {
            let required: Vec<String> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_else(|| props.keys().cloned().collect());
            for name in required {
                let p = props.get(&name).cloned().unwrap_or(Value::Null);
                obj.insert(name, instance(&p, depth + 1));
            }
        }
        return Value::Object(obj);
    }
    if type_is(schema, "array") {
        return Value::Array(Vec::new());
    }
    if type_is(schema, "boolean") {
        return Value::Bool(false);
    }
    if type_is(schema, "integer") || type_is(schema, "number") {
        let min = schema
            .get("minimum")
            .or_else(|| schema.get("exclusiveMinimum"))
            .and_then(Value::as_f64)
            // No minimum: 1, which scores, counts and ratings alike accept more often than 0.
            .unwrap_or(1.0);
        let n = if schema.get("exclusiveMinimum").is_some() {
            min.floor() as i64 + 1
        } else {
            min.ceil() as i64
        };
        return Value::from(n);
    }
    if type_is(schema, "string") {
        let len = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        return Value::String("x".repeat(len as usize));
    }
    Value::Null
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, schema: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            schema,
            namespace: None,
        }
    }

    #[test]
    fn an_mcp_call_takes_the_name_the_cli_gives_the_servers_tool() {
        let call = Call {
            role: Some(Role::Mcp),
            server: Some("notes".into()),
            tool: Some("add_note".into()),
            arguments: json!({"title": "Milk"}).as_object().cloned(),
            ..Call::default()
        };
        let claude = [
            spec("Bash", Value::Null),
            spec("mcp__notes__add_note", Value::Null),
        ];
        let r = resolve(&call, &claude).unwrap();
        assert_eq!(r.name, "mcp__notes__add_note");
        assert_eq!(r.arguments, json!({"title": "Milk"}));
        let gemini = [
            spec("run_shell_command", Value::Null),
            spec("mcp_notes_add_note", Value::Null),
        ];
        assert_eq!(resolve(&call, &gemini).unwrap().name, "mcp_notes_add_note");
        let bare = [spec("add_note", Value::Null)];
        assert_eq!(resolve(&call, &bare).unwrap().name, "add_note");
        // Codex groups a server's tools in a namespace: the call names both.
        let mut codex = spec("add_note", Value::Null);
        codex.namespace = Some("mcp__notes".into());
        let r = resolve(&call, &[spec("exec_command", Value::Null), codex]).unwrap();
        assert_eq!(
            (r.name.as_str(), r.namespace.as_deref()),
            ("add_note", Some("mcp__notes"))
        );
        let none = resolve(&call, &[spec("Bash", Value::Null)]).unwrap_err();
        assert!(
            none.contains("no tool `add_note` of MCP server `notes`"),
            "{none}"
        );
    }

    fn shell(cmd: &str) -> Call {
        Call {
            role: Some(Role::Shell),
            command: Some(cmd.into()),
            ..Call::default()
        }
    }

    #[test]
    fn claude_code_bash_gets_command_and_description() {
        let tools = [
            spec(
                "Read",
                json!({"type":"object","properties":{"file_path":{"type":"string"}}}),
            ),
            spec(
                "Bash",
                json!({"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]}),
            ),
        ];
        let r = resolve(&shell("echo hi > hello.txt"), &tools).unwrap();
        assert_eq!(r.name, "Bash");
        assert_eq!(r.arguments["command"], "echo hi > hello.txt");
        assert!(r.arguments["description"].is_string());
        assert!(r.arguments.get("timeout").is_none());
    }

    #[test]
    fn codex_exec_command_gets_cmd() {
        let tools = [
            spec(
                "shell",
                json!({"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}),
            ),
            spec(
                "exec_command",
                json!({"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"}},"required":["cmd"]}),
            ),
        ];
        let r = resolve(&shell("ls"), &tools).unwrap();
        assert_eq!(r.name, "exec_command");
        assert_eq!(r.arguments, json!({"cmd": "ls"}));
        let r = resolve(&shell("ls"), &tools[..1]).unwrap();
        assert_eq!(r.arguments, json!({"command": ["bash", "-lc", "ls"]}));
    }

    #[test]
    fn required_enums_and_defaults_are_filled() {
        let tools = [spec(
            "bash",
            json!({"type":"object","properties":{"command":{"type":"string"},"mode":{"type":"string","enum":["sync","async"]},"initial_wait":{"type":"integer","default":30}},"required":["command","mode","initial_wait"]}),
        )];
        let r = resolve(&shell("ls"), &tools).unwrap();
        assert_eq!(r.arguments["mode"], "sync");
        assert_eq!(r.arguments["initial_wait"], 30);
    }

    #[test]
    fn no_shell_tool_is_a_clear_error() {
        let tools = [spec("Read", json!({}))];
        let e = resolve(&shell("ls"), &tools).unwrap_err();
        assert!(e.contains("Read"), "{e}");
    }

    #[test]
    fn named_calls_keep_their_arguments() {
        let call = Call {
            name: Some("Write".into()),
            arguments: Some(
                json!({"file_path": "a", "content": "b"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            ..Call::default()
        };
        let r = resolve(&call, &[]).unwrap();
        assert_eq!(r.name, "Write");
        assert_eq!(r.arguments, json!({"file_path": "a", "content": "b"}));
    }
}
