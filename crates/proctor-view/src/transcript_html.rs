//! A trial's transcripts on its page: each one's first lines, rendered by the server (what a
//! reader without JavaScript, or of an export, sees), in a box whose script then shows the whole
//! transcript a visible window at a time, asking the transcript API for the lines it needs.

use std::fmt::Write;

use crate::data::{TrialPage, TRANSCRIPT_HEAD};
use crate::html::esc;
use crate::transcript::Line;

/// The transcripts section of trial `t`; `served` when the page can ask the server for more.
pub fn section(t: &TrialPage, served: bool) -> String {
    if t.transcripts.is_empty() {
        return "<p>No transcript was recorded (the agent never started, or wrote nothing).</p>"
            .into();
    }
    let mut s = String::new();
    for h in &t.transcripts {
        let api = format!(
            "/api/runs/{}/trials/{}/transcript?source={}",
            t.run, t.summary.trial_id, h.source.name
        );
        let label = match h.source.name {
            "model" => "The model's side",
            _ => "The agent's side",
        };
        let _ = write!(
            s,
            "<section class=\"tx-box\" aria-label=\"{label}\"><p><b>{label}</b>: <code>{}</code>, {} bytes</p>",
            esc(&h.source.file),
            h.source.bytes
        );
        let attrs = if served {
            format!(
                " data-transcript=\"{}\" data-source=\"{}\"",
                esc(&api),
                h.source.name
            )
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "<div class=\"tx\" role=\"log\" tabindex=\"0\" aria-label=\"{label}, one entry per line\"{attrs}><div class=\"tx-rows\">"
        );
        for line in &h.lines {
            s.push_str(&row(line));
        }
        s.push_str("</div></div>");
        if h.more {
            let rest = if served {
                "the rest loads as you scroll (this needs JavaScript; the transcript API serves it in slices)"
            } else {
                "the rest is in the trial's folder, and <code>proctor view</code> shows it all"
            };
            let _ = write!(
                s,
                "<p class=\"note tx-note\">The first {TRANSCRIPT_HEAD} lines are shown here; {rest}.</p>"
            );
        }
        s.push_str("</section>");
    }
    s
}

/// One line: its number, its kind and what it says, the line as written in its title.
pub fn row(l: &Line) -> String {
    format!(
        "<div class=\"tx-row\" title=\"{}\"><span class=\"tx-n\">{}</span> <span class=\"tx-kind\">{}</span> <span class=\"tx-text\">{}</span></div>",
        esc(&l.raw),
        l.n,
        esc(&l.kind),
        esc(&l.text)
    )
}
