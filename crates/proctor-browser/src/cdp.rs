//! A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
//! the browser reads commands on its fd 3 and writes answers and events on its fd 4, each a JSON
//! message ended by a NUL byte. No port and no websocket, so it works in a network namespace
//! with nothing but a loopback.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, PipeWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use command_fds::{CommandFdExt, FdMapping};
use serde_json::{json, Value};

use crate::error::BrowserError;

/// The browser window's size in CSS pixels, at a device scale of 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl Default for Viewport {
    fn default() -> Viewport {
        Viewport {
            width: 1280,
            height: 800,
        }
    }
}

/// A running headless browser and the pipe to it. Dropping it kills the browser.
pub struct Browser {
    child: Child,
    to_browser: PipeWriter,
    from_browser: Receiver<Result<Value, String>>,
    /// Events that arrived while an answer was awaited, oldest first.
    events: VecDeque<Value>,
    next_id: u64,
    stderr: PathBuf,
}

/// The flags that make a run deterministic and quiet: headless, no sandbox of its own (the
/// trial's sandbox is the boundary), a fixed window and scale, no background traffic.
fn flags(viewport: Viewport, profile: &Path) -> Vec<String> {
    let mut f: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--remote-debugging-pipe",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--mute-audio",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--font-render-hinting=none",
        "--force-color-profile=srgb",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.push(format!(
        "--window-size={},{}",
        viewport.width, viewport.height
    ));
    f.push(format!("--user-data-dir={}", profile.display()));
    f.push("about:blank".into());
    f
}

impl Browser {
    /// Starts `exe` headless with its profile in `profile` and its stderr in `stderr`.
    pub fn launch(
        exe: &Path,
        viewport: Viewport,
        profile: &Path,
        stderr: &Path,
    ) -> Result<Browser, BrowserError> {
        let (from_us, to_browser) = std::io::pipe().map_err(BrowserError::Pipe)?;
        let (from_browser, to_us) = std::io::pipe().map_err(BrowserError::Pipe)?;
        let log = std::fs::File::create(stderr).map_err(BrowserError::Pipe)?;
        let mut cmd = Command::new(exe);
        cmd.args(flags(viewport, profile))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        cmd.fd_mappings(vec![
            FdMapping {
                parent_fd: from_us.into(),
                child_fd: 3,
            },
            FdMapping {
                parent_fd: to_us.into(),
                child_fd: 4,
            },
        ])
        .map_err(|e| BrowserError::Start {
            exe: exe.to_path_buf(),
            why: e.to_string(),
        })?;
        let child = cmd.spawn().map_err(|e| BrowserError::Start {
            exe: exe.to_path_buf(),
            why: e.to_string(),
        })?;
        // The browser's ends of the pipes close here, so its exit is seen as the end of the pipe.
        drop(cmd);
        Ok(Browser {
            child,
            to_browser,
            from_browser: read_messages(from_browser),
            events: VecDeque::new(),
            next_id: 0,
            stderr: stderr.to_path_buf(),
        })
    }

    /// Sends `method` with `params` (to the page of `session`, or to the browser) and waits
    /// for its answer until `deadline`; gives its `result`.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, BrowserError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| self.closed(e.to_string()))?;
        bytes.push(0);
        if let Err(e) = self.to_browser.write_all(&bytes) {
            return Err(self.closed(format!("cannot write to the browser: {e}")));
        }
        loop {
            let msg = self.next_message(method, deadline)?;
            if msg.get("id").and_then(Value::as_u64) != Some(id) {
                if msg.get("method").is_some() {
                    self.events.push_back(msg);
                }
                continue;
            }
            if let Some(err) = msg.get("error") {
                let text = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error without a message");
                return Err(BrowserError::Protocol {
                    method: method.to_string(),
                    message: text.to_string(),
                });
            }
            return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// Waits until `deadline` for the event `method` of `session`; gives its `params`.
    pub fn wait_event(
        &mut self,
        session: &str,
        method: &str,
        deadline: Instant,
    ) -> Result<Value, BrowserError> {
        let is_it = |m: &Value| {
            m.get("method").and_then(Value::as_str) == Some(method)
                && m.get("sessionId").and_then(Value::as_str) == Some(session)
        };
        if let Some(at) = self.events.iter().position(is_it) {
            let m = self.events.remove(at).unwrap_or(Value::Null);
            return Ok(m.get("params").cloned().unwrap_or(Value::Null));
        }
        loop {
            let msg = self.next_message(method, deadline)?;
            if is_it(&msg) {
                return Ok(msg.get("params").cloned().unwrap_or(Value::Null));
            }
        }
    }

    /// The next message from the browser, or why none came by `deadline`.
    fn next_message(
        &mut self,
        waiting_for: &str,
        deadline: Instant,
    ) -> Result<Value, BrowserError> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from_browser.recv_timeout(left) {
            Ok(Ok(msg)) => Ok(msg),
            Ok(Err(why)) => Err(self.closed(why)),
            Err(RecvTimeoutError::Timeout) => Err(BrowserError::Timeout {
                waiting_for: waiting_for.to_string(),
            }),
            Err(RecvTimeoutError::Disconnected) => {
                Err(self.closed("the browser's pipe reader stopped".into()))
            }
        }
    }

    /// The browser is gone: why, with the last lines it printed.
    fn closed(&mut self, why: String) -> BrowserError {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!(" ({s})"),
            _ => String::new(),
        };
        BrowserError::Closed {
            why: format!("{why}{status}"),
            stderr_tail: stderr_tail(&self.stderr),
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread reading NUL-ended JSON messages from the browser into a channel; it ends with an
/// `Err` when the pipe closes or a message is not JSON.
fn read_messages(pipe: std::io::PipeReader) -> Receiver<Result<Value, String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        loop {
            let mut buf = Vec::new();
            match reader.read_until(0, &mut buf) {
                Ok(0) => {
                    let _ = tx.send(Err("the browser closed its pipe".into()));
                    return;
                }
                Ok(_) => {
                    if buf.last() == Some(&0) {
                        buf.pop();
                    }
                    let msg = serde_json::from_slice(&buf)
                        .map_err(|e| format!("the browser sent a message that is not JSON: {e}"));
                    let stop = msg.is_err();
                    if tx.send(msg).is_err() || stop {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("cannot read from the browser: {e}")));
                    return;
                }
            }
        }
    });
    rx
}

/// Lines of the browser's stderr quoted when it fails.
const STDERR_LINES: usize = 5;

/// The last lines the browser printed, joined by ` ⏎ `.
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .rev()
        .take(STDERR_LINES)
        .collect();
    lines.reverse();
    lines.join(" ⏎ ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_fix_the_window_and_scale_and_keep_the_browser_quiet() {
        let f = flags(
            Viewport {
                width: 640,
                height: 480,
            },
            Path::new("/tmp/p"),
        );
        for want in [
            "--headless",
            "--no-sandbox",
            "--remote-debugging-pipe",
            "--window-size=640,480",
            "--force-device-scale-factor=1",
            "--user-data-dir=/tmp/p",
        ] {
            assert!(f.iter().any(|a| a == want), "{want} missing from {f:?}");
        }
        assert_eq!(f.last().map(String::as_str), Some("about:blank"));
    }

    #[test]
    fn the_stderr_tail_is_its_last_non_blank_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("err");
        std::fs::write(&p, "a\n\nb\nc\nd\ne\nf\n  \n").unwrap();
        assert_eq!(stderr_tail(&p), "b ⏎ c ⏎ d ⏎ e ⏎ f");
        assert_eq!(stderr_tail(&dir.path().join("none")), "");
    }

    #[test]
    fn a_program_that_is_not_a_browser_is_seen_closing_its_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Browser::launch(
            Path::new("/bin/true"),
            Viewport::default(),
            dir.path(),
            &dir.path().join("err"),
        )
        .unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let e = b
            .call(None, "Target.getTargets", json!({}), deadline)
            .unwrap_err();
        assert!(matches!(e, BrowserError::Closed { .. }), "{e}");
    }
}
