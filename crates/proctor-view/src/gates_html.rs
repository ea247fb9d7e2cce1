//! The promotion gates on the comparison page: each gate's verdict, the numbers it used and its
//! explanation, as `proctor compare --gate` reports them; a failed `sample_size` gate is marked
//! underpowered (too few graded trials to conclude anything, so nothing can be promoted).

use std::fmt::Write;

use serde_json::Value;

use crate::html::{esc, table};

/// The gate that fails when the comparison is underpowered.
const SAMPLE_SIZE: &str = "sample_size";

/// A number a gate used: `name = value (n = N)`.
fn number(x: &Value) -> String {
    let name = x.get("name").and_then(Value::as_str).unwrap_or("");
    let value = match (x.get("value").and_then(Value::as_f64), x.get("unbounded")) {
        (_, Some(Value::Bool(true))) => "unbounded (from 0)".to_string(),
        (Some(v), _) => {
            let t = format!("{v:.4}");
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        (None, _) => "not measured".to_string(),
    };
    match x.get("n").and_then(Value::as_u64) {
        Some(n) => format!("{} = {value} (n = {n})", esc(name)),
        None => format!("{} = {value}", esc(name)),
    }
}

/// The gates section: `gates` as `compare --gate --format json` prints them, or why there are
/// none.
pub fn section(gates: &Value, note: Option<&str>) -> String {
    let Some(list) = gates.get("gates").and_then(Value::as_array) else {
        return format!(
            "<h2>Promotion gates</h2><p>No gates: {}.</p>",
            esc(note.unwrap_or("none were applied"))
        );
    };
    let s = |k: &str| gates.get(k).and_then(Value::as_str).unwrap_or("");
    let passed = gates.get("passed").and_then(Value::as_bool) == Some(true);
    let underpowered = list.iter().any(|g| {
        g.get("name").and_then(Value::as_str) == Some(SAMPLE_SIZE)
            && g.get("passed").and_then(Value::as_bool) == Some(false)
    });
    let rows: Vec<(String, Vec<String>)> = list
        .iter()
        .map(|g| {
            let name = g.get("name").and_then(Value::as_str).unwrap_or("");
            let ok = g.get("passed").and_then(Value::as_bool) == Some(true);
            let verdict = match (ok, name == SAMPLE_SIZE) {
                (true, _) => "<span class=\"badge good\">passed</span>".to_string(),
                (false, true) => {
                    "<span class=\"badge bad\">failed</span> <span class=\"badge void\">underpowered</span>".to_string()
                }
                (false, false) => "<span class=\"badge bad\">failed</span>".to_string(),
            };
            let numbers = g
                .get("numbers")
                .and_then(Value::as_array)
                .map(|ns| ns.iter().map(number).collect::<Vec<_>>().join("<br>"))
                .unwrap_or_default();
            (
                format!(" data-gate=\"{}\"", esc(name)),
                vec![
                    format!("<code>{}</code>", esc(name)),
                    verdict,
                    numbers,
                    esc(g.get("explanation").and_then(Value::as_str).unwrap_or("")),
                ],
            )
        })
        .collect();
    let mut out = format!(
        "<h2>Promotion gates</h2><p class=\"meta\">candidate <b>{}</b> against baseline <b>{}</b> (the suite's <code>[promotion]</code>, over the arms' runs, as <code>proctor compare --gate</code> applies them): {}</p>",
        esc(s("candidate")),
        esc(s("baseline")),
        if passed {
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
        let g = serde_json::json!({"baseline": "naive", "candidate": "oracle", "passed": false, "gates": [
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
