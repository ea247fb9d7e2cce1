//! The promotion gates on the comparison page (as `proctor compare --gate` reports them) and on
//! a release run's page (as the run applied them at its end): each gate's verdict, the numbers
//! it used and its explanation, and the thresholds; a failed `sample_size` gate is marked
//! underpowered (too few graded pairs on some task to conclude anything, so nothing can be
//! promoted).

use maud::{html, Markup};
use proctor_report::gate_report::{GateNumber, GateReport};

use crate::html::table;

/// The gate that fails when the comparison is underpowered.
const SAMPLE_SIZE: &str = "sample_size";

/// A number a gate used: `name = value (n = N)`.
fn number(x: &GateNumber) -> String {
    let value = match (x.value, x.unbounded) {
        (_, true) => "unbounded (from 0)".to_string(),
        (Some(v), false) => {
            let t = format!("{v:.4}");
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        (None, false) => "not measured".to_string(),
    };
    match x.n {
        Some(n) => format!("{} = {value} (n = {n})", x.name),
        None => format!("{} = {value}", x.name),
    }
}

/// The gates section: the gates `compare --gate --format json` printed, or why there are none
/// (`note`).
pub fn section(gates: Option<&GateReport>, note: Option<&str>) -> Markup {
    match gates {
        Some(report) => typed_section(
            report,
            html! { "(the suite's " code { "[promotion]" } ", over the arms' runs, as " code { "proctor compare --gate" } " applies them)" },
        ),
        None => html! {
            h2 { "Promotion gates" }
            p { "No gates: " (note.unwrap_or("none were applied")) "." }
        },
    }
}

/// The gates section of a release run's page: the gates the run applied at its end, kept in
/// its results.
pub fn release_section(gates: &GateReport) -> Markup {
    typed_section(
        gates,
        html! { "(the suite's " code { "[promotion]" } ", applied at the end of this release run; its exit status follows them)" },
    )
}

/// The gates section of a promotion document; `source` says where the gates come from.
fn typed_section(gates: &GateReport, source: Markup) -> Markup {
    let underpowered = gates
        .gates
        .iter()
        .any(|g| g.name == SAMPLE_SIZE && !g.passed);
    let rows = html! {
        @for g in &gates.gates {
            tr data-gate=(g.name) {
                td { code { (g.name) } }
                td {
                    @if g.passed {
                        span class="badge good" { "passed" }
                    } @else {
                        span class="badge bad" { "failed" }
                        @if g.name == SAMPLE_SIZE { " " span class="badge void" { "underpowered" } }
                    }
                }
                td {
                    @for (i, x) in g.numbers.iter().enumerate() {
                        @if i > 0 { br; }
                        (number(x))
                    }
                }
                td { (g.explanation) }
            }
        }
    };
    html! {
        h2 { "Promotion gates" }
        p class="meta" {
            "candidate " b { (gates.candidate) } " against baseline " b { (gates.baseline) }
            " " (source) ": "
            @if gates.passed {
                span class="badge good" { "every gate passed" }
            } @else {
                span class="badge bad" { "a gate failed: not promoted" }
            }
        }
        @if !gates.thresholds.is_empty() {
            p class="meta" data-field="thresholds" { "thresholds: " (gates.thresholds.join(", ")) }
        }
        @if underpowered {
            p class="note" {
                "The comparison is " b { "underpowered" } ": some task has fewer graded matched pairs than the suite's " code { "underpowered_below" } " (counted per task, never pooled), so it concludes nothing and cannot promote. Run more trials per cell."
            }
        }
        (table("gates", &["Gate", "Verdict", "Numbers", "Explanation"], rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_sample_size_gate_is_marked_underpowered() {
        let g = serde_json::json!({"schema_version": 1, "baseline": "naive", "candidate": "oracle", "passed": false, "gates": [
            {"name": "sample_size", "passed": false, "numbers": [{"name": "baseline graded n", "value": 5.0, "n": null, "unbounded": false}], "explanation": "too few"},
            {"name": "nonzero_success", "passed": true, "numbers": [], "explanation": "ok"}
        ]});
        let g: GateReport = serde_json::from_value(g).unwrap();
        let html = section(Some(&g), None).into_string();
        assert!(html.contains("<span class=\"badge bad\">failed</span> <span class=\"badge void\">underpowered</span>"), "{html}");
        assert!(html.contains("baseline graded n = 5"), "{html}");
        assert!(html.contains("a gate failed: not promoted"), "{html}");
        assert!(section(None, Some("the suite has no [promotion] table"))
            .into_string()
            .contains("No gates: the suite has no [promotion] table."));
        // A gate's name and explanation are the suite's words: they arrive escaped.
        let mut evil = g.clone();
        evil.gates[1].name = "<script>x</script>".into();
        evil.gates[1].explanation = "<img src=x onerror=alert(1)>".into();
        let html = section(Some(&evil), None).into_string();
        assert!(
            !html.contains("<script>") && !html.contains("<img"),
            "{html}"
        );
        assert!(
            html.contains("data-gate=\"&lt;script&gt;x&lt;/script&gt;\""),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
    }
}
