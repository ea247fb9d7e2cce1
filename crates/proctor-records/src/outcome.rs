//! The eight outcomes a trial resolves to, and the rules over them that every stage shares.
//!
//! Which outcomes count where (docs/outcomes.md):
//! - graded attempts n = all trials − `errored` − `ungradeable`; every rate shares that n
//!   ([`OutcomeKind::is_graded`]);
//! - failure = `wrong` + `refused-wrongly` + `abandoned` ([`OutcomeKind::is_failure`]);
//! - `errored` is never evidence about the agent; `ungradeable` always carries its reason.
//!
//! [`Outcome`] is the verdict with what it carries (the error's kind, the reason it cannot be
//! graded); [`OutcomeKind`] is which of the eight it is, the form the store's summary, the index
//! and the reports keep. Both are written as the same kebab-case labels.

use std::fmt;
use std::str::FromStr;

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

/// Which of the eight outcomes a trial came to, without what the outcome carries: the form kept
/// in a trial's summary, the index and the reports, written as the outcome's label.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    /// Every success assertion holds.
    Completed,
    /// The end state fails the rules (or the user undid the agent's action).
    Wrong,
    /// The agent declined, and evidence places the limit.
    RefusedHonestly,
    /// The agent declined although the task could be done.
    RefusedWrongly,
    /// The agent stopped to ask the (offline) person without acting.
    Asked,
    /// The agent stopped with no result, refusal or ask.
    Abandoned,
    /// An operational failure; not evidence about the agent.
    Errored,
    /// The rules cannot tell.
    Ungradeable,
}

impl OutcomeKind {
    /// Every outcome, in report order: the one list of the outcomes.
    pub const ALL: [OutcomeKind; 8] = [
        OutcomeKind::Completed,
        OutcomeKind::Wrong,
        OutcomeKind::RefusedHonestly,
        OutcomeKind::RefusedWrongly,
        OutcomeKind::Asked,
        OutcomeKind::Abandoned,
        OutcomeKind::Errored,
        OutcomeKind::Ungradeable,
    ];

    /// The length of the longest label, so that columns of outcomes align.
    pub const WIDEST_LABEL: usize = {
        let (mut widest, mut i) = (0, 0);
        while i < OutcomeKind::ALL.len() {
            let len = OutcomeKind::ALL[i].label().len();
            if len > widest {
                widest = len;
            }
            i += 1;
        }
        widest
    };

    /// The outcomes that are not graded (in no n, never a failure), in report order.
    pub const NOT_GRADED: [OutcomeKind; 2] = [OutcomeKind::Errored, OutcomeKind::Ungradeable];

    /// The outcome's label: `completed`, `wrong`, `refused-honestly`, `refused-wrongly`,
    /// `asked`, `abandoned`, `errored` or `ungradeable`.
    pub const fn label(self) -> &'static str {
        match self {
            OutcomeKind::Completed => "completed",
            OutcomeKind::Wrong => "wrong",
            OutcomeKind::RefusedHonestly => "refused-honestly",
            OutcomeKind::RefusedWrongly => "refused-wrongly",
            OutcomeKind::Asked => "asked",
            OutcomeKind::Abandoned => "abandoned",
            OutcomeKind::Errored => "errored",
            OutcomeKind::Ungradeable => "ungradeable",
        }
    }

    /// Whether the trial counts in n (graded attempts): the one rule that defines n, every
    /// outcome but `errored` and `ungradeable`.
    pub const fn is_graded(self) -> bool {
        !matches!(self, OutcomeKind::Errored | OutcomeKind::Ungradeable)
    }

    /// Whether the trial counts as a failure (`wrong`, `refused-wrongly`, `abandoned`).
    pub const fn is_failure(self) -> bool {
        matches!(
            self,
            OutcomeKind::Wrong | OutcomeKind::RefusedWrongly | OutcomeKind::Abandoned
        )
    }

    /// Whether it is `errored`.
    pub const fn is_errored(self) -> bool {
        matches!(self, OutcomeKind::Errored)
    }

    /// Whether it is `ungradeable`.
    pub const fn is_ungradeable(self) -> bool {
        matches!(self, OutcomeKind::Ungradeable)
    }
}

/// Every outcome label, in report order ([`OutcomeKind::ALL`]'s labels).
pub const LABELS: [&str; 8] = {
    let mut labels = [""; 8];
    let mut i = 0;
    while i < labels.len() {
        labels[i] = OutcomeKind::ALL[i].label();
        i += 1;
    }
    labels
};

/// The error of reading an [`OutcomeKind`] from text that is none of the eight labels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an outcome (completed, wrong, refused-honestly, refused-wrongly, asked, abandoned, errored or ungradeable)")]
pub struct ParseOutcomeError(pub String);

impl FromStr for OutcomeKind {
    type Err = ParseOutcomeError;

    fn from_str(s: &str) -> Result<OutcomeKind, ParseOutcomeError> {
        OutcomeKind::ALL
            .into_iter()
            .find(|k| k.label() == s)
            .ok_or_else(|| ParseOutcomeError(s.to_string()))
    }
}

impl fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl Outcome {
    /// Which of the eight outcomes it is.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Completed => OutcomeKind::Completed,
            Outcome::Wrong { .. } => OutcomeKind::Wrong,
            Outcome::RefusedHonestly => OutcomeKind::RefusedHonestly,
            Outcome::RefusedWrongly => OutcomeKind::RefusedWrongly,
            Outcome::Asked => OutcomeKind::Asked,
            Outcome::Abandoned => OutcomeKind::Abandoned,
            Outcome::Errored { .. } => OutcomeKind::Errored,
            Outcome::Ungradeable { .. } => OutcomeKind::Ungradeable,
        }
    }

    /// The outcome's label (see [`OutcomeKind::label`]).
    pub fn label(&self) -> &'static str {
        self.kind().label()
    }

    /// Whether the trial counts in n (graded attempts): [`OutcomeKind::is_graded`].
    pub fn is_graded(&self) -> bool {
        self.kind().is_graded()
    }

    /// Whether the trial counts as a failure: [`OutcomeKind::is_failure`].
    pub fn is_failure(&self) -> bool {
        self.kind().is_failure()
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every() -> [Outcome; 8] {
        [
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
        ]
    }

    #[test]
    fn every_outcome_has_its_kind_in_report_order_and_the_same_label() {
        let kinds: Vec<OutcomeKind> = every().iter().map(Outcome::kind).collect();
        assert_eq!(kinds, OutcomeKind::ALL);
        for (o, label) in every().iter().zip(LABELS) {
            assert_eq!(o.label(), label);
            assert_eq!(o.kind().to_string(), label);
            assert_eq!(label.parse::<OutcomeKind>(), Ok(o.kind()));
            // The tagged outcome and its kind are written with the same label.
            let tagged = serde_json::to_value(o).unwrap();
            assert_eq!(tagged["outcome"], serde_json::json!(label));
            assert_eq!(
                serde_json::to_value(o.kind()).unwrap(),
                serde_json::json!(label)
            );
        }
    }

    #[test]
    fn n_leaves_out_exactly_errored_and_ungradeable() {
        let not_graded: Vec<OutcomeKind> = OutcomeKind::ALL
            .into_iter()
            .filter(|k| !k.is_graded())
            .collect();
        assert_eq!(not_graded, OutcomeKind::NOT_GRADED);
        for o in every() {
            assert_eq!(o.is_graded(), o.kind().is_graded(), "{o}");
            assert!(o.is_graded() || !o.is_failure(), "a failure is graded: {o}");
        }
        let failures: Vec<&str> = OutcomeKind::ALL
            .into_iter()
            .filter(|k| k.is_failure())
            .map(OutcomeKind::label)
            .collect();
        assert_eq!(failures, ["wrong", "refused-wrongly", "abandoned"]);
    }

    #[test]
    fn a_label_that_is_no_outcome_is_refused_by_name() {
        let err = "passed".parse::<OutcomeKind>().unwrap_err();
        assert!(err.to_string().starts_with("`passed` is not an outcome"));
        assert!(serde_json::from_str::<OutcomeKind>("\"Completed\"").is_err());
    }
}
