//! Answers an ACP agent's `session/request_permission` from the trial's allow-list.
//!
//! A request is granted only when its tool call is a shell command (the tool call's
//! `rawInput.command`, a string or an argv) that is a plain call of an allow-listed program: its
//! first word is the program's name, and it has no `;`, `&`, `|`, backquote, `$(` or line break
//! that would run another program after or inside it (redirections are allowed, as the other
//! adapters allow them). It is granted with the agent's *allow once* option, never an *always*
//! one, so every later call is asked again. Anything else (an edit, a fetch, a command outside the
//! list, or a request offering no allow-once option) is denied with a reject option, and recorded
//! as a denied call.

use serde_json::{json, Value};

/// What proctor answers to one permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the call is granted.
    pub granted: bool,
    /// The option chosen (`None`: no option fits, the request is answered `cancelled`).
    pub option_id: Option<String>,
    /// Why, in words, for the transcript and the denied call.
    pub reason: String,
    /// The shell command the request is about, when it is one.
    pub command: Option<String>,
}

impl Decision {
    /// The JSON-RPC result answering the request.
    pub fn response(&self) -> Value {
        match &self.option_id {
            Some(id) => json!({ "outcome": { "outcome": "selected", "optionId": id } }),
            None => json!({ "outcome": { "outcome": "cancelled" } }),
        }
    }
}

/// The shell command a tool call runs, from its `rawInput.command`: a string as is; an argv
/// such as `["bash", "-lc", "CMD"]` as its script, any other argv joined with spaces.
pub fn shell_command(tool_call: &Value) -> Option<String> {
    let raw = tool_call.get("rawInput")?.get("command")?;
    if let Some(s) = raw.as_str() {
        return Some(s.to_string());
    }
    let argv: Vec<&str> = raw.as_array()?.iter().filter_map(Value::as_str).collect();
    let is_shell = argv.first().is_some_and(|p| {
        let name = p.rsplit('/').next().unwrap_or(p);
        matches!(name, "sh" | "bash" | "zsh" | "dash")
    });
    if is_shell && argv.len() == 3 && argv[1].starts_with('-') && argv[1].ends_with('c') {
        return Some(argv[2].to_string());
    }
    (!argv.is_empty()).then(|| argv.join(" "))
}

/// The allow-listed program `command` is a plain call of, if it is one.
pub fn allowed_program<'a>(command: &str, allow: &'a [String]) -> Option<&'a str> {
    const CONTROL: &[&str] = &[";", "&", "|", "`", "$(", "\n", "\r"];
    if CONTROL.iter().any(|c| command.contains(c)) {
        return None;
    }
    let first = command.split_whitespace().next()?;
    allow
        .iter()
        .find(|a| a.as_str() == first)
        .map(String::as_str)
}

/// The first offered option of one of `kinds` (in the order given).
fn option_of(options: &[Value], kinds: &[&str]) -> Option<String> {
    kinds.iter().find_map(|k| {
        options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(k))
            .and_then(|o| o.get("optionId").and_then(Value::as_str))
            .map(String::from)
    })
}

/// The answer to a `session/request_permission` request's `params`, given the allow-list.
pub fn decide(params: &Value, allow: &[String]) -> Decision {
    let tool_call = params.get("toolCall").cloned().unwrap_or(Value::Null);
    let options: Vec<Value> = params
        .get("options")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let command = shell_command(&tool_call);
    let program = command.as_deref().and_then(|c| allowed_program(c, allow));
    let deny = |reason: String| Decision {
        granted: false,
        option_id: option_of(&options, &["reject_once", "reject_always"]),
        reason,
        command: command.clone(),
    };
    match (program, option_of(&options, &["allow_once"])) {
        (Some(p), Some(id)) => Decision {
            granted: true,
            option_id: Some(id),
            reason: format!("`{p}` is on the allow-list"),
            command: command.clone(),
        },
        (Some(p), None) => deny(format!(
            "`{p}` is on the allow-list, but the agent offered no allow-once option (proctor never grants a call for good)"
        )),
        (None, _) => deny(match &command {
            Some(c) => format!("`{c}` is not a plain call of an allow-listed command"),
            None => format!(
                "not a shell command of the allow-list (a `{}` tool call)",
                tool_call
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("other")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Value {
        json!([
            { "optionId": "yes", "name": "Allow", "kind": "allow_once" },
            { "optionId": "always", "name": "Always", "kind": "allow_always" },
            { "optionId": "no", "name": "Reject", "kind": "reject_once" },
        ])
    }

    fn request(raw: Value) -> Value {
        json!({ "sessionId": "s", "toolCall": { "toolCallId": "t1", "kind": "execute", "rawInput": raw }, "options": options() })
    }

    #[test]
    fn an_allow_listed_command_is_granted_once() {
        let allow = vec!["echo".to_string()];
        let d = decide(
            &request(json!({ "command": "echo hi > hello.txt" })),
            &allow,
        );
        assert!(d.granted);
        assert_eq!(d.option_id.as_deref(), Some("yes"));
        assert_eq!(
            d.response()["outcome"],
            json!({ "outcome": "selected", "optionId": "yes" })
        );
    }

    #[test]
    fn anything_else_is_rejected() {
        let allow = vec!["echo".to_string()];
        for raw in [
            json!({ "command": "python3 -c 'x'" }),
            json!({ "command": "echo hi; rm -rf x" }),
            json!({ "command": "echo $(id)" }),
            json!({ "command": "echoes" }),
            json!({ "path": "/w/a.txt" }),
        ] {
            let d = decide(&request(raw.clone()), &allow);
            assert!(!d.granted, "{raw}");
            assert_eq!(d.option_id.as_deref(), Some("no"), "{raw}");
            assert!(!d.reason.is_empty());
        }
    }

    #[test]
    fn no_allow_once_option_means_denied_and_no_option_means_cancelled() {
        let allow = vec!["echo".to_string()];
        let only_always = json!({ "toolCall": { "rawInput": { "command": "echo x" } }, "options": [
            { "optionId": "always", "kind": "allow_always" }, { "optionId": "no", "kind": "reject_always" } ] });
        let d = decide(&only_always, &allow);
        assert!(!d.granted);
        assert_eq!(d.option_id.as_deref(), Some("no"));
        let none = json!({ "toolCall": { "rawInput": { "command": "rm x" } }, "options": [] });
        let d = decide(&none, &allow);
        assert_eq!(d.response()["outcome"], json!({ "outcome": "cancelled" }));
    }

    #[test]
    fn argv_commands_are_read_as_their_script() {
        let tc = json!({ "rawInput": { "command": ["/bin/bash", "-lc", "echo hi"] } });
        assert_eq!(shell_command(&tc).as_deref(), Some("echo hi"));
        let tc = json!({ "rawInput": { "command": ["echo", "hi"] } });
        assert_eq!(shell_command(&tc).as_deref(), Some("echo hi"));
    }
}
