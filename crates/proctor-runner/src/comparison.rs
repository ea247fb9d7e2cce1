//! The two arms a comparison reads (two variants of one run, or one variant of each of two
//! runs, each in the scoring asked for), and the rows the promotion gates read; and the
//! comparison of two `RUN/VARIANT` arms as JSON, for the viewer's comparison page.

use proctor_report::{compare, gate, CompareOptions, Comparison, GateReport, Provenance, TrialRow};
use proctor_store::{RunId, Scoring, ScoringChoice, Store};
use proctor_suite::Suite;

use crate::error::{Context, RunError};
use crate::export::pick_scoring;
use crate::results::read_scored_rows;

/// What to compare: one or two runs (each `RUN` or `RUN/VARIANT`), and the variants.
#[derive(Debug, Clone, Copy)]
pub struct ArmsRequest<'a> {
    /// One or two runs.
    pub runs: &'a [String],
    /// With one run: the two variants, `A,B`.
    pub variants: Option<&'a str>,
    /// With two runs: only this variant of each.
    pub variant: Option<&'a str>,
    /// Which scoring of each run to compare.
    pub scoring: ScoringChoice,
}

/// A run's rows in the scoring `choice` picks, read with the suite the run keeps (or, for a
/// run that keeps none, the folder it was read from), and the scoring used.
fn rows_of(
    store: &Store,
    id: &RunId,
    choice: ScoringChoice,
) -> Result<(Vec<TrialRow>, Suite, Scoring), RunError> {
    let run = store.open_run(id).context("cannot open the run")?;
    let (suite, _) = crate::stored_suite::open(&run)?;
    let scoring = pick_scoring(&run, choice)?;
    let rows = read_scored_rows(&run, &suite, &scoring).context("cannot read the run's trials")?;
    Ok((rows, suite, scoring))
}

fn only(rows: &[TrialRow], variant: &str) -> Vec<TrialRow> {
    rows.iter()
        .filter(|r| r.variant == variant)
        .cloned()
        .collect()
}

fn variants_of(rows: &[TrialRow]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if !v.contains(&r.variant) {
            v.push(r.variant.clone());
        }
    }
    v
}

/// The two arms, the suite they were run from, and the rows the promotion gates read.
pub struct Arms {
    /// Arm A's rows.
    pub a: Vec<TrialRow>,
    /// Arm B's rows.
    pub b: Vec<TrialRow>,
    /// The suite (arm A's run's).
    pub suite: Suite,
    /// The rows the promotion gates read.
    pub gate_rows: Vec<TrialRow>,
    /// Each run read and the scoring it was read in.
    pub scorings: Vec<(RunId, Scoring)>,
    /// Where the arms come from, and the runs of the suite they leave out.
    pub provenance: Provenance,
}

/// Where arms `a` and `b` (read in `scorings`) of suite `suite` come from.
fn provenance_of(
    store: &Store,
    suite: &Suite,
    a: &[TrialRow],
    b: &[TrialRow],
    scorings: &[(RunId, Scoring)],
) -> Result<Provenance, RunError> {
    let read = |rows| {
        crate::provenance::arm_read(rows, scorings).ok_or_else(|| {
            RunError::usage(
                "cannot compare: an arm has no trials",
                "each arm must hold finished trials",
            )
        })
    };
    crate::provenance::provenance(store, suite.id(), &read(a)?, &read(b)?)
}

/// A run's rows when it holds one variant; refused, naming them, when it holds several.
fn one_variant(rows: &[TrialRow], run: &RunId) -> Result<Vec<TrialRow>, RunError> {
    let variants = variants_of(rows);
    if variants.len() != 1 {
        return Err(RunError::usage(
            format!(
                "run {run} has variants {}: each arm must be one variant",
                variants.join(",")
            ),
            format!("write the arm as {run}/VARIANT"),
        ));
    }
    Ok(rows.to_vec())
}

/// The run a command names (an id, a unique prefix of one, or `latest`), or a usage error that
/// says how to list the runs.
pub fn resolve(store: &Store, prefix: &str) -> Result<RunId, RunError> {
    store
        .resolve_run(prefix)
        .map_err(|e| RunError::usage(e.to_string(), "`proctor list` shows the runs in this store"))
}

/// The arms the arguments name: two variants of one run, or two runs.
pub fn arms(store: &Store, args: &ArmsRequest) -> Result<Arms, RunError> {
    match (args.runs, args.variants) {
        ([one], Some(pair)) => two_variants(store, one, pair, args.scoring),
        ([one], None) => Err(RunError::usage(
            format!("compare needs two arms; got only run {one}"),
            "give two runs, or one run with --variants A,B",
        )),
        ([ra, rb], None) => two_runs(store, ra, rb, args.variant, args.scoring),
        (_, Some(_)) => Err(RunError::usage(
            "--variants compares two variants of ONE run",
            "give one run with --variants A,B",
        )),
        _ => Err(RunError::usage(
            "compare takes two runs, or one run with --variants A,B",
            "see `proctor compare --help`",
        )),
    }
}

/// Two variants of one run, `pair` being `A,B`.
fn two_variants(
    store: &Store,
    run: &str,
    pair: &str,
    choice: ScoringChoice,
) -> Result<Arms, RunError> {
    let Some((va, vb)) = pair.split_once(',') else {
        return Err(RunError::usage(
            format!("--variants {pair}: expected two variant ids, `A,B`"),
            "for example --variants control,method",
        ));
    };
    let id = resolve(store, run)?;
    let (rows, suite, scoring) = rows_of(store, &id, choice)?;
    let known = variants_of(&rows);
    for v in [va, vb] {
        if !known.iter().any(|k| k == v) {
            return Err(RunError::usage(
                format!("run {id} has no variant `{v}`"),
                format!("its variants: {}", known.join(", ")),
            ));
        }
    }
    let (a, b) = (only(&rows, va), only(&rows, vb));
    let scorings = vec![(id, scoring)];
    let provenance = provenance_of(store, &suite, &a, &b, &scorings)?;
    Ok(Arms {
        a,
        b,
        suite,
        gate_rows: rows,
        scorings,
        provenance,
    })
}

/// A run argument of `compare`: the run, and the variant when it is written `RUN/VARIANT`.
fn split_arm(arm: &str) -> (&str, Option<&str>) {
    match arm.split_once('/') {
        Some((run, variant)) => (run, Some(variant)),
        None => (arm, None),
    }
}

/// The rows of `variant` in a run's rows, refused when it has none.
fn variant_rows(rows: &[TrialRow], run: &RunId, variant: &str) -> Result<Vec<TrialRow>, RunError> {
    let picked = only(rows, variant);
    if picked.is_empty() {
        return Err(RunError::usage(
            format!("run {run} has no finished trial of variant `{variant}`"),
            format!("its variants: {}", variants_of(rows).join(", ")),
        ));
    }
    Ok(picked)
}

/// Two runs: one variant of each (the arm's own `RUN/VARIANT`, else `variant`, else each run's
/// only one).
fn two_runs(
    store: &Store,
    ra: &str,
    rb: &str,
    variant: Option<&str>,
    choice: ScoringChoice,
) -> Result<Arms, RunError> {
    let ((ra, arm_a), (rb, arm_b)) = (split_arm(ra), split_arm(rb));
    let (ida, idb) = (resolve(store, ra)?, resolve(store, rb)?);
    let (rows_a, suite, scoring_a) = rows_of(store, &ida, choice)?;
    let (rows_b, _, scoring_b) = rows_of(store, &idb, choice)?;
    let mut scorings = vec![(ida.clone(), scoring_a)];
    if idb != ida {
        scorings.push((idb.clone(), scoring_b));
    }
    let (a, b) = match (arm_a.or(variant), arm_b.or(variant)) {
        (Some(va), Some(vb)) => (
            variant_rows(&rows_a, &ida, va)?,
            variant_rows(&rows_b, &idb, vb)?,
        ),
        (Some(va), None) => (
            variant_rows(&rows_a, &ida, va)?,
            one_variant(&rows_b, &idb)?,
        ),
        (None, Some(vb)) => (
            one_variant(&rows_a, &ida)?,
            variant_rows(&rows_b, &idb, vb)?,
        ),
        (None, None) => {
            let (va, vb) = (variants_of(&rows_a), variants_of(&rows_b));
            if va.len() != 1 || vb.len() != 1 {
                return Err(RunError::usage(
                    format!("run {ida} has variants {} and run {idb} has {}: each arm must be one variant", va.join(","), vb.join(",")),
                    "write an arm as RUN/VARIANT, or add --variant V to compare the same variant across the two runs",
                ));
            }
            (rows_a.clone(), rows_b.clone())
        }
    };
    let gate_rows = gate_rows_of_two(rows_a, rows_b, &suite);
    let provenance = provenance_of(store, &suite, &a, &b, &scorings)?;
    Ok(Arms {
        a,
        b,
        suite,
        gate_rows,
        scorings,
        provenance,
    })
}

/// The rows the gates read when the arms come from two runs: the candidate from run B, every
/// other arm from run A.
fn gate_rows_of_two(rows_a: Vec<TrialRow>, rows_b: Vec<TrialRow>, suite: &Suite) -> Vec<TrialRow> {
    let candidate = suite
        .file
        .promotion
        .as_ref()
        .map(|p| p.candidate.get_ref().clone());
    let mut gate_rows: Vec<TrialRow> = rows_a
        .into_iter()
        .filter(|r| Some(&r.variant) != candidate.as_ref())
        .collect();
    gate_rows.extend(
        rows_b
            .into_iter()
            .filter(|r| Some(&r.variant) == candidate.as_ref()),
    );
    gate_rows
}

/// Compares the arms.
pub fn comparison(arms: &Arms) -> Result<proctor_report::Comparison, RunError> {
    let options =
        CompareOptions::from(&arms.suite.file.report).with_variant_tasks(&arms.suite.file);
    compare(&arms.a, &arms.b, &options)
        .map(|c| c.with_provenance(arms.provenance.clone()))
        .map_err(|e| {
            RunError::usage(
                format!("cannot compare: {e}"),
                "compare runs of the same suite, fixture and mutations",
            )
        })
}

/// The scorings read, as JSON: `[{"run": ID, "kind": ..., "rescore": N, "at": ..., "file": ...,
/// "rescores": N}]`.
pub fn scorings_json(scorings: &[(RunId, Scoring)]) -> serde_json::Value {
    scorings
        .iter()
        .map(|(run, s)| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                m.insert("run".into(), run.as_str().into());
            }
            v
        })
        .collect()
}

/// The comparison of two arms, each `RUN_ID/VARIANT` (the runs may differ), as `--format json
/// --gate` prints it: the comparison, the gates over the arms' runs (as `compare --gate` applies
/// them: one run's trials, or the candidate from B's run and every other arm from A's) or why
/// they cannot be applied, and the scoring each run was read in; for the viewer's comparison
/// page.
pub fn two_arms(store: &Store, a: &str, b: &str) -> Result<ArmsOfTwo, String> {
    let split = |arm: &str| -> Result<(RunId, String), String> {
        let (run, variant) = arm
            .split_once('/')
            .ok_or_else(|| format!("`{arm}` is not an arm: write RUN/VARIANT"))?;
        let id = resolve(store, run).map_err(|e| e.to_string())?;
        Ok((id, variant.to_string()))
    };
    let ((ra, va), (rb, vb)) = (split(a)?, split(b)?);
    let message = |e: RunError| e.one_line();
    let (rows_a, suite, scoring_a) = rows_of(store, &ra, ScoringChoice::Latest).map_err(message)?;
    let mut scorings = vec![(ra.clone(), scoring_a)];
    let rows_b = if ra == rb {
        rows_a.clone()
    } else {
        let (rows, _, scoring_b) = rows_of(store, &rb, ScoringChoice::Latest).map_err(message)?;
        scorings.push((rb.clone(), scoring_b));
        rows
    };
    for (rows, run, v) in [(&rows_a, &ra, &va), (&rows_b, &rb, &vb)] {
        if !rows.iter().any(|r| &r.variant == v) {
            return Err(format!(
                "run {run} has no finished trial of variant `{v}` (its variants: {})",
                variants_of(rows).join(", ")
            ));
        }
    }
    let options = CompareOptions::from(&suite.file.report).with_variant_tasks(&suite.file);
    let (arm_a, arm_b) = (only(&rows_a, &va), only(&rows_b, &vb));
    let provenance = provenance_of(store, &suite, &arm_a, &arm_b, &scorings).map_err(message)?;
    let comparison = compare(&arm_a, &arm_b, &options)
        .map_err(|e| format!("cannot compare: {e}"))?
        .with_provenance(provenance);
    let gates = match &suite.file.promotion {
        None => Err("the suite has no [promotion] table, so there are no gates".to_string()),
        Some(promotion) => {
            let rows = if ra == rb {
                rows_a
            } else {
                gate_rows_of_two(rows_a, rows_b, &suite)
            };
            gate(&rows, promotion, &suite.file.report)
                .map(|mut report| {
                    // As `compare --gate` without --allow-mixed-runs.
                    proctor_report::provenance_gate(&mut report, &comparison.warnings, false);
                    report
                })
                .map_err(|e| format!("the gates cannot be applied: {e}"))
        }
    };
    Ok((comparison, gates, scorings))
}

/// Two arms compared ([`two_arms`]): the comparison, the gates or why there are none, and the
/// scoring each run was read in.
pub type ArmsOfTwo = (
    Comparison,
    Result<GateReport, String>,
    Vec<(RunId, Scoring)>,
);

/// The suite's promotion gates over the arms' rows.
pub fn gates(arms: &Arms) -> Result<GateReport, RunError> {
    let Some(promotion) = &arms.suite.file.promotion else {
        return Err(RunError::usage("--gate needs a [promotion] table in suite.toml", "add [promotion] with baseline, candidate and the minimums (docs/suite-format.md, \"[promotion]\")"));
    };
    gate(&arms.gate_rows, promotion, &arms.suite.file.report).map_err(|e| {
        RunError::usage(
            format!("cannot apply the gates: {e}"),
            "the run must hold the baseline and candidate variants",
        )
    })
}
