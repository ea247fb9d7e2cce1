//! A run's scorings: the one the run made (`results.json`) and each `proctor rescore` of it
//! (`results.rescored-TIMESTAMP.json`), numbered 1, 2, ... in the order they were made. Readers
//! use the latest by default and say which they used.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{io_err, Result};

/// The stem of a rescore's results files, before its timestamp.
pub const RESCORED_STEM: &str = "results.rescored-";
/// What follows a rescore's stem in the name of the folder that keeps the suite it was scored
/// with (`results.rescored-TIMESTAMP.suite/`, laid out as a run keeps its own suite:
/// `suite/` and `suite.json`).
pub const RESCORED_SUITE_SUFFIX: &str = ".suite";

/// Which scoring of a run to read: `latest` (the default), `original`, or a rescore by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScoringChoice {
    /// The latest rescore, or the run's own scoring when it has none.
    #[default]
    Latest,
    /// The run's own scoring.
    Original,
    /// Rescore number N (from 1).
    Rescore(u32),
}

/// The error of parsing a [`ScoringChoice`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a scoring: write `latest`, `original` or a rescore's number (1, 2, ...)")]
pub struct ParseScoringError(pub String);

impl FromStr for ScoringChoice {
    type Err = ParseScoringError;

    fn from_str(s: &str) -> Result<ScoringChoice, ParseScoringError> {
        match s {
            "latest" => Ok(ScoringChoice::Latest),
            "original" => Ok(ScoringChoice::Original),
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(ScoringChoice::Rescore(n)),
                _ => Err(ParseScoringError(s.to_string())),
            },
        }
    }
}

/// One scoring of a run, as recorded in every output made from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scoring {
    /// `original` (the run's own) or `rescore`.
    pub kind: String,
    /// The rescore's number (from 1); absent for the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescore: Option<u32>,
    /// When the rescore was made (UTC, `YYYY-MM-DD HH:MM:SS`); absent for the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The results file of this scoring in the run folder (`results.json` for the original).
    pub file: String,
    /// How many rescores the run has.
    pub rescores: u32,
}

impl Scoring {
    /// Whether this is a rescore.
    pub fn is_rescore(&self) -> bool {
        self.rescore.is_some()
    }

    /// `original`, or `rescore N (DATE UTC)`: what exports record.
    pub fn label(&self) -> String {
        match (self.rescore, &self.at) {
            (Some(n), Some(at)) => format!("rescore {n} ({at} UTC)"),
            (Some(n), None) => format!("rescore {n}"),
            _ => "original".to_string(),
        }
    }

    /// The stem of its results files (`results` or `results.rescored-TIMESTAMP`).
    pub fn stem(&self) -> &str {
        self.file.strip_suffix(".json").unwrap_or(&self.file)
    }

    /// The folder, in the run folder `run_dir`, that keeps the suite whose rules made this
    /// scoring ([`crate::read_kept_suite`] reads it): the run folder itself for the original
    /// (its own kept suite), `STEM.suite` for a rescore.
    pub fn rules_dir(&self, run_dir: &Path) -> std::path::PathBuf {
        if self.is_rescore() {
            run_dir.join(format!("{}{RESCORED_SUITE_SUFFIX}", self.stem()))
        } else {
            run_dir.to_path_buf()
        }
    }
}

impl fmt::Display for Scoring {
    /// `scored by rescore N of DATE (original: proctor show RUN --scoring original)` or
    /// `original scoring`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.rescore, &self.at) {
            (Some(n), Some(at)) => write!(f, "scored by rescore {n} of {at} UTC"),
            (Some(n), None) => write!(f, "scored by rescore {n}"),
            _ if self.rescores > 0 => write!(
                f,
                "scored by the run itself (original; {} rescore(s) since)",
                self.rescores
            ),
            _ => write!(f, "scored by the run itself (never rescored)"),
        }
    }
}

/// The rescores' results files in the run folder `run_dir`, oldest first.
fn rescore_files(run_dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = std::fs::read_dir(run_dir).map_err(io_err("read directory", run_dir))?;
    for entry in entries {
        let entry = entry.map_err(io_err("read directory", run_dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(RESCORED_STEM)
            && name.ends_with(".json")
            && !name.ends_with(".report.json")
            && !crate::is_temp_name(&name)
        {
            names.push(name);
        }
    }
    // The stamp is UTC, zero-padded: names sort by time.
    names.sort();
    Ok(names)
}

/// `2026-12-02T05-10-00-123456Z` (a rescore's stamp) as `2026-12-02 05:10:00`.
fn stamp_date(file: &str) -> Option<String> {
    let stamp = file.strip_prefix(RESCORED_STEM)?;
    let (date, time) = stamp.split_once('T')?;
    let hms: Vec<&str> = time.split('-').take(3).collect();
    if date.len() != 10 || hms.len() != 3 {
        return None;
    }
    Some(format!("{date} {}", hms.join(":")))
}

/// The scoring `choice` picks among the run folder `run_dir`'s scorings; an error names the
/// rescores there are when `choice` asks for one that is not.
pub fn pick_scoring(
    run_dir: &Path,
    choice: ScoringChoice,
) -> Result<std::result::Result<Scoring, String>> {
    let files = rescore_files(run_dir)?;
    let count = u32::try_from(files.len()).unwrap_or(u32::MAX);
    let rescore = |n: u32| -> Option<Scoring> {
        let file = files.get(usize::try_from(n).ok()?.checked_sub(1)?)?;
        Some(Scoring {
            kind: "rescore".into(),
            rescore: Some(n),
            at: stamp_date(file),
            file: file.clone(),
            rescores: count,
        })
    };
    let original = Scoring {
        kind: "original".into(),
        rescore: None,
        at: None,
        file: "results.json".into(),
        rescores: count,
    };
    Ok(match choice {
        ScoringChoice::Original => Ok(original),
        ScoringChoice::Latest => Ok(rescore(count).unwrap_or(original)),
        ScoringChoice::Rescore(n) => rescore(n).ok_or_else(|| {
            if count == 0 {
                format!("the run has no rescore {n}: it was never rescored")
            } else {
                format!("the run has no rescore {n}: its rescores are 1 to {count}")
            }
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescores_are_numbered_by_time_and_latest_is_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        assert_eq!(
            pick_scoring(p, ScoringChoice::Latest)
                .unwrap()
                .unwrap()
                .kind,
            "original"
        );
        for stamp in ["2026-12-02T05-10-00-5Z", "2026-12-01T23-00-00-1Z"] {
            std::fs::write(p.join(format!("{RESCORED_STEM}{stamp}.json")), "{}").unwrap();
            std::fs::write(p.join(format!("{RESCORED_STEM}{stamp}.report.json")), "{}").unwrap();
        }
        let latest = pick_scoring(p, ScoringChoice::Latest).unwrap().unwrap();
        assert_eq!(latest.rescore, Some(2));
        assert_eq!(latest.at.as_deref(), Some("2026-12-02 05:10:00"));
        assert_eq!(
            latest.to_string(),
            "scored by rescore 2 of 2026-12-02 05:10:00 UTC"
        );
        let first = pick_scoring(p, ScoringChoice::Rescore(1)).unwrap().unwrap();
        assert_eq!(first.stem(), "results.rescored-2026-12-01T23-00-00-1Z");
        let e = pick_scoring(p, ScoringChoice::Rescore(3))
            .unwrap()
            .unwrap_err();
        assert!(e.contains("1 to 2"), "{e}");
        assert_eq!("0".parse::<ScoringChoice>().ok(), None);
        assert_eq!("original".parse(), Ok(ScoringChoice::Original));
    }
}
