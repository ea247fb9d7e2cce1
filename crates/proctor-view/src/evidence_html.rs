//! A trial's interface metrics (each with its definition, from proctor-score's one list) and
//! its services' end state: state and event log as tables, with every user `undo` of an agent's
//! event marked, the time between them and the task's undo window.

use maud::{html, Markup};
use proctor_score::endstate::{ServiceEnd, ServiceEvent};
use proctor_score::metrics::InterfaceMetrics;
use proctor_score::{EndState, TrialVerdict};
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

/// A metric of `m` by its name in [`proctor_score::metrics::DEFINITIONS`]; `None` for a name
/// the metrics do not hold.
fn metric(m: &InterfaceMetrics, name: &str) -> Option<u64> {
    Some(match name {
        "calls" => m.calls,
        "errors" => m.errors,
        "repeats" => m.repeats,
        "undone" => m.undone,
        "denied" => m.denied,
        "wrong_turns" => m.wrong_turns,
        "recoveries" => m.recoveries,
        "help_calls" => m.help_calls,
        "asks" => m.asks,
        _ => return None,
    })
}

/// A conversation as a chat: each turn's prompt (the task's, or the simulated user's reply and
/// the rule that said it) and the agent's answer, with how the turn ended; then why it ended.
pub fn conversation(c: &proctor_score::Conversation) -> Markup {
    html! {
        ol class="chat" {
            @for t in &c.turns {
                li class="chat-user" {
                    p class="meta" { "user · turn " (t.turn) " · " (t.said_by.as_deref().unwrap_or("task prompt")) }
                    pre { (t.prompt) }
                }
                li class="chat-agent" {
                    p class="meta" {
                        "agent · " (format!("{:.2}", t.wall_seconds)) " s"
                        @if t.timed_out { " · timed out" }
                        @if let Some(code) = t.exit_code { " · exit " (code) }
                        @if let Some(sig) = t.signal { " · signal " (sig) }
                        @if let Some(why) = &t.not_run { " · not run: " (why) }
                    }
                    pre { (t.answer) }
                }
            }
        }
        p class="note" { "ended: " (c.ended) }
    }
}

/// The interface metrics of the trial's verdict, each with its definition.
pub fn metrics(verdict: Option<&TrialVerdict>) -> Markup {
    let Some(m) = verdict.and_then(|v| v.metrics.as_ref()) else {
        return html! { p { "No interface metrics: the task has no interface, or the trial was not graded." } };
    };
    let rows = html! {
        @for (name, text) in proctor_score::metrics::DEFINITIONS.iter() {
            tr id={ "metric-" (name) } {
                td { code { (name) } }
                td { b { (metric(m, name).map_or("–".to_string(), |v| v.to_string())) } }
                td { (definition(text)) }
            }
        }
    };
    table("metrics", &["Metric", "Value", "Definition"], rows)
}

/// A user's `undo` of an agent's event on one service.
struct Undo<'a> {
    /// The `undo` event.
    undo: &'a ServiceEvent,
    /// The agent's event it targets.
    done: &'a ServiceEvent,
    /// Seconds from the agent's event to the undo.
    after: f64,
}

/// Every user `undo` whose target is an agent's event of the same service.
fn undos(events: &[ServiceEvent]) -> Vec<Undo<'_>> {
    events
        .iter()
        .filter(|e| e.actor == "user" && e.op == "undo")
        .filter_map(|undo| {
            let target = undo.target.as_deref()?;
            let done = events
                .iter()
                .find(|e| e.actor == "agent" && e.id == target)?;
            Some(Undo {
                undo,
                done,
                after: undo.at - done.at,
            })
        })
        .collect()
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
/// sandbox reported of the services (`reports`: readiness, guard, exit). `window` is the task's
/// undo window in seconds, `reversed` whether the verdict found an attributed reversal. `pages`
/// is the URL under which the viewer pages the trial's service files (`None` in an export,
/// which has no server): a state or event log too large for the record links to its pages there.
pub fn services(
    end: &EndState,
    reports: Option<&Value>,
    window: Option<f64>,
    reversed: bool,
    h: u8,
    pages: Option<String>,
) -> Markup {
    // What the sandbox reported is shown as the JSON it is, as tables.
    let reports = reports.filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()));
    if end.services.is_empty() && reports.is_none() {
        return html! { p { "The trial had no service." } };
    }
    html! {
        @for (name, end) in &end.services {
            (heading(h, html! { "Service " code { (name) } }))
            (service_state(name, end, pages.as_deref()))
            (event_log(name, &end.events, window, reversed))
            @if end.events_omitted > 0 {
                p class="omitted" {
                    "… and " (end.events_omitted) " more events, graded but not listed here: "
                    @match pages.as_deref() {
                        Some(base) => a href={ (base) "/" (crate::links::url_path(&format!("{name}/events.jsonl"))) } { "every event, page by page" },
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

/// A service's state at the end (free-form JSON, the service's own, shown as tables), or why
/// there is none, or where a state too large for the record is kept.
fn service_state(name: &str, end: &ServiceEnd, pages: Option<&str>) -> Markup {
    match (
        end.state.as_ref().filter(|v| !v.is_null()),
        &end.state_error,
    ) {
        (Some(state), _) => html! { p { "Its state at the end:" } (json_html::value(state)) },
        (None, Some(why)) => html! { p { "No state: " (why) } },
        _ => match end.state_omitted_bytes {
            Some(bytes) => html! {
                p class="omitted" {
                    "Its state at the end is " (bytes) " bytes of JSON: graded whole, too large for this page; "
                    @match (pages, &end.state_file) {
                        (Some(base), Some(file)) => a href={ (base) "/" (crate::links::url_path(&format!("{name}/{file}"))) } { "read it page by page" },
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
fn event_log(
    service: &str,
    events: &[ServiceEvent],
    window: Option<f64>,
    reversed: bool,
) -> Markup {
    if events.is_empty() {
        return html! { p { "It logged no event." } };
    }
    let undos = undos(events);
    let is = |e: &ServiceEvent, undo: bool| {
        undos
            .iter()
            .any(|u| std::ptr::eq(if undo { u.undo } else { u.done }, e))
    };
    let rows = html! {
        @for e in events {
            @let (undo, done) = (is(e, true), is(e, false));
            tr class=[(undo || done).then_some("reversal")] {
                // The time as JSON writes it (`41.0`), as the events file has it.
                td { (Value::from(e.at).to_string()) }
                td { (e.actor) }
                td { (e.op) }
                td { (e.id) }
                td { (e.target.as_deref().unwrap_or("")) }
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
                        "The user's " code { "undo" } " (" (u.undo.id) ") reverses the agent's "
                        code { (u.done.op) } " (" (u.done.id) ") "
                        (format!("{:.1}", u.after)) " s after it, " (undo_verdict(u, window, reversed)) "."
                    }
                }
            }
        }
    }
}

/// The visual looks: each look's page, what it found and its kept screenshot, shown inline
/// (`shots`, by look, as data URLs); nothing for a trial without visual assertions.
pub fn visuals(end: &EndState, shots: &std::collections::BTreeMap<String, String>) -> Markup {
    if end.visuals.is_empty() {
        return html! { p { "No visual assertion." } };
    }
    html! {
        @for (look, run) in &end.visuals {
            div class="look" {
                p {
                    code { (look) } " · opened " code { (run.url) }
                    @if let Some(n) = run.count { " · " (n) " element(s) match" }
                }
                @for (label, why) in [("not looked at", &run.error), ("did not load", &run.load_error)] {
                    @if let Some(why) = why { p class="note" { (label) ": " (why) } }
                }
                @match (&run.screenshot, shots.get(look)) {
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
        let end = EndState {
            services: serde_json::from_value(
                serde_json::json!({"chat": {"state": {"sent": 1}, "events": [
                    {"at": 3.2, "actor": "agent", "op": "send", "id": "e-7"},
                    {"at": 4.0, "actor": "agent", "op": "send", "id": "e-9"},
                    {"at": 41.0, "actor": "user", "op": "undo", "id": "e-8", "target": "e-7"}
                ]}}),
            )
            .unwrap(),
            ..EndState::default()
        };
        let html = services(&end, None, Some(300.0), true, 3, None).into_string();
        assert_eq!(html.matches("<tr class=\"reversal\">").count(), 2, "{html}");
        assert!(html.contains("reverses the agent's <code>send</code> (e-7) 37.8 s after it, inside the 300 s undo window: an attributed reversal, and the trial is wrong for it."), "{html}");
        // Times as the events file writes them.
        assert!(html.contains("<td>41.0</td><td>user</td>"), "{html}");
        let verdict: TrialVerdict = serde_json::from_value(serde_json::json!({
            "outcome": {"outcome": "completed"}, "reason": "", "task_success": true, "success": null,
            "rubric": null, "answer_reads_as": null, "reversed": true,
            "metrics": {"calls": 3, "errors": 1, "repeats": 0, "undone": 0, "denied": 0,
                "wrong_turns": 1, "recoveries": 0, "help_calls": 0}
        }))
        .unwrap();
        let m = metrics(Some(&verdict)).into_string();
        assert!(m.contains("<code>errors</code></td><td><b>1</b>"), "{m}");
        assert!(
            m.contains("<code>errors + repeats + undone + denied</code>"),
            "{m}"
        );
        assert!(m.contains("<code>repeats</code></td><td><b>0</b>"), "{m}");
        // A name the metrics do not hold shows as not measured.
        assert_eq!(metric(&InterfaceMetrics::default(), "nonsense"), None);
        assert!(metrics(None).into_string().contains("No interface metrics"));
    }
}
