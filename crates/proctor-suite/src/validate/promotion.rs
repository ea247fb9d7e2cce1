//! `[promotion]`: variants the suite has and metrics proctor reports.

use toml::Spanned;

use super::Validator;
use crate::model::{MetricRef, Statistic, METRICS, PER_TRIAL_METRICS};
use crate::problem::{Problem, ProblemKind};

impl Validator<'_> {
    /// `[promotion]`: a baseline and a candidate among the variants, and metrics proctor reports.
    pub(super) fn promotion(&mut self) {
        let Some(promotion) = &self.suite.file.promotion else {
            return;
        };
        let variants: Vec<&str> = self
            .suite
            .file
            .variants
            .iter()
            .map(|v| v.id.get_ref().as_str())
            .collect();
        for (field, value) in [
            ("baseline", &promotion.baseline),
            ("candidate", &promotion.candidate),
        ] {
            if !variants.contains(&value.get_ref().as_str()) {
                let hint = crate::problem::nearest(value.get_ref(), variants.iter().copied())
                    .map(|n| format!("did you mean `{n}`?"))
                    .unwrap_or_else(|| format!("variants of this suite: {}", variants.join(", ")));
                let p = self
                    .at(
                        ProblemKind::UnknownReference,
                        value.span(),
                        format!(
                            "promotion `{field}` names no variant: `{}`",
                            value.get_ref()
                        ),
                    )
                    .with_label("unknown variant")
                    .with_help(hint);
                self.out.push(p);
            }
        }
        for metric in std::iter::once(&promotion.primary_metric)
            .chain(&promotion.no_regression)
            .chain(&promotion.no_regression_per_task)
        {
            if let Some(p) = self.metric_problem(metric) {
                self.out.push(p);
            }
        }
    }

    /// The problem with a metric as `[promotion]` names it (`NAME` or `NAME:STATISTIC`), if any:
    /// a name proctor does not report, a statistic that is not one, or a statistic on a rate.
    fn metric_problem(&self, metric: &Spanned<String>) -> Option<Problem> {
        let written = metric.get_ref().as_str();
        let r = MetricRef::split(written);
        if !METRICS.contains(&r.metric) {
            let list = METRICS.join(", ");
            let hint = match crate::problem::nearest(r.metric, METRICS.iter().copied()) {
                Some(n) => format!("did you mean `{n}`? The metrics are: {list}"),
                None => format!("write one of the metrics: {list}"),
            };
            return Some(
                self.at(
                    ProblemKind::UnknownReference,
                    metric.span(),
                    format!("`{}` is not a metric proctor reports", r.metric),
                )
                .with_label("unknown metric")
                .with_help(hint),
            );
        }
        let statistic = r.statistic?;
        let choices = Statistic::ALL
            .iter()
            .map(|s| format!("`{}:{}`", r.metric, s.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        if !r.is_per_trial() {
            return Some(
                self.at(
                    ProblemKind::UnknownReference,
                    metric.span(),
                    format!(
                        "`{}` is one number per arm and takes no statistic, but `{written}` names `{statistic}`",
                        r.metric
                    ),
                )
                .with_label("no statistic here")
                .with_help(format!(
                    "write `{}` alone; a statistic (median, mean, total) applies only to the per-trial metrics: {}",
                    r.metric,
                    PER_TRIAL_METRICS.join(", ")
                )),
            );
        }
        if Statistic::parse(statistic).is_some() {
            return None;
        }
        let names: Vec<&str> = Statistic::ALL.iter().map(|s| s.as_str()).collect();
        let hint = match crate::problem::nearest(statistic, names.iter().copied()) {
            Some(n) => format!(
                "did you mean `{}:{n}`? Write one of {choices}, or `{}` alone for the mean",
                r.metric, r.metric
            ),
            None => format!(
                "write one of {choices}, or `{}` alone for the mean",
                r.metric
            ),
        };
        Some(
            self.at(
                ProblemKind::UnknownReference,
                metric.span(),
                format!("`{statistic}` in `{written}` is not a statistic proctor reports"),
            )
            .with_label("unknown statistic")
            .with_help(hint),
        )
    }
}
