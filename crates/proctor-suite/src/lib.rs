//! proctor's suite format, version 1: the typed `suite.toml`, its located diagnostics, the
//! checks of `proctor validate`, and the plan of trials a run executes.
//!
//! This is the first stage of proctor's one-way data flow: suite → sandbox → agents → capture →
//! score → store → report. Nothing here runs an agent or touches a trial.

// A `Problem` carries its source text for diagnostics; it is only built on the cold path of a
// broken suite, so its size in `Result` costs nothing that matters.
#![allow(clippy::result_large_err)]

pub mod assertion;
pub mod binpatch;
pub mod mcp;
pub mod model;
pub mod model_script;
pub mod parse;
pub mod patch;
pub mod plan;
pub mod problem;
pub mod script;
mod sections;
pub mod service;
pub mod shell;
pub mod start_order;
pub mod suite;
pub mod timeouts;
pub mod tree;
pub mod validate;

pub use assertion::Assertion;
pub use plan::{Plan, PlanError, PlanOptions, PlannedTrial, TrialMode};
pub use problem::{Problem, ProblemKind};
pub use suite::{MutationFile, ResourceHints, Settings, Suite, TaskEnvironment};
