//! `chat`: a team-chat CLI. See `chat help`.

use proctor_example_chat::cli::{
    self, format_message, format_read, parse_args, Command, TextArg, EXIT_REJECTED,
    EXIT_UNREACHABLE, EXIT_USAGE,
};
use proctor_example_chat::conv::ConvRef;
use proctor_example_chat::http::{self, percent_encode, BaseUrl, ClientError};
use proctor_example_chat::time;
use serde_json::{json, Value};
use std::io::Read;
use std::time::{Duration, Instant};

const DEFAULT_API: &str = "http://127.0.0.1:7070";
const POLL: Duration = Duration::from_millis(500);

/// Why a command stopped: a message for stderr and an exit status.
struct Fail(i32, String);

struct Api {
    base: BaseUrl,
    shown: String,
    actor: Option<String>,
    verb: &'static str,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Fail> {
        let body = body.map(|b| b.to_string());
        let headers: Vec<(&str, &str)> = match &self.actor {
            Some(a) => vec![("X-Chat-Actor", a.as_str())],
            None => vec![],
        };
        match http::call(&self.base, method, path, body.as_deref(), &headers) {
            Ok((status, text)) => {
                let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
                if status >= 400 {
                    let msg = v.get("error").and_then(Value::as_str).map(str::to_string).unwrap_or(text);
                    Err(Fail(EXIT_REJECTED, format!("chat {}: {msg}", self.verb)))
                } else {
                    Ok(v)
                }
            }
            Err(ClientError::Unreachable(e)) => Err(Fail(
                EXIT_UNREACHABLE,
                format!("chat: cannot reach the chat API at {} ({e}). Is it running, and is CHAT_API right?", self.shown),
            )),
            Err(ClientError::BadResponse(e)) => Err(Fail(
                EXIT_UNREACHABLE,
                format!("chat: the chat API at {} answered something that is not HTTP ({e})", self.shown),
            )),
        }
    }
}

fn verb_of(c: &Command) -> &'static str {
    match c {
        Command::Help(_) | Command::Version => "help",
        Command::Whoami => "whoami",
        Command::Channels => "channels",
        Command::People => "people",
        Command::Drafts => "drafts",
        Command::Read { .. } => "read",
        Command::Send { .. } | Command::SendDraft { .. } => "send",
        Command::Draft { .. } => "draft",
        Command::Discard { .. } => "discard",
        Command::Unsend { .. } => "unsend",
        Command::Edit { .. } => "edit",
    }
}

fn text_of(t: &TextArg, verb: &str) -> Result<String, Fail> {
    match t {
        TextArg::Inline(s) => Ok(s.clone()),
        TextArg::Stdin => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| {
                Fail(
                    EXIT_USAGE,
                    format!("chat {verb}: cannot read standard input: {e}"),
                )
            })?;
            if s.trim().is_empty() {
                return Err(Fail(
                    EXIT_USAGE,
                    format!("chat {verb}: the text on standard input is empty"),
                ));
            }
            Ok(s.trim_end_matches('\n').to_string())
        }
    }
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Runs one parsed command; gives what it prints on standard output.
fn run(cmd: Command) -> Result<String, Fail> {
    let verb = verb_of(&cmd);
    match &cmd {
        Command::Help(v) => {
            return cli::help(v.as_deref())
                .map(str::to_string)
                .map_err(|e| Fail(EXIT_USAGE, e))
        }
        Command::Version => return Ok(format!("chat {}\n", env!("CARGO_PKG_VERSION"))),
        _ => {}
    }
    let api = api_from_env(verb)?;
    match cmd {
        Command::Help(_) | Command::Version => unreachable!(),
        Command::Whoami => whoami(&api),
        Command::Channels => channels(&api),
        Command::People => people(&api),
        Command::Drafts => drafts(&api),
        Command::Read {
            conv,
            since,
            ids,
            wait,
        } => read(&api, &conv, since, ids, wait),
        Command::Send { to, text } => send(&api, &to, &text),
        Command::SendDraft { draft } => send_draft(&api, &draft),
        Command::Draft { to, text } => draft(&api, &to, &text),
        Command::Discard { draft } => discard(&api, &draft),
        Command::Unsend { id } => unsend(&api, &id),
        Command::Edit { id, text } => edit(&api, &id, &text),
    }
}

/// The chat API named by `CHAT_API` (or the default), acting as `CHAT_ACTOR` when set.
fn api_from_env(verb: &'static str) -> Result<Api, Fail> {
    let shown = std::env::var("CHAT_API")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_API.into());
    let base = BaseUrl::parse(&shown)
        .map_err(|e| Fail(EXIT_UNREACHABLE, format!("chat: CHAT_API: {e}")))?;
    let actor = std::env::var("CHAT_ACTOR")
        .ok()
        .filter(|s| !s.trim().is_empty());
    Ok(Api {
        base,
        shown,
        actor,
        verb,
    })
}

/// `chat whoami`.
fn whoami(api: &Api) -> Result<String, Fail> {
    let me = api.call("GET", "/me", None)?;
    Ok(format!(
        "{} ({})\n",
        str_of(&me, "handle"),
        str_of(&me, "name")
    ))
}

/// `chat channels`.
fn channels(api: &Api) -> Result<String, Fail> {
    let v = api.call("GET", "/channels", None)?;
    let mut out = String::new();
    for c in v.as_array().into_iter().flatten() {
        let n = c.get("messages").and_then(Value::as_u64).unwrap_or(0);
        let noun = if n == 1 { "message" } else { "messages" };
        out.push_str(&format!(
            "#{:<12} {} ({n} {noun})\n",
            str_of(c, "name"),
            str_of(c, "topic")
        ));
    }
    Ok(out)
}

/// `chat people`.
fn people(api: &Api) -> Result<String, Fail> {
    let v = api.call("GET", "/people", None)?;
    let mut out = String::new();
    for p in v.as_array().into_iter().flatten() {
        let n = p.get("messages").and_then(Value::as_u64).unwrap_or(0);
        let role = str_of(p, "role");
        let who = if role.is_empty() {
            str_of(p, "name").to_string()
        } else {
            format!("{}, {role}", str_of(p, "name"))
        };
        let noun = if n == 1 {
            "direct message"
        } else {
            "direct messages"
        };
        out.push_str(&format!(
            "@{:<10} {who} ({n} {noun})\n",
            str_of(p, "handle")
        ));
    }
    Ok(out)
}

/// `chat drafts`.
fn drafts(api: &Api) -> Result<String, Fail> {
    let v = api.call("GET", "/drafts", None)?;
    let list = v.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return Ok("(no drafts)\n".into());
    }
    let mut out = String::new();
    for d in list {
        out.push_str(&format!(
            "{}  to {}  {}  {}\n",
            str_of(&d, "id"),
            str_of(&d, "to"),
            time::display(str_of(&d, "at")),
            str_of(&d, "text")
        ));
    }
    Ok(out)
}

/// Whether a page of messages holds none.
fn no_messages(v: &Value) -> bool {
    v.get("messages")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty())
}

/// `chat read`: a conversation's messages (after `since`); with `wait`, waits up to that many
/// seconds for a new one when there is nothing new.
fn read(
    api: &Api,
    conv: &ConvRef,
    since: Option<String>,
    ids: bool,
    wait: Option<u64>,
) -> Result<String, Fail> {
    let base_path = format!("/conversations/{}/messages", conv.to_path_segment());
    let path_since = |s: &str| format!("{base_path}?since={}", percent_encode(s));
    let first = match &since {
        Some(s) => api.call("GET", &path_since(s), None)?,
        None => api.call("GET", &base_path, None)?,
    };
    let me = str_of(&first, "me").to_string();
    let Some(secs) = wait else {
        return Ok(format_read(&first, &me, ids, since.is_some()));
    };
    if since.is_some() && !no_messages(&first) {
        return Ok(format_read(&first, &me, ids, true));
    }
    let after = since.unwrap_or_else(|| {
        first
            .get("total")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .to_string()
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let now = Instant::now();
        if now >= deadline {
            let mut out = format_read(
                &json!({"conversation": first["conversation"], "title": first["title"],
                "total": first["total"], "messages": []}),
                &me,
                ids,
                true,
            );
            out = out.replace(
                "(no new messages)",
                &format!("(no new messages after waiting {secs}s)"),
            );
            return Ok(out);
        }
        std::thread::sleep(POLL.min(deadline - now));
        let v = api.call("GET", &path_since(&after), None)?;
        if !no_messages(&v) {
            return Ok(format_read(&v, &me, ids, true));
        }
    }
}

/// `chat send --to CONV --text TEXT`.
fn send(api: &Api, to: &ConvRef, text: &TextArg) -> Result<String, Fail> {
    let text = text_of(text, api.verb)?;
    let m = api.call(
        "POST",
        "/messages",
        Some(json!({"to": to.to_path_segment().replace("%23", "#"), "text": text})),
    )?;
    Ok(format!(
        "Sent to {} as #{} ({}).\n",
        str_of(&m, "conv"),
        m["pos"],
        str_of(&m, "id")
    ))
}

/// `chat send --draft ID`.
fn send_draft(api: &Api, draft: &str) -> Result<String, Fail> {
    let m = api.call("POST", &format!("/drafts/{draft}/send"), None)?;
    Ok(format!(
        "Sent draft {draft} to {} as #{} ({}).\n",
        str_of(&m, "conv"),
        m["pos"],
        str_of(&m, "id")
    ))
}

/// `chat draft --to CONV --text TEXT`.
fn draft(api: &Api, to: &ConvRef, text: &TextArg) -> Result<String, Fail> {
    let text = text_of(text, api.verb)?;
    let d = api.call(
        "POST",
        "/drafts",
        Some(json!({"to": to.to_path_segment().replace("%23", "#"), "text": text})),
    )?;
    let id = str_of(&d, "id");
    Ok(format!(
        "Saved draft {id} for {} (not sent; nobody else can see it).\nSend it with `chat send --draft {id}`, or delete it with `chat discard {id}`.\n",
        str_of(&d, "to")
    ))
}

/// `chat discard ID`.
fn discard(api: &Api, draft: &str) -> Result<String, Fail> {
    let d = api.call("DELETE", &format!("/drafts/{draft}"), None)?;
    Ok(format!(
        "Discarded draft {} for {}.\n",
        str_of(&d, "id"),
        str_of(&d, "to")
    ))
}

/// `chat unsend ID`.
fn unsend(api: &Api, id: &str) -> Result<String, Fail> {
    let m = api.call("DELETE", &format!("/messages/{id}"), None)?;
    Ok(format!(
        "Unsent {} from {}.\n",
        str_of(&m, "id"),
        str_of(&m, "conv")
    ))
}

/// `chat edit ID --text TEXT`.
fn edit(api: &Api, id: &str, text: &TextArg) -> Result<String, Fail> {
    let text = text_of(text, api.verb)?;
    let m = api.call(
        "PATCH",
        &format!("/messages/{id}"),
        Some(json!({"text": text})),
    )?;
    Ok(format!(
        "Edited {} in {}:\n{}\n",
        str_of(&m, "id"),
        str_of(&m, "conv"),
        format_message(&m, str_of(&m, "from"), false)
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match parse_args(&args) {
        Err(e) => {
            eprintln!("{}", e.render());
            EXIT_USAGE
        }
        Ok(cmd) => match run(cmd) {
            Ok(out) => {
                print!("{out}");
                0
            }
            Err(Fail(code, msg)) => {
                eprintln!("{msg}");
                code
            }
        },
    };
    std::process::exit(code);
}
