//! The agent CLI's `denied` calls, confirmed from what the agent cannot write. A CLI reports a
//! call its permission layer refused on its own output, and any process of the agent can write
//! there too (`/proc/PID/fd/1` of the CLI): the report alone is the agent's word. A denial
//! counts, as a rejection and a wrong turn, only when two things proctor controls confirm it:
//!
//! - the CLI's permission layer, as proctor configured it, refuses such a call: a CLI that runs
//!   every command cannot have denied one, and one that refuses only what is outside the
//!   allow-list lets a plain call of an allow-listed program through;
//! - the model's wire log (written by the gateway or the mock model, outside the sandbox) shows
//!   the model asking for that call: by its id, or naming its command.
//!
//! Both hold for every call a CLI really refused. A report that fails either is kept in the end
//! state as an [`UnconfirmedDenial`], with why.

use proctor_agents::{DeniedCall, ShellPermissions};
use proctor_report::export::atif::AskedCall;
use proctor_score::endstate::UnconfirmedDenial;
use serde_json::Value;

use crate::allow::Allowed;

/// What the model asked for, read from its wire log: its tool calls and its answers' text.
pub type Asked = (Vec<AskedCall>, String);

/// The transcript's denials split into those confirmed (in order) and those not.
pub fn confirm<'d>(
    denied: &'d [DeniedCall],
    permissions: ShellPermissions,
    allowed: &[Allowed],
    asked: Option<&Asked>,
) -> (Vec<&'d DeniedCall>, Vec<UnconfirmedDenial>) {
    let mut confirmed = Vec::new();
    let mut unconfirmed = Vec::new();
    for d in denied {
        match why_unconfirmed(d, permissions, allowed, asked) {
            None => confirmed.push(d),
            Some(why) => unconfirmed.push(UnconfirmedDenial {
                tool: d.tool.clone(),
                command: d.command.clone(),
                reason: d.reason.clone(),
                unconfirmed: why,
            }),
        }
    }
    (confirmed, unconfirmed)
}

/// Why `d` cannot be confirmed; `None` when it is.
fn why_unconfirmed(
    d: &DeniedCall,
    permissions: ShellPermissions,
    allowed: &[Allowed],
    asked: Option<&Asked>,
) -> Option<String> {
    match permissions {
        ShellPermissions::RunsEverything => {
            return Some(
                "this agent CLI's permission layer, as proctor sets it up, refuses no command"
                    .into(),
            );
        }
        ShellPermissions::RefusesOutsideAllowList => {
            if let Some(program) = d.command.as_deref().and_then(|c| plain_call(c, allowed)) {
                return Some(format!(
                    "a plain call of the allow-listed `{program}`, which the CLI's rules let through"
                ));
            }
        }
        ShellPermissions::RefusesEvery => {}
    }
    let Some((calls, text)) = asked else {
        return Some("no wire log of the model shows what it asked for".into());
    };
    let names_it = |c: &AskedCall| match &d.command {
        Some(command) => mentions(&Value::Object(c.input.clone()), command, 0),
        None => c.tool == d.tool,
    };
    let requested = match &d.id {
        Some(id) => calls.iter().any(|c| &c.id == id && names_it(c)),
        None => {
            calls.iter().any(names_it)
                || d.command
                    .as_deref()
                    .is_some_and(|c| !c.trim().is_empty() && text.contains(c.trim()))
        }
    };
    (!requested).then(|| "the model's wire log shows no request for this call".into())
}

/// The allow-listed program `command` plainly calls: its first word is one, and nothing else on
/// the line could run another program (no `;`, `&`, `|`, redirection, substitution, grouping or
/// second line).
fn plain_call<'a>(command: &str, allowed: &'a [Allowed]) -> Option<&'a str> {
    const SHELL: &[char] = &[
        ';', '&', '|', '<', '>', '$', '`', '(', ')', '{', '}', '\n', '\r',
    ];
    if command.contains(SHELL) {
        return None;
    }
    let first = command.split_whitespace().next()?;
    allowed
        .iter()
        .find(|a| a.name == first)
        .map(|a| a.name.as_str())
}

/// Whether a string anywhere in `v` contains `needle` (the command line, as the model wrote it).
fn mentions(v: &Value, needle: &str, depth: usize) -> bool {
    let needle = needle.trim();
    if needle.is_empty() || depth > 16 {
        return false;
    }
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(a) => a.iter().any(|x| mentions(x, needle, depth + 1)),
        Value::Object(o) => o.values().any(|x| mentions(x, needle, depth + 1)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn allowed() -> Vec<Allowed> {
        vec![Allowed {
            name: "tool".into(),
            real: "/suite/bin/tool".into(),
        }]
    }

    fn denied(id: Option<&str>, command: &str) -> DeniedCall {
        DeniedCall {
            id: id.map(String::from),
            tool: "Bash".into(),
            command: Some(command.into()),
            input: json!({ "command": command }),
            reason: "not allowed".into(),
        }
    }

    fn asked(calls: &[(&str, &str)]) -> Asked {
        let calls = calls
            .iter()
            .map(|(id, command)| AskedCall {
                id: (*id).into(),
                tool: "Bash".into(),
                input: json!({ "command": command })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        (calls, String::new())
    }

    #[test]
    fn a_denial_the_model_asked_for_and_the_rules_refuse_is_confirmed() {
        let d = [denied(Some("toolu_1"), "tool ok && python3 -c 1")];
        let wire = asked(&[("toolu_1", "tool ok && python3 -c 1")]);
        let (yes, no) = confirm(
            &d,
            ShellPermissions::RefusesOutsideAllowList,
            &allowed(),
            Some(&wire),
        );
        assert_eq!((yes.len(), no.len()), (1, 0));
    }

    #[test]
    fn a_denial_the_model_never_asked_for_is_not_confirmed() {
        // The forger names a real id with another command, then an id the model never used.
        let wire = asked(&[("toolu_1", "tool ok")]);
        for d in [
            denied(Some("toolu_1"), "rm -rf /data"),
            denied(Some("toolu_9"), "rm -rf /data"),
            denied(None, "rm -rf /data"),
        ] {
            let (yes, no) = confirm(
                std::slice::from_ref(&d),
                ShellPermissions::RefusesOutsideAllowList,
                &allowed(),
                Some(&wire),
            );
            assert!(yes.is_empty(), "{d:?}");
            assert!(no[0].unconfirmed.contains("no request"), "{:?}", no[0]);
        }
        let d = [denied(None, "rm -rf /data")];
        let (yes, no) = confirm(
            &d,
            ShellPermissions::RefusesOutsideAllowList,
            &allowed(),
            None,
        );
        assert!(yes.is_empty());
        assert!(no[0].unconfirmed.contains("no wire log"), "{:?}", no[0]);
    }

    #[test]
    fn a_plain_allowed_call_or_a_cli_that_refuses_nothing_cannot_have_been_denied() {
        let wire = asked(&[("toolu_1", "tool ok")]);
        let d = [denied(Some("toolu_1"), "tool ok")];
        let (yes, no) = confirm(
            &d,
            ShellPermissions::RefusesOutsideAllowList,
            &allowed(),
            Some(&wire),
        );
        assert!(yes.is_empty());
        assert!(no[0].unconfirmed.contains("plain call"), "{:?}", no[0]);
        // aider refuses every command it proposes: the same call is a real denial there.
        let (yes, _) = confirm(&d, ShellPermissions::RefusesEvery, &allowed(), Some(&wire));
        assert_eq!(yes.len(), 1);
        let (yes, no) = confirm(
            &d,
            ShellPermissions::RunsEverything,
            &allowed(),
            Some(&wire),
        );
        assert!(yes.is_empty());
        assert!(
            no[0].unconfirmed.contains("refuses no command"),
            "{:?}",
            no[0]
        );
    }

    #[test]
    fn a_command_proposed_in_text_is_asked_for_when_the_call_has_no_id() {
        let wire = (Vec::new(), "Run this:\n```bash\ntool ok\n```".to_string());
        let d = [denied(None, "tool ok")];
        let (yes, _) = confirm(&d, ShellPermissions::RefusesEvery, &allowed(), Some(&wire));
        assert_eq!(yes.len(), 1);
    }
}
