//! A trial's phase timings (`timings_ms` in its record), in milliseconds.

use serde::{Deserialize, Serialize};

/// A phase of a trial that the runner times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The workspace, shims, services and sandbox made ready.
    Setup,
    /// The task's `setup` commands.
    SetupCommands,
    /// The agent's run, to its full stop.
    Agent,
    /// The end state captured.
    Capture,
    /// The checks run and the trial graded.
    Checks,
    /// The readable diffs of changed text files.
    TextDiffs,
}

/// The milliseconds of each phase a trial reached, and in all. Written as an object whose keys
/// are the phases' names (`agent`, `capture`, `checks`, `setup`, `setup_commands`,
/// `text_diffs`, `total`), each present only when the phase ran.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timings {
    /// The agent's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<f64>,
    /// Capturing the end state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<f64>,
    /// The checks and grading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<f64>,
    /// Setting up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<f64>,
    /// The task's `setup` commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_commands: Option<f64>,
    /// The readable diffs of text files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_diffs: Option<f64>,
    /// From the start to the end (0 when the trial never got that far).
    #[serde(default)]
    pub total: f64,
}

impl Timings {
    /// Records `ms` as `phase`'s time.
    pub fn set(&mut self, phase: Phase, ms: f64) {
        *self.slot(phase) = Some(ms);
    }

    /// `phase`'s time, when it ran.
    pub fn get(&self, phase: Phase) -> Option<f64> {
        match phase {
            Phase::Setup => self.setup,
            Phase::SetupCommands => self.setup_commands,
            Phase::Agent => self.agent,
            Phase::Capture => self.capture,
            Phase::Checks => self.checks,
            Phase::TextDiffs => self.text_diffs,
        }
    }

    fn slot(&mut self, phase: Phase) -> &mut Option<f64> {
        match phase {
            Phase::Setup => &mut self.setup,
            Phase::SetupCommands => &mut self.setup_commands,
            Phase::Agent => &mut self.agent,
            Phase::Capture => &mut self.capture,
            Phase::Checks => &mut self.checks,
            Phase::TextDiffs => &mut self.text_diffs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_are_written_as_the_map_they_were() {
        let old = r#"{"agent":9.0,"capture":1.5,"checks":2.0,"setup":3.5,"total":16.0}"#;
        let t: Timings = serde_json::from_str(old).unwrap();
        assert_eq!(t.get(Phase::Setup), Some(3.5));
        assert_eq!(t.get(Phase::SetupCommands), None);
        assert_eq!(serde_json::to_string(&t).unwrap(), old);
        let mut t = Timings::default();
        t.set(Phase::SetupCommands, 1.0);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"setup_commands":1.0,"total":0.0}"#
        );
    }
}
