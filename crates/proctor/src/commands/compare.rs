//! `proctor compare A B` (two runs, each arm a run or `RUN/VARIANT`) or
//! `proctor compare RUN --variants a,b` (two variants of one run): matched trial-by-trial
//! comparison with n everywhere and `underpowered` below the power threshold; with `--gate`, the
//! suite's promotion gates, exiting 4 when one fails. A person's sitting is a run of its own
//! with one variant, `human:NAME`: `compare RUN/VARIANT SITTING_RUN` sets it beside an agent.

use std::path::Path;

use anyhow::Context;
use proctor_report::{
    compare, gate, CompareOptions, Comparison, Exporter, GateReport, Json, Markdown, Terminal,
    TrialRow,
};
use proctor_runner::results::read_scored_rows;
use proctor_store::{RunId, Scoring, ScoringChoice, Store};
use proctor_suite::Suite;

use crate::cli::CompareFormat;
use crate::exit::{Error, Status};

/// What the user asked to compare.
pub struct CompareArgs<'a> {
    /// The store.
    pub store: &'a Path,
    /// One or two runs.
    pub runs: &'a [String],
    /// With one run: the two variants.
    pub variants: Option<&'a str>,
    /// With two runs: only this variant of each.
    pub variant: Option<&'a str>,
    /// Apply the promotion gates.
    pub gate: bool,
    /// Write the gates as a JUnit XML report here.
    pub junit: Option<&'a Path>,
    /// Output format.
    pub format: CompareFormat,
    /// Which scoring of each run to compare.
    pub scoring: ScoringChoice,
}

/// A run's rows in the scoring `choice` picks, read with the suite the run keeps (or, for a
/// run that keeps none, the folder it was read from), and the scoring used.
fn rows_of(
    store: &Store,
    id: &RunId,
    choice: ScoringChoice,
) -> Result<(Vec<TrialRow>, Suite, Scoring), Error> {
    let run = store.open_run(id).context("cannot open the run")?;
    let (suite, _) = crate::commands::run_suite::open(&run)?;
    let scoring = crate::commands::scoring::pick(&run, choice)?;
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
struct Arms {
    a: Vec<TrialRow>,
    b: Vec<TrialRow>,
    suite: Suite,
    gate_rows: Vec<TrialRow>,
    /// Each run read and the scoring it was read in.
    scorings: Vec<(RunId, Scoring)>,
}

/// Runs the comparison.
pub fn run(args: CompareArgs) -> Result<Status, Error> {
    let store = crate::commands::inspect::open(args.store)?;
    let arms = arms(&store, &args)?;
    let options =
        CompareOptions::from(&arms.suite.file.report).with_variant_tasks(&arms.suite.file);
    let comparison = compare(&arms.a, &arms.b, &options).map_err(|e| {
        Error::usage(
            format!("cannot compare: {e}"),
            "compare runs of the same suite, fixture and mutations",
        )
    })?;
    let gates = if args.gate { Some(gates(&arms)?) } else { None };
    for (run, scoring) in &arms.scorings {
        errln!("{}", crate::commands::scoring::line(run, scoring));
    }
    print(&comparison, gates.as_ref(), &arms.scorings, args.format)?;
    if let (Some(file), Some(g)) = (args.junit, gates.as_ref()) {
        crate::commands::export::write_gates_junit(g, file)?;
    }
    match gates {
        Some(g) if !g.passed => {
            errln!("a promotion gate failed");
            Ok(Status::GateFailed)
        }
        _ => Ok(Status::Success),
    }
}

/// A run's rows when it holds one variant; refused, naming them, when it holds several.
fn one_variant(rows: &[TrialRow], run: &RunId) -> Result<Vec<TrialRow>, Error> {
    let variants = variants_of(rows);
    if variants.len() != 1 {
        return Err(Error::usage(
            format!(
                "run {run} has variants {}: each arm must be one variant",
                variants.join(",")
            ),
            format!("write the arm as {run}/VARIANT"),
        ));
    }
    Ok(rows.to_vec())
}

fn resolve(store: &Store, prefix: &str) -> Result<RunId, Error> {
    store
        .resolve_run(prefix)
        .map_err(|e| Error::usage(e.to_string(), "`proctor list` shows the runs in this store"))
}

/// The arms the arguments name: two variants of one run, or two runs.
fn arms(store: &Store, args: &CompareArgs) -> Result<Arms, Error> {
    match (args.runs, args.variants) {
        ([one], Some(pair)) => two_variants(store, one, pair, args.scoring),
        ([one], None) => Err(Error::usage(
            format!("compare needs two arms; got only run {one}"),
            "give two runs, or one run with --variants A,B",
        )),
        ([ra, rb], None) => two_runs(store, ra, rb, args.variant, args.scoring),
        (_, Some(_)) => Err(Error::usage(
            "--variants compares two variants of ONE run",
            "give one run with --variants A,B",
        )),
        _ => Err(Error::usage(
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
) -> Result<Arms, Error> {
    let Some((va, vb)) = pair.split_once(',') else {
        return Err(Error::usage(
            format!("--variants {pair}: expected two variant ids, `A,B`"),
            "for example --variants control,method",
        ));
    };
    let id = resolve(store, run)?;
    let (rows, suite, scoring) = rows_of(store, &id, choice)?;
    let known = variants_of(&rows);
    for v in [va, vb] {
        if !known.iter().any(|k| k == v) {
            return Err(Error::usage(
                format!("run {id} has no variant `{v}`"),
                format!("its variants: {}", known.join(", ")),
            ));
        }
    }
    Ok(Arms {
        a: only(&rows, va),
        b: only(&rows, vb),
        suite,
        gate_rows: rows,
        scorings: vec![(id, scoring)],
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
fn variant_rows(rows: &[TrialRow], run: &RunId, variant: &str) -> Result<Vec<TrialRow>, Error> {
    let picked = only(rows, variant);
    if picked.is_empty() {
        return Err(Error::usage(
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
) -> Result<Arms, Error> {
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
                return Err(Error::usage(
                    format!("run {ida} has variants {} and run {idb} has {}: each arm must be one variant", va.join(","), vb.join(",")),
                    "write an arm as RUN/VARIANT, or add --variant V to compare the same variant across the two runs",
                ));
            }
            (rows_a.clone(), rows_b.clone())
        }
    };
    let gate_rows = gate_rows_of_two(rows_a, rows_b, &suite);
    Ok(Arms {
        a,
        b,
        suite,
        gate_rows,
        scorings,
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

/// The comparison of two arms, each `RUN_ID/VARIANT` (the runs may differ), as `--format json
/// --gate` prints it: `comparison`, and `gates` over the arms' runs (as `compare --gate` applies
/// them: one run's trials, or the candidate from B's run and every other arm from A's), `null`
/// with `gates_note` saying why when they cannot be applied; for the viewer's comparison page.
pub fn arms_json(store: &Store, a: &str, b: &str) -> Result<serde_json::Value, String> {
    let split = |arm: &str| -> Result<(RunId, String), String> {
        let (run, variant) = arm
            .split_once('/')
            .ok_or_else(|| format!("`{arm}` is not an arm: write RUN/VARIANT"))?;
        let id = resolve(store, run).map_err(|e| e.to_string())?;
        Ok((id, variant.to_string()))
    };
    let ((ra, va), (rb, vb)) = (split(a)?, split(b)?);
    let message = |e: Error| crate::commands::scoring::message(&e);
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
    let comparison = compare(&only(&rows_a, &va), &only(&rows_b, &vb), &options)
        .map_err(|e| format!("cannot compare: {e}"))?;
    let comparison: serde_json::Value =
        serde_json::from_str(&Json.comparison(&comparison)).map_err(|e| e.to_string())?;
    let gates = match &suite.file.promotion {
        None => Err("the suite has no [promotion] table, so there are no gates".to_string()),
        Some(promotion) => {
            let rows = if ra == rb {
                rows_a
            } else {
                gate_rows_of_two(rows_a, rows_b, &suite)
            };
            gate(&rows, promotion, &suite.file.report)
                .map_err(|e| format!("the gates cannot be applied: {e}"))
                .and_then(|g| serde_json::from_str(&Json.gates(&g)).map_err(|e| e.to_string()))
        }
    };
    let (gates, note) = match gates {
        Ok(g) => (g, serde_json::Value::Null),
        Err(why) => (serde_json::Value::Null, serde_json::Value::String(why)),
    };
    Ok(
        serde_json::json!({ "comparison": comparison, "gates": gates, "gates_note": note, "scorings": crate::commands::scoring::json(&scorings) }),
    )
}

/// The suite's promotion gates over the arms' rows.
fn gates(arms: &Arms) -> Result<GateReport, Error> {
    let Some(promotion) = &arms.suite.file.promotion else {
        return Err(Error::usage("--gate needs a [promotion] table in suite.toml", "add [promotion] with baseline, candidate and the minimums (docs/suite-format.md, \"[promotion]\")"));
    };
    gate(&arms.gate_rows, promotion, &arms.suite.file.report).map_err(|e| {
        Error::usage(
            format!("cannot apply the gates: {e}"),
            "the run must hold the baseline and candidate variants",
        )
    })
}

/// Prints the comparison, and the gates when they were applied, in the format asked for.
fn print(
    comparison: &Comparison,
    gates: Option<&GateReport>,
    scorings: &[(RunId, Scoring)],
    format: CompareFormat,
) -> Result<(), Error> {
    let exporter: &dyn Exporter = match format {
        CompareFormat::Text => &Terminal,
        CompareFormat::Md => &Markdown,
        CompareFormat::Json => &Json,
    };
    if format == CompareFormat::Json {
        let mut doc = serde_json::json!({ "comparison": serde_json::from_str::<serde_json::Value>(&exporter.comparison(comparison)).map_err(anyhow::Error::new)? });
        if let Some(g) = gates {
            doc["gates"] = serde_json::from_str(&exporter.gates(g)).map_err(anyhow::Error::new)?;
        }
        doc["scorings"] = crate::commands::scoring::json(scorings);
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?
        );
    } else {
        out!("{}", exporter.comparison(comparison));
        if let Some(g) = gates {
            outln!();
            out!("{}", exporter.gates(g));
        }
    }
    Ok(())
}
