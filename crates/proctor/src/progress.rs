//! A run's progress on stderr, rendered from the engine's events: a redrawn bar on a terminal
//! (`indicatif`), else one aligned line per trial as it is committed to the store.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proctor_records::OutcomeTally;
use proctor_runner::Event;
use proctor_score::OutcomeKind;

/// The longest outcome label, so every progress line's columns align.
const OUTCOME_WIDTH: usize = OutcomeKind::WIDEST_LABEL;

/// Width of the bar drawn on a terminal.
const BAR: usize = 24;

/// One finished trial's progress line (when stderr is not a terminal): count, trial id,
/// outcome and seconds in aligned columns, then the reason for anything but `completed`, then
/// the integrity audit's flags, if any; each with its control characters shown escaped.
pub fn trial_line(
    done: usize,
    total: usize,
    trial: &str,
    (outcome, reason, flags): (OutcomeKind, &str, &[String]),
    seconds: f64,
) -> String {
    use proctor_report::escape_line;
    let width = total.to_string().len();
    // The reason and the flags may quote the agent (a name, an answer): one line, controls
    // escaped.
    let trial = escape_line(trial);
    let mut why = if outcome == OutcomeKind::Completed {
        String::new()
    } else {
        format!("  ({})", escape_line(reason))
    };
    if !flags.is_empty() {
        why.push_str(&format!("  [flagged: {}]", escape_line(&flags.join("; "))));
    }
    let outcome = outcome.label();
    format!("[{done:>width$}/{total}] {trial:<32} {outcome:<OUTCOME_WIDTH$} {seconds:>6.2}s{why}\n")
}

/// What a finished trial's line shows once it is committed.
struct Finished {
    outcome: OutcomeKind,
    reason: String,
    flags: Vec<String>,
    seconds: f64,
}

/// Progress on stderr: a redrawn line on a terminal, one line per committed trial otherwise.
pub struct Progress {
    total: usize,
    done: usize,
    /// Trials committed, by outcome (the bar lists them in the labels' order).
    counts: OutcomeTally,
    /// Trials finished and not yet committed, by id.
    waiting: HashMap<String, Finished>,
    /// The bar, when stderr is a terminal.
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Progress of a run of `total` trials, `done` of them finished before.
    pub fn new(total: usize, done: usize) -> Progress {
        let tty = std::io::stderr().is_terminal();
        Progress::drawn_on(total, done, tty.then(ProgressDrawTarget::stderr))
    }

    /// Progress drawn as a bar on `target`, or as lines on stderr when there is none.
    fn drawn_on(total: usize, done: usize, target: Option<ProgressDrawTarget>) -> Progress {
        let width = total.to_string().len();
        let bar = target.map(|target| {
            let bar = ProgressBar::with_draw_target(Some(total as u64), target);
            let template = format!("[{{bar:{BAR}}}] {{pos:>{width}}}/{{len}}  {{msg}}");
            // The template is built here from numbers; a bad one only loses the bar's layout.
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("# "));
            }
            bar.set_position(done as u64);
            bar
        });
        Progress {
            total,
            done,
            counts: OutcomeTally::default(),
            waiting: HashMap::new(),
            bar,
        }
    }

    /// Takes one event of the engine; a trial is counted when it is committed.
    pub fn event(&mut self, event: Event) {
        match event {
            Event::Started { .. } => {}
            Event::Finished {
                trial,
                summary,
                seconds,
            } => {
                let finished = Finished {
                    outcome: summary.outcome,
                    reason: summary.reason.unwrap_or_default(),
                    flags: summary.flags,
                    seconds,
                };
                self.waiting.insert(trial.id, finished);
            }
            Event::Committed { trial_id } => {
                if let Some(finished) = self.waiting.remove(&trial_id) {
                    self.committed(&trial_id, &finished);
                }
            }
        }
    }

    fn committed(&mut self, trial: &str, f: &Finished) {
        self.done += 1;
        self.counts.add(f.outcome, 1);
        if let Some(bar) = &self.bar {
            bar.set_message(self.counts_text());
            bar.set_position(self.done as u64);
            return;
        }
        let line = trial_line(
            self.done,
            self.total,
            trial,
            (f.outcome, &f.reason, &f.flags),
            f.seconds,
        );
        // Formatted first and written whole: stderr is unbuffered, and a padded format written
        // straight to it costs one write(2) per padding character.
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    /// The outcomes so far, for the bar: `wrong 1 · completed 3`.
    fn counts_text(&self) -> String {
        self.counts
            .iter()
            .map(|(o, n)| format!("{o} {n}"))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// Ends the redrawn line on a terminal.
    pub fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_store::TrialSummary;
    use proctor_suite::plan::PlannedTrial;

    #[test]
    fn progress_lines_align_for_every_outcome() {
        let lines: Vec<String> = OutcomeKind::ALL
            .iter()
            .map(|o| trial_line(3, 12, "deploy.trapped.0", (*o, "why", &[]), 0.25))
            .collect();
        let column = |l: &str| l.find("  0.25s").expect("the seconds column");
        let first = column(&lines[0]);
        for l in &lines {
            assert_eq!(column(l), first, "misaligned: {l:?} vs {:?}", lines[0]);
        }
        assert!(
            lines[0].starts_with("[ 3/12] deploy.trapped.0 "),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn a_progress_line_shows_the_agents_controls_escaped() {
        let flags = ["changed \x1b[31mtests".to_string()];
        let line = trial_line(
            1,
            1,
            "t.v.0",
            (OutcomeKind::Wrong, "said \x1b]52;c;aGk=\x07", &flags),
            0.5,
        );
        assert!(!line.contains('\x1b') && !line.contains('\x07'), "{line:?}");
        assert!(line.contains("(said \\u{1b}]52;c;aGk=\\u{7})"), "{line}");
        assert!(
            line.contains("[flagged: changed \\u{1b}[31mtests]"),
            "{line}"
        );
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
    }

    fn trial(id: &str) -> PlannedTrial {
        PlannedTrial {
            id: id.to_string(),
            task: "t".to_string(),
            variant: "v".to_string(),
            index: 0,
            mutation: None,
            seed: None,
        }
    }

    #[test]
    fn a_trial_counts_when_it_is_committed_not_when_it_finishes() {
        let term = indicatif::InMemoryTerm::new(4, 80);
        let target = ProgressDrawTarget::term_like(Box::new(term.clone()));
        let mut p = Progress::drawn_on(2, 0, Some(target));
        p.event(Event::Started { trial: trial("a") });
        let summary = TrialSummary {
            trial_id: "a".to_string(),
            task: String::new(),
            variant: String::new(),
            trial_index: 0,
            outcome: OutcomeKind::Wrong,
            reason: None,
            wall_seconds: 0.0,
            calls: None,
            wrong_turns: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            limit_reached: None,
            flags: Vec::new(),
        };
        p.event(Event::Finished {
            trial: trial("a"),
            summary: Box::new(summary),
            seconds: 1.0,
        });
        assert_eq!((p.done, p.waiting.len()), (0, 1));
        p.event(Event::Committed {
            trial_id: "a".to_string(),
        });
        assert_eq!((p.done, p.waiting.len()), (1, 0));
        assert_eq!(p.counts.get(OutcomeKind::Wrong), 1);
        if let Some(bar) = &p.bar {
            bar.abandon();
        }
        assert_eq!(
            term.contents().trim_end(),
            "[############            ] 1/2  wrong 1"
        );
    }
}
