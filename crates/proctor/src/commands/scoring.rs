//! Which scoring of a run `show`, `compare`, `export` and the viewer read (the latest by
//! default: the last `proctor rescore`, else the run's own), and how they say so.

use proctor_store::{RunHandle, RunId, Scoring, ScoringChoice};

use crate::exit::Error;

/// The scoring `choice` picks for `run`; an unknown rescore number is a usage error naming the
/// rescores the run has.
pub fn pick(run: &RunHandle, choice: ScoringChoice) -> Result<Scoring, Error> {
    proctor_store::pick_scoring(run.dir(), choice)
        .map_err(|e| Error::Other(anyhow::Error::new(e).context("cannot list the run's scorings")))?
        .map_err(|why| {
            Error::usage(
                format!("run {}: {why}", run.id()),
                "--scoring takes `latest` (the default), `original` or a rescore's number",
            )
        })
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

/// The scorings read, as JSON: `[{"run": ID, "kind": ..., "rescore": N, "at": ..., "file": ...,
/// "rescores": N}]`.
pub fn json(scorings: &[(RunId, Scoring)]) -> serde_json::Value {
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

/// An error as one message (for the viewer, which shows it on a page): an invalid suite's
/// every problem, each with its file, line and column.
pub fn message(e: &Error) -> String {
    match e {
        Error::InvalidSuite { suite, problems } => {
            let each: Vec<String> = problems
                .iter()
                .map(|p| match &p.location {
                    Some(l) => format!(
                        "{}:{}:{}: {}",
                        p.file.display(),
                        l.line,
                        l.column,
                        p.message
                    ),
                    None => format!("{}: {}", p.file.display(), p.message),
                })
                .collect();
            format!("{suite} is not a valid suite: {}", each.join("; "))
        }
        Error::Usage { message, hint } => match hint {
            Some(h) => format!("{message} ({h})"),
            None => message.clone(),
        },
        other => other.to_string(),
    }
}
