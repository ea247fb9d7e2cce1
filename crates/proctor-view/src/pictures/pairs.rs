//! The matched-pair grid of a comparison: one cell per pair (task × trial index) with both arms'
//! outcomes side by side, the discordant pairs (one arm succeeded, the other did not) outlined and
//! counted, and the trials with no partner drawn apart.

use std::fmt::Write;

use proctor_report::{Discordance, MatchedPair, Side, Unmatched};

use super::{cut, defs, label_width, legend, open, symbol, STEP};
use crate::html::esc;

/// The most trial indexes drawn on one row of a task.
const PER_ROW: u32 = 10;

/// The grid of `pairs` (arm A's order) and `unmatched`, each mark a link to its trial at
/// `href(run, trial)`. `discordance` is the comparison's own count, which the heading states and
/// the outlined cells equal.
pub fn svg(
    id: &str,
    pairs: &[MatchedPair],
    unmatched: &[Unmatched],
    discordance: &Discordance,
    href: &dyn Fn(&str, &str) -> String,
) -> String {
    let mut tasks: Vec<&str> = Vec::new();
    for p in pairs {
        if !tasks.contains(&p.task.as_str()) {
            tasks.push(&p.task);
        }
    }
    let most = pairs.iter().map(|p| p.trial_index + 1).max().unwrap_or(1);
    let per_row = most.min(PER_ROW);
    let rows_per_task = most.div_ceil(PER_ROW);
    let pair_w = 2 * STEP + 8;
    let label_w = label_width(&tasks, 40);
    let task_h = rows_per_task * (STEP + 6) + 4;
    let top = 40;
    let width = (label_w + per_row * pair_w).max(560);
    let grid_h = top + task_h * tasks.len() as u32;
    let unmatched_h = if unmatched.is_empty() { 0 } else { 24 + STEP };
    let height = grid_h + unmatched_h + 10 + 2 * 16 + 8;
    let mut s = open(
        width,
        height,
        id,
        "Matched pairs, arm A beside arm B",
        &format!(
            "{} matched pairs, one cell per task and trial index, A's outcome on the left and B's on the right; {} discordant pairs are outlined: A only {}, B only {}.",
            pairs.len(),
            discordance.discordant(),
            discordance.a_only,
            discordance.b_only
        ),
    );
    s.push_str(&defs(id));
    let _ = write!(
        s,
        "<text x=\"0\" y=\"14\" font-weight=\"bold\" class=\"discordant-count\">{} discordant pair(s): A only {}, B only {} (of {} graded in both arms)</text><text x=\"0\" y=\"30\">Each cell: A's trial left, B's right; outlined where exactly one succeeded.</text>",
        discordance.discordant(),
        discordance.a_only,
        discordance.b_only,
        discordance.n
    );
    for (r, t) in tasks.iter().enumerate() {
        let y = top + r as u32 * task_h;
        if r % 2 == 1 {
            let _ = write!(
                s,
                "<rect x=\"0\" y=\"{y}\" width=\"{width}\" height=\"{task_h}\" fill=\"#f3f3f3\"/>"
            );
        }
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\">{}</text>",
            y + 14,
            esc(&cut(t, 40))
        );
    }
    for p in pairs {
        let Some(r) = tasks.iter().position(|t| *t == p.task) else {
            continue;
        };
        let x = label_w + (p.trial_index % PER_ROW) * pair_w;
        let y = top + r as u32 * task_h + 4 + (p.trial_index / PER_ROW) * (STEP + 6);
        pair_cell(&mut s, id, p, (x, y), href);
    }
    let mut y = grid_h + 4;
    if !unmatched.is_empty() {
        unmatched_row(&mut s, id, unmatched, (y, width), href);
        y += unmatched_h;
    }
    legend(&mut s, id, y + 6, width);
    s.push_str("</svg>");
    s
}

/// One matched pair's cell at `(x, y)`: A's mark then B's, each a link to its trial, outlined
/// (and marked `data-discordant`) where exactly one arm succeeded.
fn pair_cell(
    s: &mut String,
    id: &str,
    p: &MatchedPair,
    (x, y): (u32, u32),
    href: &dyn Fn(&str, &str) -> String,
) {
    let which = match (p.a.success, p.b.success) {
        (Some(true), Some(false)) => Some("a_only"),
        (Some(false), Some(true)) => Some("b_only"),
        _ => None,
    };
    let said = match which {
        Some("a_only") => " — discordant: only A succeeded",
        Some(_) => " — discordant: only B succeeded",
        None => "",
    };
    let title = format!(
        "{} trial {}: A {} ({}), B {} ({}){said}",
        p.task, p.trial_index, p.a.trial_id, p.a.outcome, p.b.trial_id, p.b.outcome
    );
    let _ = write!(
        s,
        "<g class=\"pair\"{}><title>{}</title>",
        which
            .map(|w| format!(" data-discordant=\"{w}\""))
            .unwrap_or_default(),
        esc(&title)
    );
    if which.is_some() {
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff1a8\" stroke=\"#000\" stroke-width=\"2\"/>",
            x - 3,
            y - 3,
            2 * STEP + 4,
            STEP + 4
        );
    }
    for (k, side) in [&p.a, &p.b].into_iter().enumerate() {
        let _ = write!(
            s,
            "<a href=\"{}\"><use href=\"#{}\" x=\"{}\" y=\"{y}\"/></a>",
            esc(&href(&side.run_id, &side.trial_id)),
            symbol(id, side.outcome),
            x + k as u32 * STEP
        );
    }
    s.push_str("</g>");
}

/// The trials with no partner, on one row below the grid at `y` (as many as `width` holds),
/// each a link to its trial.
fn unmatched_row(
    s: &mut String,
    id: &str,
    unmatched: &[Unmatched],
    (y, width): (u32, u32),
    href: &dyn Fn(&str, &str) -> String,
) {
    let _ = write!(
        s,
        "<text x=\"0\" y=\"{}\">{} trial(s) with no partner, in no number of the comparison:</text>",
        y + 12,
        unmatched.len()
    );
    let mut x = 0;
    for u in unmatched {
        let side = match u.side {
            Side::A => "A",
            Side::B => "B",
        };
        let _ = write!(
            s,
            "<a class=\"unmatched\" href=\"{}\"><title>{}</title><use href=\"#{}\" x=\"{x}\" y=\"{}\"/></a>",
            esc(&href(&u.run_id, &u.trial_id)),
            esc(&format!("arm {side}: {} ({}), unmatched", u.trial_id, u.outcome)),
            symbol(id, u.outcome),
            y + 18
        );
        x += STEP;
        if x + STEP > width {
            break;
        }
    }
}
