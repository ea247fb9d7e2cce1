//! The viewer (docs/viewer.md): `proctor view`, a local web app over a store, and
//! `proctor export --html`, one self-contained page of a run.
//!
//! Pages are rendered on the server from the store (the SQLite index for lists and counts, one
//! `trial.json` for a trial page, the `report` of a finished run's `results.json`), each with
//! its styles and script inlined, so a page works the same served or saved as a file. Every
//! page has a JSON twin under `/api/`, which is what the pages' scripts poll while a run goes.

mod data;
mod diff_html;
mod evidence_html;
mod gates_html;
mod highlight;
mod html;
mod json_html;
mod links;
mod mcp_html;
mod pages;
mod pictures;
mod security;
mod server;
mod table;
mod transcript;
mod transcript_html;
mod viewer;

pub use data::{
    ComparePage, OriginalVerdict, RunPage, ScoringQuery, TrialPage, TrialQuery, ViewError,
};
pub use security::Hosts;
pub use server::{run_blocking, serve};
pub use viewer::{ArmsComparison, Sources, Viewer};

/// One self-contained HTML page of run `run` (prefix, id or `latest`) in the scoring `scoring`
/// names (`latest`, `original` or a rescore's number; empty is the latest): the run page
/// followed by every trial's page, linked by anchors; no network fetch is needed to read it. A
/// trial whose `trial.json` is damaged is named in its place (and in [`Export::damaged`]) and
/// the rest are exported.
pub fn export_html(viewer: &Viewer, run: &str, scoring: &str) -> Result<Export, ViewError> {
    pages::export(viewer, run, scoring)
}

/// What [`export_html`] made.
#[derive(Debug, Clone)]
pub struct Export {
    /// The page.
    pub html: String,
    /// The trials left out because their `trial.json` is damaged, each with why.
    pub damaged: Vec<proctor_store::DamagedTrial>,
}
