//! The pictures: what the tables hide, drawn as SVG from proctor's own records. The run's outcome
//! grid (one mark per trial), the matched-pair grid of a comparison, each arm's spread of
//! per-trial numbers, and success against cost. Every picture is plain SVG written here, with no
//! script and no style sheet (presentation attributes only), so it renders inline in a page, in
//! the self-contained export and alone at its own URL under the viewer's Content-Security-Policy.
//!
//! Outcomes are told apart by shape as well as colour (the Okabe–Ito palette, readable with the
//! common colour-blindnesses and in greyscale), and every mark carries its text as a `<title>`.

pub mod cost;
pub mod grid;
pub mod pairs;
pub mod spread;

use std::fmt::Write;

use proctor_score::OutcomeKind;

use crate::html::esc;

/// The distance between the corners of neighbouring marks.
pub const STEP: u32 = 12;

/// How an outcome's mark is drawn: its colour and its shape, as SVG in a 10 × 10 box (`None`:
/// a label proctor does not know).
fn shape(outcome: Option<OutcomeKind>) -> (&'static str, String) {
    // Okabe–Ito colours; filled shapes for the good outcomes, strokes for the bad, grey for the
    // trials that were not graded.
    let Some(outcome) = outcome else {
        return ("#000000", "<circle cx=\"5\" cy=\"5\" r=\"2\"/>".into());
    };
    let (colour, body) = match outcome {
        OutcomeKind::Completed => ("#009E73", "<circle cx=\"5\" cy=\"5\" r=\"4.5\"/>".to_string()),
        OutcomeKind::RefusedHonestly => ("#0072B2", "<rect x=\"0.5\" y=\"0.5\" width=\"9\" height=\"9\"/>".into()),
        OutcomeKind::Asked => ("#56B4E9", "<path d=\"M5 0 10 5 5 10 0 5Z\"/>".into()),
        OutcomeKind::Wrong => (
            "#D55E00",
            "<path d=\"M1 1 9 9M9 1 1 9\" fill=\"none\" stroke=\"#D55E00\" stroke-width=\"2.5\"/>".into(),
        ),
        OutcomeKind::RefusedWrongly => ("#CC79A7", "<path d=\"M0 1H10L5 10Z\"/>".into()),
        OutcomeKind::Abandoned => (
            "#E69F00",
            "<path d=\"M5 1 9.5 9.5H0.5Z\" fill=\"none\" stroke=\"#E69F00\" stroke-width=\"1.8\"/>".into(),
        ),
        OutcomeKind::Errored => (
            "#555555",
            "<rect x=\"1\" y=\"1\" width=\"8\" height=\"8\" fill=\"none\" stroke=\"#555555\" stroke-width=\"1.6\"/><path d=\"M1 9 9 1\" stroke=\"#555555\" stroke-width=\"1.6\"/>".into(),
        ),
        OutcomeKind::Ungradeable => (
            "#999999",
            "<circle cx=\"5\" cy=\"5\" r=\"4\" fill=\"none\" stroke=\"#999999\" stroke-width=\"1.6\" stroke-dasharray=\"2 1.5\"/>".into(),
        ),
    };
    (colour, body)
}

/// The `<defs>` of the outcome marks, each a `<symbol>` with id `PREFIX-CODE` ([`symbol`] names
/// it: a short code per outcome, as every mark names one), and of the two
/// overlays: `PREFIX-flag` (an integrity flag) and `PREFIX-limit` (a limit reached).
pub fn defs(prefix: &str) -> String {
    let mut s = String::from("<defs>");
    // The eight outcomes in report order, as the legend lists them, then any other label.
    for o in OutcomeKind::ALL.map(Some).into_iter().chain([None]) {
        let (colour, body) = shape(o);
        let _ = write!(
            s,
            "<symbol id=\"{prefix}-{}\" width=\"10\" height=\"10\" viewBox=\"0 0 10 10\" fill=\"{colour}\">{body}</symbol>",
            code(o)
        );
    }
    let _ = write!(
        s,
        "<symbol id=\"{prefix}-flag\" width=\"10\" height=\"10\" viewBox=\"0 0 10 10\"><path d=\"M6 0H10V4Z\" fill=\"#000\"/></symbol><symbol id=\"{prefix}-limit\" width=\"10\" height=\"10\" viewBox=\"0 0 10 10\"><path d=\"M0 9.2H10\" stroke=\"#000\" stroke-width=\"1.6\"/></symbol></defs>"
    );
    s
}

/// An outcome's short code in symbol ids (a grid of 10,000 marks names one per mark); `o` for
/// a label proctor does not know.
fn code(outcome: Option<OutcomeKind>) -> &'static str {
    match outcome {
        Some(OutcomeKind::Completed) => "c",
        Some(OutcomeKind::RefusedHonestly) => "rh",
        Some(OutcomeKind::Asked) => "a",
        Some(OutcomeKind::Wrong) => "w",
        Some(OutcomeKind::RefusedWrongly) => "rw",
        Some(OutcomeKind::Abandoned) => "ab",
        Some(OutcomeKind::Errored) => "e",
        Some(OutcomeKind::Ungradeable) => "u",
        None => "o",
    }
}

/// The id of an outcome's symbol.
pub fn symbol(prefix: &str, outcome: OutcomeKind) -> String {
    format!("{prefix}-{}", code(Some(outcome)))
}

/// An `<svg>` element's opening of `width` × `height` with its accessible name and description.
pub fn open(width: u32, height: u32, id: &str, title: &str, desc: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"picture\" id=\"{id}\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"{id}-title {id}-desc\" font-family=\"system-ui, sans-serif\" font-size=\"11\"><title id=\"{id}-title\">{}</title><desc id=\"{id}-desc\">{}</desc>",
        esc(title),
        esc(desc)
    )
}

/// The legend of the outcome marks (and the two overlays), as a row at `y`, `width` wide at
/// most (it wraps); its height.
pub fn legend(s: &mut String, prefix: &str, y: u32, width: u32) -> u32 {
    let items: Vec<(String, &str)> = OutcomeKind::ALL
        .iter()
        .map(|o| (symbol(prefix, *o), o.label()))
        .chain([
            (format!("{prefix}-flag"), "flagged by the audit"),
            (format!("{prefix}-limit"), "limit reached"),
        ])
        .collect();
    let (mut x, mut row) = (0u32, 0u32);
    for (id, label) in items {
        let w = 18 + 7 * label.len() as u32;
        if x > 0 && x + w > width {
            x = 0;
            row += 1;
        }
        let top = y + row * 16;
        let base = if id.ends_with("-flag") || id.ends_with("-limit") {
            // The overlays are shown on a neutral box.
            format!(
                "<rect x=\"{x}\" y=\"{top}\" width=\"10\" height=\"10\" fill=\"none\" stroke=\"#bbb\"/>"
            )
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "<g>{base}<use href=\"#{id}\" x=\"{x}\" y=\"{top}\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
            x + 14,
            top + 9,
            esc(label)
        );
        x += w;
    }
    (row + 1) * 16
}

/// A number for an axis or a title: at most three significant decimals, no trailing zeros.
pub fn number(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The width of a column of `labels` in pixels (at about 7 pixels a character, `max_chars` at
/// most), with a margin.
pub fn label_width<S: AsRef<str>>(labels: &[S], max_chars: usize) -> u32 {
    let longest = labels
        .iter()
        .map(|l| l.as_ref().chars().count())
        .max()
        .unwrap_or(4)
        .min(max_chars);
    12 + 7 * longest as u32
}

/// Text cut to `max` characters (an ellipsis marks the cut), for titles of many marks.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max).collect();
        s.push('…');
        s
    }
}

/// The run's three pictures (outcome grid, spreads, success against cost) from its page and
/// every finished trial, each trial linked to `href(trial)`.
pub struct RunPictures {
    /// The outcome grid.
    pub grid: String,
    /// The per-trial spreads.
    pub spread: String,
    /// Success against cost; `None` when no variant has a success rate yet or no trial reported
    /// tokens or money.
    pub cost: Option<String>,
}

impl RunPictures {
    /// The pictures of `p`'s run over `trials`.
    pub fn of(
        p: &crate::data::RunPage,
        trials: &[proctor_store::TrialSummary],
        href: &dyn Fn(&str) -> String,
    ) -> RunPictures {
        let variants = &p.meta.variants;
        let rates = variant_rates(p.report.as_ref());
        RunPictures {
            grid: grid::svg("grid-picture", &p.meta.tasks, variants, trials, href),
            spread: spread::svg("spread-picture", variants, trials),
            cost: (!rates.is_empty()
                && trials.iter().any(|t| {
                    t.input_tokens.is_some() || t.output_tokens.is_some() || t.cost_usd.is_some()
                }))
            .then(|| cost::svg("cost-picture", &rates, trials)),
        }
    }

    /// The pictures as a page section, with the stable URL of each when `run_urls` names the
    /// run (in the scoring `scoring` names, when the page was asked for one).
    pub fn section(&self, run_urls: Option<&str>, scoring: &str) -> String {
        let query = if scoring.is_empty() {
            String::new()
        } else {
            format!("?scoring={}", crate::links::url_encode(scoring))
        };
        let link = |name: &str| {
            run_urls
                .map(|base| {
                    format!(
                        " <a class=\"svg-link\" href=\"{}\">{name}</a>",
                        esc(&format!("{base}/{name}{query}"))
                    )
                })
                .unwrap_or_default()
        };
        let mut s = format!(
            "<h2 id=\"pictures\">Every trial at a glance</h2><figure class=\"picture\">{}<figcaption>One mark per trial: tasks down, variants across, the trial index within; shape and colour give the outcome, a black corner an integrity flag, an underline a limit reached. Each mark links to its trial.{}</figcaption></figure>",
            self.grid,
            link("grid.svg")
        );
        let _ = write!(
            s,
            "<h2>Spread per variant</h2><figure class=\"picture\">{}<figcaption>Every trial a point, the median a line, n under each strip: a tail a median hides is seen here.{}</figcaption></figure>",
            self.spread,
            link("spread.svg")
        );
        match &self.cost {
            Some(cost) => {
                let _ = write!(
                    s,
                    "<h2>Success against cost</h2><figure class=\"picture\">{cost}<figcaption>Each variant's success rate (k/n) against its median tokens and, apart, its median money per trial; the ledgers are never summed.{}</figcaption></figure>",
                    link("cost.svg")
                );
            }
            None => s.push_str("<h2>Success against cost</h2><p class=\"note\">Nothing to draw: the run has no success rates yet, or no trial reported tokens or money.</p>"),
        }
        s
    }
}

/// Each variant's success k/n and money status, from the run's report (none before it has one).
fn variant_rates(report: Option<&proctor_report::RunReport>) -> Vec<cost::VariantRate> {
    use proctor_report::Money;
    let Some(report) = report else {
        return Vec::new();
    };
    report
        .variants
        .iter()
        .map(|v| {
            let overall = &v.overall;
            let (money, unpriced) = match &overall.costs.money {
                Money::Known { .. } => ("known", 0),
                Money::Incomplete { trials_missing, .. } => ("incomplete", *trials_missing),
                Money::NotApplicable => ("not_applicable", 0),
            };
            cost::VariantRate {
                variant: v.variant.clone(),
                k: overall.rates.success.k,
                n: overall.rates.success.n,
                money: money.to_string(),
                unpriced,
            }
        })
        .collect()
}

/// A finished trial's summary for the pictures' tests: `TASK.VARIANT.INDEX` with `outcome` and
/// nothing measured.
#[cfg(test)]
pub(crate) fn summary(
    task: &str,
    variant: &str,
    index: u32,
    outcome: &str,
) -> proctor_store::TrialSummary {
    proctor_store::TrialSummary {
        trial_id: format!("{task}.{variant}.{index}"),
        task: task.into(),
        variant: variant.into(),
        trial_index: index,
        outcome: outcome.parse().expect("an outcome label"),
        reason: None,
        wall_seconds: 1.0,
        calls: None,
        wrong_turns: None,
        input_tokens: None,
        output_tokens: None,
        cost_usd: None,
        limit_reached: None,
        flags: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_its_own_colour_and_shape() {
        let drawn: Vec<(&str, String)> = OutcomeKind::ALL.map(|o| shape(Some(o))).into();
        for (i, a) in drawn.iter().enumerate() {
            for b in &drawn[i + 1..] {
                assert_ne!(a.0, b.0, "two outcomes share a colour");
                assert_ne!(a.1, b.1, "two outcomes share a shape");
            }
        }
    }

    #[test]
    fn numbers_are_short_and_text_is_cut_visibly() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.12345), "0.123");
        assert_eq!(number(1234.4), "1234");
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
