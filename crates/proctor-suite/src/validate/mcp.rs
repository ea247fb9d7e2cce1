//! `[[mcp_servers]]` and `[tasks.interface] mcp`: servers a trial can start, each with a name
//! no service or other server has, and interfaces that name one of them.

use toml::Spanned;

use super::Validator;
use crate::mcp::{valid_name, McpServer};
use crate::model::{Interface, Task};
use crate::problem::ProblemKind;

impl Validator<'_> {
    /// Each MCP server: a valid, unique name; a stdio `command` (a program inside the suite when
    /// it is a path); a `state` path inside the suite; tool names that are not empty.
    pub(super) fn mcp_servers(&mut self) {
        let servers = &self.suite.file.mcp_servers;
        for (i, server) in servers.iter().enumerate() {
            self.mcp_server_name(server, &servers[..i]);
            self.mcp_server_transport(server);
            if let Some(state) = &server.state {
                self.suite_path("state", state, false);
            }
            for tool in server.allow_tools.iter().flatten() {
                if tool.get_ref().trim().is_empty() {
                    let p = self
                        .at(ProblemKind::InvalidValue, tool.span(), "an empty tool name")
                        .with_label("no tool")
                        .with_help("name a tool the server lists, e.g. \"add_note\"");
                    self.out.push(p);
                }
            }
        }
    }

    /// The server's name: letters, digits, `_`, `-`; unique among the servers before it and the
    /// suite's services.
    fn mcp_server_name(&mut self, server: &McpServer, before: &[McpServer]) {
        let name = server.name.get_ref();
        if !valid_name(name) {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    server.name.span(),
                    format!("`{name}` is not a valid MCP server name"),
                )
                .with_label("letters, digits, `_` and `-` only")
                .with_help("agents name its tools after it (`mcp__NAME__TOOL`), e.g. \"notes\"");
            self.out.push(p);
        }
        let service = self
            .suite
            .file
            .services
            .iter()
            .chain(self.suite.file.tasks.iter().flat_map(|t| &t.services))
            .map(|s| &s.name)
            // A streamable-HTTP server may bear the name of the service that serves it: its
            // state is that service's, so a `state` assertion names one thing either way.
            .filter(|n| !server.served_by(n.get_ref()))
            .chain(before.iter().map(|s| &s.name))
            .find(|n| n.get_ref() == name);
        if let Some(first) = service {
            let p = self
                .at(
                    ProblemKind::DuplicateId,
                    server.name.span(),
                    format!("the name `{name}` is taken"),
                )
                .with_label("second use")
                .with_related(first.span(), "first use")
                .with_help("services and MCP servers share one set of names (`state` assertions name either); rename one");
            self.out.push(p);
        }
    }

    /// A server has a stdio `command`, not empty, or a `url` with the `service` that serves it.
    fn mcp_server_transport(&mut self, server: &McpServer) {
        if let Some(url) = &server.url {
            self.mcp_server_url(server, url);
            return;
        }
        if let Some(transport) = &server.transport {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    transport.span(),
                    "`transport` is given without a `url`",
                )
                .with_label("a stdio server has no HTTP transport")
                .with_help("drop `transport`, or give the server's `url` and `service`");
            self.out.push(p);
        }
        if let Some(service) = &server.service {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    service.span(),
                    "`service` is given without a `url`",
                )
                .with_label("serves nothing here")
                .with_help("add the URL where that service serves MCP: url = \"http://127.0.0.1:PORT/mcp\"");
            self.out.push(p);
        }
        let Some(command) = &server.command else {
            let p = self
                .at(
                    ProblemKind::MissingKey,
                    server.name.span(),
                    format!("MCP server `{}` has no `command` and no `url`", server.name.get_ref()),
                )
                .with_label("no way to reach it")
                .with_help("give the argv that starts it with the stdio transport, e.g. command = [\"python3\", \"servers/notes.py\"], or a `url` and the `service` that serves it");
            self.out.push(p);
            return;
        };
        match command.get_ref().first() {
            None => {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        command.span(),
                        "an empty `command`",
                    )
                    .with_label("no argv")
                    .with_help("e.g. command = [\"python3\", \"servers/notes.py\"]");
                self.out.push(p);
            }
            // An absolute program is one of the trial's root (the image's, or the host's).
            Some(prog) if prog.contains('/') && !prog.starts_with('/') => {
                let spanned = Spanned::new(command.span(), prog.clone());
                self.suite_path("command", &spanned, true);
            }
            Some(_) => {}
        }
    }

    /// A streamable-HTTP server: a loopback `http://` URL, no `command` and no `state` of its
    /// own, and a `service` naming one of the suite's `[[services]]` without an image.
    fn mcp_server_url(&mut self, server: &McpServer, url: &Spanned<String>) {
        if let Some(t) = server
            .transport
            .as_ref()
            .filter(|t| !matches!(t.get_ref().as_str(), "streamable-http" | "sse"))
        {
            let p = self
                .at(ProblemKind::InvalidValue, t.span(), format!("`transport = \"{}\"` is no MCP transport proctor relays", t.get_ref()))
                .with_label("expected \"streamable-http\" or \"sse\"")
                .with_help("\"streamable-http\" (the default) for a server of one endpoint; \"sse\" for the older HTTP+SSE transport, whose url is its event stream");
            self.out.push(p);
        }
        let loopback = ["http://127.0.0.1:", "http://localhost:"]
            .iter()
            .find_map(|p| url.get_ref().strip_prefix(p))
            .and_then(|rest| rest.split('/').next())
            .is_some_and(|port| port.parse::<u16>().is_ok_and(|p| p > 0));
        if !loopback {
            let p = self
                .at(ProblemKind::InvalidValue, url.span(), format!("`{}` is not a URL on the service's loopback", url.get_ref()))
                .with_label("expected http://127.0.0.1:PORT/PATH")
                .with_help("the service runs in a network of its own, reached on its loopback, e.g. url = \"http://127.0.0.1:8765/mcp\"");
            self.out.push(p);
        }
        for (key, span) in [
            ("command", server.command.as_ref().map(Spanned::span)),
            ("state", server.state.as_ref().map(Spanned::span)),
        ] {
            let Some(span) = span else { continue };
            let p = self
                .at(ProblemKind::Inconsistent, span, format!("`{key}` beside `url`"))
                .with_label("the service's, not the server's")
                .with_help(match key {
                    "command" => "a server is either started per session (`command`) or served by a service (`url`): keep one",
                    _ => "give the service its `state`, and assert `state = { service = \"SERVICE\", ... }`",
                });
            self.out.push(p);
        }
        let Some(service) = &server.service else {
            let p = self
                .at(
                    ProblemKind::MissingKey,
                    url.span(),
                    format!(
                        "MCP server `{}` has a `url` but no `service`",
                        server.name.get_ref()
                    ),
                )
                .with_label("served by which service?")
                .with_help("name the [[services]] entry that serves it: service = \"notes-api\"");
            self.out.push(p);
            return;
        };
        let found = self
            .suite
            .file
            .services
            .iter()
            .chain(self.suite.file.tasks.iter().flat_map(|t| &t.services))
            .find(|s| s.name.get_ref() == service.get_ref());
        match found {
            None => {
                let p = self
                    .at(ProblemKind::Inconsistent, service.span(), format!("`service = \"{}\"` names none of the suite's [[services]]", service.get_ref()))
                    .with_label("no such service")
                    .with_help("declare the server's program as a [[services]] entry with `command` (and `ready`), and name it here");
                self.out.push(p);
            }
            Some(s) if s.image.is_some() => {
                let p = self
                    .at(ProblemKind::Inconsistent, service.span(), format!("`service = \"{}\"` is a sidecar: it shares the trial's network, so an agent process can also reach `{}` directly, and such calls are neither logged nor held to `allow_tools`", service.get_ref(), url.get_ref()))
                    .with_label("reachable without proctor")
                    .with_help("for a server the agent can reach only through proctor, run it as a [[services]] entry without an `image`")
                    .as_warning();
                self.out.push(p);
            }
            Some(_) => {}
        }
    }

    /// A task's interface names exactly one of a command and an MCP server, and the server is
    /// one of `[[mcp_servers]]`. `true` when the interface is an MCP server's (the command
    /// checks then do not apply).
    pub(super) fn interface_kind(&mut self, task: &Task, interface: &Interface) -> bool {
        let Some(mcp) = &interface.mcp else {
            if interface.command.get_ref().is_empty() {
                let p = self
                    .at(
                        ProblemKind::MissingKey,
                        task.id.span(),
                        format!("the [tasks.interface] of task `{}` names neither a `command` nor an `mcp` server", task.id.get_ref()),
                    )
                    .with_label("no interface named")
                    .with_help("write `command = \"chat\"` for a command-line interface, or `mcp = \"NAME\"` for one of [[mcp_servers]]");
                self.out.push(p);
                return true;
            }
            return false;
        };
        if !interface.command.get_ref().is_empty() {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    interface.command.span(),
                    "an interface is a command or an MCP server, not both",
                )
                .with_label("second interface")
                .with_related(mcp.span(), "the MCP server")
                .with_help("keep `command` or `mcp`; a task evaluates one interface");
            self.out.push(p);
        }
        self.mcp_server_ref(mcp);
        self.command_only_keys(interface);
        true
    }

    /// An MCP interface has none of the keys that read a command's argv and exit status (`help`
    /// names help tools there).
    fn command_only_keys(&mut self, interface: &Interface) {
        let given = [
            ("verb_arg", interface.verb_arg.as_ref().map(|v| v.span())),
            ("verb", interface.verb.as_ref().map(|v| v.span())),
            (
                "help_exit",
                (!interface.help_exit.is_empty())
                    .then(|| interface.mcp.as_ref().map(|m| m.span()))
                    .flatten(),
            ),
            (
                "rejected",
                interface
                    .rejected
                    .is_some()
                    .then(|| interface.mcp.as_ref().map(|m| m.span()))
                    .flatten(),
            ),
        ];
        for (key, span) in given {
            let Some(span) = span else { continue };
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    span,
                    format!("`{key}` reads a command's calls; this interface is an MCP server"),
                )
                .with_label(format!("`{key}` with `mcp`"))
                .with_help("remove it: an MCP interface's verb is the tool called, a help call is a `tools/list` after the first (or a call of a tool its `help` names), and a failure is a JSON-RPC error or an `isError` result");
            self.out.push(p);
        }
    }

    /// `name` is one of `[[mcp_servers]]`.
    pub(super) fn mcp_server_ref(&mut self, name: &Spanned<String>) {
        let known: Vec<&str> = self
            .suite
            .file
            .mcp_servers
            .iter()
            .map(|s| s.name.get_ref().as_str())
            .collect();
        if known.contains(&name.get_ref().as_str()) {
            return;
        }
        let hint = crate::problem::nearest(name.get_ref(), known.iter().copied())
            .map(|n| format!("did you mean `{n}`?"))
            .unwrap_or_else(|| match known.is_empty() {
                true => "declare it: [[mcp_servers]] name = \"...\" command = [...]".to_string(),
                false => format!("MCP servers of this suite: {}", known.join(", ")),
            });
        let p = self
            .at(
                ProblemKind::UnknownReference,
                name.span(),
                format!("no MCP server is named `{}`", name.get_ref()),
            )
            .with_label("unknown MCP server")
            .with_help(hint);
        self.out.push(p);
    }
}
