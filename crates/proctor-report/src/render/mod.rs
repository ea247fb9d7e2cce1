//! Renderers behind one trait: Markdown (`results.md`), JSON (`results.json`, stable and
//! described by a JSON Schema) and Terminal (plain text tables, readable without colour). The
//! Markdown and Terminal renderers show agent-controlled text with its control characters escaped
//! ([`escape_text`]); JSON keeps it exact.

mod changes;
mod content;
mod doc;
mod escape;
mod table;

use serde::Serialize;

use crate::aggregate::RunReport;
use crate::compare::Comparison;
use crate::gate_report::GateReport;

pub use changes::{changes_section, ChangesOf};
pub use escape::{escape_line, escape_text, escape_text_line};
pub use table::Table;

/// Turns the report stage's outputs into text of one format.
pub trait Exporter {
    /// A run's results: rates with n per variant × task, the variants side by side, medians,
    /// cost ledgers and the trials that were not graded.
    fn run_report(&self, report: &RunReport) -> String;
    /// A comparison of two arms: verdicts, matched differences, pass@k, every rate, and the
    /// unmatched trials.
    fn comparison(&self, comparison: &Comparison) -> String;
    /// Every promotion gate with its result and explanation.
    fn gates(&self, gates: &GateReport) -> String;
}

/// GitHub-flavoured Markdown, as committed in `results.md`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown;

/// Pretty-printed JSON, as committed in `results.json`; the shape is fixed by
/// `schema_version` and described by [`crate::json_schema`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

/// Plain-text tables for a terminal: aligned columns, no colour, no box-drawing characters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal;

impl Exporter for Markdown {
    fn run_report(&self, report: &RunReport) -> String {
        doc::markdown(&content::run_report(report))
    }
    fn comparison(&self, comparison: &Comparison) -> String {
        doc::markdown(&content::comparison(comparison))
    }
    fn gates(&self, gates: &GateReport) -> String {
        doc::markdown(&content::gates(gates))
    }
}

impl Exporter for Terminal {
    fn run_report(&self, report: &RunReport) -> String {
        doc::plain(&content::run_report(report))
    }
    fn comparison(&self, comparison: &Comparison) -> String {
        doc::plain(&content::comparison(comparison))
    }
    fn gates(&self, gates: &GateReport) -> String {
        doc::plain(&content::gates(gates))
    }
}

/// Serializes `value` as pretty JSON with a final newline. The report types hold only strings,
/// integers, finite floats (non-finite ones are never produced; serde_json would write `null`)
/// and string-keyed maps, so serialization cannot fail; if it ever did, the output is a JSON
/// object naming the error rather than a panic.
fn to_json<T: Serialize>(value: &T) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(s) => s + "\n",
        Err(e) => {
            serde_json::json!({ "error": format!("cannot serialize the report: {e}") }).to_string()
                + "\n"
        }
    }
}

impl Exporter for Json {
    fn run_report(&self, report: &RunReport) -> String {
        to_json(report)
    }
    fn comparison(&self, comparison: &Comparison) -> String {
        to_json(comparison)
    }
    fn gates(&self, gates: &GateReport) -> String {
        to_json(gates)
    }
}
