//! The promotion gates on the comparison page: each gate's verdict, the numbers it used and its
//! explanation, as `proctor compare --gate` reports them; a failed `sample_size` gate is marked
//! underpowered (too few graded trials to conclude anything, so nothing can be promoted).

use std::fmt::Write;

use proctor_report::gate::{GateNumber, GateReport};
use serde::Deserialize;
use serde_json::Value;

use crate::html::{esc, table};

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
        Some(n) => format!("{} = {value} (n = {n})", esc(&x.name)),
        None => format!("{} = {value}", esc(&x.name)),
    }
}

/// The gates section: `gates` as `compare --gate --format json` prints them (read as the
/// [`GateReport`] they are), or why there are none.
pub fn section(gates: &Value, note: Option<&str>) -> String {
    if gates.get("gates").is_none_or(|g| !g.is_array()) {
        return format!(
            "<h2>Promotion gates</h2><p>No gates: {}.</p>",
            esc(note.unwrap_or("none were applied"))
        );
    }
    match GateReport::deserialize(gates) {
        Ok(report) => typed_section(&report),
        Err(e) => format!(
            "<h2>Promotion gates</h2><p>The gates cannot be read: {}.</p>",
            esc(&e.to_string())
        ),
    }
}

/// The gates section of a promotion document.
fn typed_section(gates: &GateReport) -> String {
    let underpowered = gates
        .gates
        .iter()
        .any(|g| g.name == SAMPLE_SIZE && !g.passed);
    let rows: Vec<(String, Vec<String>)> = gates
        .gates
        .iter()
        .map(|g| {
            let verdict = match (g.passed, g.name == SAMPLE_SIZE) {
                (true, _) => "<span class=\"badge good\">passed</span>".to_string(),
                (false, true) => {
                    "<span class=\"badge bad\">failed</span> <span class=\"badge void\">underpowered</span>".to_string()
                }
                (false, false) => "<span class=\"badge bad\">failed</span>".to_string(),
            };
            let numbers = g
                .numbers
                .iter()
                .map(number)
                .collect::<Vec<_>>()
                .join("<br>");
            (
                format!(" data-gate=\"{}\"", esc(&g.name)),
                vec![
                    format!("<code>{}</code>", esc(&g.name)),
                    verdict,
                    numbers,
                    esc(&g.explanation),
                ],
            )
        })
        .collect();
    let mut out = format!(
        "<h2>Promotion gates</h2><p class=\"meta\">candidate <b>{}</b> against baseline <b>{}</b> (the suite's <code>[promotion]</code>, over the arms' runs, as <code>proctor compare --gate</code> applies them): {}</p>",
        esc(&gates.candidate),
        esc(&gates.baseline),
        if gates.passed {
            "<span class=\"badge good\">every gate passed</span>"
        } else {
            "<span class=\"badge bad\">a gate failed: not promoted</span>"
        }
    );
    if underpowered {
        out.push_str("<p class=\"note\">The comparison is <b>underpowered</b>: an arm has fewer graded trials than the suite's <code>underpowered_below</code>, so it concludes nothing and cannot promote. Run more trials per cell.</p>");
    }
    let _ = write!(
        out,
        "{}",
        table(
            "gates",
            &["Gate", "Verdict", "Numbers", "Explanation"],
            &rows
        )
    );
    out
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
        let html = section(&g, None);
        assert!(html.contains("<span class=\"badge bad\">failed</span> <span class=\"badge void\">underpowered</span>"), "{html}");
        assert!(html.contains("baseline graded n = 5"), "{html}");
        assert!(html.contains("a gate failed: not promoted"), "{html}");
        assert!(
            section(&Value::Null, Some("the suite has no [promotion] table"))
                .contains("No gates: the suite has no [promotion] table.")
        );
    }
}
