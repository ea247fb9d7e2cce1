//! Builders shared by the integration tests.

#![allow(dead_code)]

use proctor_records::run::{Isolation, PlanSection, RunMode, RunSections, TrialMode};
use proctor_store::{HostInfo, RunMeta, TrialSummary};

/// A plausible run's metadata.
pub fn meta() -> RunMeta {
    RunMeta {
        suite_id: "demo".into(),
        suite_path: "suites/demo".into(),
        suite_hash: "b3:suite".into(),
        fixture_hash: "b3:fixture".into(),
        trial_mode: RunMode::Dev,
        trials_per_cell: 3,
        variants: vec!["control".into(), "method".into()],
        tasks: vec!["fix-bug".into()],
        planned_trials: 6,
        isolation: Isolation::Overlay,
        host: HostInfo::detect(),
        proctor_version: "0.1.0".into(),
        ..RunMeta::default()
    }
}

/// A finished trial's summary with id `TASK.VARIANT.INDEX`.
pub fn summary(task: &str, variant: &str, index: u32, outcome: &str) -> TrialSummary {
    let outcome: proctor_records::OutcomeKind = outcome.parse().expect("an outcome label");
    TrialSummary {
        trial_id: format!("{task}.{variant}.{index}"),
        task: task.into(),
        variant: variant.into(),
        trial_index: index,
        outcome,
        reason: outcome
            .is_ungradeable()
            .then(|| "check crashed".to_string()),
        wall_seconds: 1.25 + f64::from(index),
        calls: Some(u64::from(index) + 3),
        wrong_turns: Some(1),
        input_tokens: None,
        output_tokens: Some(420),
        cost_usd: None,
        limit_reached: None,
        flags: Vec::new(),
    }
}

/// Run sections holding a plan of `trials` trials per cell, whose one task is named `task`.
pub fn sections(trials: u32, task: &str) -> RunSections {
    RunSections {
        plan: Some(PlanSection {
            trials,
            trial_mode: TrialMode::Dev,
            variants: Vec::new(),
            tasks: vec![task.to_string()],
            isolation: Isolation::Overlay,
            models: Vec::new(),
        }),
        ..RunSections::default()
    }
}
