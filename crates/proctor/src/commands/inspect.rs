//! `proctor list`, `proctor show RUN [TRIAL]` and `proctor reindex`: reading the store
//! ([`proctor_runner::overview`] reads it; this module prints).
//!
//! `list` and `show RUN` read only the SQLite index (and probe each `running` run's lock: a run
//! whose `run.json` says `running` but that no live process holds was killed, and is shown as
//! `interrupted`); `show RUN TRIAL` opens that trial's `trial.json` and prints the evidence
//! behind its outcome. Both report what the last reindex found damaged (a `run.json` or a
//! `trial.json` that does not parse), and why proctor stopped a run it stopped itself.

use std::path::Path;

use anyhow::Context;
use proctor_records::OutcomeKind;
use proctor_report::{changes_section, ChangesOf, Exporter, Table};
use proctor_runner::evidence;
use proctor_runner::overview::{open_store, resolve, RunList, RunOverview, TrialView};
use proctor_runner::TrialRecord;
use proctor_store::{RunHandle, RunId, Scoring, ScoringChoice, Store};

use super::reason_lists;
use crate::cli::Format;
use crate::exit::{Error, Status};

/// `proctor list`: runs, newest first.
pub fn list(store_dir: &Path, format: Format) -> Result<Status, Error> {
    let store = open_store(store_dir)?;
    let RunList {
        runs,
        rescores,
        damaged_runs,
    } = RunList::read(&store)?;
    match format {
        Format::Json => {
            let rows: Vec<_> = runs
                .iter()
                .zip(&rescores)
                .map(|(r, rescores)| {
                    serde_json::json!({
                        "run": r.id.as_str(), "suite": r.meta.suite_id, "started_at": r.meta.started_at.map(proctor_records::time::format_millis).unwrap_or_default(),
                        "status": r.meta.status.as_str(), "variants": r.meta.variants, "planned": r.meta.planned_trials,
                        "finished": r.trials_finished, "outcomes": r.outcomes, "isolation": r.meta.isolation,
                        "stop_reason": r.meta.stop_reason, "damaged": r.damaged, "rescores": rescores,
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&rows).map_err(anyhow::Error::new)?
            );
        }
        Format::Text => {
            let mut t = Table::new(&["RUN", "SUITE", "STATUS", "VARIANTS", "TRIALS", "OUTCOMES"]);
            for r in &runs {
                let outcomes = r
                    .outcomes
                    .iter()
                    .map(|(o, n)| format!("{o} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                t.row([
                    r.id.to_string(),
                    r.meta.suite_id.clone(),
                    r.meta.status.as_str().to_string(),
                    r.meta.variants.join(","),
                    format!("{}/{}", r.trials_finished, r.meta.planned_trials),
                    outcomes,
                ]);
            }
            out_block!("{}", t.text());
            if runs.is_empty() && damaged_runs.is_empty() {
                errln!("no runs in {}", store_dir.display());
            }
        }
    }
    for (r, rescores) in runs.iter().zip(&rescores) {
        if let Some(why) = &r.meta.stop_reason {
            errln!("note: run {} was stopped: {why}", r.id);
        }
        if *rescores > 0 && format == Format::Text {
            errln!(
                "note: run {} was rescored {rescores} time(s): its OUTCOMES are as the run scored them; `proctor show {}` reads the latest",
                r.id,
                r.id
            );
        }
        for d in &r.damaged {
            errln!(
                "warning: run {} trial {}: {} (not counted as finished; `run --resume` runs it again)",
                r.id, d.trial_id, d.reason
            );
        }
    }
    for d in &damaged_runs {
        errln!(
            "warning: run {} is not listed: {} (repair or remove its folder, then `proctor reindex`)",
            d.id, d.reason
        );
    }
    Ok(Status::Success)
}

/// Which of a run's trials `show RUN` lists: `--task` and `--outcome`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Only<'a> {
    /// Only this task's trials and cells.
    pub task: Option<&'a str>,
    /// Only the trials with this outcome.
    pub outcome: Option<OutcomeKind>,
}

impl Only<'_> {
    /// Whether a trial of `task` that ended in `outcome` is listed.
    fn lists(&self, task: &str, outcome: OutcomeKind) -> bool {
        self.task.is_none_or(|t| t == task) && self.outcome.is_none_or(|o| o == outcome)
    }
}

/// `proctor show RUN`: the run's trials (those `only` lets through); `proctor show RUN TRIAL`:
/// one trial's evidence.
pub fn show(
    store_dir: &Path,
    run: &str,
    trial: Option<&str>,
    only: &Only<'_>,
    format: Format,
    choice: ScoringChoice,
) -> Result<Status, Error> {
    let store = open_store(store_dir)?;
    let id = resolve(&store, run)?;
    let handle = store.open_run(&id).context("cannot open the run")?;
    let scoring = proctor_runner::export::pick_scoring(&handle, choice)?;
    match trial {
        None => show_run(&store, &handle, &scoring, only, format),
        Some(t) => show_trial(&store, &handle, t, &scoring, format),
    }
}

fn show_run(
    store: &Store,
    run: &RunHandle,
    scoring: &Scoring,
    only: &Only<'_>,
    format: Format,
) -> Result<Status, Error> {
    let id = run.id();
    let mut o = RunOverview::read(store, run, scoring)?;
    if let Some(task) = only.task {
        if !o.cells.iter().any(|c| c.task == task) {
            let mut tasks: Vec<&str> = o.cells.iter().map(|c| c.task.as_str()).collect();
            tasks.dedup();
            return Err(Error::usage(
                format!("run {id} has no trial of task `{task}`"),
                format!("its tasks: {}", tasks.join(", ")),
            ));
        }
        o.cells.retain(|c| c.task == task);
    }
    o.trials.retain(|t| only.lists(&t.task, t.outcome));
    if format == Format::Json {
        let doc = serde_json::json!({ "run": id.as_str(), "meta": o.meta, "scoring": scoring, "trials": o.trials, "damaged": o.damaged, "gates": o.gates });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?
        );
        return Ok(Status::Success);
    }
    let meta = &o.meta;
    errln!(
        "run {id} · suite {} ({}…) · {} · isolation {} · {} of {} trial(s) finished",
        meta.suite_id,
        meta.suite_hash.get(..12).unwrap_or_default(),
        meta.status.as_str(),
        meta.isolation,
        o.trials.len(),
        meta.planned_trials
    );
    if let Some(why) = &meta.stop_reason {
        errln!("stopped: {why}");
    }
    errln!("{}", crate::summary::scoring_line(id, scoring));
    for d in &o.damaged {
        errln!(
            "warning: trial {}: {} (not counted as finished; `run --resume` runs it again)",
            d.trial_id,
            d.reason
        );
    }
    print_cells(&o);
    outln!();
    if o.trials.is_empty() {
        outln!("No trial matches{}.", only_words(only));
        return Ok(Status::Success);
    }
    // A rule's long list (a glob list) is printed once, under the table, not in every reason.
    let named = reason_lists::name_lists(
        o.trials
            .iter()
            .map(|t| t.reason.as_deref().unwrap_or_default()),
    );
    let mut t = Table::new(&["TRIAL", "OUTCOME", "WALL", "CALLS", "WRONG TURNS", "REASON"]);
    for (tr, reason) in o.trials.iter().zip(named.reasons) {
        t.row([
            tr.trial_id.clone(),
            tr.outcome.to_string(),
            format!("{:.2}s", tr.wall_seconds),
            tr.calls.map_or("-".into(), |c| c.to_string()),
            tr.wrong_turns.map_or("-".into(), |c| c.to_string()),
            reason,
        ]);
    }
    out_block!("{}", t.text());
    if !named.lists.is_empty() {
        outln!();
        for (name, list) in &named.lists {
            outln!("{name} = {list}");
        }
    }
    if let Some(g) = &o.gates {
        outln!();
        out_block!("{}", proctor_report::Terminal.gates(g));
    }
    if only.task.is_some() || only.outcome.is_some() {
        errln!("{} trial(s) listed{}", o.trials.len(), only_words(only));
    }
    Ok(Status::Success)
}

/// ` of task `T` with outcome O`: what `--task` and `--outcome` asked for, in words.
fn only_words(only: &Only<'_>) -> String {
    let mut s = String::new();
    if let Some(t) = only.task {
        s.push_str(&format!(" of task `{t}`"));
    }
    if let Some(o) = only.outcome {
        s.push_str(&format!(" with outcome {o}"));
    }
    s
}

/// Variants side by side per task: n, outcome counts and the wrong turns of the graded
/// trials (median / mean / total, so a tail shows) in every cell.
fn print_cells(o: &RunOverview) {
    let mut grid = Table::new(&[
        "TASK",
        "VARIANT",
        "n",
        "SUCCESS",
        "COMPLETED",
        "WRONG TURNS (median / mean / total)",
        "FLAGGED",
        "OUTCOMES",
    ]);
    for c in &o.cells {
        let list = c
            .outcomes
            .iter()
            .map(|(o, n)| format!("{o} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        grid.row([
            c.task.clone(),
            c.variant.clone(),
            c.graded.to_string(),
            // The success rate says how many of its successes were flagged, as results.md does;
            // FLAGGED counts every flagged graded trial, as results.json's `flagged` does.
            c.success
                .map_or("-".to_string(), |r| match c.flagged_successes {
                    0 => r.to_string(),
                    f => format!("{r}, {f} flagged"),
                }),
            c.completed.to_string(),
            c.wrong_turns.to_string(),
            if o.has_report {
                c.flagged.to_string()
            } else {
                "-".to_string()
            },
            list,
        ]);
    }
    out_block!("{}", grid.text());
}

fn show_trial(
    store: &Store,
    run: &RunHandle,
    trial: &str,
    scoring: &Scoring,
    format: Format,
) -> Result<Status, Error> {
    let id = run.id();
    let (r, original, dir) = match TrialView::read(store, run, trial, scoring)? {
        TrialView::Found {
            record,
            original,
            dir,
        } => (record, original, dir),
        TrialView::Damaged { reason, path } => {
            // Unreadable evidence of a trial that counts as unfinished: exit 3, as rescore does.
            eprintln!(
                "error: trial {trial} of run {id} is damaged: {reason}\n  file: {}\n  help: its outcome cannot be read; its other evidence files are kept beside it. `proctor run SUITE --resume {id}` runs it again; `proctor show {id}` lists the trials that are sound",
                path.display()
            );
            return Ok(Status::Unfinished);
        }
    };
    let r = &*r;
    if format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(r).map_err(anyhow::Error::new)?
        );
        errln!("{}", crate::summary::scoring_line(id, scoring));
        return Ok(Status::Success);
    }
    errln!("{}", crate::summary::scoring_line(id, scoring));
    print_head(r);
    if let Some(o) = &original {
        outln!("original   {} — {}", o.outcome, o.reason);
    }
    print_verdict(r);
    print_evidence(store, id, trial, &dir, r);
    Ok(Status::Success)
}

/// A conversation, turn by turn: who said what to open it (the task, or a rule of the user),
/// how the agent answered and how the turn ended; then why the conversation ended.
fn conversation_lines(c: &proctor_score::Conversation) -> String {
    let indent = |s: &str| s.trim().replace('\n', "\n      ");
    let mut out = format!("\nconversation ({} turn(s))\n", c.turns.len());
    for t in &c.turns {
        let by = t.said_by.as_deref().unwrap_or("task prompt");
        let end = match (&t.not_run, t.timed_out, t.exit_code, t.signal) {
            (Some(why), ..) => format!("not run: {why}"),
            (None, true, ..) => "timed out".to_string(),
            (None, false, Some(code), _) => format!("exit {code}"),
            (None, false, None, Some(sig)) => format!("signal {sig}"),
            (None, false, None, None) => "-".to_string(),
        };
        out.push_str(&format!(
            "  turn {} · {end} · {:.2}s\n    user ({by}): {}\n    agent: {}\n",
            t.turn,
            t.wall_seconds,
            indent(&t.prompt),
            indent(&t.answer)
        ));
    }
    out.push_str(&format!("  ended: {}\n", c.ended));
    if let Some(m) = &c.user_model {
        out.push_str(&user_model_line(m));
    }
    out
}

/// The model-played user's own ledger: its requests, tokens and cost, and its failure.
fn user_model_line(m: &proctor_score::UserModelLedger) -> String {
    let cost = m.cost_usd.map_or(String::new(), |c| format!(", ${c:.4}"));
    let mut line = format!(
        "  user played by {} ({}): {} requests, {} in / {} out tokens{cost} ({})\n",
        m.model, m.via, m.requests, m.input_tokens, m.output_tokens, m.evidence
    );
    if let Some(why) = &m.error {
        line.push_str(&format!("  user's model failed: {why}\n"));
    }
    line
}

/// A person's sitting: who, how the answer was given, the timeout, their notes.
fn print_sitting(s: &proctor_runner::record::SittingRecord) {
    let answered = match s.answer_from {
        proctor_runner::record::AnswerFrom::Asked => "typed when asked, after the full stop",
        proctor_runner::record::AnswerFrom::Flag => "given with --answer",
    };
    let timeout = s
        .timeout_seconds
        .map_or("no timeout".to_string(), |t| format!("timeout {t}s"));
    outln!(
        "\nsitting    {} · answer {answered} · {timeout} · terminal {} byte(s){}",
        s.person,
        s.terminal_bytes,
        if s.terminal_cut > 0 {
            format!(", {} cut from agent.stdout", s.terminal_cut)
        } else {
            String::new()
        }
    );
    match &s.notes {
        Some(n) => out_block!("notes\n  {}\n", n.trim().replace('\n', "\n  ")),
        None => outln!("notes      none"),
    }
}

/// The integrity audit's findings: those that decided the outcome, the flags beside it, and
/// those the task accepted.
fn print_integrity(r: &TrialRecord) {
    let Some(v) = &r.verdict else { return };
    for f in &v.integrity.findings {
        let label = f.label();
        let check = f
            .check
            .as_deref()
            .map_or(String::new(), |c| format!(" (check `{c}`)"));
        outln!("{label:<10} {}{check}", f.describe());
    }
    if v.integrity.findings_omitted > 0 {
        outln!(
            "           … and {} more findings, decided on but not listed (a rescore finds them again)",
            v.integrity.findings_omitted
        );
    }
}

/// The trial, its outcome, the agent's launch and how it stopped, its answer, the changed
/// files and the interface calls.
fn print_head(r: &TrialRecord) {
    outln!(
        "trial      {}  (task {}, variant {}, index {})",
        r.plan.id,
        r.plan.task,
        r.plan.variant,
        r.plan.index
    );
    outln!("outcome    {}", r.outcome);
    outln!("reason     {}", r.reason);
    if let Some(limit) = r.limit_reached {
        outln!("limit      limit reached: {limit} ({})", limit.meaning());
    }
    print_integrity(r);
    match &r.plan.mutation {
        Some(m) if m.as_shipped => outln!("mutation   {} (the fixture, no patch)", m.name),
        Some(m) => outln!(
            "mutation   {} ({}…)",
            m.name,
            m.hash.get(..12).unwrap_or_default()
        ),
        None => {}
    }
    outln!(
        "agent      {} {}",
        r.launch.agent,
        r.launch.model.clone().unwrap_or_default()
    );
    outln!("command    {}", one_line(&r.launch.argv));
    if let Some(img) = &r.launch.image {
        outln!("image      {} ({})", img.reference, img.digest);
    }
    if let Some(res) = &r.launch.resources {
        let asked: Vec<String> = [
            res.cpus.map(|c| format!("{c} cpus")),
            res.memory_mb.map(|m| format!("{m} MiB memory")),
            res.storage_mb.map(|s| format!("{s} MiB storage")),
        ]
        .into_iter()
        .flatten()
        .collect();
        let how = match (&res.not_enforced, res.enforced) {
            (_, true) => "enforced".to_string(),
            (Some(why), false) => format!("not enforced: {why}"),
            (None, false) => "not enforced".to_string(),
        };
        outln!("resources  {} ({how})", asked.join(", "));
    }
    let a = &r.end_state.agent;
    outln!(
        "stopped    exit {} · signal {} · timed out {} · {:.2}s wall · {} cpu",
        a.exit_code.map_or("-".into(), |c| c.to_string()),
        a.signal.map_or("-".into(), |c| c.to_string()),
        a.timed_out,
        a.wall_seconds,
        a.cpu_seconds.map_or("-".into(), |c| format!("{c:.2}s"))
    );
    out_block!(
        "\nanswer\n  {}\n",
        r.end_state.answer.trim().replace('\n', "\n  ")
    );
    if let Some(c) = &r.end_state.conversation {
        out_block!("{}", conversation_lines(c));
    }
    if let Some(s) = &r.sitting {
        print_sitting(s);
    }
    if let Some(s) = &r.setup {
        print_setup(s);
    }
    let end = &r.end_state;
    out_block!(
        "{}",
        changes_section(ChangesOf::Workspace, &end.changes, end.changes_omitted)
    );
    out_block!(
        "{}",
        changes_section(ChangesOf::Root, &end.root_changes, end.root_changes_omitted)
    );
    for t in &r.text_diffs {
        print_text_diff(t);
    }
    print_calls(r);
    print_mcp_calls(&r.end_state.mcp_calls);
}

/// A tool call's content as its text parts, one after the other (the whole content as JSON
/// when it has none).
fn content_text(content: &serde_json::Value) -> serde_json::Value {
    let texts: Vec<&str> = content
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(serde_json::Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    match texts.is_empty() {
        true => content.clone(),
        false => serde_json::Value::String(texts.join(" ")),
    }
}

/// Characters of a request's arguments, or of an answer, shown on one line.
const MCP_SHOWN: usize = 160;

/// The MCP sessions' requests: each with its server, method (and tool, arguments), how it was
/// answered, its latency, and the head of the answer.
fn print_mcp_calls(records: &[proctor_score::mcp::McpRecord]) {
    if records.is_empty() {
        return;
    }
    outln!(
        "
MCP calls ({})",
        records.len()
    );
    let head = |v: &serde_json::Value| {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let cut: String = text.chars().take(MCP_SHOWN).collect();
        let more = if cut.len() < text.len() { "…" } else { "" };
        format!("{}{more}", proctor_report::escape_line(&cut))
    };
    for m in records {
        let how = match (&m.denied, &m.error, m.is_error, m.answered) {
            (Some(_), _, _, _) => "denied".to_string(),
            (None, Some(e), _, _) => format!("error {}", e.code),
            (None, None, true, _) => "isError".to_string(),
            (None, None, false, false) => "unanswered".to_string(),
            (None, None, false, true) => "ok".to_string(),
        };
        let latency = m
            .latency_ms
            .map_or(String::new(), |l| format!(" · {l:.1} ms"));
        let what = match (&m.tool, &m.arguments) {
            (Some(t), Some(a)) => format!("{} {} {}", m.method, t, head(a)),
            (Some(t), None) => format!("{} {t}", m.method),
            (None, _) => m.method.clone(),
        };
        outln!(
            "  #{:<3} {:<11} {} {}{latency}",
            m.seq,
            how,
            proctor_report::escape_line(&m.server),
            proctor_report::escape_line(&what)
        );
        let detail = match (&m.denied, &m.error, &m.content) {
            (Some(why), _, _) => Some(proctor_report::escape_line(why).into_owned()),
            (None, Some(e), _) => Some(proctor_report::escape_line(&e.message).into_owned()),
            (None, None, Some(c)) if m.is_tool_call() => Some(head(&content_text(c))),
            _ => None,
        };
        if let Some(d) = detail {
            outln!("{:19}{d}", "");
        }
    }
}

/// The interface calls: each with its exit (or why it was denied) and what it read from stdin.
fn print_calls(r: &TrialRecord) {
    outln!("\ninterface calls ({})", r.end_state.calls.len());
    for c in &r.end_state.calls {
        let exit = match (&c.denied, c.exit) {
            (Some(_), _) => "denied".to_string(),
            (None, Some(e)) => format!("exit {e}"),
            (None, None) => "unfinished".to_string(),
        };
        // A denied call never ran: its words are the command text the agent CLI reported, split
        // at spaces, so that text is what is shown, not a quoting of made-up arguments.
        let line = if c.denied.is_some() {
            proctor_report::escape_line(&c.argv.join(" ")).into_owned()
        } else {
            one_line(&c.argv)
        };
        outln!("  #{:<3} {:<11} {line}", c.seq, exit);
        if let Some(why) = &c.denied {
            outln!("{:19}{}", "", proctor_report::escape_line(why));
        }
        for line in stdin_lines(c) {
            outln!("{:19}{line}", "");
        }
    }
    let unconfirmed = &r.end_state.unconfirmed_denials;
    if !unconfirmed.is_empty() {
        outln!(
            "\ndenials the agent CLI reported that proctor could not confirm ({}; not rejections)",
            unconfirmed.len()
        );
        for d in unconfirmed {
            let what = d.command.as_deref().unwrap_or(&d.tool);
            outln!("  {}", proctor_report::escape_line(what));
            outln!("{:19}{}", "", proctor_report::escape_line(&d.unconfirmed));
        }
    }
}

/// A file's text diff through the suite's `[diff]` converter (or why there is none).
fn print_text_diff(t: &proctor_runner::record::TextDiffRecord) {
    let converter = t.converter.join(" ");
    if let Some(e) = &t.error {
        outln!(
            "\n  {} as text ({converter}): not converted: {}",
            proctor_report::escape_line(&t.path),
            proctor_report::escape_line(e)
        );
        return;
    }
    let Some(diff) = &t.diff else { return };
    let cut = if t.diff_bytes as usize > diff.len() {
        format!(
            ", the first {} bytes of {}; all of it in the trial's text/{}.diff",
            diff.len(),
            t.diff_bytes,
            t.path
        )
    } else {
        String::new()
    };
    outln!(
        "\n  {} as text ({converter}{cut}):",
        proctor_report::escape_line(&t.path)
    );
    for line in proctor_report::escape_text(diff).lines() {
        outln!("    {line}");
    }
}

/// The task's `setup` as it ran: each command (the failed one marked), the heads of its
/// output, and what it changed in the start state (none of it the agent's).
fn print_setup(s: &proctor_runner::record::SetupRecord) {
    let how = match (s.failed, s.timed_out, s.exit) {
        (_, true, _) => "timed out".to_string(),
        (_, _, Some(e)) => format!("exit {e}"),
        (_, _, None) => format!("signal {}", s.signal.unwrap_or_default()),
    };
    outln!(
        "\nsetup ({} command(s), {how}, {} ms)",
        s.commands.len(),
        s.milliseconds
    );
    for (i, c) in s.commands.iter().enumerate() {
        let mark = if s.failed == Some(i + 1) {
            "  <- failed"
        } else {
            ""
        };
        outln!("  {}. {}{mark}", i + 1, proctor_report::escape_line(c));
    }
    for (name, bytes, head) in [
        ("stdout", s.stdout_bytes, &s.stdout_head),
        ("stderr", s.stderr_bytes, &s.stderr_head),
    ] {
        if bytes == 0 {
            continue;
        }
        let kept = if bytes as usize > head.len() {
            format!(
                ", the first {} kept; all of it in the trial's setup/{name}",
                head.len()
            )
        } else {
            String::new()
        };
        outln!("  {name} ({bytes} bytes{kept}):");
        for line in proctor_report::escape_text(head).lines() {
            outln!("    {line}");
        }
    }
    if !s.changes.is_empty() {
        outln!(
            "  start state changed by setup ({}, not the agent's):",
            s.changes.len()
        );
        for c in &s.changes {
            outln!(
                "    {:<13} {}",
                format!("{:?}", c.kind).to_lowercase(),
                proctor_report::escape_line(&c.path)
            );
        }
    }
}

/// What a call read from stdin, for `show`: its size, then the head the record keeps, each
/// line escaped; nothing for a call that read nothing.
fn stdin_lines(c: &proctor_score::CallRecord) -> Vec<String> {
    if c.stdin_terminal {
        return vec!["stdin: a terminal (what was typed is not in the calls log)".into()];
    }
    if c.stdin_bytes == 0 {
        return Vec::new();
    }
    let kept = if c.stdin_whole() {
        String::new()
    } else {
        format!(", the first {} kept", proctor_score::endstate::HEAD_BYTES)
    };
    let mut out = vec![format!("stdin ({} bytes{kept}):", c.stdin_bytes)];
    out.extend(
        proctor_report::escape_text(&c.stdin_head)
            .lines()
            .map(|l| format!("  {l}")),
    );
    out
}

/// An argv as one line a shell would read back as the same words: each argument quoted where
/// it needs it, then every control (newline included) escaped.
fn one_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| proctor_report::escape_line(&proctor_suite::shell::quote(a)).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every success assertion with its evidence, the interface metrics and the rubric.
fn print_verdict(r: &TrialRecord) {
    let Some(v) = &r.verdict else {
        return;
    };
    if let Some(s) = &v.success {
        outln!("\nsuccess ({}): {:?}", s.mode, s.verdict);
        for a in &s.assertions {
            outln!("  {:<8} {}", verdict_word(&a.verdict), a.rule);
            if !a.evidence.is_null() {
                outln!("           evidence: {}", a.evidence);
            }
        }
    }
    if let Some(m) = &v.metrics {
        outln!(
            "\nmetrics    calls {} · errors {} · repeats {} · undone {} · denied {} · wrong turns {} · recoveries {} · help {} · asks {}",
            m.calls, m.errors, m.repeats, m.undone, m.denied, m.wrong_turns, m.recoveries, m.help_calls, m.asks
        );
    }
    if let Some(rb) = &v.rubric {
        outln!(
            "\nrubric     {}/{} (before caps {})",
            rb.total,
            rb.max,
            rb.raw_total
        );
        for c in &rb.criteria {
            outln!(
                "  {:<20} {}/{} (level {})",
                c.id,
                c.score,
                c.max,
                c.level.map_or("none".into(), |l| l.to_string())
            );
        }
        for c in &rb.caps {
            outln!("  cap {} applied: total at most {}", c.cap, c.max_total);
        }
    }
}

/// The transcript, the ledgers, the visual looks, the harness notes and the diff of every
/// changed file.
/// The internet network's way out, as proctor decided it: what it let out and what it refused.
fn egress_lines(e: &proctor_records::isolation::Egress) -> Vec<String> {
    let hosts = if e.allowed_hosts.is_empty() {
        "any public address".to_owned()
    } else {
        e.allowed_hosts.join(", ")
    };
    let refused = e.refused.len() as u64 + e.refused_more;
    let mut lines = vec![format!(
        "network    internet through {} (reaches: {hosts}): {} names answered, {} connections and datagrams let out, {refused} refused",
        e.stack, e.lookups, e.allowed
    )];
    for r in &e.refused {
        let what = match r.kind {
            proctor_records::isolation::EgressKind::Lookup => "lookup",
            proctor_records::isolation::EgressKind::Connect => "connect",
        };
        let to = [r.host.as_deref(), r.address.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        lines.push(format!("  refused {what} {to}: {}", r.reason));
    }
    if e.refused_more > 0 {
        lines.push(format!("  and {} more refused", e.refused_more));
    }
    lines
}

fn print_evidence(store: &Store, id: &RunId, trial: &str, trial_dir: &Path, r: &TrialRecord) {
    outln!();
    for line in evidence::transcript(&r.launch.agent, r.end_state.agent.started, trial_dir) {
        outln!("{line}");
    }
    outln!();
    for line in evidence::ledgers(&r.ledgers) {
        outln!("{line}");
    }
    let looks = evidence::visuals(&r.end_state.visuals, trial_dir);
    if !looks.is_empty() {
        outln!();
        for line in looks {
            outln!("{line}");
        }
    }
    let services = crate::summary::service_lines(id.as_str(), trial, &r.end_state.services);
    if !services.is_empty() {
        outln!();
        for line in services {
            outln!("{line}");
        }
    }
    let logs = crate::summary::service_log_lines(id.as_str(), trial, trial_dir);
    if !logs.is_empty() {
        outln!();
        for line in logs {
            outln!("{line}");
        }
    }
    if let Some(egress) = r.isolation.as_ref().and_then(|i| i.egress.as_ref()) {
        outln!();
        for line in egress_lines(egress) {
            outln!("{line}");
        }
    }
    if !r.capture_notes.is_empty() {
        outln!("\ncapture notes (what the agent made that could not be kept; graded as added, with no content)");
        for n in &r.capture_notes {
            outln!("  {n}");
        }
    }
    if !r.harness_notes.is_empty() {
        outln!("\nharness notes");
        for n in &r.harness_notes {
            outln!("  {n}");
        }
    }
    if r.end_state.changes.iter().any(|c| !c.dir) {
        outln!(
            "\ndiff (against the start state; whole files in {})",
            trial_dir.join("changes/files").display()
        );
        let mut start = || proctor_runner::stored_suite::start_state(store, id, r);
        for line in evidence::diffs(
            &r.end_state.changes,
            &trial_dir.join("changes").join("files"),
            &mut start,
        ) {
            outln!("{line}");
        }
    }
}

fn verdict_word(v: &proctor_score::Verdict) -> String {
    match v {
        proctor_score::Verdict::Holds => "holds".into(),
        proctor_score::Verdict::Fails => "FAILS".into(),
        proctor_score::Verdict::Unknown { reason } => format!("unknown ({reason})"),
    }
}

/// `proctor reindex`: rebuilds index.sqlite from the run folders; an index SQLite cannot read is
/// moved aside first. A run whose `run.json` or a trial whose `trial.json` does not parse is
/// skipped with a warning naming it (and kept in the index for `list` to report).
pub fn reindex(store_dir: &Path) -> Result<Status, Error> {
    if !store_dir.join("runs").is_dir() {
        return Err(Error::usage(
            format!("no store at {}", store_dir.display()),
            "run a suite first (`proctor run SUITE`), or pass --store DIR",
        ));
    }
    let (_, r) = Store::rebuild_index(store_dir)
        .with_context(|| format!("cannot rebuild the index of {}", store_dir.display()))?;
    if let Some(aside) = &r.moved_aside {
        errln!(
            "warning: the index was unreadable; moved it to {} and built a new one",
            aside.display()
        );
    }
    for d in &r.skipped_runs {
        errln!(
            "warning: skipped run {}: {} (repair or remove its folder, then reindex again)",
            d.id,
            d.reason
        );
    }
    for m in &r.mismatched_runs {
        eprintln!(
            "warning: run folder {} holds a run.json whose id is {}: indexed as run {} (the folder's name is the run's id; runs are never merged)",
            m.id, m.recorded, m.id
        );
    }
    for (run, d) in &r.damaged_trials {
        errln!(
            "warning: run {run} trial {}: {} (not counted as finished; `run --resume` runs it again)",
            d.trial_id, d.reason
        );
    }
    errln!(
        "reindexed {} run(s), {} trial(s) from the run folders",
        r.runs,
        r.trials
    );
    Ok(Status::Success)
}
