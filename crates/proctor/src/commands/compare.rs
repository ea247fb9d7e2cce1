//! `proctor compare A B` (two runs, each arm a run or `RUN/VARIANT`) or
//! `proctor compare RUN --variants a,b` (two variants of one run): matched trial-by-trial
//! comparison with n everywhere and `underpowered` below the power threshold; with `--gate`, the
//! suite's promotion gates, exiting 4 when one fails; a mixed comparison (arms picked among
//! other runs of the suite in the store, or scored by different suite versions) fails the
//! `provenance` gate unless `--allow-mixed-runs` is given, and warns either way. A person's sitting is a run of its own
//! with one variant, `human:NAME`: `compare RUN/VARIANT SITTING_RUN` sets it beside an agent.
//! Reading the arms is [`proctor_runner::comparison`]'s.

use std::path::Path;

use proctor_report::{Comparison, Exporter, GateReport, Json, Markdown, Terminal};
use proctor_runner::comparison::{self, ArmsRequest};
use proctor_store::{RunId, Scoring, ScoringChoice};

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
    /// List pass@k and pass^k for k up to this.
    pub pass_k_max: u32,
    /// Let the gates pass a mixed comparison (it still warns).
    pub allow_mixed_runs: bool,
    /// Write the gates as a JUnit XML report here.
    pub junit: Option<&'a Path>,
    /// Output format.
    pub format: CompareFormat,
    /// Which scoring of each run to compare.
    pub scoring: ScoringChoice,
}

/// Runs the comparison.
pub fn run(args: CompareArgs) -> Result<Status, Error> {
    let store = proctor_runner::overview::open_store(args.store)?;
    let request = ArmsRequest {
        runs: args.runs,
        variants: args.variants,
        variant: args.variant,
        scoring: args.scoring,
    };
    let arms = comparison::arms(&store, &request)?;
    let mut comparison = comparison::comparison(&arms)?;
    comparison.cap_pass_k(args.pass_k_max);
    let gates = if args.gate {
        let mut report = comparison::gates(&arms)?;
        proctor_report::provenance_gate(&mut report, &comparison.warnings, args.allow_mixed_runs);
        Some(report)
    } else {
        None
    };
    for (run, scoring) in &arms.scorings {
        errln!("{}", crate::summary::scoring_line(run, scoring));
    }
    for w in proctor_report::mixed(&comparison.warnings) {
        errln!("warning: {}: {}", w.kind.as_str(), w.message);
    }
    print(&comparison, gates.as_ref(), &arms.scorings, args.format)?;
    if let (Some(file), Some(g)) = (args.junit, gates.as_ref()) {
        crate::summary::write_gates_junit(g, file)?;
    }
    match gates {
        Some(g) if !g.passed => {
            let names: Vec<&str> = g.failed().map(|f| f.name.as_str()).collect();
            errln!("a promotion gate failed: {}", names.join(", "));
            Ok(Status::GateFailed)
        }
        _ => Ok(Status::Success),
    }
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
        doc["scorings"] = comparison::scorings_json(scorings);
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?
        );
    } else {
        out_block!("{}", exporter.comparison(comparison));
        if let Some(g) = gates {
            outln!();
            out_block!("{}", exporter.gates(g));
        }
    }
    Ok(())
}
