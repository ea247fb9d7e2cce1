//! proctor's engine: executes a plan's trials in sandboxes, captures each end state into the
//! store, and scores it. It knows stages, not agents: launching goes through `proctor-agents`,
//! isolation through `proctor-sandbox`, evidence into `proctor-store`.

pub mod access;
pub mod allow;
pub mod calls;
pub mod cgroup;
pub mod comparison;
pub mod conclusion;
pub mod engine;
pub mod error;
pub mod evidence;
pub mod executor;
pub mod export;
pub mod gateway;
pub mod host_program;
pub mod image;
pub mod layers;
pub mod model;
pub mod opening;
pub mod oracle;
pub mod oracle_summary;
pub mod overview;
mod provenance;
pub mod provision;
pub mod record;
pub mod report_row;
pub mod request;
pub mod rescore;
pub mod rescoring;
pub mod results;
pub mod scored_trials;
pub mod scratch;
pub mod session;
pub mod shard;
pub mod shim;
pub mod sit;
pub mod skeletons;
pub mod spool;
pub mod stored_suite;
pub mod trial;

pub use engine::{
    decide_isolation, execute, EngineOptions, Event, ExecutionSummary, IsolationChoice, Job,
};
pub use error::RunError;
pub use executor::{Execution, Executor, Observer};
pub use record::TrialRecord;
pub use request::{Prepared, RunRequest};
pub use session::{PlanRecord, PlanRecordExt, Session, SessionError};
