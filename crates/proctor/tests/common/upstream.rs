//! A real model upstream for gateway tests: `proctor mock-model` on the host's loopback,
//! requiring the real key (`--require-key-env`), so a request that did not pass through the
//! gateway (which alone holds the key) is refused.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The real key the upstream requires: it must never reach the store or the agent.
pub const REAL_KEY: &str = "sk-real-upstream-KEY-7f3a9c0e21b4";

/// A real upstream: `proctor mock-model` on the host's loopback, killed on drop.
pub struct Upstream {
    child: Child,
    /// Its base URL.
    pub url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Upstream {
    /// Serves `script` (TOML turns), requiring `REAL_KEY`, with `extra` arguments, logging
    /// every exchange.
    pub fn start(script: &str, extra: &[&str]) -> Upstream {
        Upstream::launch(script, extra, true)
    }

    /// [`Upstream::start`] keeping no log (it would hold every request body).
    pub fn start_unlogged(script: &str) -> Upstream {
        Upstream::launch(script, &[], false)
    }

    fn launch(script: &str, extra: &[&str], logged: bool) -> Upstream {
        let dir = tempfile::tempdir().unwrap();
        let script_path = dir.path().join("upstream.toml");
        std::fs::write(&script_path, script).unwrap();
        let log = dir.path().join("upstream.jsonl");
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("proctor"));
        cmd.args(["mock-model", "--script"])
            .arg(&script_path)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--require-key-env",
                "UPSTREAM_KEY",
            ]);
        if logged {
            cmd.arg("--log").arg(&log);
        }
        let mut child = cmd
            .args(extra)
            .env("UPSTREAM_KEY", REAL_KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Upstream {
            child,
            url: line.trim().to_string(),
            log,
            _dir: dir,
        }
    }

    /// The exchange log's lines.
    pub fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            let gz = if e.path().extension().is_some_and(|x| x == "gz") {
                let mut out = Vec::new();
                let _ = std::io::Read::read_to_end(
                    &mut flate2::read::GzDecoder::new(&bytes[..]),
                    &mut out,
                );
                out
            } else {
                Vec::new()
            };
            [bytes, gz]
                .iter()
                .any(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .map(|e| e.path().display().to_string())
        .collect()
}
