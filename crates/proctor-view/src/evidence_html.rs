//! A trial's interface metrics (each with its definition, from proctor-score's one list) and
//! its services' end state: state and event log as tables, with every user `undo` of an agent's
//! event marked, the time between them and the task's undo window.

use maud::{html, Markup};
use serde_json::Value;

use crate::html::table;
use crate::json_html;

/// A definition's text, its backticked spans as code.
fn definition(text: &str) -> Markup {
    html! {
        @for (i, part) in text.split('`').enumerate() {
            @if i % 2 == 1 { code { (part) } } @else { (part) }
        }
    }
}

/// The interface metrics of the record's verdict, each with its definition.
pub fn metrics(record: &Value) -> Markup {
    let Some(m) = record
        .get("verdict")
        .and_then(|v| v.get("metrics"))
        .filter(|m| m.is_object())
    else {
        return html! { p { "No interface metrics: the task has no interface, or the trial was not graded." } };
    };
    let rows = html! {
        @for (name, text) in proctor_score::metrics::DEFINITIONS.iter() {
            tr id={ "metric-" (name) } {
                td { code { (name) } }
                td { b { (m.get(*name).map_or("–".to_string(), Value::to_string)) } }
                td { (definition(text)) }
            }
        }
    };
    table("metrics", &["Metric", "Value", "Definition"], rows)
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

/// A heading of level `h` (3 to 6; a service's sections sit under a trial's sections).
fn heading(h: u8, content: Markup) -> Markup {
    match h {
        ..=3 => html! { h3 { (content) } },
        4 => html! { h4 { (content) } },
        5 => html! { h5 { (content) } },
        _ => html! { h6 { (content) } },
    }
}

/// Each service's end state (state and events as tables, reversals marked), then what the
/// sandbox reported of the services (readiness, guard, exit). `pages` is the URL under which the
/// viewer pages the trial's service files (`None` in an export, which has no server): a state or
/// event log too large for the record links to its pages there.
pub fn services(record: &Value, h: u8, pages: Option<String>) -> Markup {
    let window = undo_window(record);
    let reversed = record
        .get("verdict")
        .and_then(|v| v.get("reversed"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ends = record
        .get("end_state")
        .and_then(|e| e.get("services"))
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty());
    // A service's state and its reports are free-form JSON (each service's own), shown as
    // tables of JSON.
    let reports = record
        .get("services")
        .filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()));
    if ends.is_none() && reports.is_none() {
        return html! { p { "The trial had no service." } };
    }
    html! {
        @for (name, end) in ends.into_iter().flatten() {
            (heading(h, html! { "Service " code { (name) } }))
            (service_state(name, end, pages.as_deref()))
            @let events = end.get("events").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
            (event_log(name, events, window, reversed))
            @if let Some(omitted) = end.get("events_omitted").and_then(Value::as_u64).filter(|n| *n > 0) {
                p class="omitted" {
                    "… and " (omitted) " more events, graded but not listed here: "
                    @match pages.as_deref() {
                        Some(base) => a href={ (base) "/" (crate::pages::url_path(&format!("{name}/events.jsonl"))) } { "every event, page by page" },
                        None => { "the trial's " code { "services/" (name) "/events.jsonl" } " lists them all" },
                    }
                    "."
                }
            }
        }
        @if let Some(reports) = reports {
            (heading(h, html! { "How the services ran" }))
            (json_html::value(reports))
        }
    }
}

/// A service's state at the end: as tables, or why there is none, or where a state too large
/// for the record is kept.
fn service_state(name: &str, end: &Value, pages: Option<&str>) -> Markup {
    match (
        end.get("state").filter(|v| !v.is_null()),
        end.get("state_error"),
    ) {
        (Some(state), _) => html! { p { "Its state at the end:" } (json_html::value(state)) },
        (None, Some(Value::String(why))) => html! { p { "No state: " (why) } },
        _ => match end.get("state_omitted_bytes").and_then(Value::as_u64) {
            Some(bytes) => html! {
                p class="omitted" {
                    "Its state at the end is " (bytes) " bytes of JSON: graded whole, too large for this page; "
                    @match (pages, end.get("state_file").and_then(Value::as_str)) {
                        (Some(base), Some(file)) => a href={ (base) "/" (crate::pages::url_path(&format!("{name}/{file}"))) } { "read it page by page" },
                        _ => { "the trial's " code { "services/" (name) "/" } " folder keeps it" },
                    }
                    "."
                }
            },
            None => html! { p { "It wrote no state." } },
        },
    }
}

/// What an undo's reversal means, given the task's undo window.
fn undo_verdict(u: &Undo<'_>, window: Option<f64>, reversed: bool) -> String {
    let inside = window.map(|w| (0.0..=w).contains(&u.after));
    match (inside, window) {
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
    }
}

/// A service's events, each user `undo` of an agent's event and that event marked.
fn event_log(service: &str, events: &[Value], window: Option<f64>, reversed: bool) -> Markup {
    if events.is_empty() {
        return html! { p { "It logged no event." } };
    }
    let undos = undos(events);
    let g = |e: &Value, k: &str| match e.get(k) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let is = |e: &Value, undo: bool| {
        undos
            .iter()
            .any(|u| std::ptr::eq(if undo { u.undo } else { u.done }, e))
    };
    let rows = html! {
        @for e in events {
            @let (undo, done) = (is(e, true), is(e, false));
            tr class=[(undo || done).then_some("reversal")] {
                td { (g(e, "at")) }
                td { (g(e, "actor")) }
                td { (g(e, "op")) }
                td { (g(e, "id")) }
                td { (g(e, "target")) }
                td {
                    @if undo { b { "undo" } " of the agent's event" }
                    @else if done { b { "undone" } " by the user" }
                }
            }
        }
    };
    html! {
        (table(&format!("events-{service}"), &["At (s)", "Actor", "Op", "Id", "Target", "Reversal"], rows))
        @if !undos.is_empty() {
            ul class="reversals" {
                @for u in &undos {
                    li {
                        "The user's " code { "undo" } " (" (g(u.undo, "id")) ") reverses the agent's "
                        code { (g(u.done, "op")) } " (" (g(u.done, "id")) ") "
                        (format!("{:.1}", u.after)) " s after it, " (undo_verdict(u, window, reversed)) "."
                    }
                }
            }
        }
    }
}

/// The visual looks: each look's page, what it found and its kept screenshot, shown inline
/// (`shots`, by look, as data URLs); nothing for a trial without visual assertions.
pub fn visuals(r: &Value, shots: &std::collections::BTreeMap<String, String>) -> Markup {
    let Some(looks) = r
        .pointer("/end_state/visuals")
        .and_then(Value::as_object)
        .filter(|l| !l.is_empty())
    else {
        return html! { p { "No visual assertion." } };
    };
    html! {
        @for (look, run) in looks {
            @let field = |k: &str| run.get(k).and_then(Value::as_str);
            div class="look" {
                p {
                    code { (look) }
                    @if let Some(url) = field("url") { " · opened " code { (url) } }
                    @if let Some(n) = run.get("count").and_then(Value::as_u64) { " · " (n) " element(s) match" }
                }
                @for (label, key) in [("not looked at", "error"), ("did not load", "load_error")] {
                    @if let Some(why) = field(key) { p class="note" { (label) ": " (why) } }
                }
                @match (field("screenshot"), shots.get(look)) {
                    (Some(file), Some(data)) => figure {
                        img class="screenshot" alt="the screenshot of this look" src=(data);
                        figcaption { code { (file) } }
                    },
                    (Some(file), None) => p class="note" {
                        "screenshot " code { (file) } " (not shown: it cannot be read, or is over 8 MiB)"
                    },
                    (None, _) => p class="note" { "no screenshot was kept" },
                }
            }
        }
    }
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
        let html = services(&record, 3, None).into_string();
        assert_eq!(html.matches("<tr class=\"reversal\">").count(), 2, "{html}");
        assert!(html.contains("reverses the agent's <code>send</code> (e-7) 37.8 s after it, inside the 300 s undo window: an attributed reversal, and the trial is wrong for it."), "{html}");
        let m = metrics(&record).into_string();
        assert!(m.contains("<code>errors</code></td><td><b>1</b>"), "{m}");
        assert!(
            m.contains("<code>errors + repeats + undone + denied</code>"),
            "{m}"
        );
        assert!(m.contains("<code>repeats</code></td><td><b>–</b>"), "{m}");
    }
}
