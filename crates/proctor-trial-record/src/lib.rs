//! The trial record, `trial.json`'s `record`: what was planned, how the trial was isolated, how
//! the agent was launched, the captured end state, the verdict, its ledgers and notes.
//!
//! It sits below the runner, which builds it from a trial's run, so that the viewer, `inspect`
//! and any other renderer read `trial.json` typed without depending on the engine or the
//! sandbox. Its parts the sandbox reports (isolation, services) are
//! [`proctor_records::isolation`]'s.

pub mod launch;
pub mod ledgers;
pub mod notes;
pub mod record;
pub mod setup;
pub mod sitting;
pub mod text_diff;

pub use launch::{Allowed, ImageRecord, LaunchRecord, LimitsRecord, ResourcesRecord};
pub use ledgers::{Ledgers, Usage};
pub use notes::{CaptureNote, HarnessNote, NoteStage, CAPTURE_NOTE_PATH_MAX};
pub use record::{Hashes, StoredRecord, TrialRecord, RECORD_VERSION};
pub use setup::SetupRecord;
pub use sitting::{AnswerFrom, SittingRecord};
pub use text_diff::TextDiffRecord;

/// The JSON Schema of `trial.json`: the store's summary, this record, and where it ran.
pub fn trial_json_schema() -> serde_json::Value {
    schemars::schema_for!(proctor_store::TrialFile<TrialRecord>).to_value()
}
