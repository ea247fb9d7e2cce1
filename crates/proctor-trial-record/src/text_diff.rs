//! A file the suite's `[diff]` converter printed as text, as the trial record keeps it.

use serde::{Deserialize, Serialize};

/// A file converted to text by the suite's `[diff]` converter, after the agent stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TextDiffRecord {
    /// The workspace path.
    pub path: String,
    /// The converter's argv, as the suite gives it (`{}` for the path).
    pub converter: Vec<String>,
    /// The unified diff of the converted start and end (its first 64 KiB; the whole in the
    /// trial's `text/PATH.diff`); absent for a file that did not change, converted only for
    /// `file_contains`, or when a conversion failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The whole diff's size in bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub diff_bytes: u64,
    /// Why a conversion failed; `file_contains` then finds no text in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
