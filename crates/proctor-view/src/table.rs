//! The run page's trial table: one page of the run's trials, filtered by the server (outcome,
//! task, variant, "differs between variants") with links to the other pages; in an export,
//! every trial, filtered by the page's script.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use proctor_store::TrialSummary;

use crate::data::RunPage;
use crate::html::{esc, outcome, table};
use crate::pages::trial_href;

/// The table's columns.
const HEAD: [&str; 11] = [
    "Trial",
    "Task",
    "Variant",
    "Outcome",
    "Reason",
    "Wall",
    "Calls",
    "Wrong turns",
    "Tokens in / out",
    "Cost",
    "Limit reached",
];

/// The trial table of `p`: served (`base` empty) a page with its filter form and pager; in an
/// export, every trial with filters the script applies.
pub fn trials(p: &RunPage, base: &str) -> String {
    if base.is_empty() {
        served(p)
    } else {
        exported(p, base)
    }
}

/// One row's cells.
fn cells(p: &RunPage, base: &str, t: &TrialSummary) -> Vec<String> {
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "–".into());
    vec![
        format!(
            "<a href=\"{}\">{}</a>",
            trial_href(base, &p.run, &t.trial_id),
            esc(&t.trial_id)
        ),
        esc(&t.task),
        esc(&t.variant),
        outcome(t.outcome),
        esc(t.reason.as_deref().unwrap_or("")),
        format!("{:.2}s", t.wall_seconds),
        opt(t.calls),
        opt(t.wrong_turns),
        format!("{} / {}", opt(t.input_tokens), opt(t.output_tokens)),
        t.cost_usd
            .map(|c| format!("${c:.4}"))
            .unwrap_or_else(|| "–".into()),
        t.limit_reached
            .map(|l| format!("<b>{}</b>", esc(l.as_str())))
            .unwrap_or_else(|| "–".into()),
    ]
}

/// The distinct values of one column among the run's cells.
fn values(p: &RunPage, f: fn(&proctor_store::CellCount) -> &str) -> BTreeSet<String> {
    p.cells.iter().map(|c| f(c).to_string()).collect()
}

/// A page of trials, the form that filters them (read by the server) and the pager.
fn served(p: &RunPage) -> String {
    let q = &p.filter;
    let select = |name: &str, values: &BTreeSet<String>, chosen: &str| {
        let mut s = format!(
            "<label>{name} <select name=\"{name}\"><option value=\"\">all</option>",
            name = esc(name)
        );
        for v in values {
            let selected = if v == chosen { " selected" } else { "" };
            let _ = write!(s, "<option{selected}>{}</option>", esc(v));
        }
        s.push_str("</select></label> ");
        s
    };
    let rows: Vec<(String, Vec<String>)> = p
        .trials
        .iter()
        .map(|t| (" tabindex=\"-1\"".to_string(), cells(p, "", t)))
        .collect();
    let shown = if p.trials.is_empty() {
        format!("showing none of {}", p.total)
    } else {
        format!(
            "showing {}–{} of {}",
            p.offset + 1,
            p.offset + p.trials.len() as u64,
            p.total
        )
    };
    let mut s = format!(
        "<h2 id=\"trials-heading\">Trials</h2><form class=\"filters\" method=\"get\" role=\"search\" aria-label=\"Filter the trials\" data-autosubmit>{}{}{}<label><input type=\"checkbox\" name=\"differs\" value=\"1\"{}> differs between variants</label> <button type=\"submit\">Show</button> <output data-count aria-live=\"polite\">{shown}</output></form>",
        select("outcome", &values(p, |c| c.outcome.label()), &q.outcome),
        select("task", &values(p, |c| &c.task), &q.task),
        select("variant", &values(p, |c| &c.variant), &q.variant),
        if q.differs_only() { " checked" } else { "" },
    );
    if p.trials.is_empty() {
        s.push_str("<p>No finished trial passes this filter.</p>");
    } else {
        s.push_str(&table("trials", &HEAD, &rows).replacen(
            "<table id=\"trials\"",
            "<table id=\"trials\" aria-labelledby=\"trials-heading\" data-keys",
            1,
        ));
        s.push_str("<p class=\"note\">Keys: <kbd>j</kbd>/<kbd>k</kbd> or <kbd>↓</kbd>/<kbd>↑</kbd> move through the rows, <kbd>Enter</kbd> opens the trial.</p>");
    }
    s.push_str(&pager(p));
    s
}

/// Links to the first, previous and next pages of the filtered trials.
fn pager(p: &RunPage) -> String {
    let size = p.limit;
    let mut links = Vec::new();
    if p.offset > 0 {
        links.push(format!("<a href=\"?{}\">first</a>", esc(&p.filter.at(0))));
        links.push(format!(
            "<a rel=\"prev\" href=\"?{}\">previous {size}</a>",
            esc(&p.filter.at(p.offset.saturating_sub(size)))
        ));
    }
    let next = p.offset + p.trials.len() as u64;
    if next < p.total {
        links.push(format!(
            "<a rel=\"next\" href=\"?{}\">next {}</a>",
            esc(&p.filter.at(next)),
            size.min(p.total - next)
        ));
    }
    if links.is_empty() {
        return String::new();
    }
    format!(
        "<nav class=\"pager\" aria-label=\"Pages of trials\">{}</nav>",
        links.join(" · ")
    )
}

/// Every trial of the run (an export), with filters that the page's script applies.
fn exported(p: &RunPage, base: &str) -> String {
    let set = |f: fn(&TrialSummary) -> &str| -> BTreeSet<String> {
        p.trials.iter().map(|t| f(t).to_string()).collect()
    };
    let select = |name: &str, values: &BTreeSet<String>| {
        let mut s = format!(
            "<label>{} <select data-filter=\"{name}\"><option value=\"\">all</option>",
            esc(name)
        );
        for v in values {
            let _ = write!(s, "<option>{}</option>", esc(v));
        }
        s.push_str("</select></label> ");
        s
    };
    // A (task, index) whose outcome is not the same for every variant.
    let mut by_slot: BTreeMap<(&str, u32), BTreeSet<&str>> = BTreeMap::new();
    for t in &p.trials {
        by_slot
            .entry((t.task.as_str(), t.trial_index))
            .or_default()
            .insert(t.outcome.label());
    }
    let rows: Vec<(String, Vec<String>)> = p
        .trials
        .iter()
        .map(|t| {
            let differs = by_slot
                .get(&(t.task.as_str(), t.trial_index))
                .is_some_and(|o| o.len() > 1);
            let attrs = format!(
                " tabindex=\"-1\" data-outcome=\"{}\" data-task=\"{}\" data-variant=\"{}\" data-differs=\"{differs}\"",
                esc(t.outcome.label()),
                esc(&t.task),
                esc(&t.variant)
            );
            (attrs, cells(p, base, t))
        })
        .collect();
    format!(
        "<h2 id=\"trials-heading\">Trials</h2><div class=\"filters\" role=\"search\">{}{}{}<label><input type=\"checkbox\" data-filter=\"differs\"> differs between variants</label> <output data-count aria-live=\"polite\"></output></div>{}",
        select("outcome", &set(|t| t.outcome.label())),
        select("task", &set(|t| &t.task)),
        select("variant", &set(|t| &t.variant)),
        table("trials", &HEAD, &rows).replacen(
            "<table id=\"trials\"",
            "<table id=\"trials\" aria-labelledby=\"trials-heading\" data-keys",
            1
        )
    )
}
