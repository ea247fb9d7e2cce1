//! `[[mcp_servers]]`: MCP servers as the interface a task evaluates.
//!
//! A stdio server is started per MCP session inside the trial, outside the agent's reach, by
//! the trial's call runner; a streamable-HTTP server is a suite service in a network of its
//! own, which the call runner's bridge joins per session. Either way the agent's MCP client
//! reaches it through proctor's stdio shim, and every JSON-RPC message between the two is
//! logged by proctor (see docs/mcp.md).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use crate::service::Service;

/// The command an agent's MCP client runs to reach server `NAME`, as a file in the trial's
/// shims folder: `proctor-mcp-NAME`.
pub const SHIM_PREFIX: &str = "proctor-mcp-";

/// One MCP server of the suite: `[[mcp_servers]]`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The server's name, unique among the suite's services and MCP servers; `[tasks.interface]
    /// mcp`, `mcp_calls` and `state` assertions name it, and agents see its tools as this
    /// server's (Claude Code: `mcp__NAME__TOOL`). Letters, digits, `_` and `-`. Required.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// The argv that starts the server with the stdio transport (newline-delimited JSON-RPC on
    /// its stdin and stdout); the program is a path inside the suite (`"servers/notes.py"`), an
    /// absolute path in the trial's root (inside an image, the image's), or a name on PATH
    /// (`"python3"`). Started afresh for each MCP session of a trial, inside the
    /// trial, where no agent process reaches it. Required (proctor relays the stdio transport).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub command: Option<Spanned<Vec<String>>>,
    /// The URL where a suite service (`service`) serves MCP's streamable HTTP transport, on
    /// its own loopback: `http://127.0.0.1:PORT/PATH`. That service then runs in a network of
    /// its own, which only proctor's relay joins: the agent reaches it only through its MCP
    /// client's stdio shim, every message logged. Instead of `command`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub url: Option<Spanned<String>>,
    /// The HTTP transport `url` speaks: `"streamable-http"` (the current one) or `"sse"` (the
    /// older HTTP+SSE one, whose `url` is its event stream's). Default: `"streamable-http"`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub transport: Option<Spanned<String>>,
    /// The `[[services]]` entry that serves `url`. Required with `url`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub service: Option<Spanned<String>>,
    /// The file the server writes in `$PROCTOR_SERVICE_DIR` (its own folder, which the agent
    /// never sees), read after the full stop and asserted like a service's:
    /// `state = { service = "NAME", pointer = "/notes/0/title", equals = "Groceries" }`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub state: Option<Spanned<String>>,
    /// The tools the agent may call, e.g. `["add_note", "list_notes"]`. A `tools/call` of any
    /// other is answered by proctor with an MCP error, never reaches the server, and is
    /// recorded as denied. Default: every tool the server lists.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub allow_tools: Option<Vec<Spanned<String>>>,
    /// Environment variables the server gets, over the trial's `PATH` and `LANG`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl McpServer {
    /// The server as the service whose folder holds its state: its name, its command and its
    /// state file, so that its end state is read, kept and asserted as a service's is.
    pub fn as_service(&self) -> Service {
        Service {
            name: self.name.clone(),
            command: self
                .command
                .clone()
                .unwrap_or_else(|| Spanned::new(0..0, Vec::new())),
            image: None,
            workdir: None,
            healthcheck: None,
            depends_on: Vec::new(),
            ready: None,
            guard: None,
            state: self.state.clone(),
            env: self.env.clone(),
        }
    }

    /// Whether `url` speaks the older HTTP+SSE transport.
    pub fn legacy_sse(&self) -> bool {
        self.transport
            .as_ref()
            .is_some_and(|t| t.get_ref() == "sse")
    }

    /// Whether this server's `url` is served by the suite service `name`.
    pub fn served_by(&self, name: &str) -> bool {
        self.url.is_some() && self.service.as_ref().is_some_and(|s| s.get_ref() == name)
    }

    /// Whether the agent may call `tool` (every tool when there is no `allow_tools`).
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.allow_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t.get_ref() == tool))
    }

    /// The allow-list as plain names (`None`: every tool).
    pub fn allowed_tools(&self) -> Option<Vec<String>> {
        self.allow_tools
            .as_ref()
            .map(|l| l.iter().map(|t| t.get_ref().clone()).collect())
    }
}

/// Whether `name` is a valid MCP server name: letters, digits, `_` and `-`, not empty.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
