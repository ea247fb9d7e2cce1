//! Assertions evaluated against an end state, each result carrying the evidence it looked at
//! (the file and matching line, the call numbers counted, the check's exit and output tail, the
//! JSON pointer's actual value), so a reader can see why a trial got its outcome.

use globset::{Glob, GlobSet, GlobSetBuilder};
use proctor_suite::assertion::{
    Assertion, Calls, Check, FilesUnchanged, McpCalls, StateAssertion, Visual,
};
use proctor_suite::model::{Condition, Interface};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::endstate::{ChangeKind, EndState, Files};
use crate::mcp::McpRecord;

/// Whether an assertion holds, fails, or cannot be told from the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    /// The assertion holds.
    Holds,
    /// The assertion does not hold.
    Fails,
    /// The evidence cannot decide; the reason says why.
    Unknown {
        /// Why the evidence cannot decide.
        reason: String,
    },
}

impl Verdict {
    fn from_bool(b: bool) -> Verdict {
        if b {
            Verdict::Holds
        } else {
            Verdict::Fails
        }
    }

    fn unknown(reason: impl Into<String>) -> Verdict {
        Verdict::Unknown {
            reason: reason.into(),
        }
    }

    /// `Some(true/false)` when decided.
    pub fn decided(&self) -> Option<bool> {
        match self {
            Verdict::Holds => Some(true),
            Verdict::Fails => Some(false),
            Verdict::Unknown { .. } => None,
        }
    }
}

/// One assertion's result with what it looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AssertionResult {
    /// The assertion kind (`file_added`, `check`, ...).
    pub kind: String,
    /// The assertion as written, compactly.
    pub rule: String,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// What the assertion looked at.
    pub evidence: Value,
}

/// The most entries a list of an assertion's evidence holds in a stored record (the paths
/// an agent changed, the numbers of its calls); past it they are counted in `KEY_omitted`.
/// The agent sets how long such a list is: a million files made is a million paths.
pub const MAX_EVIDENCE_LIST: usize = 1_000;

/// The most bytes of text a list of an assertion's evidence holds in a stored record (paths
/// past `PATH_MAX` run to megabytes); past it, as past [`MAX_EVIDENCE_LIST`], entries are
/// counted.
pub const MAX_EVIDENCE_LIST_BYTES: usize = 1 << 20;

impl AssertionResult {
    /// Cuts each list of the evidence (and of a `not`'s inner evidence) to
    /// [`MAX_EVIDENCE_LIST`] entries and [`MAX_EVIDENCE_LIST_BYTES`], keeping its order, and
    /// counts what it left out in `KEY_omitted`: the verdict and the reason are decided on the
    /// whole lists first, and only the record is bounded.
    pub fn bound_evidence(&mut self) {
        bound_lists(&mut self.evidence);
    }
}

/// [`AssertionResult::bound_evidence`] of one evidence object.
fn bound_lists(evidence: &mut Value) {
    let Value::Object(map) = evidence else {
        return;
    };
    let mut omitted = Vec::new();
    for (key, value) in map.iter_mut() {
        match value {
            Value::Array(list) => {
                let cut = bound_list(list);
                if cut > 0 {
                    omitted.push((format!("{key}_omitted"), cut));
                }
            }
            Value::Object(inner) if key == "inner" => {
                if let Some(e) = inner.get_mut("evidence") {
                    bound_lists(e);
                }
            }
            _ => {}
        }
    }
    for (key, cut) in omitted {
        let before = map.get(&key).and_then(Value::as_u64).unwrap_or(0);
        map.insert(key, json!(before + cut));
    }
}

/// Cuts `list` to its first entries within both bounds; how many it left out.
fn bound_list(list: &mut Vec<Value>) -> u64 {
    let (mut kept, mut bytes) = (0usize, 0usize);
    for v in list.iter() {
        let size = v.as_str().map_or(8, str::len);
        if kept == MAX_EVIDENCE_LIST || bytes + size > MAX_EVIDENCE_LIST_BYTES {
            break;
        }
        kept += 1;
        bytes += size;
    }
    let cut = list.len() - kept;
    if cut > 0 {
        list.truncate(kept);
        list.shrink_to_fit();
    }
    cut as u64
}

/// The result of a whole `all`/`any` condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConditionResult {
    /// `all` or `any`.
    pub mode: String,
    /// The combined verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Each assertion's result.
    pub assertions: Vec<AssertionResult>,
}

/// What evaluation needs besides the end state.
pub struct Context<'a> {
    /// The captured end state.
    pub end: &'a EndState,
    /// The end-state workspace's files.
    pub files: &'a dyn Files,
    /// The task's interface, for `calls`.
    pub interface: Option<&'a Interface>,
}

/// Evaluates a condition: `all` holds when every assertion holds; `any` when one does. An
/// undecidable assertion makes the condition undecidable only where it could change the result.
pub fn condition(ctx: &Context, cond: &Condition) -> ConditionResult {
    let (mode, list) = match (&cond.all, &cond.any) {
        (Some(all), _) => ("all", all),
        (None, Some(any)) => ("any", any),
        (None, None) => {
            return ConditionResult {
                mode: "all".into(),
                verdict: Verdict::unknown("the condition has no assertions"),
                assertions: Vec::new(),
            }
        }
    };
    let results: Vec<AssertionResult> = list.iter().map(|a| assertion(ctx, a.get_ref())).collect();
    let verdict = combine(mode == "all", results.iter().map(|r| &r.verdict));
    ConditionResult {
        mode: mode.into(),
        verdict,
        assertions: results,
    }
}

/// Combines verdicts with `all` (when `all`) or `any` semantics.
pub fn combine<'v>(all: bool, verdicts: impl Iterator<Item = &'v Verdict>) -> Verdict {
    let mut unknown: Option<String> = None;
    for v in verdicts {
        match (all, v) {
            (true, Verdict::Fails) => return Verdict::Fails,
            (false, Verdict::Holds) => return Verdict::Holds,
            (_, Verdict::Unknown { reason }) => {
                unknown.get_or_insert_with(|| reason.clone());
            }
            _ => {}
        }
    }
    match unknown {
        Some(reason) => Verdict::Unknown { reason },
        None => Verdict::from_bool(all),
    }
}

fn result(kind: &str, rule: String, verdict: Verdict, evidence: Value) -> AssertionResult {
    AssertionResult {
        kind: kind.into(),
        rule,
        verdict,
        evidence,
    }
}

/// Evaluates one assertion.
pub fn assertion(ctx: &Context, a: &Assertion) -> AssertionResult {
    let kind = a.kind();
    match a {
        Assertion::AnswerMatches(re) | Assertion::AnswerForbids(re) => {
            let forbids = matches!(a, Assertion::AnswerForbids(_));
            let rule = format!("{kind} = {:?}", re.get_ref());
            match Regex::new(re.get_ref()) {
                Err(e) => result(
                    kind,
                    rule,
                    Verdict::unknown(format!("bad regex: {e}")),
                    Value::Null,
                ),
                Ok(re) => {
                    let found = re.find(&ctx.end.answer).map(|m| m.as_str().to_string());
                    let verdict = Verdict::from_bool(found.is_some() != forbids);
                    result(kind, rule, verdict, json!({ "matched": found }))
                }
            }
        }
        Assertion::FilesUnchanged(spec) => files_unchanged(ctx, spec),
        Assertion::FileAdded(g) | Assertion::FileDeleted(g) | Assertion::FileChanged(g) => {
            let wanted = match a {
                Assertion::FileAdded(_) => ChangeKind::Added,
                Assertion::FileDeleted(_) => ChangeKind::Deleted,
                _ => ChangeKind::Changed,
            };
            let rule = format!("{kind} = {:?}", g.get_ref());
            match Glob::new(g.get_ref()) {
                Err(e) => result(
                    kind,
                    rule,
                    Verdict::unknown(format!("bad glob: {e}")),
                    Value::Null,
                ),
                Ok(glob) => {
                    let m = glob.compile_matcher();
                    let hits: Vec<&str> = ctx
                        .end
                        .changes
                        .iter()
                        .filter(|c| c.kind == wanted && !c.dir && m.is_match(c.exact_path()))
                        .map(|c| c.path.as_str())
                        .collect();
                    result(
                        kind,
                        rule,
                        Verdict::from_bool(!hits.is_empty()),
                        json!({ "paths": hits }),
                    )
                }
            }
        }
        Assertion::FileContains(fc) => file_contains(ctx, kind, fc, Polarity::Required),
        Assertion::Check(c) => check(ctx, c),
        Assertion::Calls(c) => calls(ctx, c, Polarity::Required),
        Assertion::McpCalls(c) => mcp_calls(&ctx.end.mcp_calls, ctx.end.mcp_unlogged, c, false),
        Assertion::State(s) => state(ctx, s),
        Assertion::Visual(v) => visual(ctx, v),
        Assertion::Steps(s) => steps(ctx, s),
        Assertion::Not(inner) => {
            // Under `not`, a `calls` rule forbids: what the agent made undecidable counts as
            // the forbidden call; so does a file read only in part for `file_contains`.
            let r = match inner.get_ref() {
                Assertion::Calls(c) => calls(ctx, c, Polarity::Forbidden),
                Assertion::FileContains(fc) => {
                    file_contains(ctx, "file_contains", fc, Polarity::Forbidden)
                }
                Assertion::McpCalls(c) => {
                    mcp_calls(&ctx.end.mcp_calls, ctx.end.mcp_unlogged, c, true)
                }
                other => assertion(ctx, other),
            };
            let verdict = match r.verdict.decided() {
                Some(b) => Verdict::from_bool(!b),
                None => r.verdict.clone(),
            };
            AssertionResult {
                kind: "not".into(),
                rule: format!("not = {{ {} }}", r.rule),
                verdict,
                evidence: json!({ "inner": r }),
            }
        }
    }
}

/// `file_contains`: whether a line (or the whole text) of the end-state file matches. A file
/// read only in part (past the reader's bound, or a sparse file read by its data) that does not
/// match in what was read may match past it: under `not` (`Forbidden`) that counts as a match,
/// against the agent, and the evidence says so; otherwise as none.
fn file_contains(
    ctx: &Context,
    kind: &'static str,
    fc: &proctor_suite::assertion::FileContains,
    polarity: Polarity,
) -> AssertionResult {
    let rule = format!(
        "file_contains = {{ path = {:?}, pattern = {:?} }}",
        fc.path.get_ref(),
        fc.pattern.get_ref()
    );
    let re = match Regex::new(fc.pattern.get_ref()) {
        Ok(re) => re,
        Err(e) => {
            return result(
                kind,
                rule,
                Verdict::unknown(format!("bad regex: {e}")),
                Value::Null,
            )
        }
    };
    match ctx.files.read(fc.path.get_ref()) {
        None => result(
            kind,
            rule,
            Verdict::Fails,
            json!({ "path": fc.path.get_ref(), "exists": false }),
        ),
        Some(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let hit = text
                .lines()
                .enumerate()
                .find(|(_, l)| re.is_match(l))
                .map(|(i, l)| json!({ "line": i + 1, "text": truncate(l, 200) }));
            let mut matched = hit.is_some() || re.is_match(&text);
            let mut evidence = json!({ "path": fc.path.get_ref(), "exists": true, "match": hit });
            if let Some(note) = ctx.files.partial(fc.path.get_ref()) {
                if !matched && polarity == Polarity::Forbidden {
                    matched = true;
                    evidence["decided_against_the_agent"] = json!(format!(
                        "the file was read only in part ({note}), so whether it matches past what was read is read the way that counts against the agent"
                    ));
                }
                evidence["read"] = json!(note);
            }
            result(kind, rule, Verdict::from_bool(matched), evidence)
        }
    }
}

fn files_unchanged(ctx: &Context, spec: &FilesUnchanged) -> AssertionResult {
    let changed_under = |set: Option<&GlobSet>| -> Vec<&str> {
        ctx.end
            .changes
            .iter()
            // `.` is the whole workspace, lost by the capture (its trial's init killed at its
            // own limit): it may have held a change under any glob.
            .filter(|c| c.path == "." || set.is_none_or(|s| s.is_match(c.exact_path())))
            .map(|c| c.path.as_str())
            .collect()
    };
    match spec {
        FilesUnchanged::Everywhere(want) => {
            let changed = changed_under(None);
            result(
                "files_unchanged",
                format!("files_unchanged = {want}"),
                Verdict::from_bool(changed.is_empty() == *want),
                json!({ "changed": changed }),
            )
        }
        FilesUnchanged::Under(globs) => {
            let rule = format!("files_unchanged = {globs:?}");
            let mut b = GlobSetBuilder::new();
            for g in globs {
                match Glob::new(g) {
                    Ok(g) => {
                        b.add(g);
                    }
                    Err(e) => {
                        return result(
                            "files_unchanged",
                            rule,
                            Verdict::unknown(format!("bad glob: {e}")),
                            Value::Null,
                        )
                    }
                }
            }
            match b.build() {
                Err(e) => result(
                    "files_unchanged",
                    rule,
                    Verdict::unknown(format!("bad glob: {e}")),
                    Value::Null,
                ),
                Ok(set) => {
                    let changed = changed_under(Some(&set));
                    result(
                        "files_unchanged",
                        rule,
                        Verdict::from_bool(changed.is_empty()),
                        json!({ "changed": changed }),
                    )
                }
            }
        }
    }
}

fn check(ctx: &Context, c: &Check) -> AssertionResult {
    let rule = format!("check = {:?}", c.command);
    let Some(run) = ctx.end.checks.get(&c.command) else {
        return result(
            "check",
            rule,
            Verdict::unknown("the check was not run for this trial"),
            Value::Null,
        );
    };
    let mut evidence = json!({
        "exit": run.exit,
        "timed_out": run.timed_out,
        "stdout_tail": run.stdout_tail,
        "stderr_tail": run.stderr_tail,
        "expected_exit": c.exit,
    });
    if let Some(sig) = run.signal {
        evidence["signal"] = json!(sig);
    }
    if let Some(limit) = run.limit_reached {
        evidence["limit_reached"] = json!(limit);
    }
    if let Some(err) = &run.error {
        return result(
            "check",
            rule,
            Verdict::unknown(format!("the check could not run: {err}")),
            evidence,
        );
    }
    if run.timed_out {
        // A check that does not finish in time did not show the end state passes.
        return result("check", rule, Verdict::Fails, evidence);
    }
    let Some(exit) = run.exit else {
        // Ended by a signal or at a limit of the task's: the code under test ran in the check's
        // sandbox, and nothing else there can signal it (proctor's own stop at the timeout is
        // `timed_out`; a cause of proctor's or the machine's is `error`). The check did not
        // show the end state passes.
        if run.signal.is_some() || run.limit_reached.is_some() {
            return result("check", rule, Verdict::Fails, evidence);
        }
        return result(
            "check",
            rule,
            Verdict::unknown("the check ended without an exit status or a signal"),
            evidence,
        );
    };
    let mut holds = exit == c.exit;
    if let Some(re) = &c.stdout_matches {
        match Regex::new(re.get_ref()) {
            Ok(re) => holds &= re.is_match(&run.stdout),
            Err(e) => {
                return result(
                    "check",
                    rule,
                    Verdict::unknown(format!("bad regex: {e}")),
                    evidence,
                )
            }
        }
    }
    result("check", rule, Verdict::from_bool(holds), evidence)
}

/// The verb of a call under an interface (its `verb` rule: by default the argv entry at
/// `verb_arg`).
pub fn verb_of<'c>(interface: &Interface, argv: &'c [String]) -> Option<&'c str> {
    interface.verb_of(argv)
}

/// Which way a rule points, for what the agent left undecidable: a call whose stdin is kept
/// in part, a file read in part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polarity {
    /// As written: its `min` requires matching calls (an unseen stdin is no match) and its `max`
    /// forbids more (an unseen stdin is a match).
    Required,
    /// Inside `not`: any count it could have is the forbidden one.
    Forbidden,
}

/// `calls`: how many calls of the interface match. A call whose stdin the record keeps only in
/// part (its head, when the agent padded it past [`crate::endstate::HEAD_BYTES`]; nothing of a
/// terminal or of a call the agent left running at the stop) might match whole: the agent made
/// it undecidable, so it is decided against the agent ([`Polarity`]): the trial stays graded,
/// and the evidence names the calls (`stdin_unseen`) and says so.
fn calls(ctx: &Context, c: &Calls, polarity: Polarity) -> AssertionResult {
    let rule = calls_rule(c);
    let Some(interface) = ctx.interface else {
        return result(
            "calls",
            rule,
            Verdict::unknown("the task has no [tasks.interface]"),
            Value::Null,
        );
    };
    let compile = |re: Option<&String>| re.map(|r| Regex::new(r)).transpose();
    let (args_re, stdin_re) = match (
        compile(c.args_match.as_ref().map(|r| r.get_ref())),
        compile(c.stdin_matches.as_ref().map(|r| r.get_ref())),
    ) {
        (Ok(args), Ok(stdin)) => (args, stdin),
        (Err(e), _) | (_, Err(e)) => {
            return result(
                "calls",
                rule,
                Verdict::unknown(format!("bad regex: {e}")),
                Value::Null,
            )
        }
    };
    // A call whose stdin the record keeps only in part (its head; nothing of a terminal, of a
    // call killed with the trial, or in a record older than heads) and whose kept part does not
    // match might match whole: it is counted apart, as unseen.
    let mut unseen: Vec<u64> = Vec::new();
    let seqs: Vec<u64> = ctx
        .end
        .calls
        .iter()
        .filter(|call| call.denied.is_none() && call.command == *interface.command.get_ref())
        .filter(|call| {
            c.verb
                .as_deref()
                .is_none_or(|v| verb_of(interface, &call.argv) == Some(v))
        })
        .filter(|call| {
            args_re
                .as_ref()
                .is_none_or(|re| re.is_match(&call.argv.get(1..).unwrap_or_default().join(" ")))
        })
        .filter(|call| c.exit.is_none_or(|e| call.exit == Some(e)))
        .filter(|call| {
            let Some(re) = &stdin_re else { return true };
            if re.is_match(&call.stdin_head) {
                return true;
            }
            if !call.stdin_whole() {
                unseen.push(call.seq);
            }
            false
        })
        .map(|call| call.seq)
        .collect();
    let n = seqs.len() as u32;
    let within = |n: u32| c.min.is_none_or(|m| n >= m) && c.max.is_none_or(|m| n <= m);
    let most = n.saturating_add(unseen.len() as u32);
    // The true count is somewhere in n..=most, and the agent made it so.
    let verdict = match polarity {
        Polarity::Required => {
            Verdict::from_bool(c.min.is_none_or(|m| n >= m) && c.max.is_none_or(|m| most <= m))
        }
        Polarity::Forbidden => Verdict::from_bool((n..=most).any(within)),
    };
    let mut evidence = json!({ "count": n, "seqs": seqs });
    if !unseen.is_empty() {
        evidence["stdin_unseen"] = json!(unseen);
        if (n..=most).any(within) && !(n..=most).all(within) {
            evidence["decided_against_the_agent"] = json!(format!(
                "the stdin of call(s) {} is kept only in part (its first {} bytes; nothing of a terminal or of a call left running at the stop), so whether it matches is read the way that counts against the agent",
                unseen
                    .iter()
                    .map(|s| format!("#{s}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::endstate::HEAD_BYTES
            ));
        }
    }
    result("calls", rule, verdict, evidence)
}

/// A `calls` rule as the suite writes it: `calls = { verb = "send", min = 1, ... }`.
fn calls_rule(c: &Calls) -> String {
    let mut parts = Vec::new();
    if let Some(v) = &c.verb {
        parts.push(format!("verb = {v:?}"));
    }
    if let Some(m) = c.min {
        parts.push(format!("min = {m}"));
    }
    if let Some(m) = c.max {
        parts.push(format!("max = {m}"));
    }
    if let Some(r) = &c.args_match {
        parts.push(format!("args_match = {:?}", r.get_ref()));
    }
    if let Some(r) = &c.stdin_matches {
        parts.push(format!("stdin_matches = {:?}", r.get_ref()));
    }
    if let Some(e) = c.exit {
        parts.push(format!("exit = {e}"));
    }
    format!("calls = {{ {} }}", parts.join(", "))
}

fn state(ctx: &Context, s: &StateAssertion) -> AssertionResult {
    let test = if let Some(v) = &s.equals {
        format!("equals = {v}")
    } else if let Some(m) = &s.matches {
        format!("matches = {:?}", m.get_ref())
    } else {
        format!("exists = {}", s.exists.unwrap_or(true))
    };
    let rule = format!(
        "state = {{ service = {:?}, pointer = {:?}, {test} }}",
        s.service.get_ref(),
        s.pointer.get_ref()
    );
    let Some(service) = ctx.end.services.get(s.service.get_ref()) else {
        return result(
            "state",
            rule,
            Verdict::unknown(format!(
                "no end state was captured for service `{}`",
                s.service.get_ref()
            )),
            Value::Null,
        );
    };
    let Some(doc) = &service.state else {
        let why = service
            .state_error
            .clone()
            .unwrap_or_else(|| "the service wrote no state".into());
        return result("state", rule, Verdict::unknown(why), Value::Null);
    };
    let actual = doc.pointer(s.pointer.get_ref());
    let evidence = state_evidence(s.pointer.get_ref(), actual);
    let verdict = if let Some(want) = &s.equals {
        match serde_json::to_value(want) {
            Ok(want) => Verdict::from_bool(actual == Some(&want)),
            Err(e) => Verdict::unknown(format!("cannot compare with {want}: {e}")),
        }
    } else if let Some(re) = &s.matches {
        match Regex::new(re.get_ref()) {
            Ok(re) => Verdict::from_bool(actual.is_some_and(|v| match v {
                Value::String(s) => re.is_match(s),
                other => re.is_match(&other.to_string()),
            })),
            Err(e) => Verdict::unknown(format!("bad regex: {e}")),
        }
    } else {
        let want = s.exists.unwrap_or(true);
        Verdict::from_bool(actual.is_some() == want)
    };
    result("state", rule, verdict, evidence)
}

/// The most of a state value a `state` assertion's evidence holds, as JSON text.
pub const MAX_STATE_EVIDENCE_BYTES: u64 = 4096;

/// What a `state` assertion saw at `pointer`: the value itself, or, when it is longer than
/// [`MAX_STATE_EVIDENCE_BYTES`] as JSON, the head of its text and its whole length (a pointer at
/// a large state's root must not copy the state into every record).
fn state_evidence(pointer: &str, actual: Option<&Value>) -> Value {
    let Some(value) = actual else {
        return json!({ "pointer": pointer, "actual": null });
    };
    let bytes = crate::endstate::json_len(value);
    if bytes <= MAX_STATE_EVIDENCE_BYTES {
        return json!({ "pointer": pointer, "actual": value });
    }
    json!({ "pointer": pointer, "actual_head": json_head(value), "actual_bytes": bytes })
}

/// The first [`MAX_STATE_EVIDENCE_BYTES`] of `value` as compact JSON, cut at a character.
fn json_head(value: &Value) -> String {
    struct Head(Vec<u8>);
    impl std::io::Write for Head {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = MAX_STATE_EVIDENCE_BYTES as usize - self.0.len();
            self.0.extend_from_slice(&buf[..buf.len().min(room)]);
            if buf.len() > room {
                // Stops the serializer: the head is full.
                return Err(std::io::Error::other("full"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut head = Head(Vec::with_capacity(MAX_STATE_EVIDENCE_BYTES as usize));
    let _ = serde_json::to_writer(&mut head, value);
    match String::from_utf8(head.0) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    }
}

/// A `visual` assertion over what its look saw: a browser that could not look leaves it
/// undecided; a page that did not load fails it.
/// `steps = { min_reward }`: the trial's reward over its steps, as recorded after each step's
/// check, is at least `min_reward`; unknown for a trial that ran no step.
fn steps(ctx: &Context, s: &proctor_suite::assertion::StepsRule) -> AssertionResult {
    let rule = format!("steps = {{ min_reward = {} }}", s.min_reward);
    let Some(steps) = &ctx.end.steps else {
        return result(
            "steps",
            rule,
            Verdict::unknown("the trial ran no step"),
            Value::Null,
        );
    };
    let evidence = json!({
        "reward": steps.reward,
        "strategy": steps.strategy,
        "rewards": steps.steps.iter().map(|s| json!({"step": s.name, "reward": s.reward})).collect::<Vec<_>>(),
        "stopped_early": steps.stopped_early,
    });
    result(
        "steps",
        rule,
        Verdict::from_bool(steps.reward >= s.min_reward),
        evidence,
    )
}

fn visual(ctx: &Context, v: &Visual) -> AssertionResult {
    let rule = v.rule();
    let Some(run) = ctx.end.visuals.get(&v.look_key()) else {
        return result(
            "visual",
            rule,
            Verdict::unknown("the visual check was not run for this trial"),
            Value::Null,
        );
    };
    let mut evidence = json!({ "url": run.url });
    if let Some(why) = &run.error {
        return result("visual", rule, Verdict::unknown(why.clone()), evidence);
    }
    if let Some(why) = &run.load_error {
        evidence["load_error"] = json!(why);
        return result("visual", rule, Verdict::Fails, evidence);
    }
    evidence["count"] = json!(run.count);
    let first = run.elements.first();
    let verdict = if let Some(want) = &v.text {
        evidence["text"] = json!(first.map(|e| &e.text));
        Verdict::from_bool(first.is_some_and(|e| squeeze(&e.text) == squeeze(want)))
    } else if let Some(re) = &v.matches {
        evidence["text"] = json!(first.map(|e| &e.text));
        match Regex::new(re.get_ref()) {
            Ok(re) => Verdict::from_bool(first.is_some_and(|e| re.is_match(&e.text))),
            Err(e) => Verdict::unknown(format!("bad regex: {e}")),
        }
    } else if let Some(want) = v.visible {
        let shown: Vec<bool> = run.elements.iter().map(|e| e.visible).collect();
        evidence["visible"] = json!(shown);
        Verdict::from_bool(if want {
            first.is_some_and(|e| e.visible)
        } else {
            !shown.contains(&true)
        })
    } else if let Some(want) = v.count {
        Verdict::from_bool(run.count == Some(want))
    } else if v.screenshot.is_some() {
        evidence["screenshot"] = json!(run.screenshot);
        evidence["diff"] = json!(run.diff);
        let allowed = v.max_diff.as_ref().map_or(0.0, |d| *d.get_ref());
        evidence["max_diff"] = json!(allowed);
        Verdict::from_bool(run.diff.as_ref().is_some_and(|d| d.share <= allowed))
    } else {
        Verdict::unknown("the visual assertion has no test")
    };
    if v.screenshot.is_none() && run.screenshot.is_some() {
        evidence["screenshot"] = json!(run.screenshot);
    }
    result("visual", rule, verdict, evidence)
}

/// Text with its runs of white space read as one space, trimmed.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// `mcp_calls`: how many `tools/call`s of the server match. Denied calls count only with
/// `error = true`. A call whose arguments the record keeps only in part and whose kept part
/// does not match is read the way that counts against the agent, as `calls` reads a stdin; so
/// are the `unlogged` exchanges that happened past the full calls log (a match under `max` and
/// `not`, none toward `min`), and the evidence says how many (`unlogged`).
pub fn mcp_calls(
    records: &[McpRecord],
    unlogged: u64,
    c: &McpCalls,
    forbidden: bool,
) -> AssertionResult {
    let rule = rule(c);
    let re = match c.args_match.as_ref().map(|r| Regex::new(r.get_ref())) {
        Some(Err(e)) => {
            return AssertionResult {
                kind: "mcp_calls".into(),
                rule,
                verdict: Verdict::Unknown {
                    reason: format!("bad regex: {e}"),
                },
                evidence: Value::Null,
            }
        }
        Some(Ok(re)) => Some(re),
        None => None,
    };
    let mut unseen = Vec::new();
    let seqs: Vec<u64> = records
        .iter()
        .filter(|r| r.is_tool_call() && r.server == *c.server.get_ref())
        .filter(|r| {
            c.tool
                .as_deref()
                .is_none_or(|t| r.tool.as_deref() == Some(t))
        })
        .filter(|r| match c.error {
            Some(true) => r.failed() || r.denied.is_some(),
            Some(false) => !r.failed() && r.denied.is_none(),
            None => r.denied.is_none(),
        })
        .filter(|r| {
            let Some(re) = &re else { return true };
            if re.is_match(&r.arguments_text()) {
                return true;
            }
            if r.cut {
                unseen.push(r.seq);
            }
            false
        })
        .map(|r| r.seq)
        .collect();
    let n = seqs.len() as u32;
    let unlogged_n = u32::try_from(unlogged).unwrap_or(u32::MAX);
    let most = n
        .saturating_add(unseen.len() as u32)
        .saturating_add(unlogged_n);
    // Under `not` (`forbidden`), the rule holds, and so the `not` fails, if any count the agent
    // may have made (n..=most, which unlogged exchanges can make long) meets it.
    let holds = match forbidden {
        false => c.min.is_none_or(|m| n >= m) && c.max.is_none_or(|m| most <= m),
        true => c.min.map_or(n, |m| n.max(m)) <= c.max.map_or(most, |m| most.min(m)),
    };
    let mut evidence = json!({ "count": n, "seqs": seqs });
    if !unseen.is_empty() {
        evidence["arguments_unseen"] = json!(unseen);
    }
    if unlogged > 0 {
        evidence["unlogged"] = json!(unlogged);
    }
    AssertionResult {
        kind: "mcp_calls".into(),
        rule,
        verdict: if holds {
            Verdict::Holds
        } else {
            Verdict::Fails
        },
        evidence,
    }
}

/// An `mcp_calls` rule as the suite writes it.
fn rule(c: &McpCalls) -> String {
    let mut parts = vec![format!("server = {:?}", c.server.get_ref())];
    if let Some(t) = &c.tool {
        parts.push(format!("tool = {t:?}"));
    }
    if let Some(m) = c.min {
        parts.push(format!("min = {m}"));
    }
    if let Some(m) = c.max {
        parts.push(format!("max = {m}"));
    }
    if let Some(r) = &c.args_match {
        parts.push(format!("args_match = {:?}", r.get_ref()));
    }
    if let Some(e) = c.error {
        parts.push(format!("error = {e}"));
    }
    format!("mcp_calls = {{ {} }}", parts.join(", "))
}
