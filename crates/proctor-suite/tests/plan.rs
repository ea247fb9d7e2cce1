//! The plan: stable mutation choices, identical for every variant of a (task, trial index), and
//! unchanged when variants are added or removed.

use std::collections::BTreeMap;
use std::path::Path;

use proctor_suite::plan::plan;
use proctor_suite::{PlanOptions, Suite};

fn traps() -> Suite {
    Suite::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traps"))
        .expect("the bundled traps suite is valid")
}

fn mutations(options: &PlanOptions) -> BTreeMap<(String, u32), Option<String>> {
    let p = plan(&traps(), options).unwrap();
    let mut out: BTreeMap<(String, u32), Option<String>> = BTreeMap::new();
    for t in &p.trials {
        let m = t.mutation.as_ref().map(|m| m.name.clone());
        if let Some(prev) = out.insert((t.task.clone(), t.index), m.clone()) {
            assert_eq!(
                prev, m,
                "two variants of {} #{} got different mutations",
                t.task, t.index
            );
        }
    }
    out
}

#[test]
fn the_same_suite_plans_the_same_mutations_every_time() {
    let options = PlanOptions {
        trials: Some(20),
        ..PlanOptions::default()
    };
    let first = plan(&traps(), &options).unwrap();
    let second = plan(&traps(), &options).unwrap();
    assert_eq!(first.trials, second.trials);
    assert_eq!(first.suite_hash, second.suite_hash);
    assert_eq!(first.fixture_hash, second.fixture_hash);
    // Both patches of spec-test are used over 20 trial indices.
    let used: std::collections::BTreeSet<_> = first
        .trials
        .iter()
        .filter_map(|t| t.mutation.as_ref().map(|m| m.name.clone()))
        .collect();
    assert_eq!(used.len(), 2, "{used:?}");
}

#[test]
fn adding_or_removing_a_variant_changes_no_mutation() {
    let all = mutations(&PlanOptions {
        trials: Some(12),
        ..PlanOptions::default()
    });
    let oracle_only = mutations(&PlanOptions {
        trials: Some(12),
        variants: vec!["oracle".into()],
        ..PlanOptions::default()
    });
    let trapped_only = mutations(&PlanOptions {
        trials: Some(12),
        variants: vec!["trapped".into()],
        ..PlanOptions::default()
    });
    assert_eq!(all, oracle_only);
    assert_eq!(all, trapped_only);
}

#[test]
fn unknown_variants_and_tasks_are_refused_with_the_known_ones() {
    let e = plan(
        &traps(),
        &PlanOptions {
            variants: vec!["orcale".into()],
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("oracle, trapped"), "{e}");
    let e = plan(
        &traps(),
        &PlanOptions {
            tasks: vec!["nope".into()],
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("assess"), "{e}");
}
