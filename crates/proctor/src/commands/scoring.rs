//! Which scoring of a run `show`, `compare`, `export` and the viewer read (the latest by
//! default: the last `proctor rescore`, else the run's own), and how they say so.

use proctor_store::{RunHandle, RunId, Scoring, ScoringChoice};

use crate::exit::Error;

/// The scoring `choice` picks for `run`; an unknown rescore number is a usage error naming the
/// rescores the run has.
pub fn pick(run: &RunHandle, choice: ScoringChoice) -> Result<Scoring, Error> {
    Ok(proctor_runner::export::pick_scoring(run, choice)?)
}

/// The line that says which scoring of `run` a command read, with how to read the others:
/// `run R: scored by rescore 2 of DATE UTC; original: --scoring original (rescores: 1 to 2)`.
pub fn line(run: &RunId, scoring: &Scoring) -> String {
    if scoring.is_rescore() {
        format!(
            "run {run}: {scoring}; original: --scoring original (rescores: 1 to {})",
            scoring.rescores
        )
    } else if scoring.rescores > 0 {
        format!(
            "run {run}: {scoring}; the latest: --scoring latest (rescores: 1 to {})",
            scoring.rescores
        )
    } else {
        format!("run {run}: {scoring}")
    }
}
