//! The mock's state machine: fixtures in, deterministic state and events out.
//!
//! Nothing here touches the clock, the network or the file system. Ids come from counters, message
//! timestamps from the fixtures' `now` plus one minute per mutation, and the only time the caller
//! supplies is an event's `at` (seconds since the mock started), which goes to the event log only.
//!
//! Waiting for a reply is simulated by poll count: when the account sends a direct message to a
//! person with a scripted reply, the reply appears on the `after_reads`th (default 2nd) later read
//! of that conversation.

use crate::conv::{ConvRef, CONV_HINT};
use crate::ids::{draft_id, message_id, message_number, MESSAGE_ID_HINT};
use crate::time;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Longest message or draft text accepted.
pub const MAX_TEXT_CHARS: usize = 4000;

/// A person of the fixture world (the account itself is one).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Person {
    /// The handle people are named by (`@handle`).
    pub handle: String,
    /// The display name.
    pub name: String,
    /// What they do, shown beside the name (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
}

/// A channel of the fixture world.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Channel {
    /// The channel name, without the `#`.
    pub name: String,
    /// The channel topic (may be empty).
    #[serde(default)]
    pub topic: String,
}

/// A message of the fixture, there before the mock starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureMessage {
    /// `#channel` or `@person` (the direct conversation between the account and that person).
    pub conv: String,
    /// The handle of the sender.
    pub from: String,
    /// When it was sent, `YYYY-MM-DDTHH:MM`.
    pub at: String,
    /// The message text.
    pub text: String,
}

/// A reply a person sends once the account has written to them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedReply {
    /// The handle that replies (in the direct conversation with the account).
    pub from: String,
    /// The reply text.
    pub text: String,
    /// How many reads of that conversation after the account writes to it before the reply arrives (default 2).
    #[serde(default = "default_after_reads")]
    pub after_reads: u32,
}

fn default_after_reads() -> u32 {
    2
}

/// The made-up world the mock serves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixtures {
    /// What the world is for, for people reading the fixture.
    #[serde(default)]
    pub description: String,
    /// The account `chat` acts as.
    pub me: Person,
    /// The mock's clock at start, `YYYY-MM-DDTHH:MM`.
    pub now: String,
    /// The people the account knows.
    #[serde(default)]
    pub people: Vec<Person>,
    /// The channels.
    #[serde(default)]
    pub channels: Vec<Channel>,
    /// The messages already there, oldest first.
    #[serde(default)]
    pub messages: Vec<FixtureMessage>,
    /// Replies people send after the account writes to them.
    #[serde(default)]
    pub replies: Vec<ScriptedReply>,
}

impl Fixtures {
    /// Parse and check fixtures: every name unique, every reference known, every time valid.
    pub fn from_json(text: &str) -> Result<Fixtures, String> {
        let f: Fixtures = serde_json::from_str(text).map_err(|e| format!("fixtures: {e}"))?;
        let mut names = BTreeSet::new();
        let valid = |n: &str| {
            crate::conv::parse_conversation(n)
                .map(|c| c == ConvRef::Either(n.to_string()))
                .unwrap_or(false)
        };
        for n in std::iter::once(&f.me.handle)
            .chain(f.people.iter().map(|p| &p.handle))
            .chain(f.channels.iter().map(|c| &c.name))
        {
            if !valid(n) {
                return Err(format!("fixtures: '{n}' is not a valid lowercase name"));
            }
            if !names.insert(n.clone()) {
                return Err(format!("fixtures: the name '{n}' is used twice (people and channels share one namespace)"));
            }
        }
        if time::parse_minutes(&f.now).is_none() {
            return Err(format!(
                "fixtures: now = '{}' is not YYYY-MM-DDTHH:MM",
                f.now
            ));
        }
        let person = |h: &str| f.people.iter().any(|p| p.handle == h);
        for (i, m) in f.messages.iter().enumerate() {
            let n = i + 1;
            if time::parse_minutes(&m.at).is_none() {
                return Err(format!("fixtures: message {n} has a bad time '{}'", m.at));
            }
            if m.from != f.me.handle && !person(&m.from) {
                return Err(format!(
                    "fixtures: message {n} is from unknown '{}'",
                    m.from
                ));
            }
            if let Some(c) = m.conv.strip_prefix('#') {
                if !f.channels.iter().any(|ch| ch.name == c) {
                    return Err(format!(
                        "fixtures: message {n} is in unknown channel '{}'",
                        m.conv
                    ));
                }
            } else if let Some(p) = m.conv.strip_prefix('@') {
                if !person(p) {
                    return Err(format!(
                        "fixtures: message {n} is in a conversation with unknown '{}'",
                        m.conv
                    ));
                }
                if m.from != f.me.handle && m.from != p {
                    return Err(format!(
                        "fixtures: message {n} in {} is from an outsider '{}'",
                        m.conv, m.from
                    ));
                }
            } else {
                return Err(format!(
                    "fixtures: message {n} has conv '{}': use #channel or @person",
                    m.conv
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for r in &f.replies {
            if !person(&r.from) {
                return Err(format!("fixtures: a reply is from unknown '{}'", r.from));
            }
            if !seen.insert(r.from.clone()) {
                return Err(format!("fixtures: two replies from '{}'", r.from));
            }
            if r.after_reads == 0 {
                return Err(format!(
                    "fixtures: the reply from '{}' needs after_reads >= 1",
                    r.from
                ));
            }
        }
        Ok(f)
    }
}

/// One message. `conv` is `#channel` or `@person`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Message {
    /// The message id (`m-00001`).
    pub id: String,
    /// The conversation: `#channel` or `@person`.
    pub conv: String,
    /// The handle of the sender.
    pub from: String,
    /// The text, as last edited.
    pub text: String,
    /// When it was sent, `YYYY-MM-DDTHH:MM` on the mock's clock.
    pub at: String,
    /// Whether it was edited since it was sent.
    pub edited: bool,
    /// Whether it was taken back.
    pub unsent: bool,
}

/// A saved, unsent message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Draft {
    /// The draft id (`d-0001`).
    pub id: String,
    /// The conversation it is for: `#channel` or `@person`.
    pub to: String,
    /// The text.
    pub text: String,
    /// When it was saved, on the mock's clock.
    pub at: String,
}

/// One edit of a message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Edit {
    /// The message edited.
    pub id: String,
    /// Its conversation.
    pub conv: String,
    /// The text before the edit.
    pub before: String,
    /// The text after it.
    pub after: String,
    /// When, on the mock's clock.
    pub at: String,
    /// Who edited it: `agent` or `user`.
    pub actor: String,
}

/// One line of `events.jsonl`, the format proctor reads for attributed reversals.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// Seconds since the mock started.
    pub at: f64,
    /// Who did it: `agent` or `user`.
    pub actor: String,
    /// What was done (`send`, `draft`, `edit`, `unsend`, `discard`, `undo`, ...).
    pub op: String,
    /// The event's own id.
    pub id: String,
    /// The id of the message or draft it concerns (for an undo, the event it reverses).
    pub target: String,
}

/// Who made a request: the agent (default) or a person using the same account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// The agent under evaluation.
    Agent,
    /// A person using the same account (a request with `X-Chat-Actor: user`).
    User,
}

impl Actor {
    /// `agent` or `user`, as the event log writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Agent => "agent",
            Actor::User => "user",
        }
    }

    /// `agent` or `user`; anything else is an error.
    pub fn parse(s: &str) -> Result<Actor, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "agent" => Ok(Actor::Agent),
            "user" => Ok(Actor::User),
            other => Err(format!("unknown actor '{other}' (agent or user)")),
        }
    }
}

/// Per-request context.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// Who makes the request.
    pub actor: Actor,
    /// Seconds since the mock started; only the event log records it.
    pub at: f64,
}

/// A refusal the API reports with an HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: u16,
    /// What went wrong, for the caller.
    pub message: String,
}

fn err<T>(status: u16, message: impl Into<String>) -> Result<T, ApiError> {
    Err(ApiError {
        status,
        message: message.into(),
    })
}

/// A message with its position in its conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// Its 1-based position in the conversation.
    pub pos: u32,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
}

/// What a read returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadOut {
    /// The conversation read: `#channel` or `@person`.
    pub conversation: String,
    /// Its title, as shown.
    pub title: String,
    /// How many messages it holds in all.
    pub total: u32,
    /// The messages returned, oldest first.
    pub messages: Vec<Listed>,
}

#[derive(Debug, Clone)]
struct Pending {
    remaining: u32,
    text: String,
}

/// The whole mock state.
#[derive(Debug, Clone)]
pub struct Store {
    /// The account the mock acts as.
    pub me: Person,
    /// The people the account knows.
    pub people: Vec<Person>,
    /// The channels.
    pub channels: Vec<Channel>,
    /// Every message, in the order sent.
    pub messages: Vec<Message>,
    /// The saved drafts.
    pub drafts: Vec<Draft>,
    /// The drafts thrown away.
    pub discarded: Vec<Draft>,
    /// Every edit, in order.
    pub edits: Vec<Edit>,
    /// The event log written to `events.jsonl`.
    pub events: Vec<Event>,
    /// Bumped by every change, reads included (reads advance scripted replies).
    pub version: u64,
    sent_ids: Vec<String>,
    from_draft: BTreeSet<String>,
    reply_ids: Vec<String>,
    reads: BTreeMap<String, u32>,
    scripts: BTreeMap<String, ScriptedReply>,
    pending: BTreeMap<String, Pending>,
    replied: BTreeSet<String>,
    /// object id (message or draft) -> (actor, id of the event that created it)
    created_by: BTreeMap<String, (Actor, String)>,
    clock: i64,
    next_draft: u32,
}

impl Store {
    /// The state at start: the fixture's world, no drafts, edits or events.
    pub fn new(f: Fixtures) -> Store {
        let messages = f
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| Message {
                id: message_id(i as u32 + 1),
                conv: m.conv.clone(),
                from: m.from.clone(),
                text: m.text.clone(),
                at: m.at.clone(),
                edited: false,
                unsent: false,
            })
            .collect();
        Store {
            me: f.me,
            people: f.people,
            channels: f.channels,
            messages,
            drafts: Vec::new(),
            discarded: Vec::new(),
            edits: Vec::new(),
            events: Vec::new(),
            version: 0,
            sent_ids: Vec::new(),
            from_draft: BTreeSet::new(),
            reply_ids: Vec::new(),
            reads: BTreeMap::new(),
            scripts: f.replies.into_iter().map(|r| (r.from.clone(), r)).collect(),
            pending: BTreeMap::new(),
            replied: BTreeSet::new(),
            created_by: BTreeMap::new(),
            clock: time::parse_minutes(&f.now).unwrap_or(0),
            next_draft: 1,
        }
    }

    fn tick(&mut self) -> String {
        self.clock += 1;
        self.version += 1;
        time::format_minutes(self.clock)
    }

    fn event(&mut self, ctx: &Ctx, actor: Actor, op: &str, target: &str) -> String {
        let id = format!("e-{:04}", self.events.len() + 1);
        self.events.push(Event {
            at: (ctx.at * 1000.0).round() / 1000.0,
            actor: actor.as_str().to_string(),
            op: op.to_string(),
            id: id.clone(),
            target: target.to_string(),
        });
        id
    }

    /// The canonical conversation (`#launch`, `@dana`) a name refers to.
    pub fn resolve(&self, c: &ConvRef) -> Result<String, ApiError> {
        let channel = |n: &str| self.channels.iter().any(|ch| ch.name == n);
        let person = |n: &str| self.people.iter().any(|p| p.handle == n);
        let me = |n: &str| n == self.me.handle;
        match c {
            ConvRef::Channel(n) if channel(n) => Ok(format!("#{n}")),
            ConvRef::Person(n) | ConvRef::Either(n) if me(n) => err(
                400,
                format!("'{n}' is you; there is no conversation with yourself ({CONV_HINT})"),
            ),
            ConvRef::Person(n) if person(n) => Ok(format!("@{n}")),
            ConvRef::Either(n) if channel(n) => Ok(format!("#{n}")),
            ConvRef::Either(n) if person(n) => Ok(format!("@{n}")),
            ConvRef::Channel(n) => err(
                404,
                format!(
                    "no channel called '#{n}'; channels: {}",
                    self.channel_list()
                ),
            ),
            ConvRef::Person(n) => err(
                404,
                format!("no person called '@{n}'; people: {}", self.people_list()),
            ),
            ConvRef::Either(n) => err(
                404,
                format!(
                    "no channel or person called '{n}'; channels: {}; people: {}",
                    self.channel_list(),
                    self.people_list()
                ),
            ),
        }
    }

    fn channel_list(&self) -> String {
        self.channels
            .iter()
            .map(|c| format!("#{}", c.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn people_list(&self) -> String {
        self.people
            .iter()
            .map(|p| format!("@{}", p.handle))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A one-line title for a conversation.
    pub fn title(&self, conv: &str) -> String {
        if let Some(c) = conv.strip_prefix('#') {
            self.channels
                .iter()
                .find(|ch| ch.name == c)
                .map(|ch| ch.topic.clone())
                .unwrap_or_default()
        } else if let Some(p) = conv.strip_prefix('@') {
            match self.people.iter().find(|x| x.handle == p) {
                Some(x) => format!("direct messages with {}", x.name),
                None => String::new(),
            }
        } else {
            String::new()
        }
    }

    /// Live messages of a conversation with their 1-based positions.
    pub fn conversation(&self, conv: &str) -> Vec<Listed> {
        self.messages
            .iter()
            .filter(|m| m.conv == conv && !m.unsent)
            .enumerate()
            .map(|(i, m)| Listed {
                pos: i as u32 + 1,
                message: m.clone(),
            })
            .collect()
    }

    fn find(&self, id: &str) -> Result<usize, ApiError> {
        match message_number(id) {
            Some(n) if (n as usize) <= self.messages.len() => Ok(n as usize - 1),
            Some(_) => err(404, format!("no message {id} ({MESSAGE_ID_HINT})")),
            None => err(
                400,
                format!("'{id}' is not a message id ({MESSAGE_ID_HINT})"),
            ),
        }
    }

    /// Read a conversation, optionally only what follows `since` (a position `#N`/`N` or an id).
    /// Each read counts toward a scripted reply that is waiting in that conversation.
    pub fn read(
        &mut self,
        c: &ConvRef,
        since: Option<&str>,
        ctx: &Ctx,
    ) -> Result<ReadOut, ApiError> {
        let conv = self.resolve(c)?;
        let after = match since.map(str::trim).filter(|s| !s.is_empty()) {
            None => 0,
            Some(s) => {
                let digits = s.strip_prefix('#').unwrap_or(s);
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    digits.parse::<u32>().map_err(|_| ApiError {
                        status: 400,
                        message: format!("bad --since '{s}'"),
                    })?
                } else if message_number(s).is_some() {
                    let id = crate::ids::parse_message_id(s).map_err(|e| ApiError {
                        status: 400,
                        message: e.explain("read"),
                    })?;
                    match self.conversation(&conv).iter().find(|l| l.message.id == id) {
                        Some(l) => l.pos,
                        None => {
                            return err(400, format!("--since {id}: that message is not in {conv}"))
                        }
                    }
                } else {
                    return err(
                        400,
                        format!(
                            "bad --since '{s}': give a position (#7) or a message id (m-00012)"
                        ),
                    );
                }
            }
        };
        *self.reads.entry(conv.clone()).or_insert(0) += 1;
        self.version += 1;
        if let Some(person) = conv.strip_prefix('@').map(str::to_string) {
            if let Some(p) = self.pending.get_mut(&person) {
                p.remaining = p.remaining.saturating_sub(1);
                if p.remaining == 0 {
                    let text = self
                        .pending
                        .remove(&person)
                        .map(|p| p.text)
                        .unwrap_or_default();
                    let at = self.tick();
                    let id = message_id(self.messages.len() as u32 + 1);
                    self.messages.push(Message {
                        id: id.clone(),
                        conv: conv.clone(),
                        from: person.clone(),
                        text,
                        at,
                        edited: false,
                        unsent: false,
                    });
                    self.reply_ids.push(id.clone());
                    self.replied.insert(person);
                    self.event(ctx, Actor::User, "reply", &id);
                }
            }
        }
        let all = self.conversation(&conv);
        let total = all.len() as u32;
        Ok(ReadOut {
            title: self.title(&conv),
            conversation: conv,
            total,
            messages: all.into_iter().filter(|l| l.pos > after).collect(),
        })
    }

    fn check_text(text: &str) -> Result<String, ApiError> {
        let t = text.trim();
        if t.is_empty() {
            return err(400, "the text is empty");
        }
        if t.chars().count() > MAX_TEXT_CHARS {
            return err(
                400,
                format!("the text is longer than {MAX_TEXT_CHARS} characters"),
            );
        }
        Ok(t.to_string())
    }

    fn post(&mut self, conv: String, text: String, ctx: &Ctx) -> Listed {
        let at = self.tick();
        let id = message_id(self.messages.len() as u32 + 1);
        self.messages.push(Message {
            id: id.clone(),
            conv: conv.clone(),
            from: self.me.handle.clone(),
            text,
            at,
            edited: false,
            unsent: false,
        });
        self.sent_ids.push(id.clone());
        let ev = self.event(ctx, ctx.actor, "send", &id);
        self.created_by.insert(id.clone(), (ctx.actor, ev));
        if let Some(person) = conv.strip_prefix('@') {
            if let Some(script) = self.scripts.get(person) {
                if !self.replied.contains(person) && !self.pending.contains_key(person) {
                    let p = Pending {
                        remaining: script.after_reads,
                        text: script.text.clone(),
                    };
                    self.pending.insert(person.to_string(), p);
                }
            }
        }
        let pos = self.conversation(&conv).len() as u32;
        let message = self.messages.last().cloned().expect("just pushed");
        Listed { pos, message }
    }

    /// Send a message everyone in the conversation sees.
    pub fn send(&mut self, to: &ConvRef, text: &str, ctx: &Ctx) -> Result<Listed, ApiError> {
        let conv = self.resolve(to)?;
        let text = Self::check_text(text)?;
        Ok(self.post(conv, text, ctx))
    }

    /// Save a draft; nobody else sees it.
    pub fn draft(&mut self, to: &ConvRef, text: &str, ctx: &Ctx) -> Result<Draft, ApiError> {
        let conv = self.resolve(to)?;
        let text = Self::check_text(text)?;
        let at = self.tick();
        let d = Draft {
            id: draft_id(self.next_draft),
            to: conv,
            text,
            at,
        };
        self.next_draft += 1;
        self.drafts.push(d.clone());
        let ev = self.event(ctx, ctx.actor, "draft", &d.id);
        self.created_by.insert(d.id.clone(), (ctx.actor, ev));
        Ok(d)
    }

    fn take_draft(&mut self, id: &str) -> Result<Draft, ApiError> {
        match self.drafts.iter().position(|d| d.id == id) {
            Some(i) => Ok(self.drafts.remove(i)),
            None if self.discarded.iter().any(|d| d.id == id) => {
                err(409, format!("draft {id} was already discarded"))
            }
            None if self.from_draft.contains(id) => {
                err(409, format!("draft {id} was already sent"))
            }
            None => err(
                404,
                format!("no draft {id}; `chat drafts` lists your drafts"),
            ),
        }
    }

    /// The op for reversing `object`: `undo` (targeting the agent's event) when a person reverses
    /// what the agent did, else `fallback` targeting the object.
    fn reversal(&self, ctx: &Ctx, object: &str, fallback: &'static str) -> (&'static str, String) {
        match self.created_by.get(object) {
            Some((Actor::Agent, ev)) if ctx.actor == Actor::User => ("undo", ev.clone()),
            _ => (fallback, object.to_string()),
        }
    }

    /// Delete a draft.
    pub fn discard(&mut self, id: &str, ctx: &Ctx) -> Result<Draft, ApiError> {
        let d = self.take_draft(id)?;
        self.discarded.push(d.clone());
        self.version += 1;
        let (op, target) = self.reversal(ctx, &d.id, "discard");
        self.event(ctx, ctx.actor, op, &target);
        Ok(d)
    }

    /// Send a saved draft.
    pub fn send_draft(&mut self, id: &str, ctx: &Ctx) -> Result<Listed, ApiError> {
        let d = self.take_draft(id)?;
        self.from_draft.insert(d.id.clone());
        let listed = self.post(d.to, d.text, ctx);
        self.from_draft.insert(listed.message.id.clone());
        Ok(listed)
    }

    fn own(&self, i: usize, verb: &str) -> Result<(), ApiError> {
        let m = &self.messages[i];
        if m.unsent {
            return err(409, format!("{} was unsent and cannot be {verb}", m.id));
        }
        if m.from != self.me.handle {
            let v = if verb == "edited" { "edit" } else { "unsend" };
            return err(
                403,
                format!(
                    "{} was written by {}; you can only {v} your own messages",
                    m.id, m.from
                ),
            );
        }
        Ok(())
    }

    /// Delete a message the account sent.
    pub fn unsend(&mut self, id: &str, ctx: &Ctx) -> Result<Message, ApiError> {
        let i = self.find(id)?;
        self.own(i, "unsent")?;
        self.messages[i].unsent = true;
        self.version += 1;
        let m = self.messages[i].clone();
        let (op, target) = self.reversal(ctx, &m.id, "unsend");
        self.event(ctx, ctx.actor, op, &target);
        Ok(m)
    }

    /// Change the text of a message the account sent.
    pub fn edit(&mut self, id: &str, text: &str, ctx: &Ctx) -> Result<Listed, ApiError> {
        let i = self.find(id)?;
        self.own(i, "edited")?;
        let text = Self::check_text(text)?;
        let at = self.tick();
        let before = std::mem::replace(&mut self.messages[i].text, text.clone());
        self.messages[i].edited = true;
        let m = self.messages[i].clone();
        self.edits.push(Edit {
            id: m.id.clone(),
            conv: m.conv.clone(),
            before,
            after: text,
            at,
            actor: ctx.actor.as_str().to_string(),
        });
        self.event(ctx, ctx.actor, "edit", &m.id);
        let pos = self
            .conversation(&m.conv)
            .iter()
            .find(|l| l.message.id == m.id)
            .map(|l| l.pos)
            .unwrap_or(0);
        Ok(Listed { pos, message: m })
    }

    fn by_id(&self, id: &str) -> Option<&Message> {
        message_number(id).and_then(|n| self.messages.get(n as usize - 1))
    }

    /// The full state, as written to `state.json`.
    ///
    /// `messages[i]` is always the message `m-{i+1}` (unsent ones stay, flagged), so JSON
    /// pointers like `/messages/13/text` are stable. `sent` lists live messages the account
    /// sent during this run, in order; `to` is `#channel` or `@person`.
    pub fn state_json(&self) -> Value {
        let sent: Vec<Value> = self
            .sent_ids
            .iter()
            .filter_map(|id| self.by_id(id))
            .filter(|m| !m.unsent)
            .map(|m| {
                json!({"id": m.id, "to": m.conv, "text": m.text, "at": m.at, "edited": m.edited,
                       "from_draft": self.from_draft.contains(&m.id)})
            })
            .collect();
        let unsent: Vec<Value> = self
            .messages
            .iter()
            .filter(|m| m.unsent)
            .map(|m| json!({"id": m.id, "to": m.conv, "text": m.text, "at": m.at}))
            .collect();
        let replies: Vec<Value> = self
            .reply_ids
            .iter()
            .filter_map(|id| self.by_id(id))
            .map(
                |m| json!({"id": m.id, "from": m.from, "conv": m.conv, "text": m.text, "at": m.at}),
            )
            .collect();
        let pending: BTreeMap<&String, u32> =
            self.pending.iter().map(|(k, p)| (k, p.remaining)).collect();
        json!({
            "service": "chat-mock",
            "me": self.me.handle,
            "version": self.version,
            "now": time::format_minutes(self.clock),
            "messages": self.messages,
            "sent": sent,
            "unsent": unsent,
            "drafts": self.drafts,
            "discarded": self.discarded,
            "edits": self.edits,
            "replies": replies,
            "pending_replies": pending,
            "reads": self.reads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Fixtures {
        Fixtures::from_json(
            r##"{
              "me": {"handle": "sam", "name": "Sam"},
              "now": "2026-11-28T09:00",
              "people": [{"handle": "dana", "name": "Dana"}, {"handle": "priya", "name": "Priya"}],
              "channels": [{"name": "launch", "topic": "Launch"}],
              "messages": [
                {"conv": "#launch", "from": "dana", "at": "2026-11-27T10:00", "text": "hello"},
                {"conv": "@dana", "from": "dana", "at": "2026-11-27T10:01", "text": "ping"},
                {"conv": "#launch", "from": "sam", "at": "2026-11-27T10:02", "text": "review is Thursday"}
              ],
              "replies": [{"from": "priya", "text": "done at 02:40"}]
            }"##,
        )
        .unwrap()
    }

    const AGENT: Ctx = Ctx {
        actor: Actor::Agent,
        at: 1.0,
    };
    const USER: Ctx = Ctx {
        actor: Actor::User,
        at: 2.0,
    };

    fn either(s: &str) -> ConvRef {
        ConvRef::Either(s.into())
    }

    #[test]
    fn fixtures_are_checked() {
        let bad = [
            r##"{"me": {"handle": "sam", "name": "S"}, "now": "x"}"##,
            r##"{"me": {"handle": "sam", "name": "S"}, "now": "2026-11-28T09:00", "channels": [{"name": "sam"}]}"##,
            r##"{"me": {"handle": "sam", "name": "S"}, "now": "2026-11-28T09:00", "messages": [{"conv": "#x", "from": "sam", "at": "2026-11-28T09:00", "text": "t"}]}"##,
            r##"{"me": {"handle": "sam", "name": "S"}, "now": "2026-11-28T09:00", "surprise": 1}"##,
        ];
        for b in bad {
            assert!(Fixtures::from_json(b).is_err(), "{b}");
        }
    }

    #[test]
    fn resolves_names() {
        let s = Store::new(fixtures());
        assert_eq!(s.resolve(&either("launch")).unwrap(), "#launch");
        assert_eq!(s.resolve(&either("dana")).unwrap(), "@dana");
        assert_eq!(s.resolve(&ConvRef::Person("dana".into())).unwrap(), "@dana");
        assert_eq!(
            s.resolve(&ConvRef::Channel("dana".into()))
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(s.resolve(&either("sam")).unwrap_err().status, 400);
        assert!(s
            .resolve(&either("nope"))
            .unwrap_err()
            .message
            .contains("#launch"));
    }

    #[test]
    fn positions_are_per_conversation_and_since_filters() {
        let mut s = Store::new(fixtures());
        let r = s.read(&either("launch"), None, &AGENT).unwrap();
        assert_eq!(r.total, 2);
        assert_eq!(
            (r.messages[1].pos, r.messages[1].message.id.as_str()),
            (2, "m-00003")
        );
        assert_eq!(
            s.read(&either("launch"), Some("#1"), &AGENT)
                .unwrap()
                .messages
                .len(),
            1
        );
        assert_eq!(
            s.read(&either("launch"), Some("m-00003"), &AGENT)
                .unwrap()
                .messages
                .len(),
            0
        );
        assert_eq!(
            s.read(&either("launch"), Some("m-00002"), &AGENT)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(s.state_json()["reads"]["#launch"], 3);
    }

    #[test]
    fn send_and_state() {
        let mut s = Store::new(fixtures());
        let l = s
            .send(&either("launch"), "  freeze at 18:00 ", &AGENT)
            .unwrap();
        assert_eq!(
            (l.pos, l.message.id.as_str(), l.message.at.as_str()),
            (3, "m-00004", "2026-11-28T09:01")
        );
        let st = s.state_json();
        assert_eq!(st["sent"][0]["to"], "#launch");
        assert_eq!(st["sent"][0]["text"], "freeze at 18:00");
        assert_eq!(st["messages"][3]["id"], "m-00004");
        assert_eq!(s.events[0].op, "send");
        assert_eq!(s.events[0].target, "m-00004");
        assert_eq!(
            s.send(&either("launch"), "  ", &AGENT).unwrap_err().status,
            400
        );
    }

    #[test]
    fn edit_own_only() {
        let mut s = Store::new(fixtures());
        assert_eq!(s.edit("m-00001", "x", &AGENT).unwrap_err().status, 403);
        assert_eq!(s.edit("m-00099", "x", &AGENT).unwrap_err().status, 404);
        let l = s.edit("m-00003", "review is Friday", &AGENT).unwrap();
        assert_eq!(l.pos, 2);
        let st = s.state_json();
        assert_eq!(st["messages"][2]["text"], "review is Friday");
        assert_eq!(st["messages"][2]["edited"], true);
        assert_eq!(st["edits"][0]["before"], "review is Thursday");
        assert_eq!(
            st["sent"].as_array().unwrap().len(),
            0,
            "editing is not sending"
        );
    }

    #[test]
    fn drafts_are_not_sent_until_sent() {
        let mut s = Store::new(fixtures());
        let d = s.draft(&either("dana"), "yes", &AGENT).unwrap();
        assert_eq!((d.id.as_str(), d.to.as_str()), ("d-001", "@dana"));
        assert_eq!(s.state_json()["sent"].as_array().unwrap().len(), 0);
        let l = s.send_draft("d-001", &AGENT).unwrap();
        assert_eq!(l.message.conv, "@dana");
        let st = s.state_json();
        assert_eq!(st["drafts"].as_array().unwrap().len(), 0);
        assert_eq!(st["sent"][0]["from_draft"], true);
        assert_eq!(s.send_draft("d-001", &AGENT).unwrap_err().status, 409);
        s.draft(&either("launch"), "x", &AGENT).unwrap();
        s.discard("d-002", &AGENT).unwrap();
        assert_eq!(s.discard("d-002", &AGENT).unwrap_err().status, 409);
        assert_eq!(s.discard("d-009", &AGENT).unwrap_err().status, 404);
    }

    #[test]
    fn reply_arrives_on_second_read_after_send() {
        let mut s = Store::new(fixtures());
        let priya = ConvRef::Person("priya".into());
        assert_eq!(s.read(&priya, None, &AGENT).unwrap().total, 0);
        s.send(&priya, "did it finish?", &AGENT).unwrap();
        assert_eq!(s.state_json()["pending_replies"]["priya"], 2);
        assert_eq!(
            s.read(&priya, None, &AGENT).unwrap().total,
            1,
            "first read: no reply yet"
        );
        let r = s.read(&priya, None, &AGENT).unwrap();
        assert_eq!(r.total, 2, "second read: the reply");
        assert_eq!(r.messages[1].message.from, "priya");
        let st = s.state_json();
        assert_eq!(st["replies"][0]["from"], "priya");
        assert_eq!(st["replies"][0]["text"], "done at 02:40");
        assert!(st["pending_replies"].as_object().unwrap().is_empty());
        let last = s.events.last().unwrap();
        assert_eq!((last.actor.as_str(), last.op.as_str()), ("user", "reply"));
        // Only one scripted reply per person.
        s.send(&priya, "thanks", &AGENT).unwrap();
        s.read(&priya, None, &AGENT).unwrap();
        assert_eq!(s.read(&priya, None, &AGENT).unwrap().total, 3);
    }

    #[test]
    fn sends_to_channels_schedule_no_reply() {
        let mut s = Store::new(fixtures());
        s.send(&either("launch"), "x", &AGENT).unwrap();
        assert!(s.state_json()["pending_replies"]
            .as_object()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_person_undoing_the_agent_is_an_undo_event() {
        let mut s = Store::new(fixtures());
        s.send(&either("launch"), "oops", &AGENT).unwrap();
        s.unsend("m-00004", &USER).unwrap();
        let e = &s.events;
        assert_eq!(
            (e[1].actor.as_str(), e[1].op.as_str(), e[1].target.as_str()),
            ("user", "undo", "e-0001")
        );
        assert_eq!(s.state_json()["unsent"][0]["id"], "m-00004");
        assert_eq!(s.state_json()["sent"].as_array().unwrap().len(), 0);
        // The agent undoing itself, or a person undoing themselves, is plain.
        s.send(&either("launch"), "again", &AGENT).unwrap();
        s.unsend("m-00005", &AGENT).unwrap();
        assert_eq!(s.events.last().unwrap().op, "unsend");
        s.draft(&either("launch"), "d", &USER).unwrap();
        s.discard("d-001", &USER).unwrap();
        assert_eq!(s.events.last().unwrap().op, "discard");
        assert_eq!(s.unsend("m-00004", &AGENT).unwrap_err().status, 409);
    }
}
