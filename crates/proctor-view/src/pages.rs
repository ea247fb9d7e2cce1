//! The pages: the runs, one run, one trial, the export, and the error page.

use std::collections::{BTreeMap, BTreeSet};

use maud::{html, Markup};
use proctor_report::{Cell, Change, ComparisonCell, CountLedger, Money, RunReport};
use proctor_score::endstate::{CallRecord, ChangeKind};
use proctor_score::{EndState, OutcomeKind, TrialVerdict, Verdict};
use proctor_trial_record::{AnswerFrom, SittingRecord, TrialRecord};

use crate::data::{ArmScoring, ComparePage, RunPage, RunRow, TrialPage, ViewError};
use crate::html::{json, made, outcome, page, rate, table};
use crate::links::{trial_href, url_path};
use crate::viewer::Viewer;

/// `/`: every run, newest first, filterable by suite, variant, model and agent; counts update
/// while runs go.
pub fn runs(rows: &[RunRow]) -> String {
    let suites: BTreeSet<&str> = rows.iter().map(|r| r.suite.as_str()).collect();
    let table_rows = html! {
        @for r in rows {
            @let text = [&r.variants[..], &r.models[..], &r.agents[..]].concat().join(" ");
            tr data-run=(r.run) data-suite=(r.suite) data-text=(text) data-started=(r.started_at) {
                td { a href={ "/runs/" (r.run) } { (r.run) } }
                td { (r.suite) }
                td { span data-field="status" { (r.status) } }
                td { (r.started_at) }
                td { (r.variants.join(", ")) }
                td { span data-field="trials" { (r.finished) "/" (r.planned) } }
                td {
                    span data-field="outcomes" { (outcome_counts(&r.outcomes)) }
                    @if r.rescores > 0 {
                        " "
                        span class="note" {
                            "(as the run scored them; rescored " (r.rescores) " time(s): "
                            a href={ "/runs/" (r.run) } { "the latest" } ")"
                        }
                    }
                }
            }
        }
    };
    let body = html! {
        h1 { "Runs" }
        div class="filters" role="search" {
            label {
                "Suite "
                select data-filter="suite" {
                    option value="" { "all" }
                    @for s in &suites { option { (s) } }
                }
            }
            " "
            label { "Variant, model or agent " input type="search" data-filter="text" placeholder="e.g. claude-code"; }
            " "
            button type="button" data-sort="started" { "Oldest first" }
        }
        @if rows.is_empty() {
            p { "No runs in this store yet: " code { "proctor run SUITE" } " makes one." }
        } @else {
            (table("runs", &["Run", "Suite", "Status", "Started (UTC)", "Variants", "Trials", "Outcomes"], table_rows))
        }
    };
    let live = rows
        .iter()
        .any(|r| r.status == "running")
        .then_some("/api/runs");
    page("Runs", &[("runs".into(), String::new())], body, live)
}

/// `completed 3, wrong 1`.
fn outcome_counts(counts: &proctor_records::OutcomeTally) -> String {
    counts
        .iter()
        .map(|(o, n)| format!("{o} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `/runs/RUN`: the rates with n per variant, the task × variant grid, the trial table.
pub fn run(p: &RunPage, base: &str, pictures: &crate::pictures::RunPictures) -> String {
    let live = (p.meta.status.as_str() == "running").then(|| format!("/api/runs/{}", p.run));
    page(
        &format!("Run {}", p.run),
        &[("runs".into(), root(base)), (p.run.clone(), String::new())],
        run_body(p, base, pictures),
        live.as_deref(),
    )
}

/// The run page's sections.
fn run_body(p: &RunPage, base: &str, pictures: &crate::pictures::RunPictures) -> Markup {
    let m = &p.meta;
    let started = m
        .started_at
        .map(proctor_records::time::format_millis)
        .unwrap_or_default();
    let run_url = base.is_empty().then(|| format!("/runs/{}", p.run));
    html! {
        h1 { "Run " (p.run) }
        p class="meta" {
            "suite " b { (m.suite_id) } " · status " b data-field="status" { (m.status.as_str()) }
            " · isolation " (m.isolation.label()) " · " span data-field="trials" { (p.finished) }
            " of " (m.planned_trials) " trial(s) finished · started " (started)
        }
        (scoring_note(&p.scoring, &p.run, base))
        @if let Some(g) = p.report.as_ref().and_then(|r| r.gates.as_ref()) {
            (crate::gates_html::release_section(g))
        }
        (variant_rates(p.report.as_ref()))
        @if base.is_empty() && m.variants.len() > 1 {
            (compare_form(&p.run, &m.variants))
        }
        (grid(p))
        // The run's pictures: SVG this crate draws, escaping every value (see `made`).
        (made(pictures.section(run_url.as_deref(), &p.filter.scoring)))
        (ledgers(p.report.as_ref()))
        (not_graded(p, base))
        (crate::table::trials(p, base))
    }
}

/// Which scoring a page shows, with links to the others when served: `scored by rescore N of
/// DATE UTC; original: ...`.
fn scoring_note(s: &proctor_store::Scoring, run: &str, base: &str) -> Markup {
    let link = |q: &str, text: &str| {
        html! {
            @if base.is_empty() {
                a href={ "/runs/" (run) "?scoring=" (q) } { (text) }
            } @else {
                code { "proctor show " (run) " --scoring " (q) }
            }
        }
    };
    html! {
        p class="scoring" data-field="scoring" {
            (s.to_string())
            @if s.is_rescore() {
                "; original: " (link("original", "the run's own scoring"))
            } @else if s.rescores > 0 {
                "; latest: " (link("latest", &format!("rescore {}", s.rescores)))
            }
        }
    }
}

/// A form that opens the comparison of two of the run's variants.
fn compare_form(run: &str, variants: &[String]) -> Markup {
    let options = |selected: usize| {
        html! {
            @for (i, v) in variants.iter().enumerate() {
                option value={ (run) "/" (v) } selected[i == selected] { (v) }
            }
        }
    };
    html! {
        form action="/compare" method="get" class="filters" {
            label { "Compare A " select name="a" { (options(0)) } }
            " "
            label { "with B " select name="b" { (options(1)) } }
            " "
            button type="submit" { "Compare trial by trial" }
        }
    }
}

/// The link to the runs page: `/` when served; nothing in an export.
fn root(base: &str) -> String {
    if base.is_empty() {
        "/".into()
    } else {
        String::new()
    }
}

/// Each variant's rates, with n, from the run's report (none while the run goes).
fn variant_rates(report: Option<&RunReport>) -> Markup {
    let Some(report) = report else {
        return html! {
            h2 { "Rates by variant" }
            p { "The rates appear when the run has written its results (" code { "results.json" } "); until then the grid below counts outcomes." }
        };
    };
    let rows = html! {
        @for v in &report.variants {
            @let o = &v.overall;
            tr {
                td { (v.variant) }
                td { (o.n) }
                td { (rate(&o.rates.success)) }
                td { (rate(&o.rates.completion)) }
                td { (rate(&o.rates.wrong)) }
                td { (rate(&o.rates.refused_honestly)) }
                td { (rate(&o.rates.failure)) }
                td { (o.errored) }
                td { (rate(&o.ungradeable_share)) }
            }
        }
    };
    html! {
        h2 { "Rates by variant" }
        (table("rates", &["Variant", "n", "Success", "Completion", "Wrong", "Refused honestly", "Failure", "Errored", "Ungradeable"], rows))
        p class="note" { "Each rate is k/n over the graded trials; errored and ungradeable trials are counted apart, never as failures." }
    }
}

/// A ledger: `total (r of n reported)`, or `not reported (0 of n)`.
fn ledger(total: f64, reported: u64, missing: u64) -> String {
    if reported == 0 {
        return format!("not reported (0 of {missing})");
    }
    let total = format!("{total:.3}");
    let total = total.trim_end_matches('0').trim_end_matches('.');
    format!("{total} ({reported} of {} reported)", reported + missing)
}

/// A count ledger, as [`ledger`] writes it.
fn count_ledger(l: &CountLedger) -> String {
    ledger(l.total as f64, l.reported, l.missing)
}

/// Each variant's cost ledgers, kept apart (never summed into one score): tokens, requests,
/// the agent's CPU time and money, each with how many trials reported it.
fn ledgers(report: Option<&RunReport>) -> Markup {
    let Some(report) = report else {
        return html! {};
    };
    let money = |m: &Money| match m {
        Money::Known { usd, trials } => format!("${usd:.4} over {trials} priced trial(s)"),
        Money::Incomplete { trials_missing, .. } => {
            format!("no total: {trials_missing} trial(s) without a price")
        }
        Money::NotApplicable => "not applicable (no priced model)".into(),
    };
    let rows = html! {
        @for v in &report.variants {
            @let c = &v.overall.costs;
            tr {
                td { (v.variant) }
                td { (count_ledger(&c.tokens.input)) }
                td { (count_ledger(&c.tokens.output)) }
                td { (count_ledger(&c.requests)) }
                td { (ledger(c.agent_cpu_seconds.total, c.agent_cpu_seconds.reported, c.agent_cpu_seconds.missing)) }
                td { (money(&c.money)) }
            }
        }
    };
    html! {
        h2 { "Cost ledgers" }
        (table("ledgers", &["Variant", "Input tokens", "Output tokens", "Requests", "Agent CPU s", "Money"], rows))
        p class="note" { "Each ledger is kept apart; a total counts only the trials that reported it." }
    }
}

/// The trials that were not graded (errored or ungradeable), each with its reason: they are
/// counted apart from every rate.
fn not_graded(p: &RunPage, base: &str) -> Markup {
    let count = p
        .cells
        .iter()
        .filter(|c| !c.outcome.is_graded())
        .map(|c| c.n)
        .sum::<u64>();
    if count == 0 {
        return html! { h2 { "Not graded" } p { "Every finished trial was graded." } };
    }
    let rows = html! {
        @for t in &p.not_graded {
            tr {
                td { a href=(trial_href(base, &p.run, &t.trial_id)) { (t.trial_id) } }
                td { (outcome(t.outcome)) }
                td { (t.reason.as_deref().unwrap_or("")) }
            }
        }
    };
    html! {
        h2 { "Not graded" }
        p class="note" {
            (count) " trial(s), counted apart from every rate."
            @if p.not_graded.len() as u64 != count {
                " The first " (p.not_graded.len()) " are listed; the trial table filtered by outcome shows them all."
            }
        }
        (table("not-graded", &["Trial", "Outcome", "Reason"], rows))
    }
}

/// The task × variant grid: success k/n per cell (from the report), else completed k/n from
/// the index's counts of finished trials.
fn grid(p: &RunPage) -> Markup {
    let tasks: BTreeSet<&str> = p.cells.iter().map(|c| c.task.as_str()).collect();
    let variants: BTreeSet<&str> = p.cells.iter().map(|c| c.variant.as_str()).collect();
    if tasks.is_empty() {
        return html! { h2 { "Tasks × variants" } p { "No trial has finished yet." } };
    }
    let from_report = |task: &str, variant: &str| -> Option<(u64, u64, u64)> {
        let cell = p.report.as_ref()?.cell(variant, task)?;
        let s = cell.rates.success;
        Some((s.k, s.n, cell.flagged_successes))
    };
    let from_counts = |task: &str, variant: &str| -> (u64, u64, u64) {
        let here = p
            .cells
            .iter()
            .filter(|c| c.task == task && c.variant == variant);
        here.fold((0, 0, 0), |(k, n, f), c| {
            (
                k + if c.outcome == OutcomeKind::Completed {
                    c.n
                } else {
                    0
                },
                n + c.n,
                f,
            )
        })
    };
    let what = if p.report.is_some() {
        "success"
    } else {
        "completed"
    };
    let mut head = vec!["Task"];
    head.extend(variants.iter().copied());
    let rows = html! {
        @for task in &tasks {
            tr {
                th scope="row" { (task) }
                @for variant in &variants {
                    @let (k, n, flagged) = from_report(task, variant).unwrap_or_else(|| from_counts(task, variant));
                    @let class = match (k, n) {
                        (_, 0) => "void",
                        (k, n) if k == n => "good",
                        (0, _) => "bad",
                        _ => "mixed",
                    };
                    td {
                        @if n == 0 {
                            span class="cell void" { "–" }
                        } @else {
                            span class={ "cell " (class) } { (k) "/" (n) }
                            @if flagged > 0 {
                                " "
                                span class="flag" title={ (flagged) " of the successes flagged by the integrity audit" } { (flagged) " flagged" }
                            }
                        }
                    }
                }
            }
        }
    };
    html! {
        h2 { "Tasks × variants" }
        p class="note" { "Each cell: " (what) " k/n." }
        (table("grid", &head, rows))
    }
}

/// A person's sitting (`proctor sit`): who sat, how the answer was given, their notes.
fn sitting_section(s: &SittingRecord) -> Markup {
    let answered = match s.answer_from {
        AnswerFrom::Asked => "typed when asked, after the full stop",
        AnswerFrom::Flag => "given with --answer",
    };
    let timeout = s
        .timeout_seconds
        .map_or("no timeout".to_string(), |t| format!("timeout {t}s"));
    html! {
        p class="meta" { "sat by " b { (s.person) } " · answer " (answered) " · " (timeout) }
        @match &s.notes {
            Some(n) => pre class="notes" { (n) },
            None => p { "No notes." },
        }
    }
}

/// `/runs/RUN/trials/TRIAL`: the trial's body inside a page.
pub fn trial(t: &TrialPage) -> String {
    page(
        &format!("Trial {}", t.summary.trial_id),
        &[
            ("runs".into(), "/".into()),
            (t.run.clone(), format!("/runs/{}", t.run)),
            (t.summary.trial_id.clone(), String::new()),
        ],
        trial_body(t, 1),
        None,
    )
}

/// A trial's scoring: which one, and in a rescore the run's own outcome and reason.
fn trial_scoring(t: &TrialPage) -> Markup {
    html! {
        p class="scoring" data-field="scoring" {
            (t.scoring.to_string())
            @if let Some(o) = &t.original {
                "; original: " (outcome(o.outcome)) " — " (o.reason.as_deref().unwrap_or(""))
            }
        }
    }
}

/// A heading of level `level` (1 to 6), with an optional id.
fn heading(level: u8, id: Option<&str>, content: Markup) -> Markup {
    match level {
        1 => html! { h1 id=[id] { (content) } },
        2 => html! { h2 id=[id] { (content) } },
        3 => html! { h3 id=[id] { (content) } },
        4 => html! { h4 id=[id] { (content) } },
        5 => html! { h5 id=[id] { (content) } },
        _ => html! { h6 id=[id] { (content) } },
    }
}

/// A trial's sections; `level` is the heading level of its title.
fn trial_body(t: &TrialPage, level: u8) -> Markup {
    let r = &t.record;
    let s = &t.summary;
    let h2 = level + 1;
    let (end, verdict) = (&r.end_state, r.verdict.as_ref());
    let window = r.settings.as_ref().map(|s| s.undo_window.as_secs_f64());
    // What the sandbox reported of the services is shown as the JSON it is.
    let reports = r
        .services
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok());
    let mut sections: Vec<(&str, &str, Markup)> = vec![
        (
            "answer",
            "Answer",
            html! { pre class="answer" { (end.answer) } },
        ),
        ("assertions", "Assertions", assertions(verdict)),
        ("calls", "Interface calls", calls(end)),
        (
            "metrics",
            "Interface metrics",
            crate::evidence_html::metrics(verdict),
        ),
        ("diff", "Workspace diff", diff_section(t, end)),
        ("checks", "Checks", checks(end)),
        (
            "visuals",
            "Visual checks",
            crate::evidence_html::visuals(end, &t.screenshots),
        ),
        (
            "transcripts",
            "Transcripts",
            crate::transcript_html::section(t, level == 1),
        ),
        (
            "services",
            "Services",
            crate::evidence_html::services(
                end,
                reports.as_ref(),
                window,
                verdict.is_some_and(|v| v.reversed),
                h2 + 1,
                (level == 1).then(|| format!("/runs/{}/trials/{}/services", t.run, s.trial_id)),
            ),
        ),
    ];
    if let Some(html) = root_changes(end) {
        sections.insert(5, ("root", "Changes outside the workspace", html));
    }
    if let Some(html) = crate::mcp_html::mcp_calls(&end.mcp_calls) {
        sections.insert(3, ("mcp-calls", "MCP calls", html));
    }
    if let Some(c) = &end.conversation {
        let chat = crate::evidence_html::conversation(c);
        sections.insert(1, ("conversation", "Conversation", chat));
    }
    if let Some(sitting) = &r.sitting {
        sections.insert(1, ("sitting", "Sitting", sitting_section(sitting)));
    }
    // The ledgers, the launch and the isolation, each as the JSON it is in the record.
    let mut details = vec![("Ledgers", json(&r.ledgers)), ("Launch", json(&r.launch))];
    if let Some(isolation) = &r.isolation {
        details.push(("Isolation", json(isolation)));
    }
    html! {
        (heading(level, None, html! { "Trial " (s.trial_id) }))
        p class="meta" {
            "task " b { (s.task) } " · variant " b { (s.variant) } " · index " (s.trial_index)
            " · " (outcome(s.outcome)) " · " (format!("{:.2}", s.wall_seconds)) "s wall"
        }
        p class="reason" { (s.reason.as_deref().unwrap_or("")) }
        (mutation_and_findings(r))
        (trial_scoring(t))
        (limit_and_capture_notes(r))
        @for (id, title, html) in sections {
            // Each section can be linked to on a trial's own page (an export holds many trials).
            (heading(h2, (level == 1).then_some(id), html! { (title) }))
            (html)
        }
        @for (title, v) in details {
            details { summary { (heading(h2, None, html! { (title) })) } (v) }
        }
    }
}

/// The hidden mutation the trial ran against, and the integrity audit's findings (what made it
/// `wrong`, the flags beside its outcome, what the task accepted): what `show RUN TRIAL` prints
/// under the reason, with the same labels and words.
fn mutation_and_findings(r: &TrialRecord) -> Markup {
    let findings = r
        .verdict
        .as_ref()
        .map_or(&[][..], |v| v.integrity.findings.as_slice());
    let omitted = r
        .verdict
        .as_ref()
        .map_or(0, |v| v.integrity.findings_omitted);
    html! {
        @if let Some(m) = &r.plan.mutation {
            p class="mutation" data-field="mutation" {
                @if m.as_shipped {
                    "Hidden mutation: none, the fixture " b { "as shipped" } " (one of the task's choices)"
                } @else {
                    "Hidden mutation: " code { (m.name) } " (" (m.hash.get(..12).unwrap_or_default()) "…)"
                }
            }
        }
        @if !findings.is_empty() {
            ul class="findings" data-field="integrity" {
                @for f in findings {
                    @let class = match f.label() { "flagged" | "integrity" => "bad", _ => "void" };
                    li data-label=(f.label()) {
                        span class={ "badge " (class) } { (f.label()) } " " (f.describe())
                        @if let Some(c) = &f.check { " (check " code { (c) } ")" }
                    }
                }
            }
            @if omitted > 0 {
                p class="omitted" { "… and " (omitted) " more findings, decided on but not listed here (a rescore finds them again)." }
            }
        }
    }
}

/// The limit the trial reached, and what the agent made that the capture could not keep.
fn limit_and_capture_notes(r: &TrialRecord) -> Markup {
    html! {
        @if let Some(limit) = r.limit_reached {
            p class="limit" { "Limit reached: " b { (limit.as_str()) } }
        }
        @if !r.capture_notes.is_empty() {
            div class="capture-notes" {
                p { "What the agent made that could not be kept (graded as added, with no content):" }
                ul { @for n in &r.capture_notes { li { code { (n.path) } ": " (n.cause) } } }
            }
        }
    }
}

/// A change's kind as the record writes it (`mode-changed`).
fn change_kind(k: ChangeKind) -> &'static str {
    match k {
        ChangeKind::Added => "added",
        ChangeKind::Changed => "changed",
        ChangeKind::ModeChanged => "mode-changed",
        ChangeKind::Deleted => "deleted",
    }
}

/// What the agent changed outside the workspace, where the task's checks saw it
/// (`check_root = "agent"`): one line a change, and how many more the record leaves out. None
/// when the record has none.
fn root_changes(end: &EndState) -> Option<Markup> {
    if end.root_changes.is_empty() {
        return None;
    }
    Some(html! {
        p { "The task's checks ran over the image with these changes (kept in the trial's " code { "root/" } ")." }
        ul class="root-changes" { @for c in &end.root_changes { li { code { (change_kind(c.kind)) } " /" (c.path) } } }
        @if end.root_changes_omitted > 0 {
            p class="omitted" { "… and " (end.root_changes_omitted) " more, graded but not listed here: the trial's " code { "root/changes.json" } " lists them all." }
        }
    })
}

/// The workspace diff, and how many changes the record leaves out (graded, but listed only in
/// the trial's `changes/changes.json`).
fn diff_section(t: &TrialPage, end: &EndState) -> Markup {
    html! {
        (crate::diff_html::section(&t.diff))
        // Binary files the suite's `[diff]` converters printed as text, each with its text diff.
        @for d in t.record.text_diffs.iter().filter(|d| d.diff.is_some() || d.error.is_some()) {
            (crate::diff_html::text_section(
                &d.path,
                &d.converter.join(" "),
                d.diff.as_deref(),
                d.error.as_deref(),
            ))
        }
        @if end.changes_omitted > 0 {
            p class="omitted" { "… and " (end.changes_omitted) " more changes, graded but not listed here: the trial's " code { "changes/changes.json" } " lists them all." }
        }
    }
}

/// The success rule's assertions with their verdicts and evidence (and the rubric, if any).
fn assertions(verdict: Option<&TrialVerdict>) -> Markup {
    let Some(success) = verdict.and_then(|v| v.success.as_ref()) else {
        return html! { p { "No assertion was evaluated (the trial was not graded)." } };
    };
    let rows = html! {
        @for a in &success.assertions {
            @let (v, class) = match a.verdict {
                Verdict::Holds => ("holds", "good"),
                Verdict::Fails => ("fails", "bad"),
                Verdict::Unknown { .. } => ("unknown", "bad"),
            };
            tr {
                td { code { (a.rule) } }
                td { span class={ "badge " (class) } { (v) } }
                // An assertion's evidence is free-form JSON (each rule's own), shown as JSON.
                td { (json(&a.evidence)) }
            }
        }
    };
    html! {
        p { "Success needs " b { (success.mode) } " of:" }
        (table("assertions", &["Rule", "Verdict", "Evidence"], rows))
        @if let Some(rubric) = verdict.and_then(|v| v.rubric.as_ref()) {
            h3 { "Rubric" }
            (json(rubric))
        }
    }
}

/// The calls log: each call's command line, exit, and the head of its output.
fn calls(end: &EndState) -> Markup {
    if end.calls.is_empty() {
        return html! { p { "No interface call." } };
    }
    let rows = html! {
        @for c in &end.calls {
            // A denied call never ran: its words are the command text the agent CLI reported.
            @let command = if c.denied.is_some() { c.argv.join(" ") } else { proctor_suite::shell::join(&c.argv) };
            tr {
                td { (c.seq) }
                td { code { (command) } }
                td {
                    @match (&c.denied, c.exit) {
                        (Some(d), _) => { "denied: " (d) },
                        (None, Some(e)) => (e),
                        (None, None) => "unfinished",
                    }
                }
                td { (call_stdin(c)) }
                td { pre { (c.stdout_head) } }
            }
        }
    };
    table(
        "calls",
        &["#", "Command", "Exit", "Stdin (head)", "Output (head)"],
        rows,
    )
}

/// What a call read from stdin: its size and the head its record keeps.
fn call_stdin(c: &CallRecord) -> Markup {
    if c.stdin_terminal {
        return html! { "a terminal (not kept)" };
    }
    if c.stdin_bytes == 0 {
        return html! { "–" };
    }
    let kept = proctor_score::endstate::HEAD_BYTES as u64;
    let size = if c.stdin_bytes > kept {
        format!("{} bytes, the first {kept} kept", c.stdin_bytes)
    } else {
        format!("{} bytes", c.stdin_bytes)
    };
    html! { (size) pre { (c.stdin_head) } }
}

/// Each check's command, exit and output tails.
fn checks(end: &EndState) -> Markup {
    if end.checks.is_empty() {
        return html! { p { "No check ran." } };
    }
    let rows = html! {
        @for (cmd, c) in &end.checks {
            tr {
                td { code { (cmd) } }
                // A check that never exited shows `null`, as the record writes it.
                td { (c.exit.map_or_else(|| "null".to_string(), |e| e.to_string())) }
                td { pre { (c.stdout_tail) (c.stderr_tail) } }
            }
        }
    };
    table("checks", &["Check", "Exit", "Output (tail)"], rows)
}

/// `/runs/RUN/trials/TRIAL/services/NAME/FILE`: one page of a file a service left, with links to
/// the pages before and after it.
pub fn service_file(p: &crate::data::ServiceFilePage) -> String {
    let here = format!(
        "/runs/{}/trials/{}/services/{}",
        p.run,
        p.trial,
        url_path(&p.path)
    );
    let pg = &p.page;
    let bytes = pg.bytes.max(1);
    let nav = html! {
        nav class="pages" {
            @if pg.offset > 0 {
                a rel="prev" href={ (here) "?offset=" (pg.offset.saturating_sub(bytes)) } { "previous page" }
            }
            @if pg.offset > 0 && pg.next_offset.is_some() { " · " }
            @if let Some(next) = pg.next_offset {
                a rel="next" href={ (here) "?offset=" (next) } { "next page" }
            }
        }
    };
    let body = html! {
        h1 { "Service file " code { (p.path) } }
        p class="meta" {
            "bytes " (pg.offset) "–" (pg.offset + pg.bytes) " of " (pg.total_bytes)
            " (" a href={ "/api" (here) "?offset=" (pg.offset) } { "as JSON" } ")"
        }
        (nav)
        pre class="service-file" { (pg.text) }
        (nav)
    };
    page(
        &format!("{} of {}", p.path, p.trial),
        &[
            ("runs".into(), "/".into()),
            (p.run.clone(), format!("/runs/{}", p.run)),
            (
                p.trial.clone(),
                format!("/runs/{}/trials/{}", p.run, p.trial),
            ),
            (p.path.clone(), String::new()),
        ],
        body,
        None,
    )
}

/// The matched-pair grid of a comparison page, drawn from its typed comparison.
pub fn pairs_svg(c: &ComparePage) -> String {
    let cmp = &c.comparison;
    crate::pictures::pairs::svg(
        "pairs-picture",
        &cmp.pairs,
        &cmp.unmatched,
        &cmp.overall.discordance,
        &|run, trial| format!("/runs/{run}/trials/{trial}"),
    )
}

/// An error page: `title` ("Not found", "Cannot show this page") and the message.
pub fn error(title: &str, message: &str) -> String {
    page(
        title,
        &[("runs".into(), "/".into())],
        html! { h1 { (title) } p { (message) } },
        None,
    )
}

/// The export: the run page, then every trial's sections under an anchor.
pub fn export(viewer: &Viewer, prefix: &str, choice: &str) -> Result<crate::Export, ViewError> {
    let store = viewer.store();
    let run_page = crate::data::run_all(store, viewer.sources(), prefix, choice)?;
    // run_all's page holds every trial, in the scoring chosen.
    let pictures = crate::pictures::RunPictures::of(&run_page, &run_page.trials, &|t| {
        trial_href("export", &run_page.run, t)
    });
    let id: proctor_store::RunId = run_page
        .run
        .parse()
        .map_err(|e: proctor_store::ParseRunIdError| ViewError::Failed(e.to_string()))?;
    // A rescore's records are read once for the whole page.
    let mut rescored: BTreeMap<
        String,
        (
            proctor_store::TrialSummary,
            proctor_trial_record::TrialRecord,
        ),
    > = if run_page.scoring.is_rescore() {
        viewer
            .sources()
            .rescored(store, &id, &run_page.scoring, &|_| true)
            .map_err(ViewError::Failed)?
            .into_iter()
            .filter_map(|(s, r)| Some((s.trial_id.clone(), (s, r?))))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut sections = Vec::new();
    let mut damaged = Vec::new();
    for t in &run_page.trials {
        let page = match crate::data::trial_in(
            store,
            &id,
            &t.trial_id,
            viewer.sources(),
            run_page.scoring.clone(),
            rescored.remove(&t.trial_id),
        ) {
            Ok(page) => page,
            // One torn trial.json, or a record that does not read as a trial record, costs that
            // trial's section, never the page.
            Err(e) => {
                let reason = match e {
                    ViewError::Store(proctor_store::StoreError::TrialDamaged {
                        reason, ..
                    }) => reason,
                    ViewError::Store(proctor_store::StoreError::Json { source, .. }) => {
                        format!("its record does not read as a trial record: {source}")
                    }
                    e => return Err(e),
                };
                sections.push(html! {
                    section id={ "trial-" (t.trial_id) } class="trial" {
                        h3 { (t.trial_id) }
                        p class="note" { "damaged: " (reason) "; this trial's evidence is not in this page" }
                    }
                });
                damaged.push(proctor_store::DamagedTrial {
                    trial_id: t.trial_id.clone(),
                    reason,
                });
                continue;
            }
        };
        sections.push(html! {
            section id={ "trial-" (t.trial_id) } class="trial" { (trial_body(&page, 3)) }
        });
    }
    let body = html! {
        (run_body(&run_page, "export", &pictures))
        h2 { "Every trial" }
        @for s in sections { (s) }
    };
    let html = page(
        &format!("Run {}", run_page.run),
        &[
            (String::from("runs"), String::new()),
            (run_page.run.clone(), String::new()),
        ],
        body,
        (run_page.meta.status.as_str() == "running")
            .then(|| format!("/api/runs/{}", run_page.run))
            .as_deref(),
    );
    Ok(crate::Export { html, damaged })
}

/// The scorings a comparison read, one line each (`run R: scored by rescore 2 of DATE UTC`).
fn compare_scorings(scorings: &[ArmScoring]) -> Markup {
    html! {
        @if !scorings.is_empty() {
            p class="scoring" data-field="scoring" {
                @for (i, s) in scorings.iter().enumerate() {
                    @if i > 0 { "; " }
                    "run " code { (s.run) } ": " (s.scoring().to_string())
                }
            }
        }
    }
}

/// `/compare?a=RUN/VARIANT&b=RUN/VARIANT`: verdicts per task, matched differences, pass@k.
pub fn compare(c: &ComparePage) -> String {
    let cmp = &c.comparison;
    let mut scopes: Vec<(&str, &ComparisonCell)> = cmp
        .tasks
        .iter()
        .map(|t| (t.task.as_str(), &t.comparison))
        .collect();
    scopes.push(("(all tasks)", &cmp.overall));
    let body = html! {
        (compare_scorings(&c.scorings))
        h1 { "A " code { (c.a) } " vs B " code { (c.b) } }
        p class="meta" {
            "suite " b { (cmp.suite_id) } " · " (cmp.matched) " matched pair(s) · " (cmp.unmatched.len())
            " unmatched trial(s) · a verdict needs graded n ≥ " (cmp.underpowered_below)
            " in both arms, else it is " b { "underpowered" }
        }
        p class="note" {
            "Differences are B − A over matched pairs graded in both arms. A direction (better, worse) needs the pairs that differ lopsided beyond what fair coin flips give: at least K of N on one side (the exact two-sided sign test at 5%); anything less is "
            b { "no clear difference" } ", and 5 or fewer differing pairs is " b { "underpowered" } ". No p-values, no confidence intervals."
        }
        // Where the arms come from, and, first, what makes the comparison mixed.
        @if let Some(p) = &cmp.provenance {
            p class="meta" id="provenance" { "A is " (p.a.describe()) "; B is " (p.b.describe()) }
        }
        @let mixed = proctor_report::mixed(&cmp.warnings);
        @if !mixed.is_empty() {
            ul class="flag" id="mixed-runs" {
                @for w in mixed { li data-kind=(w.kind.as_str()) { b { (w.kind.as_str()) } ": " (w.message) } }
            }
        }
        // The tasks only one arm ran: in no number of the page, and why.
        @if !cmp.left_out.is_empty() {
            ul class="note" id="left-out" {
                @for l in &cmp.left_out {
                    li {
                        "task " code { (l.task) } " is left out: only arm " (side(l.ran_in)) " ran it ("
                        (l.trials) " trial(s)); " (l.why)
                    }
                }
            }
        }
        h2 id="pairs" { "Trial by trial" }
        figure class="picture" {
            // The pairs picture: SVG this crate draws, escaping every value (see `made`).
            (made(pairs_svg(c)))
            figcaption {
                "One cell per matched pair: A's trial left, B's right; the discordant pairs outlined. Each mark links to its trial. "
                a class="svg-link" href={ "/compare/pairs.svg?a=" (crate::links::url_encode(&c.a)) "&b=" (crate::links::url_encode(&c.b)) } { "pairs.svg" }
            }
        }
        h2 { "Verdicts" }
        (verdicts(&scopes))
        (crate::gates_html::section(c.gates.as_ref(), c.gates_note.as_deref()))
        h2 { "Matched differences (B − A)" }
        (differences(&scopes))
        @for (arm, label) in [(&cmp.overall.a, "A"), (&cmp.overall.b, "B")] {
            details {
                summary { h2 { "pass@k and pass^k, arm " (label) } }
                (json(&arm.pass_at_k))
                (json(&arm.pass_pow_k))
            }
        }
        @if !cmp.warnings.is_empty() {
            h2 id="warnings" { "Warnings" }
            ul { @for w in &cmp.warnings { li data-kind=(w.kind.as_str()) { b { (w.kind.as_str()) } ": " (w.message) } } }
        }
    };
    page(
        "Compare",
        &[
            ("runs".into(), "/".into()),
            ("compare".into(), String::new()),
        ],
        body,
        None,
    )
}

/// An arm's letter, `A` or `B`.
fn side(s: proctor_report::Side) -> &'static str {
    match s {
        proctor_report::Side::A => "A",
        proctor_report::Side::B => "B",
    }
}

/// A cell's rate, with `, F flagged` on the success rate when the audit flagged F successes.
fn cell_rate(cell: &Cell, success: bool) -> String {
    match cell.flagged_successes {
        f if f > 0 && success => format!("{}, {f} flagged", rate(&cell.rates.success)),
        _ if success => rate(&cell.rates.success),
        _ => rate(&cell.rates.failure),
    }
}

/// The verdict of each scope (a task, or all tasks), with each arm's success and failure.
fn verdicts(scopes: &[(&str, &ComparisonCell)]) -> Markup {
    let rows = html! {
        @for (task, s) in scopes {
            @let verdict = s.verdict.as_str();
            @let class = match s.verdict {
                proctor_report::ComparisonVerdict::Underpowered => "void",
                proctor_report::ComparisonVerdict::Better => "good",
                proctor_report::ComparisonVerdict::Worse => "bad",
                proctor_report::ComparisonVerdict::Same => "other",
                proctor_report::ComparisonVerdict::NoClearDifference => "other",
            };
            tr {
                td { (task) }
                td { span class={ "badge " (class) } { (verdict) } }
                td { (cell_rate(&s.a.cell, true)) }
                td { (cell_rate(&s.b.cell, true)) }
                td { (cell_rate(&s.a.cell, false)) }
                td { (cell_rate(&s.b.cell, false)) }
                td { (s.reason) }
            }
        }
    };
    table(
        "verdicts",
        &[
            "Task",
            "Verdict",
            "Success A",
            "Success B",
            "Failure A",
            "Failure B",
            "Why",
        ],
        rows,
    )
}

/// Every matched difference of every scope, with its pairs and assessment.
fn differences(scopes: &[(&str, &ComparisonCell)]) -> Markup {
    let rows = html! {
        @for (task, s) in scopes {
            @let d = &s.differences;
            // In the order and words of `compare`'s text; the JSON key is the row's data.
            @for (quantity, c) in [
                ("success", &d.success),
                ("failure", &d.failure),
                ("wrong_turns", &d.wrong_turns),
                ("calls", &d.calls),
                ("asks", &d.asks),
                ("tokens", &d.tokens),
                ("wall_seconds", &d.wall_seconds),
            ] {
                (difference_row(task, quantity, c))
            }
        }
    };
    table(
        "differences",
        &[
            "Task",
            "Quantity",
            "A",
            "B",
            "B − A",
            "Relative",
            "Pairs",
            "B above vs below A",
            "Assessment",
        ],
        rows,
    )
}

/// One matched difference's row: `quantity` is its JSON key (the row's `data-quantity`), shown in
/// the words of `compare`'s text.
fn difference_row(task: &str, quantity: &str, c: &Change) -> Markup {
    let assessment = c.assessment.as_str();
    let is_rate = matches!(quantity, "success" | "failure");
    let relative = if c.relative_unbounded {
        "unbounded (from 0)".to_string()
    } else {
        quantity_value(c.relative, true, true).replace(" points", "%")
    };
    let words = match quantity {
        "success" => "success rate",
        "failure" => "failure rate",
        "wrong_turns" => "median wrong turns",
        "calls" => "median calls",
        "tokens" => "median tokens (in+out)",
        "wall_seconds" => "median wall s",
        other => other,
    };
    html! {
        tr data-assessment=(assessment_value(c.assessment)) data-quantity=(quantity) {
            td { (task) }
            td { (words) }
            td { (quantity_value(c.a, is_rate, false)) }
            td { (quantity_value(c.b, is_rate, false)) }
            td { (quantity_value(c.difference, is_rate, true)) }
            td { (relative) }
            td { (c.n) }
            td {
                (c.b_higher) " vs " (c.b_lower)
                @if let Some(k) = c.needs { " (needs " (k) ")" }
            }
            td { (assessment) }
        }
    }
}

/// An assessment as the comparison's JSON spells it (`not_measured`, `no_clear_difference`),
/// for the row's `data-assessment`; the cell shows it in words, as the CLI's text does.
fn assessment_value(a: proctor_report::Assessment) -> String {
    serde_json::to_value(a)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A compared quantity: `–` when not measured; a rate as a percentage (a difference of rates in
/// points); other numbers with at most three decimals; `signed` puts `+` on positive values.
fn quantity_value(v: Option<f64>, rate: bool, signed: bool) -> String {
    let Some(x) = v else {
        return "–".into();
    };
    let (x, unit) = if rate {
        (x * 100.0, if signed { " points" } else { "%" })
    } else {
        (x, "")
    };
    let text = format!("{x:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    let sign = if signed && x > 0.0 { "+" } else { "" };
    format!("{sign}{text}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compared_quantities_read_as_the_cli_writes_them() {
        assert_eq!(quantity_value(Some(1.0), true, false), "100%");
        assert_eq!(quantity_value(Some(-1.0), true, true), "-100 points");
        assert_eq!(quantity_value(Some(0.5), true, true), "+50 points");
        assert_eq!(quantity_value(Some(0.080262), false, false), "0.08");
        assert_eq!(quantity_value(Some(2.0), false, true), "+2");
        assert_eq!(quantity_value(None, false, false), "–");
    }
}
