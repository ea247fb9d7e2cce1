//! The pages: the runs, one run, one trial, the export, and the error page.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use proctor_score::OutcomeKind;
use serde_json::Value;

use crate::data::{ComparePage, RunPage, RunRow, TrialPage, ViewError};
use crate::html::{esc, json, outcome, page, rate, table};
use crate::server::Viewer;

/// `/`: every run, newest first, filterable by suite, variant, model and agent; counts update
/// while runs go.
pub fn runs(rows: &[RunRow]) -> String {
    let suites: BTreeSet<&str> = rows.iter().map(|r| r.suite.as_str()).collect();
    let mut body = String::from("<h1>Runs</h1>\n<div class=\"filters\" role=\"search\">");
    body.push_str("<label>Suite <select data-filter=\"suite\"><option value=\"\">all</option>");
    for s in &suites {
        let _ = write!(body, "<option>{}</option>", esc(s));
    }
    body.push_str("</select></label> <label>Variant, model or agent <input type=\"search\" data-filter=\"text\" placeholder=\"e.g. claude-code\"></label> <button type=\"button\" data-sort=\"started\">Oldest first</button></div>");
    let table_rows: Vec<(String, Vec<String>)> = rows
        .iter()
        .map(|r| {
            let text = [&r.variants[..], &r.models[..], &r.agents[..]]
                .concat()
                .join(" ");
            let attrs = format!(
                " data-run=\"{}\" data-suite=\"{}\" data-text=\"{}\" data-started=\"{}\"",
                esc(&r.run),
                esc(&r.suite),
                esc(&text),
                esc(&r.started_at)
            );
            (
                attrs,
                vec![
                    format!("<a href=\"/runs/{0}\">{0}</a>", esc(&r.run)),
                    esc(&r.suite),
                    format!("<span data-field=\"status\">{}</span>", esc(&r.status)),
                    esc(&r.started_at),
                    esc(&r.variants.join(", ")),
                    format!(
                        "<span data-field=\"trials\">{}/{}</span>",
                        r.finished, r.planned
                    ),
                    format!(
                        "<span data-field=\"outcomes\">{}</span>{}",
                        esc(&outcome_counts(&r.outcomes)),
                        match r.rescores {
                            0 => String::new(),
                            n => format!(
                                " <span class=\"note\">(as the run scored them; rescored {n} time(s): <a href=\"/runs/{}\">the latest</a>)</span>",
                                esc(&r.run)
                            ),
                        }
                    ),
                ],
            )
        })
        .collect();
    if rows.is_empty() {
        body.push_str(
            "<p>No runs in this store yet: <code>proctor run SUITE</code> makes one.</p>",
        );
    } else {
        body.push_str(&table(
            "runs",
            &[
                "Run",
                "Suite",
                "Status",
                "Started (UTC)",
                "Variants",
                "Trials",
                "Outcomes",
            ],
            &table_rows,
        ));
    }
    let live = rows
        .iter()
        .any(|r| r.status == "running")
        .then_some("/api/runs");
    page("Runs", &[("runs".into(), String::new())], &body, live)
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
    let m = &p.meta;
    let mut body = format!(
        "<h1>Run {}</h1>\n<p class=\"meta\">suite <b>{}</b> · status <b data-field=\"status\">{}</b> · isolation {} · <span data-field=\"trials\">{}</span> of {} trial(s) finished · started {}</p>\n",
        esc(&p.run),
        esc(&m.suite_id),
        esc(m.status.as_str()),
        esc(m.isolation.label()),
        p.finished,
        m.planned_trials,
        esc(
            &m.started_at
                .map(proctor_records::time::format_millis)
                .unwrap_or_default()
        )
    );
    body.push_str(&scoring_note(&p.scoring, &p.run, base));
    body.push_str(&variant_rates(p.report.as_ref()));
    if base.is_empty() && m.variants.len() > 1 {
        body.push_str(&compare_form(&p.run, &m.variants));
    }
    body.push_str(&grid(p));
    body.push_str(
        &pictures.section(
            base.is_empty()
                .then(|| format!("/runs/{}", p.run))
                .as_deref(),
            &p.filter.scoring,
        ),
    );
    body.push_str(&ledgers(p.report.as_ref()));
    body.push_str(&not_graded(p, base));
    body.push_str(&crate::table::trials(p, base));
    let live = (m.status.as_str() == "running").then(|| format!("/api/runs/{}", p.run));
    page(
        &format!("Run {}", p.run),
        &[("runs".into(), root(base)), (p.run.clone(), String::new())],
        &body,
        live.as_deref(),
    )
}

/// Which scoring a page shows, with links to the others when served: `scored by rescore N of
/// DATE UTC; original: ...`.
fn scoring_note(s: &proctor_store::Scoring, run: &str, base: &str) -> String {
    let link = |q: &str, text: &str| {
        if base.is_empty() {
            format!("<a href=\"/runs/{}?scoring={q}\">{text}</a>", esc(run))
        } else {
            format!("<code>proctor show {} --scoring {q}</code>", esc(run))
        }
    };
    let others = if s.is_rescore() {
        format!("; original: {}", link("original", "the run's own scoring"))
    } else if s.rescores > 0 {
        format!(
            "; latest: {}",
            link("latest", &format!("rescore {}", s.rescores))
        )
    } else {
        String::new()
    };
    format!(
        "<p class=\"scoring\" data-field=\"scoring\">{}{others}</p>\n",
        esc(&s.to_string())
    )
}

/// A form that opens the comparison of two of the run's variants.
fn compare_form(run: &str, variants: &[String]) -> String {
    let options = |selected: usize| {
        variants
            .iter()
            .enumerate()
            .map(|(i, v)| {
                format!(
                    "<option value=\"{run}/{v}\"{}>{v}</option>",
                    if i == selected { " selected" } else { "" },
                    run = esc(run),
                    v = esc(v)
                )
            })
            .collect::<String>()
    };
    format!(
        "<form action=\"/compare\" method=\"get\" class=\"filters\"><label>Compare A <select name=\"a\">{}</select></label> <label>with B <select name=\"b\">{}</select></label> <button type=\"submit\">Compare trial by trial</button></form>",
        options(0),
        options(1)
    )
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
fn variant_rates(report: Option<&Value>) -> String {
    let Some(variants) = report
        .and_then(|r| r.get("variants"))
        .and_then(Value::as_array)
    else {
        return "<h2>Rates by variant</h2><p>The rates appear when the run has written its results (<code>results.json</code>); until then the grid below counts outcomes.</p>".into();
    };
    let rows: Vec<(String, Vec<String>)> = variants
        .iter()
        .map(|v| {
            let o = v.get("overall").unwrap_or(&Value::Null);
            let r = |k: &str| rate(o.get("rates").and_then(|x| x.get(k)));
            (
                String::new(),
                vec![
                    esc(v.get("variant").and_then(Value::as_str).unwrap_or("")),
                    o.get("n").map(Value::to_string).unwrap_or_default(),
                    r("success"),
                    r("completion"),
                    r("wrong"),
                    r("refused_honestly"),
                    r("failure"),
                    o.get("errored").map(Value::to_string).unwrap_or_default(),
                    rate(o.get("ungradeable_share")),
                ],
            )
        })
        .collect();
    format!(
        "<h2>Rates by variant</h2>{}<p class=\"note\">Each rate is k/n over the graded trials; errored and ungradeable trials are counted apart, never as failures.</p>",
        table(
            "rates",
            &["Variant", "n", "Success", "Completion", "Wrong", "Refused honestly", "Failure", "Errored", "Ungradeable"],
            &rows
        )
    )
}

/// Each variant's cost ledgers, kept apart (never summed into one score): tokens, requests,
/// the agent's CPU time and money, each with how many trials reported it.
fn ledgers(report: Option<&Value>) -> String {
    let Some(variants) = report
        .and_then(|r| r.get("variants"))
        .and_then(Value::as_array)
    else {
        return String::new();
    };
    let ledger = |l: Option<&Value>| -> String {
        let Some(l) = l else {
            return "–".into();
        };
        let reported = l.get("reported").and_then(Value::as_u64).unwrap_or(0);
        let missing = l.get("missing").and_then(Value::as_u64).unwrap_or(0);
        if reported == 0 {
            return format!("not reported (0 of {missing})");
        }
        let total = l.get("total").and_then(Value::as_f64).unwrap_or(0.0);
        let total = format!("{total:.3}");
        let total = total.trim_end_matches('0').trim_end_matches('.');
        format!("{total} ({reported} of {} reported)", reported + missing)
    };
    let rows: Vec<(String, Vec<String>)> = variants
        .iter()
        .map(|v| {
            let c = v
                .get("overall")
                .and_then(|o| o.get("costs"))
                .unwrap_or(&Value::Null);
            let tokens = c.get("tokens");
            let money = c.get("money").unwrap_or(&Value::Null);
            let money = match money.get("status").and_then(Value::as_str) {
                Some("known") => format!(
                    "${:.4} over {} priced trial(s)",
                    money.get("usd").and_then(Value::as_f64).unwrap_or(0.0),
                    money.get("trials").and_then(Value::as_u64).unwrap_or(0)
                ),
                Some("incomplete") => format!(
                    "no total: {} trial(s) without a price",
                    money
                        .get("trials_missing")
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                ),
                Some("not_applicable") => "not applicable (no priced model)".into(),
                Some(other) => esc(other),
                None => "–".into(),
            };
            (
                String::new(),
                vec![
                    esc(v.get("variant").and_then(Value::as_str).unwrap_or("")),
                    ledger(tokens.and_then(|t| t.get("input"))),
                    ledger(tokens.and_then(|t| t.get("output"))),
                    ledger(c.get("requests")),
                    ledger(c.get("agent_cpu_seconds")),
                    money,
                ],
            )
        })
        .collect();
    format!(
        "<h2>Cost ledgers</h2>{}<p class=\"note\">Each ledger is kept apart; a total counts only the trials that reported it.</p>",
        table(
            "ledgers",
            &["Variant", "Input tokens", "Output tokens", "Requests", "Agent CPU s", "Money"],
            &rows
        )
    )
}

/// The trials that were not graded (errored or ungradeable), each with its reason: they are
/// counted apart from every rate.
fn not_graded(p: &RunPage, base: &str) -> String {
    let count = p
        .cells
        .iter()
        .filter(|c| !c.outcome.is_graded())
        .map(|c| c.n)
        .sum::<u64>();
    if count == 0 {
        return "<h2>Not graded</h2><p>Every finished trial was graded.</p>".into();
    }
    let rows: Vec<(String, Vec<String>)> = p
        .not_graded
        .iter()
        .map(|t| {
            (
                String::new(),
                vec![
                    format!(
                        "<a href=\"{}\">{}</a>",
                        trial_href(base, &p.run, &t.trial_id),
                        esc(&t.trial_id)
                    ),
                    outcome(t.outcome),
                    esc(t.reason.as_deref().unwrap_or("")),
                ],
            )
        })
        .collect();
    let shown = if rows.len() as u64 == count {
        String::new()
    } else {
        format!(
            " The first {} are listed; the trial table filtered by outcome shows them all.",
            rows.len()
        )
    };
    format!(
        "<h2>Not graded</h2><p class=\"note\">{count} trial(s), counted apart from every rate.{shown}</p>{}",
        table("not-graded", &["Trial", "Outcome", "Reason"], &rows)
    )
}

/// The task × variant grid: success k/n per cell (from the report), else completed k/n from
/// the index's counts of finished trials.
fn grid(p: &RunPage) -> String {
    let tasks: BTreeSet<&str> = p.cells.iter().map(|c| c.task.as_str()).collect();
    let variants: BTreeSet<&str> = p.cells.iter().map(|c| c.variant.as_str()).collect();
    if tasks.is_empty() {
        return "<h2>Tasks × variants</h2><p>No trial has finished yet.</p>".into();
    }
    let from_report = |task: &str, variant: &str| -> Option<(u64, u64, u64)> {
        let v = p
            .report
            .as_ref()?
            .get("variants")?
            .as_array()?
            .iter()
            .find(|v| v.get("variant").and_then(Value::as_str) == Some(variant))?;
        let cell = v
            .get("tasks")?
            .as_array()?
            .iter()
            .find(|t| t.get("task").and_then(Value::as_str) == Some(task))?
            .get("cell")?;
        let s = cell.get("rates")?.get("success")?;
        let flagged = cell
            .get("flagged_successes")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Some((s.get("k")?.as_u64()?, s.get("n")?.as_u64()?, flagged))
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
    let rows: Vec<(String, Vec<String>)> = tasks
        .iter()
        .map(|task| {
            let mut cells = vec![format!("<th scope=\"row\">{}</th>", esc(task))];
            for variant in &variants {
                let (k, n, flagged) =
                    from_report(task, variant).unwrap_or_else(|| from_counts(task, variant));
                let flagged = match flagged {
                    0 => String::new(),
                    f => format!(
                        " <span class=\"flag\" title=\"{f} of the successes flagged by the integrity audit\">{f} flagged</span>"
                    ),
                };
                let class = match (k, n) {
                    (_, 0) => "void",
                    (k, n) if k == n => "good",
                    (0, _) => "bad",
                    _ => "mixed",
                };
                cells.push(if n == 0 {
                    "<span class=\"cell void\">–</span>".into()
                } else {
                    format!("<span class=\"cell {class}\">{k}/{n}</span>{flagged}")
                });
            }
            (String::new(), cells)
        })
        .collect();
    format!(
        "<h2>Tasks × variants</h2><p class=\"note\">Each cell: {what} k/n.</p>{}",
        table("grid", &head, &rows)
            .replace("<td><th", "<th")
            .replace("</th></td>", "</th>")
    )
}

/// Where a trial's page is: its own URL when served, its anchor in an export.
pub(crate) fn trial_href(base: &str, run: &str, trial: &str) -> String {
    if base.is_empty() {
        format!("/runs/{}/trials/{}", esc(run), esc(trial))
    } else {
        format!("#trial-{}", esc(trial))
    }
}

/// A person's sitting (`proctor sit`): who sat, how the answer was given, their notes.
fn sitting_section(s: &Value) -> String {
    let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
    let answered = match text("answer_from") {
        "asked" => "typed when asked, after the full stop",
        "flag" => "given with --answer",
        other => other,
    };
    let timeout = s
        .get("timeout_seconds")
        .and_then(Value::as_u64)
        .map_or("no timeout".to_string(), |t| format!("timeout {t}s"));
    let notes = match s.get("notes").and_then(Value::as_str) {
        Some(n) => format!("<pre class=\"notes\">{}</pre>", esc(n)),
        None => "<p>No notes.</p>".to_string(),
    };
    format!(
        "<p class=\"meta\">sat by <b>{}</b> · answer {} · {}</p>{notes}",
        esc(text("person")),
        esc(answered),
        esc(&timeout)
    )
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
        &trial_body(t, 1),
        None,
    )
}

/// A trial's scoring: which one, and in a rescore the run's own outcome and reason.
fn trial_scoring(t: &TrialPage) -> String {
    let mut html = format!(
        "<p class=\"scoring\" data-field=\"scoring\">{}",
        esc(&t.scoring.to_string())
    );
    if let Some(o) = &t.original {
        let _ = write!(
            html,
            "; original: {} — {}",
            outcome(o.outcome),
            esc(o.reason.as_deref().unwrap_or(""))
        );
    }
    html.push_str("</p>\n");
    html
}

/// A trial's sections; `level` is the heading level of its title.
fn trial_body(t: &TrialPage, level: u8) -> String {
    let r = &t.record;
    let s = &t.summary;
    let (h, h2) = (level, level + 1);
    let mut body = format!(
        "<h{h}>Trial {id}</h{h}>\n<p class=\"meta\">task <b>{task}</b> · variant <b>{variant}</b> · index {index} · {outcome} · {wall:.2}s wall</p>\n<p class=\"reason\">{reason}</p>\n",
        id = esc(&s.trial_id),
        task = esc(&s.task),
        variant = esc(&s.variant),
        index = s.trial_index,
        outcome = outcome(s.outcome),
        wall = s.wall_seconds,
        reason = esc(s.reason.as_deref().unwrap_or("")),
    );
    body.push_str(&trial_scoring(t));
    body.push_str(&limit_and_capture_notes(r));
    let end = r.get("end_state").unwrap_or(&Value::Null);
    let mut sections = vec![
        (
            "answer",
            "Answer",
            format!(
                "<pre class=\"answer\">{}</pre>",
                esc(end.get("answer").and_then(Value::as_str).unwrap_or(""))
            ),
        ),
        ("assertions", "Assertions", assertions(r)),
        ("calls", "Interface calls", calls(end)),
        (
            "metrics",
            "Interface metrics",
            crate::evidence_html::metrics(r),
        ),
        ("diff", "Workspace diff", diff_section(t, end)),
        ("checks", "Checks", checks(end)),
        (
            "visuals",
            "Visual checks",
            crate::evidence_html::visuals(r, &t.screenshots),
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
                r,
                h2 + 1,
                (level == 1).then(|| format!("/runs/{}/trials/{}/services", t.run, s.trial_id)),
            ),
        ),
    ];
    if let Some(html) = root_changes(end) {
        sections.insert(5, ("root", "Changes outside the workspace", html));
    }
    if let Some(sitting) = r.get("sitting").filter(|v| v.is_object()) {
        sections.insert(1, ("sitting", "Sitting", sitting_section(sitting)));
    }
    for (id, title, html) in sections {
        // Each section can be linked to on a trial's own page (an export holds many trials).
        let id = if level == 1 {
            format!(" id=\"{id}\"")
        } else {
            String::new()
        };
        let _ = write!(body, "<h{h2}{id}>{title}</h{h2}>{html}");
    }
    for (title, key) in [
        ("Ledgers", r.get("ledgers")),
        ("Launch", r.get("launch")),
        ("Isolation", r.get("isolation")),
    ] {
        if let Some(v) = key.filter(|v| !v.is_null()) {
            let _ = write!(
                body,
                "<details><summary><h{h2}>{title}</h{h2}></summary>{}</details>",
                json(v)
            );
        }
    }
    body
}

/// The limit the trial reached, and what the agent made that the capture could not keep.
fn limit_and_capture_notes(r: &Value) -> String {
    let mut html = String::new();
    if let Some(limit) = r.get("limit_reached").and_then(Value::as_str) {
        let _ = write!(
            html,
            "<p class=\"limit\">Limit reached: <b>{}</b></p>",
            esc(limit)
        );
    }
    if let Some(notes) = r.get("capture_notes").and_then(Value::as_array) {
        let items: String = notes
            .iter()
            .map(|n| {
                let field = |k: &str| esc(n.get(k).and_then(Value::as_str).unwrap_or(""));
                format!(
                    "<li><code>{}</code>: {}</li>",
                    field("path"),
                    field("cause")
                )
            })
            .collect();
        let _ = write!(
            html,
            "<div class=\"capture-notes\"><p>What the agent made that could not be kept (graded as added, with no content):</p><ul>{items}</ul></div>"
        );
    }
    html
}

/// What the agent changed outside the workspace, where the task's checks saw it
/// (`check_root = "agent"`): one line a change, and how many more the record leaves out. None
/// when the record has none.
fn root_changes(end: &Value) -> Option<String> {
    let list = end
        .get("root_changes")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())?;
    let field = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let items: String = list
        .iter()
        .map(|c| {
            format!(
                "<li><code>{}</code> /{}</li>",
                esc(&field(c, "kind")),
                esc(&field(c, "path"))
            )
        })
        .collect();
    let omitted = end
        .get("root_changes_omitted")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let more = if omitted > 0 {
        format!("<p class=\"omitted\">… and {omitted} more, graded but not listed here: the trial's <code>root/changes.json</code> lists them all.</p>")
    } else {
        String::new()
    };
    Some(format!(
        "<p>The task's checks ran over the image with these changes (kept in the trial's <code>root/</code>).</p><ul class=\"root-changes\">{items}</ul>{more}"
    ))
}

/// The workspace diff, and how many changes the record leaves out (graded, but listed only in
/// the trial's `changes/changes.json`).
fn diff_section(t: &TrialPage, end: &Value) -> String {
    let mut html = crate::diff_html::section(&t.diff);
    // Binary files the suite's `[diff]` converters printed as text, each with its text diff.
    for d in t
        .record
        .get("text_diffs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|d| d.get("diff").is_some() || d.get("error").is_some())
    {
        let converter: Vec<&str> = d
            .get("converter")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        html.push_str(&crate::diff_html::text_section(
            d.get("path").and_then(Value::as_str).unwrap_or_default(),
            &converter.join(" "),
            d.get("diff").and_then(Value::as_str),
            d.get("error").and_then(Value::as_str),
        ));
    }
    let omitted = end
        .get("changes_omitted")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if omitted > 0 {
        let _ = write!(
            html,
            "<p class=\"omitted\">… and {omitted} more changes, graded but not listed here: the trial's <code>changes/changes.json</code> lists them all.</p>"
        );
    }
    html
}

/// The success rule's assertions with their verdicts and evidence (and the rubric, if any).
fn assertions(r: &Value) -> String {
    let verdict = r.get("verdict").unwrap_or(&Value::Null);
    let Some(list) = verdict
        .get("success")
        .and_then(|s| s.get("assertions"))
        .and_then(Value::as_array)
    else {
        return "<p>No assertion was evaluated (the trial was not graded).</p>".into();
    };
    let rows: Vec<(String, Vec<String>)> = list
        .iter()
        .map(|a| {
            let v = a.get("verdict").and_then(Value::as_str).unwrap_or("");
            (
                String::new(),
                vec![
                    format!(
                        "<code>{}</code>",
                        esc(a.get("rule").and_then(Value::as_str).unwrap_or(""))
                    ),
                    format!(
                        "<span class=\"badge {}\">{}</span>",
                        if v == "holds" { "good" } else { "bad" },
                        esc(v)
                    ),
                    json(a.get("evidence").unwrap_or(&Value::Null)),
                ],
            )
        })
        .collect();
    let mode = verdict
        .get("success")
        .and_then(|s| s.get("mode"))
        .and_then(Value::as_str)
        .unwrap_or("all");
    let mut s = format!("<p>Success needs <b>{}</b> of:</p>", esc(mode));
    s.push_str(&table(
        "assertions",
        &["Rule", "Verdict", "Evidence"],
        &rows,
    ));
    if let Some(rubric) = verdict.get("rubric").filter(|v| !v.is_null()) {
        s.push_str("<h3>Rubric</h3>");
        s.push_str(&json(rubric));
    }
    s
}

/// The calls log: each call's command line, exit, and the head of its output.
fn calls(end: &Value) -> String {
    let Some(list) = end
        .get("calls")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    else {
        return "<p>No interface call.</p>".into();
    };
    let rows: Vec<(String, Vec<String>)> = list
        .iter()
        .map(|c| {
            let argv: Vec<String> = c
                .get("argv")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let denied = c.get("denied").and_then(Value::as_str);
            // A denied call never ran: its words are the command text the agent CLI reported.
            let command = if denied.is_some() {
                argv.join(" ")
            } else {
                proctor_suite::shell::join(&argv)
            };
            let exit = match (denied, c.get("exit")) {
                (Some(d), _) => format!("denied: {}", esc(d)),
                (None, Some(e)) if !e.is_null() => e.to_string(),
                _ => "unfinished".into(),
            };
            (
                String::new(),
                vec![
                    c.get("seq").map(Value::to_string).unwrap_or_default(),
                    format!("<code>{}</code>", esc(&command)),
                    exit,
                    call_stdin(c),
                    format!(
                        "<pre>{}</pre>",
                        esc(c.get("stdout_head").and_then(Value::as_str).unwrap_or(""))
                    ),
                ],
            )
        })
        .collect();
    table(
        "calls",
        &["#", "Command", "Exit", "Stdin (head)", "Output (head)"],
        &rows,
    )
}

/// What a call read from stdin: its size and the head its record keeps.
fn call_stdin(c: &Value) -> String {
    if c.get("stdin_terminal").and_then(Value::as_bool) == Some(true) {
        return "a terminal (not kept)".into();
    }
    let bytes = c.get("stdin_bytes").and_then(Value::as_u64).unwrap_or(0);
    if bytes == 0 {
        return "–".into();
    }
    let head = c.get("stdin_head").and_then(Value::as_str).unwrap_or("");
    let kept = proctor_score::endstate::HEAD_BYTES as u64;
    let size = if bytes > kept {
        format!("{bytes} bytes, the first {kept} kept")
    } else {
        format!("{bytes} bytes")
    };
    format!("{size}<pre>{}</pre>", esc(head))
}

/// Each check's command, exit and output tails.
fn checks(end: &Value) -> String {
    let Some(map) = end
        .get("checks")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    else {
        return "<p>No check ran.</p>".into();
    };
    let rows: Vec<(String, Vec<String>)> = map
        .iter()
        .map(|(cmd, c)| {
            (
                String::new(),
                vec![
                    format!("<code>{}</code>", esc(cmd)),
                    c.get("exit").map(Value::to_string).unwrap_or_default(),
                    format!(
                        "<pre>{}{}</pre>",
                        esc(c.get("stdout_tail").and_then(Value::as_str).unwrap_or("")),
                        esc(c.get("stderr_tail").and_then(Value::as_str).unwrap_or(""))
                    ),
                ],
            )
        })
        .collect();
    table("checks", &["Check", "Exit", "Output (tail)"], &rows)
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
    let mut nav = Vec::new();
    if pg.offset > 0 {
        nav.push(format!(
            "<a rel=\"prev\" href=\"{}?offset={}\">previous page</a>",
            esc(&here),
            pg.offset.saturating_sub(bytes)
        ));
    }
    if let Some(next) = pg.next_offset {
        nav.push(format!(
            "<a rel=\"next\" href=\"{}?offset={next}\">next page</a>",
            esc(&here)
        ));
    }
    let body = format!(
        "<h1>Service file <code>{path}</code></h1>\n<p class=\"meta\">bytes {from}–{to} of {total} (<a href=\"/api{here}?offset={offset}\">as JSON</a>)</p>\n<nav class=\"pages\">{nav}</nav>\n<pre class=\"service-file\">{text}</pre>\n<nav class=\"pages\">{nav}</nav>",
        path = esc(&p.path),
        from = pg.offset,
        to = pg.offset + pg.bytes,
        total = pg.total_bytes,
        here = esc(&here),
        offset = pg.offset,
        nav = nav.join(" · "),
        text = esc(&pg.text),
    );
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
        &body,
        None,
    )
}

/// A relative path percent-encoded segment by segment for a URL's path.
pub(crate) fn url_path(path: &str) -> String {
    path.split('/')
        .map(crate::data::url_encode)
        .collect::<Vec<_>>()
        .join("/")
}

/// The matched-pair grid of a comparison page, read from its typed comparison (a comparison
/// that does not parse draws an empty grid that says so).
pub fn pairs_svg(c: &ComparePage) -> String {
    match serde_json::from_value::<proctor_report::Comparison>(c.comparison.clone()) {
        Ok(cmp) => crate::pictures::pairs::svg(
            "pairs-picture",
            &cmp.pairs,
            &cmp.unmatched,
            &cmp.overall.discordance,
            &|run, trial| format!("/runs/{run}/trials/{trial}"),
        ),
        Err(e) => format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"560\" height=\"20\" role=\"img\"><text x=\"0\" y=\"14\">The comparison cannot be drawn: {}</text></svg>",
            esc(&e.to_string())
        ),
    }
}

/// An error page: `title` ("Not found", "Cannot show this page") and the message.
pub fn error(title: &str, message: &str) -> String {
    page(
        title,
        &[("runs".into(), "/".into())],
        &format!("<h1>{}</h1><p>{}</p>", esc(title), esc(message)),
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
    let mut html = run(&run_page, "export", &pictures);
    let mut trials = String::from("<h2>Every trial</h2>");
    let mut damaged = Vec::new();
    let id: proctor_store::RunId = run_page
        .run
        .parse()
        .map_err(|e: proctor_store::ParseRunIdError| ViewError::Failed(e.to_string()))?;
    // A rescore's records are read once for the whole page.
    let mut rescored: BTreeMap<String, (proctor_store::TrialSummary, Value)> =
        if run_page.scoring.is_rescore() {
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
            // One torn trial.json costs that trial's section, never the page.
            Err(ViewError::Store(proctor_store::StoreError::TrialDamaged { reason, .. })) => {
                let _ = write!(
                    trials,
                    "<section id=\"trial-{id}\" class=\"trial\"><h3>{id}</h3><p class=\"note\">damaged: {why}; this trial's evidence is not in this page</p></section>",
                    id = esc(&t.trial_id),
                    why = esc(&reason),
                );
                damaged.push(proctor_store::DamagedTrial {
                    trial_id: t.trial_id.clone(),
                    reason,
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        let _ = write!(
            trials,
            "<section id=\"trial-{}\" class=\"trial\">{}</section>",
            esc(&t.trial_id),
            trial_body(&page, 3)
        );
    }
    if let Some(at) = html.find("\n</main>") {
        html.insert_str(at, &trials);
    }
    Ok(crate::Export { html, damaged })
}

/// The scorings a comparison read, one line each (`run R: scored by rescore 2 of DATE UTC`).
fn compare_scorings(scorings: &Value) -> String {
    let lines: Vec<String> = scorings
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let scoring: proctor_store::Scoring = serde_json::from_value({
                let mut s = s.clone();
                s.as_object_mut()?.remove("run");
                s
            })
            .ok()?;
            let run = s.get("run")?.as_str()?;
            Some(format!(
                "run <code>{}</code>: {}",
                esc(run),
                esc(&scoring.to_string())
            ))
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"scoring\" data-field=\"scoring\">{}</p>\n",
        lines.join("; ")
    )
}

/// `/compare?a=RUN/VARIANT&b=RUN/VARIANT`: verdicts per task, matched differences, pass@k.
pub fn compare(c: &ComparePage) -> String {
    let cmp = &c.comparison;
    let num = |v: Option<&Value>| v.map(Value::to_string).unwrap_or_else(|| "–".into());
    let mut body = compare_scorings(&c.scorings);
    body += &format!(
        "<h1>A <code>{}</code> vs B <code>{}</code></h1>\n<p class=\"meta\">suite <b>{}</b> · {} matched pair(s) · {} unmatched trial(s) · a verdict needs graded n ≥ {} in both arms, else it is <b>underpowered</b></p>\n<p class=\"note\">Differences are B − A over matched pairs graded in both arms. No p-values, no confidence intervals.</p>",
        esc(&c.a),
        esc(&c.b),
        esc(cmp.get("suite_id").and_then(Value::as_str).unwrap_or("")),
        num(cmp.get("matched")),
        cmp.get("unmatched").and_then(Value::as_array).map_or(0, Vec::len),
        num(cmp.get("underpowered_below")),
    );
    // The tasks only one arm ran: in no number of the page, and why.
    if let Some(left) = cmp
        .get("left_out")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    {
        body.push_str("<ul class=\"note\" id=\"left-out\">");
        for l in left {
            let text = |k: &str| l.get(k).and_then(Value::as_str).unwrap_or("");
            let _ = write!(
                body,
                "<li>task <code>{}</code> is left out: only arm {} ran it ({} trial(s)); {}</li>",
                esc(text("task")),
                esc(text("ran_in")),
                num(l.get("trials")),
                esc(text("why"))
            );
        }
        body.push_str("</ul>");
    }
    let mut scopes: Vec<(String, &Value)> = cmp
        .get("tasks")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    (
                        t.get("task")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        t.get("comparison").unwrap_or(&Value::Null),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(all) = cmp.get("overall") {
        scopes.push(("(all tasks)".into(), all));
    }
    let _ = write!(
        body,
        "<h2 id=\"pairs\">Trial by trial</h2><figure class=\"picture\">{}<figcaption>One cell per matched pair: A's trial left, B's right; the discordant pairs outlined. Each mark links to its trial. <a class=\"svg-link\" href=\"/compare/pairs.svg?a={}&amp;b={}\">pairs.svg</a></figcaption></figure>",
        pairs_svg(c),
        esc(&crate::data::url_encode(&c.a)),
        esc(&crate::data::url_encode(&c.b))
    );
    body.push_str("<h2>Verdicts</h2>");
    body.push_str(&verdicts(&scopes));
    body.push_str(&crate::gates_html::section(
        &c.gates,
        c.gates_note.as_deref(),
    ));
    body.push_str("<h2>Matched differences (B − A)</h2>");
    body.push_str(&differences(&scopes));
    if let Some(all) = cmp.get("overall") {
        for (arm, label) in [("a", "A"), ("b", "B")] {
            let a = all.get(arm).unwrap_or(&Value::Null);
            let _ = write!(
                body,
                "<details><summary><h2>pass@k and pass^k, arm {label}</h2></summary>{}{}</details>",
                json(a.get("pass_at_k").unwrap_or(&Value::Null)),
                json(a.get("pass_pow_k").unwrap_or(&Value::Null))
            );
        }
    }
    if let Some(w) = cmp
        .get("warnings")
        .and_then(Value::as_array)
        .filter(|w| !w.is_empty())
    {
        body.push_str("<h2>Warnings</h2><ul>");
        for x in w {
            let _ = write!(body, "<li>{}</li>", esc(&x.to_string()));
        }
        body.push_str("</ul>");
    }
    page(
        "Compare",
        &[
            ("runs".into(), "/".into()),
            ("compare".into(), String::new()),
        ],
        &body,
        None,
    )
}

/// The verdict of each scope (a task, or all tasks), with each arm's success and failure.
fn verdicts(scopes: &[(String, &Value)]) -> String {
    let cell_rate = |arm: &Value, k: &str| {
        let cell = arm.get("cell");
        let text = rate(cell.and_then(|c| c.get("rates")).and_then(|r| r.get(k)));
        match cell
            .and_then(|c| c.get("flagged_successes"))
            .and_then(Value::as_u64)
        {
            Some(f) if f > 0 && k == "success" => format!("{text}, {f} flagged"),
            _ => text,
        }
    };
    let rows: Vec<(String, Vec<String>)> = scopes
        .iter()
        .map(|(task, s)| {
            let (a, b) = (
                s.get("a").unwrap_or(&Value::Null),
                s.get("b").unwrap_or(&Value::Null),
            );
            let verdict = s.get("verdict").and_then(Value::as_str).unwrap_or("");
            let class = match verdict {
                "underpowered" => "void",
                "b_better" | "better" => "good",
                "b_worse" | "worse" => "bad",
                _ => "other",
            };
            (
                String::new(),
                vec![
                    esc(task),
                    format!("<span class=\"badge {class}\">{}</span>", esc(verdict)),
                    cell_rate(a, "success"),
                    cell_rate(b, "success"),
                    cell_rate(a, "failure"),
                    cell_rate(b, "failure"),
                    esc(s.get("reason").and_then(Value::as_str).unwrap_or("")),
                ],
            )
        })
        .collect();
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
        &rows,
    )
}

/// Every matched difference of every scope, with its pairs and assessment.
fn differences(scopes: &[(String, &Value)]) -> String {
    let num = |v: Option<&Value>| v.map(Value::to_string).unwrap_or_else(|| "–".into());
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for (task, s) in scopes {
        let Some(map) = s.get("differences").and_then(Value::as_object) else {
            continue;
        };
        for (quantity, d) in map {
            let assessment = d.get("assessment").and_then(Value::as_str).unwrap_or("");
            let is_rate = matches!(quantity.as_str(), "success" | "failure");
            let f = |k: &str| quantity_value(d.get(k), is_rate, false);
            let relative = if d.get("relative_unbounded").and_then(Value::as_bool) == Some(true) {
                "unbounded (from 0)".to_string()
            } else {
                quantity_value(d.get("relative"), true, true).replace(" points", "%")
            };
            rows.push((
                format!(" data-assessment=\"{}\"", esc(assessment)),
                vec![
                    esc(task),
                    esc(quantity),
                    f("a"),
                    f("b"),
                    quantity_value(d.get("difference"), is_rate, true),
                    relative,
                    num(d.get("n")),
                    esc(assessment),
                ],
            ));
        }
    }
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
            "Assessment",
        ],
        &rows,
    )
}

/// A compared quantity: `–` when not measured; a rate as a percentage (a difference of rates in
/// points); other numbers with at most three decimals; `signed` puts `+` on positive values.
fn quantity_value(v: Option<&Value>, rate: bool, signed: bool) -> String {
    let Some(x) = v.and_then(Value::as_f64) else {
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
        let v = |x: f64| Some(serde_json::json!(x));
        assert_eq!(quantity_value(v(1.0).as_ref(), true, false), "100%");
        assert_eq!(quantity_value(v(-1.0).as_ref(), true, true), "-100 points");
        assert_eq!(quantity_value(v(0.5).as_ref(), true, true), "+50 points");
        assert_eq!(quantity_value(v(0.080262).as_ref(), false, false), "0.08");
        assert_eq!(quantity_value(v(2.0).as_ref(), false, true), "+2");
        assert_eq!(quantity_value(Some(&Value::Null), false, false), "–");
    }
}
