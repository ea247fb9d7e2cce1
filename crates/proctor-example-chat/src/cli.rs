//! The `chat` command line: argument parsing, help, and output formatting (all pure).

use crate::conv::{parse_conversation, ConvRef};
use crate::ids::{parse_draft_id, parse_message_id};
use crate::time;
use serde_json::Value;

/// Exit status when the command line itself is wrong (including a bad message id).
pub const EXIT_USAGE: i32 = 2;
/// Exit status when the chat API refused the request (not found, not yours, ...).
pub const EXIT_REJECTED: i32 = 1;
/// Exit status when the chat API could not be reached or answered nonsense.
pub const EXIT_UNREACHABLE: i32 = 3;

/// Text given with `--text`: inline, or `-` for standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextArg {
    /// The text itself.
    Inline(String),
    /// `-`: read the text from standard input.
    Stdin,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `chat help [VERB]`: the main help, or one verb's.
    Help(Option<String>),
    /// `chat --version`.
    Version,
    /// `chat whoami`.
    Whoami,
    /// `chat channels`.
    Channels,
    /// `chat people`.
    People,
    /// `chat drafts`.
    Drafts,
    /// `chat read <conversation> [--since N] [--ids] [--wait SECONDS]`.
    Read {
        /// The conversation.
        conv: ConvRef,
        /// Only messages after this position or message id.
        since: Option<String>,
        /// Whether to show each message's id.
        ids: bool,
        /// Seconds to wait for a new message when there is none.
        wait: Option<u64>,
    },
    /// `chat send --to <conversation> --text TEXT`.
    Send {
        /// The conversation.
        to: ConvRef,
        /// The text.
        text: TextArg,
    },
    /// `chat send --draft <draft-id>`.
    SendDraft {
        /// The draft id.
        draft: String,
    },
    /// `chat draft --to <conversation> --text TEXT`.
    Draft {
        /// The conversation.
        to: ConvRef,
        /// The text.
        text: TextArg,
    },
    /// `chat discard <draft-id>`.
    Discard {
        /// The draft id.
        draft: String,
    },
    /// `chat unsend <message-id>`.
    Unsend {
        /// The message id.
        id: String,
    },
    /// `chat edit <message-id> --text TEXT`.
    Edit {
        /// The message id.
        id: String,
        /// The new text.
        text: TextArg,
    },
}

/// A command line that cannot run; printed with `chat VERB: ` and exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The verb whose arguments are wrong; `None` when the command itself is.
    pub verb: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl UsageError {
    fn new(verb: &str, message: impl Into<String>) -> UsageError {
        UsageError {
            verb: Some(verb.to_string()),
            message: message.into(),
        }
    }

    /// `chat edit: ...` or `chat: ...`, plus a pointer to help.
    pub fn render(&self) -> String {
        match &self.verb {
            Some(v) => format!("chat {v}: {}\nRun `chat help {v}` for usage.", self.message),
            None => format!("chat: {}\nRun `chat help` for usage.", self.message),
        }
    }
}

/// The verbs, for help and suggestions.
pub const VERBS: &[&str] = &[
    "channels", "people", "read", "send", "draft", "drafts", "discard", "unsend", "edit", "whoami",
    "help",
];

/// The main help (`chat help`).
pub const MAIN_HELP: &str = "\
chat - team chat from the command line

Usage: chat <command> [options]

Reading:
  channels                          list channels
  people                            list people you can message directly
  read <conversation> [--since N] [--ids] [--wait SECONDS]
                                    show a conversation's messages, numbered #1, #2, ...
                                    within that conversation
  drafts                            list your saved drafts
  whoami                            show the account you are using

Writing:
  send --to <conversation> --text TEXT
                                    post a message; everyone in the conversation sees it
  send --draft <draft-id>           post a saved draft
  draft --to <conversation> --text TEXT
                                    save a draft without sending it (nobody else sees it)
  discard <draft-id>                delete a draft
  edit <message-id> --text TEXT     change the text of a message you sent
  unsend <message-id>               delete a message you sent

A <conversation> is a channel (launch or '#launch') or a person (@dana or dana).
--text - reads the text from standard input.
Run `chat help <command>` for details. Set CHAT_API to the API's URL
(default http://127.0.0.1:7070).
";

/// Help for one verb (or the main help).
pub fn help(verb: Option<&str>) -> Result<&'static str, String> {
    Ok(match verb {
        None | Some("help") => MAIN_HELP,
        Some("channels") => "Usage: chat channels\n\nList channels with their topics and message counts.\n",
        Some("people") => "Usage: chat people\n\nList people you can message directly (chat read @handle, chat send --to @handle).\n",
        Some("whoami") => "Usage: chat whoami\n\nShow the account chat acts as.\n",
        Some("drafts") => "Usage: chat drafts\n\nList your saved drafts with their ids (d-001, ...). Drafts are not sent.\n",
        Some("read") => "\
Usage: chat read <conversation> [--since N|MESSAGE-ID] [--ids] [--wait SECONDS]

Show the messages of a channel (launch or '#launch') or of your direct
conversation with a person (@dana or dana). Messages are numbered #1, #2, ...
by position within the conversation.

  --since N     only messages after position N (or after message id m-00012)
  --ids         also show each message's id (m-00012), which edit and unsend need
  --wait S      if there is nothing new (after --since, or after the newest
                message when --since is not given), wait up to S seconds for
                a new message and show it
",
        Some("send") => "\
Usage: chat send --to <conversation> --text TEXT
       chat send --draft <draft-id>

Post a message. Everyone in the conversation sees it at once. To prepare a
message without sending it, use `chat draft`. --text - reads standard input.
",
        Some("draft") => "\
Usage: chat draft --to <conversation> --text TEXT

Save a draft. Nobody else sees it until you send it with
`chat send --draft <draft-id>`; `chat discard <draft-id>` deletes it.
",
        Some("discard") => "Usage: chat discard <draft-id>\n\nDelete a saved draft (ids look like d-001; `chat drafts` lists them).\n",
        Some("unsend") => "\
Usage: chat unsend <message-id>

Delete a message you sent. Message ids look like m-00012; `chat read
<conversation> --ids` shows them (the #N positions are not ids).
",
        Some("edit") => "\
Usage: chat edit <message-id> --text TEXT

Replace the text of a message you sent; it is marked (edited). Message ids look
like m-00012; `chat read <conversation> --ids` shows them. The #N numbers that
`chat read` prints are positions within one conversation, not ids.
",
        Some(other) => return Err(unknown_verb(other)),
    })
}

fn unknown_verb(v: &str) -> String {
    let near = VERBS
        .iter()
        .copied()
        .min_by_key(|c| distance(v, c))
        .filter(|c| distance(v, c) <= 2);
    let alias = match v {
        "post" | "message" | "msg" | "reply" => Some("send"),
        "delete" | "rm" | "remove" | "retract" => Some("unsend"),
        "ls" | "list" => Some("channels"),
        "show" | "history" | "log" => Some("read"),
        "update" | "modify" | "fix" => Some("edit"),
        _ => None,
    };
    let mut m = format!("unknown command '{v}'");
    if let Some(s) = alias.or(near) {
        m.push_str(&format!(" (did you mean `chat {s}`?)"));
    }
    m.push_str(&format!("; commands: {}", VERBS.join(", ")));
    m
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Options and positionals of one verb.
struct Parsed {
    positionals: Vec<String>,
    opts: Vec<(String, Option<String>)>,
}

fn split(
    verb: &str,
    args: &[String],
    with_value: &[&str],
    flags: &[&str],
) -> Result<Parsed, UsageError> {
    let mut p = Parsed {
        positionals: Vec::new(),
        opts: Vec::new(),
    };
    let mut i = 0;
    let mut only_positionals = false;
    while i < args.len() {
        let a = &args[i];
        if only_positionals || !a.starts_with("--") {
            p.positionals.push(a.clone());
            i += 1;
            continue;
        }
        if a == "--" {
            only_positionals = true;
            i += 1;
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        if with_value.contains(&name.as_str()) {
            let v = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| UsageError::new(verb, format!("{name} needs a value")))?
                }
            };
            if p.opts.iter().any(|(n, _)| *n == name) {
                return Err(UsageError::new(verb, format!("{name} given twice")));
            }
            p.opts.push((name, Some(v)));
        } else if flags.contains(&name.as_str()) {
            if inline.is_some() {
                return Err(UsageError::new(verb, format!("{name} takes no value")));
            }
            p.opts.push((name, None));
        } else {
            let known: Vec<&str> = with_value.iter().chain(flags).copied().collect();
            let known = if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            };
            return Err(UsageError::new(
                verb,
                format!("unknown option '{name}' (options: {known})"),
            ));
        }
        i += 1;
    }
    Ok(p)
}

impl Parsed {
    fn value(&self, name: &str) -> Option<String> {
        self.opts
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.clone())
    }
    fn flag(&self, name: &str) -> bool {
        self.opts.iter().any(|(n, _)| n == name)
    }
    fn no_positionals(&self, verb: &str) -> Result<(), UsageError> {
        match self.positionals.first() {
            Some(x) => Err(UsageError::new(verb, format!("unexpected argument '{x}'"))),
            None => Ok(()),
        }
    }
    fn one_positional(&self, verb: &str, what: &str) -> Result<Option<String>, UsageError> {
        match self.positionals.as_slice() {
            [] => Ok(None),
            [x] => Ok(Some(x.clone())),
            [_, extra, ..] => Err(UsageError::new(
                verb,
                format!(
                    "unexpected argument '{extra}' (only one {what}; quote text that has spaces)"
                ),
            )),
        }
    }
}

fn text_arg(verb: &str, p: &Parsed) -> Result<TextArg, UsageError> {
    match p.value("--text") {
        None => Err(UsageError::new(
            verb,
            "missing --text TEXT (or --text - to read standard input)",
        )),
        Some(t) if t == "-" => Ok(TextArg::Stdin),
        Some(t) if t.trim().is_empty() => Err(UsageError::new(verb, "the text is empty")),
        Some(t) => Ok(TextArg::Inline(t)),
    }
}

fn to_arg(verb: &str, p: &Parsed) -> Result<ConvRef, UsageError> {
    match p.value("--to") {
        None => Err(UsageError::new(
            verb,
            "missing --to <conversation> (a channel like launch, or a person like @dana)",
        )),
        Some(t) => parse_conversation(&t).map_err(|e| UsageError::new(verb, e)),
    }
}

/// Parse `chat`'s arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Command, UsageError> {
    let Some(verb) = args.first() else {
        return Ok(Command::Help(None));
    };
    let rest = &args[1..];
    if let Some(done) = parse_leading(verb, rest) {
        return done;
    }
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help(Some(verb.clone())));
    }
    let v = verb.as_str();
    match v {
        "channels" | "people" | "drafts" | "whoami" => {
            split(v, rest, &[], &[])?.no_positionals(v)?;
            Ok(match v {
                "channels" => Command::Channels,
                "people" => Command::People,
                "drafts" => Command::Drafts,
                _ => Command::Whoami,
            })
        }
        "read" => parse_read(v, rest),
        "send" | "draft" => parse_send_or_draft(v, rest),
        "discard" => {
            let p = split(v, rest, &[], &[])?;
            let d = p.one_positional(v, "draft id")?.unwrap_or_default();
            Ok(Command::Discard {
                draft: parse_draft_id(&d).map_err(|e| UsageError::new(v, e))?,
            })
        }
        "unsend" => {
            let p = split(v, rest, &[], &[])?;
            let id = p.one_positional(v, "message id")?.unwrap_or_default();
            Ok(Command::Unsend {
                id: parse_message_id(&id).map_err(|e| UsageError::new(v, e.explain(v)))?,
            })
        }
        "edit" => {
            let p = split(v, rest, &["--text"], &[])?;
            let id = p.one_positional(v, "message id")?.unwrap_or_default();
            let id = parse_message_id(&id).map_err(|e| UsageError::new(v, e.explain(v)))?;
            Ok(Command::Edit {
                id,
                text: text_arg(v, &p)?,
            })
        }
        _ => unreachable!("verbs are checked above"),
    }
}

/// What the first argument decides alone: help, the version, an option before the command or
/// an unknown command. `None` for a known verb, whose arguments are parsed next.
fn parse_leading(verb: &str, rest: &[String]) -> Option<Result<Command, UsageError>> {
    match verb {
        "--help" | "-h" | "help" => Some(match rest.first() {
            None => Ok(Command::Help(None)),
            Some(v) => help(Some(v))
                .map(|_| Command::Help(Some(v.clone())))
                .map_err(|e| UsageError {
                    verb: None,
                    message: e,
                }),
        }),
        "--version" | "-V" => Some(Ok(Command::Version)),
        v if v.starts_with('-') => Some(Err(UsageError {
            verb: None,
            message: format!("unknown option '{v}' before the command"),
        })),
        v if !VERBS.contains(&v) => Some(Err(UsageError {
            verb: None,
            message: unknown_verb(v),
        })),
        _ => None,
    }
}

/// `read <conversation> [--since N] [--ids] [--wait SECONDS]`.
fn parse_read(v: &str, rest: &[String]) -> Result<Command, UsageError> {
    let p = split(v, rest, &["--since", "--wait"], &["--ids"])?;
    // No conversation reads as an empty one, which `parse_conversation` explains.
    let conv = p.one_positional(v, "conversation")?.unwrap_or_default();
    let conv = parse_conversation(&conv).map_err(|e| UsageError::new(v, e))?;
    let wait = match p.value("--wait") {
        None => None,
        Some(w) => match w.parse::<u64>() {
            Ok(s) if s <= 600 => Some(s),
            _ => {
                return Err(UsageError::new(
                    v,
                    format!("--wait takes whole seconds from 0 to 600, not '{w}'"),
                ))
            }
        },
    };
    Ok(Command::Read {
        conv,
        since: p.value("--since"),
        ids: p.flag("--ids"),
        wait,
    })
}

/// `send --to <conversation> --text TEXT`, `send --draft <draft-id>` or
/// `draft --to <conversation> --text TEXT`.
fn parse_send_or_draft(v: &str, rest: &[String]) -> Result<Command, UsageError> {
    let with: &[&str] = if v == "send" {
        &["--to", "--text", "--draft"]
    } else {
        &["--to", "--text"]
    };
    let p = split(v, rest, with, &[])?;
    if let Some(x) = p.positionals.first() {
        let hint = if p.value("--text").is_none() {
            " (did you mean --text? quote text that has spaces)"
        } else {
            ""
        };
        return Err(UsageError::new(
            v,
            format!("unexpected argument '{x}'{hint}"),
        ));
    }
    if let Some(d) = p.value("--draft") {
        if p.value("--to").is_some() || p.value("--text").is_some() {
            return Err(UsageError::new(
                v,
                "--draft sends a saved draft as it is; do not combine it with --to or --text",
            ));
        }
        return Ok(Command::SendDraft {
            draft: parse_draft_id(&d).map_err(|e| UsageError::new(v, e))?,
        });
    }
    let to = to_arg(v, &p)?;
    let text = text_arg(v, &p)?;
    Ok(if v == "send" {
        Command::Send { to, text }
    } else {
        Command::Draft { to, text }
    })
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn author(from: &str, me: &str) -> String {
    if from == me {
        format!("{from} (you)")
    } else {
        from.to_string()
    }
}

/// One message line: `#7  Nov 27 11:10  sam (you): text`, with `--ids` the id after the position.
pub fn format_message(m: &Value, me: &str, ids: bool) -> String {
    let pos = m.get("pos").and_then(Value::as_u64).unwrap_or(0);
    let mut line = format!("#{pos}  ");
    if ids {
        line.push_str(s(m, "id"));
        line.push_str("  ");
    }
    line.push_str(&time::display(s(m, "at")));
    line.push_str("  ");
    line.push_str(&author(s(m, "from"), me));
    line.push_str(": ");
    let text = s(m, "text").replace('\n', "\n      ");
    line.push_str(&text);
    if m.get("edited").and_then(Value::as_bool).unwrap_or(false) {
        line.push_str(" (edited)");
    }
    line
}

/// A read result: a header, then one line per message.
pub fn format_read(out: &Value, me: &str, ids: bool, filtered: bool) -> String {
    let conv = s(out, "conversation");
    let total = out.get("total").and_then(Value::as_u64).unwrap_or(0);
    let msgs = out
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let title = s(out, "title");
    let noun = if total == 1 { "message" } else { "messages" };
    let mut text = if title.is_empty() {
        format!("{conv} ({total} {noun})\n")
    } else {
        format!("{conv}: {title} ({total} {noun})\n")
    };
    if msgs.is_empty() {
        text.push_str(if filtered {
            "(no new messages)\n"
        } else {
            "(no messages)\n"
        });
    }
    for m in &msgs {
        text.push_str(&format_message(m, me, ids));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn parse(s: &[&str]) -> Result<Command, UsageError> {
        parse_args(&args(s))
    }

    #[test]
    fn help_everywhere() {
        assert_eq!(parse(&[]), Ok(Command::Help(None)));
        assert_eq!(parse(&["--help"]), Ok(Command::Help(None)));
        assert_eq!(
            parse(&["help", "edit"]),
            Ok(Command::Help(Some("edit".into())))
        );
        assert_eq!(
            parse(&["edit", "-h"]),
            Ok(Command::Help(Some("edit".into())))
        );
        assert!(parse(&["help", "nope"]).is_err());
        for v in VERBS {
            assert!(help(Some(v)).is_ok(), "{v}");
            assert!(MAIN_HELP.contains(v), "{v} missing from the main help");
        }
        assert!(help(Some("edit")).unwrap().contains("--ids"));
    }

    #[test]
    fn unknown_verbs_suggest() {
        let e = parse(&["post", "x"]).unwrap_err();
        assert!(e.message.contains("chat send"), "{}", e.message);
        let e = parse(&["reed"]).unwrap_err();
        assert!(e.message.contains("chat read"), "{}", e.message);
        assert!(parse(&["--verbose"]).is_err());
    }

    #[test]
    fn read_forms() {
        assert_eq!(
            parse(&["read", "#launch", "--since", "7", "--ids"]),
            Ok(Command::Read {
                conv: ConvRef::Channel("launch".into()),
                since: Some("7".into()),
                ids: true,
                wait: None
            })
        );
        assert_eq!(
            parse(&["read", "@priya", "--wait=30"]),
            Ok(Command::Read {
                conv: ConvRef::Person("priya".into()),
                since: None,
                ids: false,
                wait: Some(30)
            })
        );
        let e = parse(&["read"]).unwrap_err();
        assert!(e.message.contains("unquoted #"), "{}", e.message);
        assert!(parse(&["read", "launch", "--wait", "soon"]).is_err());
        assert!(parse(&["read", "launch", "general"]).is_err());
        assert!(parse(&["read", "launch", "--bogus"])
            .unwrap_err()
            .message
            .contains("--ids"));
    }

    #[test]
    fn send_and_draft_forms() {
        assert_eq!(
            parse(&["send", "--to", "launch", "--text", "hi there"]),
            Ok(Command::Send {
                to: ConvRef::Either("launch".into()),
                text: TextArg::Inline("hi there".into())
            })
        );
        assert_eq!(
            parse(&["draft", "--to=@mei", "--text", "-"]),
            Ok(Command::Draft {
                to: ConvRef::Person("mei".into()),
                text: TextArg::Stdin
            })
        );
        assert_eq!(
            parse(&["send", "--draft", "d-1"]),
            Ok(Command::SendDraft {
                draft: "d-001".into()
            })
        );
        assert!(parse(&["send", "--draft", "d-1", "--to", "x"]).is_err());
        assert!(parse(&["send", "--to", "launch"])
            .unwrap_err()
            .message
            .contains("--text"));
        assert!(parse(&["send", "--text", "x"])
            .unwrap_err()
            .message
            .contains("--to"));
        assert!(parse(&["send", "--to", "launch", "hello"])
            .unwrap_err()
            .message
            .contains("--text"));
        assert!(parse(&["send", "--to", "launch", "--text", "a", "--text", "b"]).is_err());
        assert!(parse(&["draft", "--to", "launch", "--text", " "]).is_err());
        assert!(parse(&["draft", "--draft", "d-1"]).is_err());
    }

    #[test]
    fn the_edit_trap() {
        assert_eq!(
            parse(&["edit", "m-00014", "--text", "Friday"]),
            Ok(Command::Edit {
                id: "m-00014".into(),
                text: TextArg::Inline("Friday".into())
            })
        );
        for id in ["7", "#7"] {
            let e = parse(&["edit", id, "--text", "Friday"]).unwrap_err();
            assert_eq!(e.verb.as_deref(), Some("edit"));
            assert!(e.message.contains("position"), "{}", e.message);
            assert!(
                e.message.contains("chat read <conversation> --ids"),
                "{}",
                e.message
            );
        }
        // What the shell leaves of `chat edit #7 --text Friday`.
        let e = parse(&["edit"]).unwrap_err();
        assert!(e.message.contains("missing message id"), "{}", e.message);
        assert!(parse(&["edit", "m-00014"])
            .unwrap_err()
            .message
            .contains("--text"));
        assert!(parse(&["unsend", "3"])
            .unwrap_err()
            .message
            .contains("chat unsend"));
        assert_eq!(
            parse(&["unsend", "m-3"]),
            Ok(Command::Unsend {
                id: "m-00003".into()
            })
        );
        assert_eq!(
            parse(&["discard", "d-002"]),
            Ok(Command::Discard {
                draft: "d-002".into()
            })
        );
        assert!(parse(&["discard"]).is_err());
    }

    #[test]
    fn renders_usage_errors() {
        let e = parse(&["edit", "7", "--text", "x"]).unwrap_err();
        assert!(e.render().starts_with("chat edit: "));
        assert!(e.render().ends_with("`chat help edit` for usage."));
    }

    #[test]
    fn formats_messages() {
        let m = json!({"pos": 7, "id": "m-00014", "at": "2026-11-27T11:10", "from": "sam", "text": "Review\nThursday", "edited": true});
        assert_eq!(
            format_message(&m, "sam", false),
            "#7  Nov 27 11:10  sam (you): Review\n      Thursday (edited)"
        );
        assert!(format_message(&m, "dana", true).starts_with("#7  m-00014  Nov 27 11:10  sam: "));
        let out = json!({"conversation": "#launch", "title": "Launch", "total": 8, "messages": []});
        assert_eq!(
            format_read(&out, "sam", false, true),
            "#launch: Launch (8 messages)\n(no new messages)\n"
        );
    }
}
