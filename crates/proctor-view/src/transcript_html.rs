//! A trial's transcripts on its page: each one's first lines, rendered by the server (what a
//! reader without JavaScript, or of an export, sees), in a box whose script then shows the whole
//! transcript a visible window at a time, asking the transcript API for the lines it needs.

use maud::{html, Markup};

use crate::data::{TrialPage, TRANSCRIPT_HEAD};
use crate::transcript::Line;

/// The transcripts section of trial `t`; `served` when the page can ask the server for more.
pub fn section(t: &TrialPage, served: bool) -> Markup {
    if t.transcripts.is_empty() {
        return html! { p { "No transcript was recorded (the agent never started, or wrote nothing)." } };
    }
    html! {
        @for h in &t.transcripts {
            @let api = format!(
                "/api/runs/{}/trials/{}/transcript?source={}",
                t.run, t.summary.trial_id, h.source.name
            );
            @let label = match h.source.name {
                "model" => "The model's side",
                _ => "The agent's side",
            };
            section class="tx-box" aria-label=(label) {
                p { b { (label) } ": " code { (h.source.file) } ", " (h.source.bytes) " bytes" }
                div class="tx" role="log" tabindex="0" aria-label={ (label) ", one entry per line" }
                    data-transcript=[served.then_some(&api)] data-source=[served.then_some(h.source.name)] {
                    div class="tx-rows" { @for line in &h.lines { (row(line)) } }
                }
                @if h.more {
                    p class="note tx-note" {
                        "The first " (TRANSCRIPT_HEAD) " lines are shown here; "
                        @if served {
                            "the rest loads as you scroll (this needs JavaScript; the transcript API serves it in slices)"
                        } @else {
                            "the rest is in the trial's folder, and " code { "proctor view" } " shows it all"
                        }
                        "."
                    }
                }
            }
        }
    }
}

/// One line: its number, its kind and what it says, the line as written in its title.
pub fn row(l: &Line) -> Markup {
    html! {
        div class="tx-row" title=(l.raw) {
            span class="tx-n" { (l.n) } " " span class="tx-kind" { (l.kind) } " " span class="tx-text" { (l.text) }
        }
    }
}
