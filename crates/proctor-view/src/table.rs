//! The run page's trial table: one page of the run's trials, filtered by the server (outcome,
//! task, variant, "differs between variants") with links to the other pages; in an export,
//! every trial, filtered by the page's script.

use std::collections::{BTreeMap, BTreeSet};

use maud::{html, Markup};
use proctor_store::TrialSummary;

use crate::data::RunPage;
use crate::html::outcome;
use crate::links::trial_href;

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
pub fn trials(p: &RunPage, base: &str) -> Markup {
    if base.is_empty() {
        served(p)
    } else {
        exported(p, base)
    }
}

/// The table itself, `rows` its `tr`s: labelled by its heading, moved through with keys.
fn table(rows: Markup) -> Markup {
    html! {
        table id="trials" aria-labelledby="trials-heading" data-keys {
            thead { tr { @for h in HEAD { th scope="col" { (h) } } } }
            tbody { (rows) }
        }
    }
}

/// One row's cells.
fn cells(p: &RunPage, base: &str, t: &TrialSummary) -> Markup {
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "–".into());
    html! {
        td { a href=(trial_href(base, &p.run, &t.trial_id)) { (t.trial_id) } }
        td { (t.task) }
        td { (t.variant) }
        td { (outcome(t.outcome)) }
        td { (t.reason.as_deref().unwrap_or("")) }
        td { (format!("{:.2}s", t.wall_seconds)) }
        td { (opt(t.calls)) }
        td { (opt(t.wrong_turns)) }
        td { (opt(t.input_tokens)) " / " (opt(t.output_tokens)) }
        td { (t.cost_usd.map(|c| format!("${c:.4}")).unwrap_or_else(|| "–".into())) }
        td {
            @match t.limit_reached {
                Some(l) => b { (l.as_str()) },
                None => "–",
            }
        }
    }
}

/// The distinct values of one column among the run's cells.
fn values(p: &RunPage, f: fn(&proctor_store::CellCount) -> &str) -> BTreeSet<String> {
    p.cells.iter().map(|c| f(c).to_string()).collect()
}

/// A page of trials, the form that filters them (read by the server) and the pager.
fn served(p: &RunPage) -> Markup {
    let q = &p.filter;
    let select = |name: &str, values: &BTreeSet<String>, chosen: &str| {
        html! {
            label {
                (name) " "
                select name=(name) {
                    option value="" { "all" }
                    @for v in values { option selected[v == chosen] { (v) } }
                }
            }
            " "
        }
    };
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
    html! {
        h2 id="trials-heading" { "Trials" }
        form class="filters" method="get" role="search" aria-label="Filter the trials" data-autosubmit {
            (select("outcome", &values(p, |c| c.outcome.label()), &q.outcome))
            (select("task", &values(p, |c| &c.task), &q.task))
            (select("variant", &values(p, |c| &c.variant), &q.variant))
            label { input type="checkbox" name="differs" value="1" checked[q.differs_only()]; " differs between variants" }
            " "
            button type="submit" { "Show" }
            " "
            output data-count aria-live="polite" { (shown) }
        }
        @if p.trials.is_empty() {
            p { "No finished trial passes this filter." }
        } @else {
            (table(html! { @for t in &p.trials { tr tabindex="-1" { (cells(p, "", t)) } } }))
            p class="note" {
                "Keys: " kbd { "j" } "/" kbd { "k" } " or " kbd { "↓" } "/" kbd { "↑" }
                " move through the rows, " kbd { "Enter" } " opens the trial."
            }
        }
        (pager(p))
    }
}

/// Links to the first, previous and next pages of the filtered trials.
fn pager(p: &RunPage) -> Markup {
    let size = p.limit;
    let next = p.offset + p.trials.len() as u64;
    let (back, forward) = (p.offset > 0, next < p.total);
    html! {
        @if back || forward {
            nav class="pager" aria-label="Pages of trials" {
                @if back {
                    a href={ "?" (p.filter.at(0)) } { "first" }
                    " · "
                    a rel="prev" href={ "?" (p.filter.at(p.offset.saturating_sub(size))) } { "previous " (size) }
                }
                @if back && forward { " · " }
                @if forward {
                    a rel="next" href={ "?" (p.filter.at(next)) } { "next " (size.min(p.total - next)) }
                }
            }
        }
    }
}

/// Every trial of the run (an export), with filters that the page's script applies.
fn exported(p: &RunPage, base: &str) -> Markup {
    let set = |f: fn(&TrialSummary) -> &str| -> BTreeSet<String> {
        p.trials.iter().map(|t| f(t).to_string()).collect()
    };
    let select = |name: &str, values: &BTreeSet<String>| {
        html! {
            label {
                (name) " "
                select data-filter=(name) {
                    option value="" { "all" }
                    @for v in values { option { (v) } }
                }
            }
            " "
        }
    };
    // A (task, index) whose outcome is not the same for every variant.
    let mut by_slot: BTreeMap<(&str, u32), BTreeSet<&str>> = BTreeMap::new();
    for t in &p.trials {
        by_slot
            .entry((t.task.as_str(), t.trial_index))
            .or_default()
            .insert(t.outcome.label());
    }
    let rows = html! {
        @for t in &p.trials {
            @let differs = by_slot
                .get(&(t.task.as_str(), t.trial_index))
                .is_some_and(|o| o.len() > 1);
            tr tabindex="-1" data-outcome=(t.outcome.label()) data-task=(t.task) data-variant=(t.variant) data-differs=(differs) {
                (cells(p, base, t))
            }
        }
    };
    html! {
        h2 id="trials-heading" { "Trials" }
        div class="filters" role="search" {
            (select("outcome", &set(|t| t.outcome.label())))
            (select("task", &set(|t| &t.task)))
            (select("variant", &set(|t| &t.variant)))
            label { input type="checkbox" data-filter="differs"; " differs between variants" }
            " "
            output data-count aria-live="polite" {}
        }
        (table(rows))
    }
}
