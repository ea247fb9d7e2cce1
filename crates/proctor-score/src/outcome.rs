//! The eight outcomes a trial resolves to, and the one decision procedure that assigns them.
//!
//! Which outcomes count where (docs/outcomes.md):
//! - graded attempts n = all trials − `errored` − `ungradeable`; every rate shares that n;
//! - failure = `wrong` + `refused-wrongly` + `abandoned`;
//! - `errored` is never evidence about the agent; `ungradeable` always carries its reason.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a trial came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every success assertion holds.
    Completed,
    /// The agent acted and the end state fails the rules, a cap or forbidden effect was hit, or
    /// the user undid the agent's action inside the undo window.
    Wrong {
        /// Whether a user's attributed reversal made it wrong.
        reversed: bool,
    },
    /// The agent declined, and evidence places the limit.
    RefusedHonestly,
    /// The agent declined although the task could be done and nothing was rejected.
    RefusedWrongly,
    /// The agent stopped to ask the (offline) person without acting.
    Asked,
    /// The agent stopped with no result, refusal or ask (timeout, crash after acting, gave up).
    Abandoned,
    /// An operational failure; not evidence about the agent.
    Errored {
        /// What failed.
        kind: ErrorKind,
    },
    /// The rules cannot tell; the reason is part of the value, so it cannot be left out.
    Ungradeable {
        /// Why the rules cannot tell.
        reason: String,
    },
}

/// The typed reasons a trial is `errored`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The agent could not start (missing CLI, missing flag, bad launch).
    AgentStart,
    /// A service's guard refused it, or it never became ready.
    ServiceGuard,
    /// The provider failed: 5xx after retries, unreachable, or a malformed response.
    ProviderError,
    /// Credentials were rejected or lost.
    CredentialLoss,
    /// The provider rate-limited the agent.
    RateLimit,
    /// The model endpoint timed out.
    Timeout,
    /// proctor itself failed (a file it could not write, a sandbox it could not build).
    Harness,
    /// The task's environment could not be provided: its image is gone from the cache.
    Environment,
    /// A `setup` command of the task failed: the start state could not be built.
    Setup,
}

impl ErrorKind {
    /// The spelling used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::AgentStart => "agent-start",
            ErrorKind::ServiceGuard => "service-guard",
            ErrorKind::ProviderError => "provider-error",
            ErrorKind::CredentialLoss => "credential-loss",
            ErrorKind::RateLimit => "rate-limit",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Harness => "harness",
            ErrorKind::Environment => "environment",
            ErrorKind::Setup => "setup",
        }
    }
}

impl Outcome {
    /// The outcome's label: `completed`, `wrong`, `refused-honestly`, `refused-wrongly`,
    /// `asked`, `abandoned`, `errored` or `ungradeable`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Wrong { .. } => "wrong",
            Outcome::RefusedHonestly => "refused-honestly",
            Outcome::RefusedWrongly => "refused-wrongly",
            Outcome::Asked => "asked",
            Outcome::Abandoned => "abandoned",
            Outcome::Errored { .. } => "errored",
            Outcome::Ungradeable { .. } => "ungradeable",
        }
    }

    /// Whether the trial counts in n (graded attempts).
    pub fn is_graded(&self) -> bool {
        !matches!(self, Outcome::Errored { .. } | Outcome::Ungradeable { .. })
    }

    /// Whether the trial counts as a failure (wrong, refused-wrongly, abandoned).
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Outcome::Wrong { .. } | Outcome::RefusedWrongly | Outcome::Abandoned
        )
    }
}

/// The labels of the outcomes that are not graded (in no n, never a failure).
pub const NOT_GRADED: [&str; 2] = ["errored", "ungradeable"];

/// Whether an outcome label counts in n (graded attempts): the rule of
/// [`Outcome::is_graded`] for a label read back from a record or the index.
pub fn is_graded_label(label: &str) -> bool {
    !NOT_GRADED.contains(&label)
}

/// Every outcome label, in report order.
pub const LABELS: [&str; 8] = [
    "completed",
    "wrong",
    "refused-honestly",
    "refused-wrongly",
    "asked",
    "abandoned",
    "errored",
    "ungradeable",
];

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_graded_exactly_when_its_outcome_is() {
        let every = [
            Outcome::Completed,
            Outcome::Wrong { reversed: false },
            Outcome::RefusedHonestly,
            Outcome::RefusedWrongly,
            Outcome::Asked,
            Outcome::Abandoned,
            Outcome::Errored {
                kind: ErrorKind::AgentStart,
            },
            Outcome::Ungradeable {
                reason: "why".into(),
            },
        ];
        assert_eq!(every.len(), LABELS.len());
        for o in &every {
            assert!(LABELS.contains(&o.label()), "{}", o.label());
            assert_eq!(is_graded_label(o.label()), o.is_graded(), "{}", o.label());
        }
        assert_eq!(
            LABELS.iter().filter(|l| !is_graded_label(l)).count(),
            NOT_GRADED.len()
        );
    }
}
