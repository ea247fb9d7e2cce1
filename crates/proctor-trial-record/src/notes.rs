//! The notes a trial record carries beside its verdict: what the capture could not keep
//! ([`CaptureNote`], the agent's doing) and the harness's own problems ([`HarnessNote`]).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Who made a harness note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteStage {
    /// A stage of the trial's own run (its capture, mostly): the note is an operational fault
    /// of the trial.
    Run,
    /// A later `proctor rescore` that could not score the trial again: the trial keeps its
    /// verdict, and the note says why.
    Rescore,
}

/// Something the agent made that the capture could not keep, and why (the agent's doing, so
/// never a harness fault).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaptureNote {
    /// The workspace path it concerns (relative; cut to [`CAPTURE_NOTE_PATH_MAX`] bytes with
    /// `…` when longer), or `.` for the whole workspace.
    pub path: String,
    /// Why it could not be kept.
    pub cause: String,
}

/// The most bytes of a path a [`CaptureNote`] keeps.
pub const CAPTURE_NOTE_PATH_MAX: usize = 240;

impl CaptureNote {
    /// A note on `path` (cut when long) for `cause`.
    pub fn new(path: &str, cause: impl Into<String>) -> CaptureNote {
        let mut path = path.to_string();
        if path.len() > CAPTURE_NOTE_PATH_MAX {
            let mut cut = CAPTURE_NOTE_PATH_MAX;
            while !path.is_char_boundary(cut) {
                cut -= 1;
            }
            let total = path.len();
            path.truncate(cut);
            path.push_str(&format!("… ({total} bytes)"));
        }
        CaptureNote {
            path,
            cause: cause.into(),
        }
    }
}

impl std::fmt::Display for CaptureNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.cause)
    }
}

/// A problem of the harness (not the agent) met with a trial. Written as a sentence, as it
/// always was: a rescore's note starts with `rescore: `, a run's is the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessNote {
    /// Who made it.
    pub stage: NoteStage,
    /// What went wrong, in a sentence.
    pub message: String,
}

/// How a rescore's note starts when written.
const RESCORE_PREFIX: &str = "rescore: ";

impl HarnessNote {
    /// A note of the trial's own run.
    pub fn run(message: impl Into<String>) -> HarnessNote {
        HarnessNote {
            stage: NoteStage::Run,
            message: message.into(),
        }
    }

    /// A note of a rescore.
    pub fn rescore(message: impl Into<String>) -> HarnessNote {
        HarnessNote {
            stage: NoteStage::Rescore,
            message: message.into(),
        }
    }

    /// Reads a note as written.
    pub fn parse(text: &str) -> HarnessNote {
        match text.strip_prefix(RESCORE_PREFIX) {
            Some(message) => HarnessNote::rescore(message),
            None => HarnessNote::run(text),
        }
    }
}

impl fmt::Display for HarnessNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stage {
            NoteStage::Run => f.write_str(&self.message),
            NoteStage::Rescore => write!(f, "{RESCORE_PREFIX}{}", self.message),
        }
    }
}

impl Serialize for HarnessNote {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HarnessNote {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HarnessNote, D::Error> {
        String::deserialize(d).map(|text| HarnessNote::parse(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_notes_are_written_as_the_sentences_they_always_were() {
        let notes = vec![
            HarnessNote::run("cannot read calls.jsonl: gone"),
            HarnessNote::rescore("cannot rebuild the start state: gone"),
        ];
        let json = serde_json::to_string(&notes).unwrap();
        assert_eq!(
            json,
            r#"["cannot read calls.jsonl: gone","rescore: cannot rebuild the start state: gone"]"#
        );
        let back: Vec<HarnessNote> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, notes);
        assert_eq!(back[1].stage, NoteStage::Rescore);
        assert_eq!(back[1].message, "cannot rebuild the start state: gone");
        assert_eq!(
            notes[1].to_string(),
            "rescore: cannot rebuild the start state: gone"
        );
    }

    #[test]
    fn a_note_that_merely_mentions_rescore_is_a_run_note() {
        let n = HarnessNote::parse("service `rescore`: events.jsonl line 2: bad");
        assert_eq!(n.stage, NoteStage::Run);
        assert_eq!(
            n,
            HarnessNote::run("service `rescore`: events.jsonl line 2: bad")
        );
    }
}
