//! The run's outcome grid: one mark per finished trial, tasks down, variants across, the trial
//! index within each cell; each mark drawn by its outcome, flagged and limit-reached trials marked,
//! each a link to its trial with its id, outcome and reason as its title.

use std::collections::BTreeMap;
use std::fmt::Write;

use proctor_score::OutcomeKind;
use proctor_store::TrialSummary;

use super::{cut, defs, label_width, legend, open, symbol, STEP};
use crate::html::esc;

/// Marks per row within one task × variant cell.
const PER_ROW: u32 = 10;
/// The most characters of a reason a mark's title keeps.
const REASON_CHARS: usize = 60;

/// The grid of `trials` (tasks in `tasks` order then any other, variants likewise), each mark a
/// link to `href(trial_id)`. `id` is the element's id (and the prefix of its symbols).
pub fn svg(
    id: &str,
    tasks: &[String],
    variants: &[String],
    trials: &[TrialSummary],
    href: &dyn Fn(&str) -> String,
) -> String {
    let tasks = drawn(tasks, trials, |t| &t.task);
    let variants = drawn(variants, trials, |t| &t.variant);
    let mut cells: BTreeMap<(usize, usize), Vec<&TrialSummary>> = BTreeMap::new();
    for t in trials {
        let (Some(r), Some(c)) = (
            tasks.iter().position(|x| *x == t.task),
            variants.iter().position(|x| *x == t.variant),
        ) else {
            continue;
        };
        cells.entry((r, c)).or_default().push(t);
    }
    let most = trials.iter().map(|t| t.trial_index + 1).max().unwrap_or(1);
    let per_row = most.min(PER_ROW);
    let rows_per_cell = most.div_ceil(PER_ROW);
    let label_w = label_width(&tasks, 40);
    let cell_w = (per_row * STEP + 16).max(4 + label_width(&variants, 24));
    let cell_h = rows_per_cell * STEP + 8;
    let top = 22;
    let width = (label_w + cell_w * variants.len() as u32).max(520);
    let grid_h = top + cell_h * tasks.len() as u32;
    let legend_h = 2 * 16 + 8;
    let height = grid_h + 10 + legend_h;
    let mut s = open(
        width,
        height,
        id,
        "Outcome of every trial",
        &format!(
            "{} trials: one mark per trial, tasks down ({}), variants across ({}), trial index within each cell; the shape and colour say the outcome.",
            trials.len(),
            tasks.len(),
            variants.len()
        ),
    );
    s.push_str(&defs(&symbol_prefix(id)));
    for (c, v) in variants.iter().enumerate() {
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"14\" font-weight=\"bold\">{}</text>",
            label_w + c as u32 * cell_w,
            esc(&cut(v, 24))
        );
    }
    for (r, t) in tasks.iter().enumerate() {
        let y = top + r as u32 * cell_h;
        if r % 2 == 1 {
            let _ = write!(
                s,
                "<rect x=\"0\" y=\"{}\" width=\"{width}\" height=\"{cell_h}\" fill=\"#f3f3f3\"/>",
                y
            );
        }
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\">{}</text>",
            y + 4 + 9,
            esc(&cut(t, 40))
        );
    }
    let prefix = symbol_prefix(id);
    for ((r, c), here) in &cells {
        // Each cell's marks in a group of their own: their positions are small numbers.
        let _ = write!(
            s,
            "<g transform=\"translate({},{})\">",
            label_w + *c as u32 * cell_w,
            top + *r as u32 * cell_h + 4
        );
        for t in here {
            let x = (t.trial_index % PER_ROW) * STEP;
            let y = (t.trial_index / PER_ROW) * STEP;
            mark(&mut s, &prefix, t, x, y, href);
        }
        s.push_str("</g>");
    }
    legend(&mut s, &symbol_prefix(id), grid_h + 10, width);
    s.push_str("</svg>");
    s
}

/// The rows (or columns) drawn: those `planned`, then any other a trial has, in the order met;
/// only those that have a trial.
fn drawn(
    planned: &[String],
    trials: &[TrialSummary],
    of: impl Fn(&TrialSummary) -> &String,
) -> Vec<String> {
    let mut out: Vec<String> = planned.to_vec();
    for t in trials {
        if !out.contains(of(t)) {
            out.push(of(t).clone());
        }
    }
    out.retain(|x| trials.iter().any(|t| of(t) == x));
    out
}

/// The prefix of the grid's symbol ids: short, as every mark names one.
fn symbol_prefix(id: &str) -> String {
    format!("{}g", id.chars().next().unwrap_or('g'))
}

/// One trial's mark: a link around its outcome's symbol and its overlays, titled.
fn mark(s: &mut String, id: &str, t: &TrialSummary, x: u32, y: u32, href: &dyn Fn(&str) -> String) {
    let mut title = format!("{}: {}", t.trial_id, t.outcome);
    if t.outcome != OutcomeKind::Completed {
        if let Some(reason) = t.reason.as_deref().filter(|r| !r.is_empty()) {
            title.push_str(" — ");
            title.push_str(&cut(reason, REASON_CHARS));
        }
    }
    if !t.flags.is_empty() {
        let _ = write!(title, " [flagged: {}]", cut(&t.flags.join("; "), 60));
    }
    if let Some(limit) = &t.limit_reached {
        let _ = write!(title, " [limit reached: {limit}]");
    }
    let _ = write!(
        s,
        "<a class=\"mark\" href=\"{href}\"><title>{title}</title><use href=\"#{sym}\" x=\"{x}\" y=\"{y}\"/>",
        href = esc(&href(&t.trial_id)),
        title = esc(&title),
        sym = symbol(id, t.outcome),
    );
    if !t.flags.is_empty() {
        let _ = write!(s, "<use href=\"#{id}-flag\" x=\"{x}\" y=\"{y}\"/>");
    }
    if t.limit_reached.is_some() {
        let _ = write!(s, "<use href=\"#{id}-limit\" x=\"{x}\" y=\"{y}\"/>");
    }
    s.push_str("</a>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(task: &str, variant: &str, index: u32, outcome: &str) -> TrialSummary {
        TrialSummary {
            reason: Some(format!("why <{outcome}>")),
            ..crate::pictures::summary(task, variant, index, outcome)
        }
    }

    #[test]
    fn one_linked_titled_mark_per_trial() {
        let mut trials = vec![
            trial("a", "v", 0, "completed"),
            trial("a", "v", 1, "wrong"),
            trial("b", "w", 0, "errored"),
        ];
        trials[1].flags = vec!["tamper: tests/x".into()];
        trials[2].limit_reached = Some(proctor_records::Limit::Memory);
        let svg = svg(
            "grid",
            &["a".into(), "b".into()],
            &["v".into(), "w".into()],
            &trials,
            &|t| format!("/t/{t}"),
        );
        assert_eq!(svg.matches("<a class=\"mark\"").count(), 3);
        assert!(svg.contains("href=\"/t/a.v.1\"><title>a.v.1: wrong — why &lt;wrong&gt; [flagged: tamper: tests/x]</title><use href=\"#gg-w\""), "{svg}");
        assert!(svg.contains("<use href=\"#gg-limit\" x=\"0\" y=\"0\"/>"));
        assert!(svg.contains("<use href=\"#gg-flag\" x=\"12\" y=\"0\"/>"));
        assert!(!svg.contains("<script"));
    }
}

#[cfg(test)]
mod size {
    use super::*;

    #[test]
    fn the_grid_of_ten_thousand_trials_stays_under_two_megabytes() {
        let trials: Vec<TrialSummary> = (0..100)
            .flat_map(|t| {
                (0..4).flat_map(move |v| {
                    (0..25).map(move |i| TrialSummary {
                        reason: Some("the success condition fails: state /sent/0/to is \"dana\", expected \"mei\"".into()),
                        ..crate::pictures::summary(
                            &format!("task-{t:03}"),
                            &format!("variant-{v}"),
                            i,
                            if i % 3 == 0 { "wrong" } else { "completed" },
                        )
                    })
                })
            })
            .collect();
        let svg = svg("grid", &[], &[], &trials, &|t| {
            format!("/runs/20261202-051550-f83e/trials/{t}")
        });
        assert_eq!(svg.matches("<a class=\"mark\"").count(), 10_000);
        assert!(svg.len() < 2 * 1024 * 1024, "{} bytes", svg.len());
    }
}
