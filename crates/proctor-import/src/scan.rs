//! What the import reads from a task's test files: the metrics its verifier writes to
//! `reward.json`, and whether it downloads anything while it runs.

use std::collections::BTreeSet;

use regex::Regex;

use crate::files::FileEntry;

/// What the test files say about the verifier.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TestScan {
    /// Some test file mentions `reward.json`.
    pub writes_reward_json: bool,
    /// Metric names found in JSON objects written near a mention of `reward.json`, other than
    /// `reward` itself, in order of first appearance.
    pub metrics: Vec<String>,
    /// Commands in the test files that fetch from the network (`apt-get install`, `curl`, ...),
    /// each once.
    pub downloads: Vec<String>,
}

/// How many lines around a mention of `reward.json` may hold the object written to it.
const WINDOW_BEFORE: usize = 3;
const WINDOW_AFTER: usize = 5;

/// Reads the text files among `files`.
pub(crate) fn scan(files: &[FileEntry]) -> TestScan {
    let mut out = TestScan::default();
    let (Ok(object), Ok(key), Ok(download)) = (
        Regex::new(r"\{[^{}]*\}"),
        Regex::new(r#""([A-Za-z_][A-Za-z0-9_.-]{0,63})"\s*:"#),
        Regex::new(
            r"\b(apt-get install|apt install|apk add|pip3? install|uv (?:add|pip install|sync)|uvx|curl|wget|npm (?:install|ci)|git clone|go install|cargo install)\b",
        ),
    ) else {
        return out;
    };
    let mut metrics = BTreeSet::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file.src) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if let Some(m) = download.find(line) {
                let trimmed = line.trim_start();
                if !trimmed.starts_with('#') {
                    let cmd = m.as_str().to_string();
                    if !out.downloads.contains(&cmd) {
                        out.downloads.push(cmd);
                    }
                }
            }
            if !line.contains("reward.json") {
                continue;
            }
            out.writes_reward_json = true;
            let from = i.saturating_sub(WINDOW_BEFORE);
            let to = (i + WINDOW_AFTER + 1).min(lines.len());
            let window = lines[from..to].join("\n");
            for obj in object.find_iter(&window) {
                for cap in key.captures_iter(obj.as_str()) {
                    let name = &cap[1];
                    if name != "reward" && metrics.insert(name.to_string()) {
                        out.metrics.push(name.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The warning for tests that fetch or install while the check runs, if they do (`shown_as`
/// names the test files).
pub(crate) fn download_warning(scanned: &TestScan, shown_as: &str) -> Option<String> {
    (!scanned.downloads.is_empty()).then(|| {
        format!(
            "{shown_as} download while verifying ({}): proctor runs checks with no network, so the check fails unless the image already holds what they fetch",
            scanned.downloads.join(", ")
        )
    })
}

/// The warning for a solution that fetches or installs while it runs, if it does.
pub(crate) fn solution_warning(files: &[FileEntry], shown_as: &str) -> Option<String> {
    let downloads = scan(files).downloads;
    (!downloads.is_empty()).then(|| {
        format!(
            "{shown_as} fetches or installs while it runs ({}): a trial's root is read-only outside the workspace, HOME and /tmp, and has no network unless network = \"host\", so the oracle may fail",
            downloads.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &std::path::Path, name: &str, text: &str) -> FileEntry {
        let src = dir.join(name);
        std::fs::write(&src, text).expect("write");
        FileEntry {
            src,
            rel: name.into(),
            executable: false,
        }
    }

    #[test]
    fn metrics_come_from_objects_written_to_reward_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = vec![
            entry(
                dir.path(),
                "test.sh",
                "#!/bin/bash\n# curl is not used here\napt-get install -y curl\necho '{\"reward\": 0.0, \"accuracy\": 0.0, \"speed\": 0.0}' > /logs/verifier/reward.json\n",
            ),
            entry(
                dir.path(),
                "grade.py",
                "CONFIG = {\"unrelated\": 1}\n\n\n\n\n\n\nwith open('/logs/verifier/reward.json', 'w') as f:\n    json.dump({\"accuracy\": acc, \"recall\": r}, f)\n",
            ),
        ];
        let scan = scan(&files);
        assert!(scan.writes_reward_json);
        assert_eq!(scan.metrics, vec!["accuracy", "speed", "recall"]);
        assert_eq!(scan.downloads, vec!["apt-get install"]);
    }

    #[test]
    fn plain_reward_txt_tests_have_no_metrics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = vec![entry(
            dir.path(),
            "test.sh",
            "pytest /tests/test_outputs.py -rA && echo 1 > /logs/verifier/reward.txt\n",
        )];
        assert_eq!(scan(&files), TestScan::default());
    }
}
