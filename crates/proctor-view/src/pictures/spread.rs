//! Each arm's spread of per-trial numbers, where a median would hide a tail: wrong turns, calls,
//! tokens, wall time and cost, one panel each, one strip per variant with every trial a point (the
//! median a line), and `n` under each strip. Points that land on the same pixel are drawn once,
//! larger, with their count in the title, so a picture of 10,000 trials stays small.

use std::collections::BTreeMap;
use std::fmt::Write;

use proctor_store::TrialSummary;

use super::{cut, number, open};
use crate::html::esc;

/// One quantity a panel draws.
struct Quantity {
    title: &'static str,
    value: fn(&TrialSummary) -> Option<f64>,
}

const QUANTITIES: [Quantity; 5] = [
    Quantity {
        title: "wrong turns",
        value: |t| t.wrong_turns.map(|v| v as f64),
    },
    Quantity {
        title: "calls",
        value: |t| t.calls.map(|v| v as f64),
    },
    Quantity {
        title: "tokens",
        value: |t| match (t.input_tokens, t.output_tokens) {
            (None, None) => None,
            (i, o) => Some((i.unwrap_or(0) + o.unwrap_or(0)) as f64),
        },
    },
    Quantity {
        title: "wall seconds",
        value: |t| Some(t.wall_seconds),
    },
    Quantity {
        title: "cost (USD)",
        value: |t| t.cost_usd,
    },
];

const PLOT_H: u32 = 160;
const STRIP_W: u32 = 64;
const JITTER: u32 = 8;

/// The panels for `variants` (in order) over `trials`; a quantity no trial reported is left out
/// and named as such.
pub fn svg(id: &str, variants: &[String], trials: &[TrialSummary]) -> String {
    let shown: Vec<&Quantity> = QUANTITIES
        .iter()
        .filter(|q| trials.iter().any(|t| (q.value)(t).is_some()))
        .collect();
    let missing: Vec<&str> = QUANTITIES
        .iter()
        .filter(|q| !shown.iter().any(|s| s.title == q.title))
        .map(|q| q.title)
        .collect();
    let panel_w = 44 + STRIP_W * variants.len().max(1) as u32 + 12;
    let per_line = (1100 / panel_w).max(1);
    let lines = (shown.len() as u32).div_ceil(per_line).max(1);
    let panel_h = 24 + PLOT_H + 44;
    let width = per_line.min(shown.len().max(1) as u32) * panel_w;
    let height = lines * panel_h + 20;
    let mut s = open(
        width.max(320),
        height,
        id,
        "Per-trial numbers of each variant",
        &format!(
            "One panel per quantity ({}), one strip per variant ({}), every trial a point and the median a line; n under each strip.{}",
            shown.iter().map(|q| q.title).collect::<Vec<_>>().join(", "),
            variants.join(", "),
            if missing.is_empty() {
                String::new()
            } else {
                format!(" Not reported by any trial: {}.", missing.join(", "))
            }
        ),
    );
    for (i, q) in shown.iter().enumerate() {
        let x0 = (i as u32 % per_line) * panel_w;
        let y0 = (i as u32 / per_line) * panel_h;
        panel(&mut s, q, variants, trials, x0, y0);
    }
    if !missing.is_empty() {
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" fill=\"#555\">Not reported by any trial: {}.</text>",
            height - 6,
            esc(&missing.join(", "))
        );
    }
    s.push_str("</svg>");
    s
}

fn panel(
    s: &mut String,
    q: &Quantity,
    variants: &[String],
    trials: &[TrialSummary],
    x0: u32,
    y0: u32,
) {
    let max = trials
        .iter()
        .filter_map(q.value)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot_top = y0 + 24;
    let axis_x = x0 + 40;
    let y_of = |v: f64| plot_top + PLOT_H - ((v / max) * f64::from(PLOT_H)).round() as u32;
    let _ = write!(
        s,
        "<g class=\"panel\" data-quantity=\"{t}\"><text x=\"{x0}\" y=\"{}\" font-weight=\"bold\">{t}</text><path d=\"M{axis_x} {plot_top}V{}H{}\" fill=\"none\" stroke=\"#888\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>",
        y0 + 14,
        plot_top + PLOT_H,
        axis_x + STRIP_W * variants.len() as u32,
        axis_x - 4,
        plot_top + 8,
        number(max),
        axis_x - 4,
        plot_top + PLOT_H,
        t = esc(q.title),
    );
    for (c, v) in variants.iter().enumerate() {
        let left = axis_x + 6 + c as u32 * STRIP_W;
        let mut values: Vec<(f64, &str)> = trials
            .iter()
            .filter(|t| &t.variant == v)
            .filter_map(|t| (q.value)(t).map(|x| (x, t.trial_id.as_str())))
            .collect();
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Points on the same pixel (after a deterministic jitter by trial order) are drawn once.
        let mut points: BTreeMap<(u32, u32), (f64, Vec<&str>)> = BTreeMap::new();
        for (i, (x, trial)) in values.iter().enumerate() {
            let px = left + 6 + (i as u32 * 5) % (JITTER * 5);
            let e = points.entry((px, y_of(*x))).or_insert((*x, Vec::new()));
            e.1.push(trial);
        }
        for ((px, py), (x, ids)) in &points {
            let r = if ids.len() > 1 { 3.5 } else { 2.5 };
            let title = if ids.len() == 1 {
                format!("{}: {} {}", ids[0], number(*x), q.title)
            } else {
                format!(
                    "{} trials of {}: {} {} ({}{})",
                    ids.len(),
                    v,
                    number(*x),
                    q.title,
                    ids.iter().take(5).copied().collect::<Vec<_>>().join(", "),
                    if ids.len() > 5 { ", …" } else { "" }
                )
            };
            let _ = write!(
                s,
                "<circle cx=\"{px}\" cy=\"{py}\" r=\"{r}\" fill=\"#0072B2\" fill-opacity=\"0.55\" stroke=\"#0072B2\"><title>{}</title></circle>",
                esc(&title)
            );
        }
        if let Some(median) = median(&values) {
            let y = y_of(median);
            let _ = write!(
                s,
                "<path d=\"M{} {y}H{}\" stroke=\"#D55E00\" stroke-width=\"2\"><title>median {} {} ({})</title></path>",
                left,
                left + STRIP_W - 14,
                number(median),
                esc(q.title),
                esc(v)
            );
        }
        let _ = write!(
            s,
            "<text x=\"{left}\" y=\"{}\">{}</text><text x=\"{left}\" y=\"{}\" class=\"n\">n = {}</text>",
            plot_top + PLOT_H + 14,
            esc(&cut(v, 9)),
            plot_top + PLOT_H + 28,
            values.len()
        );
    }
    s.push_str("</g>");
}

fn median(sorted: &[(f64, &str)]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2].0),
        n => Some((sorted[n / 2 - 1].0 + sorted[n / 2].0) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(variant: &str, i: u32, wrong: u64) -> TrialSummary {
        TrialSummary {
            wall_seconds: f64::from(i),
            calls: Some(wrong + 1),
            wrong_turns: Some(wrong),
            ..crate::pictures::summary("t", variant, i, "completed")
        }
    }

    #[test]
    fn every_trial_is_a_point_and_the_tail_is_drawn() {
        // The sloppy arm: 9 clean trials and one with 24 wrong turns.
        let mut trials: Vec<TrialSummary> = (0..9).map(|i| trial("sloppy", i, 0)).collect();
        trials.push(trial("sloppy", 9, 24));
        trials.extend((0..10).map(|i| trial("tidy", i, 1)));
        let svg = svg("s", &["sloppy".into(), "tidy".into()], &trials);
        let wrong = svg
            .split("<g class=\"panel\"")
            .find(|p| p.contains("data-quantity=\"wrong turns\""))
            .unwrap();
        assert!(wrong.contains("t.sloppy.9: 24 wrong turns"), "{wrong}");
        // Every trial is in a point's title, once (a point of several counts them).
        let single = wrong.matches("wrong turns</title></circle>").count();
        assert!(single >= 1);
        assert_eq!(wrong.matches("n = 10").count(), 2);
        // The median of the sloppy arm is 0: the tail is seen as a point, not in the median.
        assert!(wrong.contains("median 0 wrong turns (sloppy)"), "{wrong}");
        assert!(svg.contains("Not reported by any trial: tokens, cost (USD)."));
    }

    #[test]
    fn ten_thousand_trials_stay_small() {
        let trials: Vec<TrialSummary> = (0..10_000)
            .map(|i| trial(if i % 2 == 0 { "a" } else { "b" }, i, u64::from(i % 37)))
            .collect();
        let svg = svg("s", &["a".into(), "b".into()], &trials);
        assert!(svg.len() < 2_000_000, "{} bytes", svg.len());
    }
}
