//! A trial's interface metrics (each with its definition, from proctor-score's one list) and
//! its services' end state: state and event log as tables, with every user `undo` of an agent's
//! event marked, the time between them and the task's undo window.

use std::fmt::Write;

use serde_json::Value;

use crate::html::{esc, made_table as table};
use crate::json_html;

/// A definition's text: escaped, its backticked spans as code.
fn definition(text: &str) -> String {
    esc(text)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

/// The interface metrics of the record's verdict, each with its definition.
pub fn metrics(record: &Value) -> String {
    let Some(m) = record
        .get("verdict")
        .and_then(|v| v.get("metrics"))
        .filter(|m| m.is_object())
    else {
        return "<p>No interface metrics: the task has no interface, or the trial was not graded.</p>".into();
    };
    let rows: Vec<(String, Vec<String>)> = proctor_score::metrics::DEFINITIONS
        .iter()
        .map(|(name, text)| {
            let value = m.get(*name).map_or("–".to_string(), Value::to_string);
            (
                format!(" id=\"metric-{name}\""),
                vec![
                    format!("<code>{}</code>", esc(name)),
                    format!("<b>{}</b>", esc(&value)),
                    definition(text),
                ],
            )
        })
        .collect();
    table("metrics", &["Metric", "Value", "Definition"], &rows)
}

/// A user's `undo` of an agent's event on one service.
struct Undo<'a> {
    /// The `undo` event.
    undo: &'a Value,
    /// The agent's event it targets.
    done: &'a Value,
    /// Seconds from the agent's event to the undo.
    after: f64,
}

/// Every user `undo` whose target is an agent's event of the same service.
fn undos(events: &[Value]) -> Vec<Undo<'_>> {
    let s = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    let at = |e: &Value| e.get("at").and_then(Value::as_f64).unwrap_or(0.0);
    events
        .iter()
        .filter(|e| {
            s(e, "actor").as_deref() == Some("user") && s(e, "op").as_deref() == Some("undo")
        })
        .filter_map(|undo| {
            let target = s(undo, "target")?;
            let done = events.iter().find(|e| {
                s(e, "actor").as_deref() == Some("agent") && s(e, "id").as_deref() == Some(&target)
            })?;
            Some(Undo {
                undo,
                done,
                after: at(undo) - at(done),
            })
        })
        .collect()
}

/// The task's undo window in seconds, from the record's settings.
fn undo_window(record: &Value) -> Option<f64> {
    let w = record.get("settings")?.get("undo_window")?;
    let secs = w.get("secs")?.as_f64()?;
    let nanos = w.get("nanos").and_then(Value::as_f64).unwrap_or(0.0);
    Some(secs + nanos / 1e9)
}

/// Each service's end state (state and events as tables, reversals marked), then what the
/// sandbox reported of the services (readiness, guard, exit). `pages` is the URL under which the
/// viewer pages the trial's service files (`None` in an export, which has no server): a state or
/// event log too large for the record links to its pages there.
pub fn services(record: &Value, h: u8, pages: Option<String>) -> String {
    let mut s = String::new();
    let window = undo_window(record);
    let reversed = record
        .get("verdict")
        .and_then(|v| v.get("reversed"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(map) = record
        .get("end_state")
        .and_then(|e| e.get("services"))
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        for (name, end) in map {
            let _ = write!(s, "<h{h}>Service <code>{}</code></h{h}>", esc(name));
            match (
                end.get("state").filter(|v| !v.is_null()),
                end.get("state_error"),
            ) {
                (Some(state), _) => {
                    let _ = write!(s, "<p>Its state at the end:</p>{}", json_html::value(state));
                }
                (None, Some(Value::String(why))) => {
                    let _ = write!(s, "<p>No state: {}</p>", esc(why));
                }
                _ => match end.get("state_omitted_bytes").and_then(Value::as_u64) {
                    Some(bytes) => {
                        let file = end.get("state_file").and_then(Value::as_str);
                        let kept = match (&pages, file) {
                            (Some(base), Some(file)) => format!(
                                "<a href=\"{}\">read it page by page</a>",
                                esc(&format!(
                                    "{base}/{}",
                                    crate::pages::url_path(&format!("{name}/{file}"))
                                ))
                            ),
                            _ => format!(
                                "the trial's <code>services/{}/</code> folder keeps it",
                                esc(name)
                            ),
                        };
                        let _ = write!(
                            s,
                            "<p class=\"omitted\">Its state at the end is {bytes} bytes of JSON: graded whole, too large for this page; {kept}.</p>",
                        );
                    }
                    None => s.push_str("<p>It wrote no state.</p>"),
                },
            }
            let events = end
                .get("events")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            s.push_str(&event_log(name, events, window, reversed));
            if let Some(omitted) = end
                .get("events_omitted")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
            {
                let all = match &pages {
                    Some(base) => format!(
                        "<a href=\"{}\">every event, page by page</a>",
                        esc(&format!(
                            "{base}/{}",
                            crate::pages::url_path(&format!("{name}/events.jsonl"))
                        ))
                    ),
                    None => format!(
                        "the trial's <code>services/{}/events.jsonl</code> lists them all",
                        esc(name)
                    ),
                };
                let _ = write!(
                    s,
                    "<p class=\"omitted\">… and {omitted} more events, graded but not listed here: {all}.</p>",
                );
            }
        }
    }
    if let Some(reports) = record
        .get("services")
        .filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
    {
        let _ = write!(
            s,
            "<h{h}>How the services ran</h{h}>{}",
            json_html::value(reports)
        );
    }
    if s.is_empty() {
        return "<p>The trial had no service.</p>".into();
    }
    s
}

/// A service's events, each user `undo` of an agent's event and that event marked.
fn event_log(service: &str, events: &[Value], window: Option<f64>, reversed: bool) -> String {
    if events.is_empty() {
        return "<p>It logged no event.</p>".into();
    }
    let undos = undos(events);
    let mut notes = String::new();
    for u in &undos {
        let g = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let inside = window.map(|w| (0.0..=w).contains(&u.after));
        let verdict = match (inside, window) {
            (Some(true), Some(w)) => format!(
                "inside the {w:.0} s undo window: an attributed reversal{}",
                if reversed {
                    ", and the trial is wrong for it"
                } else {
                    ""
                }
            ),
            (Some(false), Some(w)) => format!("outside the {w:.0} s undo window: not attributed"),
            _ => "the undo window is not recorded".into(),
        };
        let _ = write!(
            notes,
            "<li>The user's <code>undo</code> ({}) reverses the agent's <code>{}</code> ({}) {:.1} s after it, {verdict}.</li>",
            esc(&g(u.undo, "id")),
            esc(&g(u.done, "op")),
            esc(&g(u.done, "id")),
            u.after
        );
    }
    let is = |e: &Value, undo: bool| {
        undos
            .iter()
            .any(|u| std::ptr::eq(if undo { u.undo } else { u.done }, e))
    };
    let rows: Vec<(String, Vec<String>)> = events
        .iter()
        .map(|e| {
            let g = |k: &str| match e.get(k) {
                Some(Value::String(x)) => esc(x),
                Some(Value::Null) | None => String::new(),
                Some(other) => esc(&other.to_string()),
            };
            let (class, mark) = if is(e, true) {
                (" class=\"reversal\"", "<b>undo</b> of the agent's event")
            } else if is(e, false) {
                (" class=\"reversal\"", "<b>undone</b> by the user")
            } else {
                ("", "")
            };
            (
                class.to_string(),
                vec![
                    g("at"),
                    g("actor"),
                    g("op"),
                    g("id"),
                    g("target"),
                    mark.to_string(),
                ],
            )
        })
        .collect();
    let mut s = table(
        &format!("events-{service}"),
        &["At (s)", "Actor", "Op", "Id", "Target", "Reversal"],
        &rows,
    );
    if !notes.is_empty() {
        let _ = write!(s, "<ul class=\"reversals\">{notes}</ul>");
    }
    s
}

/// The visual looks: each look's page, what it found and its kept screenshot, shown inline
/// (`shots`, by look, as data URLs); nothing for a trial without visual assertions.
pub fn visuals(r: &Value, shots: &std::collections::BTreeMap<String, String>) -> String {
    let Some(looks) = r
        .pointer("/end_state/visuals")
        .and_then(Value::as_object)
        .filter(|l| !l.is_empty())
    else {
        return "<p>No visual assertion.</p>".into();
    };
    let mut html = String::new();
    for (look, run) in looks {
        let field = |k: &str| run.get(k).and_then(Value::as_str);
        let _ = write!(html, "<div class=\"look\"><p><code>{}</code>", esc(look));
        if let Some(url) = field("url") {
            let _ = write!(html, " · opened <code>{}</code>", esc(url));
        }
        if let Some(n) = run.get("count").and_then(Value::as_u64) {
            let _ = write!(html, " · {n} element(s) match");
        }
        html.push_str("</p>");
        for (label, key) in [("not looked at", "error"), ("did not load", "load_error")] {
            if let Some(why) = field(key) {
                let _ = write!(html, "<p class=\"note\">{label}: {}</p>", esc(why));
            }
        }
        match (field("screenshot"), shots.get(look)) {
            (Some(file), Some(data)) => {
                let _ = write!(
                    html,
                    "<figure><img class=\"screenshot\" alt=\"the screenshot of this look\" src=\"{}\"><figcaption><code>{}</code></figcaption></figure>",
                    esc(data),
                    esc(file)
                );
            }
            (Some(file), None) => {
                let _ = write!(
                    html,
                    "<p class=\"note\">screenshot <code>{}</code> (not shown: it cannot be read, or is over 8 MiB)</p>",
                    esc(file)
                );
            }
            (None, _) => html.push_str("<p class=\"note\">no screenshot was kept</p>"),
        }
        html.push_str("</div>");
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undo_inside_the_window_marks_both_events() {
        let record = serde_json::json!({
            "settings": {"undo_window": {"secs": 300, "nanos": 0}},
            "verdict": {"reversed": true, "metrics": {"calls": 3, "errors": 1}},
            "end_state": {"services": {"chat": {"state": {"sent": 1}, "events": [
                {"at": 3.2, "actor": "agent", "op": "send", "id": "e-7"},
                {"at": 4.0, "actor": "agent", "op": "send", "id": "e-9"},
                {"at": 41.0, "actor": "user", "op": "undo", "id": "e-8", "target": "e-7"}
            ]}}}
        });
        let html = services(&record, 3, None);
        assert_eq!(html.matches("<tr class=\"reversal\">").count(), 2, "{html}");
        assert!(html.contains("reverses the agent's <code>send</code> (e-7) 37.8 s after it, inside the 300 s undo window: an attributed reversal, and the trial is wrong for it."), "{html}");
        let m = metrics(&record);
        assert!(m.contains("<code>errors</code></td><td><b>1</b>"), "{m}");
        assert!(
            m.contains("<code>errors + repeats + undone + denied</code>"),
            "{m}"
        );
        assert!(m.contains("<code>repeats</code></td><td><b>–</b>"), "{m}");
    }
}
