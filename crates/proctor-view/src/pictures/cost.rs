//! Success against cost, per variant: the success rate (with its n) against the median tokens per
//! trial, and in a chart of its own the median money per trial. The ledgers are never summed into
//! one axis; a variant some of whose trials had no price is drawn hollow and says so.

use std::fmt::Write;

use proctor_store::TrialSummary;

use super::{cut, number, open};
use crate::html::esc;

/// One variant's success rate and what its money ledger says.
#[derive(Debug, Clone)]
pub struct VariantRate {
    /// The variant.
    pub variant: String,
    /// Successes.
    pub k: u64,
    /// Graded trials.
    pub n: u64,
    /// The report's money status: `known`, `incomplete` or `not_applicable`.
    pub money: String,
    /// Trials without a price, when `incomplete`.
    pub unpriced: u64,
}

const W: u32 = 420;
const H: u32 = 220;
const LEFT: u32 = 48;
const TOP: u32 = 26;

/// The two charts (tokens, then money) side by side.
pub fn svg(id: &str, rates: &[VariantRate], trials: &[TrialSummary]) -> String {
    let tokens = |v: &str| -> Vec<f64> {
        trials
            .iter()
            .filter(|t| t.variant == v)
            .filter_map(|t| match (t.input_tokens, t.output_tokens) {
                (None, None) => None,
                (i, o) => Some((i.unwrap_or(0) + o.unwrap_or(0)) as f64),
            })
            .collect()
    };
    let money = |v: &str| -> Vec<f64> {
        trials
            .iter()
            .filter(|t| t.variant == v)
            .filter_map(|t| t.cost_usd)
            .collect()
    };
    let mut s = open(
        2 * W + 20,
        H + 40,
        id,
        "Success against cost, per variant",
        "Each variant's success rate (k/n) against its median tokens per trial, and against its median money per trial in a chart of its own; a hollow point had trials without a price.",
    );
    chart(
        &mut s,
        0,
        "tokens per trial (median)",
        rates,
        &tokens,
        false,
    );
    chart(
        &mut s,
        W + 20,
        "USD per trial (median)",
        rates,
        &money,
        true,
    );
    s.push_str("</svg>");
    s
}

fn chart(
    s: &mut String,
    x0: u32,
    axis: &str,
    rates: &[VariantRate],
    values: &dyn Fn(&str) -> Vec<f64>,
    is_money: bool,
) {
    let points: Vec<(&VariantRate, Option<f64>, usize)> = rates
        .iter()
        .map(|r| {
            let mut v = values(&r.variant);
            v.sort_by(f64::total_cmp);
            let m = match v.len() {
                0 => None,
                n if n % 2 == 1 => Some(v[n / 2]),
                n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
            };
            (r, m, v.len())
        })
        .collect();
    let max = points
        .iter()
        .filter_map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot_w = W - LEFT - 20;
    let plot_h = H - TOP - 30;
    let (ax, ay) = (x0 + LEFT, TOP + plot_h);
    let _ = write!(
        s,
        "<g class=\"cost-chart\" data-ledger=\"{ledger}\"><text x=\"{x0}\" y=\"14\" font-weight=\"bold\">success against {axis}</text><path d=\"M{ax} {TOP}V{ay}H{}\" fill=\"none\" stroke=\"#888\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">100%</text><text x=\"{}\" y=\"{ay}\" text-anchor=\"end\">0%</text><text x=\"{ax}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        ax + plot_w,
        ax - 4,
        TOP + 8,
        ax - 4,
        ay + 14,
        ax + plot_w,
        ay + 14,
        number(max),
        ledger = if is_money { "money" } else { "tokens" },
        axis = esc(axis),
    );
    let mut absent = Vec::new();
    for (i, (r, m, reported)) in points.iter().enumerate() {
        let (Some(m), true) = (m, r.n > 0) else {
            absent.push(r.variant.as_str());
            continue;
        };
        let rate = r.k as f64 / r.n as f64;
        let px = ax + ((m / max) * f64::from(plot_w)).round() as u32;
        let py = ay - (rate * f64::from(plot_h)).round() as u32;
        let incomplete = is_money && r.money == "incomplete";
        let note = if incomplete {
            format!(
                ", prices incomplete: {} trial(s) without a price",
                r.unpriced
            )
        } else {
            String::new()
        };
        let title = format!(
            "{}: success {}/{} ({:.0}%), median {} {} over {} trial(s){note}",
            r.variant,
            r.k,
            r.n,
            rate * 100.0,
            number(*m),
            if is_money { "USD" } else { "tokens" },
            reported
        );
        let fill = if incomplete { "#fff" } else { "#0072B2" };
        let _ = write!(
            s,
            "<g class=\"variant-point\"{}><title>{}</title><circle cx=\"{px}\" cy=\"{py}\" r=\"5\" fill=\"{fill}\" stroke=\"#0072B2\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{} {}/{}{}</text></g>",
            if incomplete { " data-incomplete=\"true\"" } else { "" },
            esc(&title),
            px + 8,
            py.saturating_sub(6).max(TOP - 4) + (i as u32 % 3) * 2,
            esc(&cut(&r.variant, 18)),
            r.k,
            r.n,
            if incomplete { " (prices incomplete)" } else { "" }
        );
    }
    if !absent.is_empty() {
        let _ = write!(
            s,
            "<text x=\"{x0}\" y=\"{}\" fill=\"#555\">Not reported: {}</text>",
            H + 32,
            esc(&cut(&absent.join(", "), 60))
        );
    }
    s.push_str("</g>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(variant: &str, i: u32, tokens: Option<u64>, usd: Option<f64>) -> TrialSummary {
        TrialSummary {
            input_tokens: tokens,
            output_tokens: tokens.map(|_| 0),
            cost_usd: usd,
            ..crate::pictures::summary("t", variant, i, "completed")
        }
    }

    #[test]
    fn each_ledger_has_its_own_chart_and_unpriced_trials_are_marked() {
        let rates = vec![
            VariantRate {
                variant: "cheap".into(),
                k: 3,
                n: 4,
                money: "known".into(),
                unpriced: 0,
            },
            VariantRate {
                variant: "dear".into(),
                k: 1,
                n: 4,
                money: "incomplete".into(),
                unpriced: 2,
            },
        ];
        let trials = vec![
            trial("cheap", 0, Some(100), Some(0.01)),
            trial("cheap", 1, Some(300), Some(0.03)),
            trial("dear", 0, Some(1000), Some(0.5)),
            trial("dear", 1, Some(1000), None),
        ];
        let svg = svg("c", &rates, &trials);
        assert_eq!(svg.matches("<g class=\"cost-chart\"").count(), 2);
        assert!(svg.contains("data-ledger=\"tokens\""));
        assert!(svg.contains("data-ledger=\"money\""));
        // Tokens: the median of 100 and 300; never added to money.
        assert!(
            svg.contains("cheap: success 3/4 (75%), median 200 tokens over 2 trial(s)"),
            "{svg}"
        );
        assert!(svg.contains("cheap: success 3/4 (75%), median 0.02 USD over 2 trial(s)"));
        // The variant with unpriced trials: hollow in the money chart, and said.
        assert_eq!(svg.matches("data-incomplete=\"true\"").count(), 1);
        assert!(svg.contains("prices incomplete: 2 trial(s) without a price"));
    }
}
