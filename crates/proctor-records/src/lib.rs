//! proctor's records: the data every stage shares, with nothing below it.
//!
//! A record is typed from its producer to its renderers: the runner makes an [`Outcome`], the
//! store keeps its [`OutcomeKind`] (the same text in `trial.json` and the index as ever), the
//! report counts it and the viewer draws it, and none of them compares labels as strings. The
//! one rule that defines n, "graded = not `errored`, not `ungradeable`", is
//! [`OutcomeKind::is_graded`]; the list of outcomes, in report order, is [`OutcomeKind::ALL`].
//! Counts of trials by outcome are an [`OutcomeTally`], keyed by the outcome.
//!
//! A run is named by its [`RunId`]; what the sandbox reports of a trial's isolation and services
//! is [`isolation`]'s, so the trial record (`proctor-trial-record`) and its readers need no
//! sandbox.
//!
//! The on-disk formats (`run.json`, `trial.json`) carry a `major.minor` [`FormatVersion`]; a
//! reader reads every minor version of its major and refuses another major by name.

pub mod exact_name;
pub mod format;
pub mod isolation;
pub mod limit;
pub mod outcome;
pub mod run;
pub mod run_id;
pub mod tally;
pub mod time;
pub mod timings;

pub use format::{FormatVersion, RUN_FORMAT, TRIAL_FORMAT};
pub use limit::Limit;
pub use outcome::{ErrorKind, Outcome, OutcomeKind, ParseOutcomeError};
pub use run_id::{ParseRunIdError, RunId};
pub use tally::OutcomeTally;
