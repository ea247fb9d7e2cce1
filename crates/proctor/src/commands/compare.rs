//! `proctor compare A B` (two runs) or `proctor compare RUN --variants a,b` (two variants of one
//! run): matched trial-by-trial comparison with n everywhere and `underpowered` below the power
//! threshold; with `--gate`, the suite's promotion gates, exiting 4 when one fails.

use std::path::Path;

use anyhow::Context;
use proctor_report::{
    compare, gate, CompareOptions, Exporter, GateReport, Json, Markdown, Terminal, TrialRow,
};
use proctor_runner::results::read_rows;
use proctor_store::{RunId, Store};
use proctor_suite::Suite;

use crate::cli::CompareFormat;
use crate::commands::open_suite;
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
    /// Output format.
    pub format: CompareFormat,
}

fn rows_of(store: &Store, id: &RunId) -> Result<(Vec<TrialRow>, Suite), Error> {
    let run = store.open_run(id).context("cannot open the run")?;
    let meta = run.meta();
    let suite = open_suite(&meta.suite_path).map_err(|e| match e {
        Error::InvalidSuite { suite, .. } => Error::usage(
            format!(
                "run {id} was made from the suite at {suite}, which is no longer a valid suite"
            ),
            "compare needs the suite for its [report] and [promotion] settings; restore it",
        ),
        other => other,
    })?;
    let rows = read_rows(&run, &suite).context("cannot read the run's trials")?;
    Ok((rows, suite))
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

/// Runs the comparison.
pub fn run(args: CompareArgs) -> Result<Status, Error> {
    let store = Store::open(args.store)
        .with_context(|| format!("cannot open the store at {}", args.store.display()))?;
    let resolve = |p: &str| {
        store
            .resolve_run(p)
            .map_err(|e| Error::usage(e.to_string(), "`proctor list` shows the runs in this store"))
    };
    let (a, b, suite, gate_rows) = match (args.runs, args.variants) {
        ([one], Some(pair)) => {
            let Some((va, vb)) = pair.split_once(',') else {
                return Err(Error::usage(
                    format!("--variants {pair}: expected two variant ids, `A,B`"),
                    "for example --variants control,method",
                ));
            };
            let id = resolve(one)?;
            let (rows, suite) = rows_of(&store, &id)?;
            let known = variants_of(&rows);
            for v in [va, vb] {
                if !known.iter().any(|k| k == v) {
                    return Err(Error::usage(
                        format!("run {id} has no variant `{v}`"),
                        format!("its variants: {}", known.join(", ")),
                    ));
                }
            }
            (only(&rows, va), only(&rows, vb), suite, rows)
        }
        ([one], None) => {
            return Err(Error::usage(
                format!("compare needs two arms; got only run {one}"),
                "give two runs, or one run with --variants A,B",
            ));
        }
        ([ra, rb], None) => {
            let (ida, idb) = (resolve(ra)?, resolve(rb)?);
            let (rows_a, suite) = rows_of(&store, &ida)?;
            let (rows_b, _) = rows_of(&store, &idb)?;
            let (a, b) = match args.variant {
                Some(v) => (only(&rows_a, v), only(&rows_b, v)),
                None => {
                    let (va, vb) = (variants_of(&rows_a), variants_of(&rows_b));
                    if va.len() != 1 || vb.len() != 1 {
                        return Err(Error::usage(
                            format!("run {ida} has variants {} and run {idb} has {}: each arm must be one variant", va.join(","), vb.join(",")),
                            "add --variant V to compare the same variant across the two runs",
                        ));
                    }
                    (rows_a.clone(), rows_b.clone())
                }
            };
            // For the gates: the candidate from run B, every other arm from run A.
            let candidate = suite
                .file
                .promotion
                .as_ref()
                .map(|p| p.candidate.get_ref().clone());
            let mut gate_rows: Vec<TrialRow> = rows_a
                .iter()
                .filter(|r| Some(&r.variant) != candidate.as_ref())
                .cloned()
                .collect();
            gate_rows.extend(
                rows_b
                    .iter()
                    .filter(|r| Some(&r.variant) == candidate.as_ref())
                    .cloned(),
            );
            (a, b, suite, gate_rows)
        }
        (_, Some(_)) => {
            return Err(Error::usage(
                "--variants compares two variants of ONE run",
                "give one run with --variants A,B",
            ))
        }
        _ => {
            return Err(Error::usage(
                "compare takes two runs, or one run with --variants A,B",
                "see `proctor compare --help`",
            ))
        }
    };
    let options = CompareOptions::from(&suite.file.report);
    let comparison = compare(&a, &b, &options).map_err(|e| {
        Error::usage(
            format!("cannot compare: {e}"),
            "compare runs of the same suite, fixture and mutations",
        )
    })?;
    let gates: Option<GateReport> = if args.gate {
        let Some(promotion) = &suite.file.promotion else {
            return Err(Error::usage("--gate needs a [promotion] table in suite.toml", "add [promotion] with baseline, candidate and the minimums (docs/suite-format.md, \"[promotion]\")"));
        };
        Some(
            gate(&gate_rows, promotion, &suite.file.report).map_err(|e| {
                Error::usage(
                    format!("cannot apply the gates: {e}"),
                    "the run must hold the baseline and candidate variants",
                )
            })?,
        )
    } else {
        None
    };
    let exporter: &dyn Exporter = match args.format {
        CompareFormat::Text => &Terminal,
        CompareFormat::Md => &Markdown,
        CompareFormat::Json => &Json,
    };
    if args.format == CompareFormat::Json {
        let mut doc = serde_json::json!({ "comparison": serde_json::from_str::<serde_json::Value>(&exporter.comparison(&comparison)).map_err(anyhow::Error::new)? });
        if let Some(g) = &gates {
            doc["gates"] = serde_json::from_str(&exporter.gates(g)).map_err(anyhow::Error::new)?;
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?
        );
    } else {
        print!("{}", exporter.comparison(&comparison));
        if let Some(g) = &gates {
            println!();
            print!("{}", exporter.gates(g));
        }
    }
    match gates {
        Some(g) if !g.passed => {
            eprintln!("a promotion gate failed");
            Ok(Status::GateFailed)
        }
        _ => Ok(Status::Success),
    }
}

/// The gates of a release run, printed; `Some(false)` when one failed.
pub fn release_gates(suite: &Suite, rows: &[TrialRow]) -> Result<Option<bool>, Error> {
    let Some(promotion) = &suite.file.promotion else {
        return Ok(None);
    };
    let report = gate(rows, promotion, &suite.file.report).map_err(|e| {
        Error::usage(
            format!("cannot apply the promotion gates: {e}"),
            "a release run must include the baseline and candidate variants",
        )
    })?;
    print!("\n{}", Terminal.gates(&report));
    Ok(Some(report.passed))
}
