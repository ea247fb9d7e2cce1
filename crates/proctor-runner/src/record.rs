//! The record of one trial as kept in `trial.json`: the types are `proctor-trial-record`'s
//! (re-exported here), what the runner adds is how a launch's environment is written down.

use std::collections::BTreeMap;

pub use proctor_trial_record::{
    trial_json_schema, Allowed, AnswerFrom, CaptureNote, HarnessNote, Hashes, ImageRecord,
    LaunchRecord, LimitsRecord, NoteStage, ResourcesRecord, SetupRecord, SittingRecord,
    StoredRecord, TextDiffRecord, TrialRecord, CAPTURE_NOTE_PATH_MAX, RECORD_VERSION,
};

/// Whether an environment variable's value must not be written down.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"]
        .iter()
        .any(|s| n.contains(s))
}

/// The environment as recorded: secrets replaced by `[redacted]`.
pub fn redact_env(env: &[(String, String)]) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let v = if is_secret(k) {
                "[redacted]".to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        let env = vec![
            ("ANTHROPIC_API_KEY".to_string(), "sk-123".to_string()),
            ("GITHUB_TOKEN".to_string(), "ghp".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let r = redact_env(&env);
        assert_eq!(r["ANTHROPIC_API_KEY"], "[redacted]");
        assert_eq!(r["GITHUB_TOKEN"], "[redacted]");
        assert_eq!(r["PATH"], "/bin");
    }
}
