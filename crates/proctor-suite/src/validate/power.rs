//! The power floor: `[report] underpowered_below` no lower than a comparison can conclude
//! anything from ([`MIN_UNDERPOWERED_BELOW`]), and, with `[promotion]`, `release_trials` no
//! lower than `underpowered_below`, so that a release run can reach the gates' sample size on
//! every task.
//!
//! Both are errors, not warnings: a suite below the floor would let a comparison or a
//! promotion conclude from as few pairs as fair coin flips give, and a release run below the
//! threshold fails its own `sample_size` gate every time. Neither is a choice worth allowing.

use super::spans::span_of;
use super::Validator;
use crate::model::MIN_UNDERPOWERED_BELOW;
use crate::problem::ProblemKind;

impl Validator<'_> {
    /// `underpowered_below` at or above the floor; with `[promotion]`, `release_trials` at or
    /// above `underpowered_below`.
    pub(super) fn power(&mut self) {
        let f = &self.suite.file;
        let threshold = f.report.underpowered_below;
        let threshold_span = span_of(&self.spans.report.underpowered_below);
        if threshold < MIN_UNDERPOWERED_BELOW {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    threshold_span.clone(),
                    format!(
                        "`underpowered_below = {threshold}` is below {MIN_UNDERPOWERED_BELOW}, the fewest matched pairs on which any difference can be told from noise"
                    ),
                )
                .with_label("below the power floor")
                .with_help(format!(
                    "write `underpowered_below = {MIN_UNDERPOWERED_BELOW}` or more: with n discordant pairs all on one side, fair coin flips give that 2 × 0.5^n of the time, 6.25% for 5 and 3.1% for 6, so below {MIN_UNDERPOWERED_BELOW} no verdict, and no promotion, would rest on evidence (docs/metrics.md, \"Gates\")"
                ));
            self.out.push(p);
        }
        if f.promotion.is_some() && f.release_trials < threshold {
            let release = f.release_trials;
            let span = match &self.spans.release_trials {
                Some(s) => s.span(),
                None => threshold_span,
            };
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    span,
                    format!(
                        "`release_trials = {release}` is below `underpowered_below = {threshold}`: every task of a release run would have too few matched pairs for the promotion gates"
                    ),
                )
                .with_label("fewer release trials than the gates need")
                .with_help(format!(
                    "write `release_trials = {}` or more (the `sample_size` gate wants {threshold} graded matched pairs on every task), or lower `underpowered_below` (not below {MIN_UNDERPOWERED_BELOW})",
                    threshold.max(MIN_UNDERPOWERED_BELOW)
                ));
            self.out.push(p);
        }
    }
}
