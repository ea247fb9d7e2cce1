//! Scoring: a pure function from a trial's captured end state and its task's rules to a
//! verdict with evidence. It never runs the agent, never touches a live trial and never asks a
//! model.

pub mod audit;
pub mod endstate;
pub mod evaluate;
pub mod mcp;
pub mod metrics;
pub mod outcome;
pub mod verdict;

pub use audit::{Audit, CheckFiles, Finding, FindingKind};
pub use endstate::{
    AgentEnd, ArgvCut, CallRecord, ChangeKind, CheckLimits, CheckRun, Conversation,
    ConversationTurn, EndState, FileChange, Files, Mtime, ServiceEnd, ServiceEvent, StepResult,
    StepsRecord, UserModelLedger,
};
pub use evaluate::{AssertionResult, ConditionResult, Context, Verdict};
pub use metrics::InterfaceMetrics;
pub use outcome::{ErrorKind, Outcome, OutcomeKind};
pub use verdict::{score, Faults, RubricScore, TrialVerdict};
