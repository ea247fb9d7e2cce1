//! A conversation: the agent run again, in the same sandbox, for each turn the caller asks for.
//!
//! With [`crate::SandboxSpec::max_turns`] above 1, the trial init T tells the caller when each
//! turn of the agent has ended (its whole process tree gone, the services still up) and waits
//! for the caller's word: the next turn's command and environment, or the end. Each turn runs
//! in a fresh PID namespace of its own under a new agent init, exactly as the first; the
//! workspace, `HOME`, `/tmp` and the services carry over. One wall clock,
//! [`crate::SandboxSpec::wall_timeout`], bounds the whole conversation.

use serde::{Deserialize, Serialize};

use crate::report::Exit;

/// How one turn of the agent ended, as the caller is told before it decides on the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    /// The turn that ended, counted from 1.
    pub turn: usize,
    /// How the turn's main process ended (`None`: it could not be executed).
    pub exit: Option<Exit>,
    /// The turn's command could not be executed, and why.
    pub exec_failed: Option<String>,
    /// The turn was stopped at its timeout (its own, or the conversation's).
    pub timed_out: bool,
    /// Bytes of [`crate::SandboxSpec::stdout`] written when the turn ended: this turn's output
    /// is what lies between the previous turn's end and this.
    pub stdout_end: u64,
    /// As `stdout_end`, for [`crate::SandboxSpec::stderr`].
    pub stderr_end: u64,
}

/// What the agent runs for the next turn: its command line and its whole environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextCommand {
    /// The command line (a bare program name is looked up on the `PATH` of `env`).
    pub command: Vec<String>,
    /// The complete environment of the turn; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// The most this turn may run, within what is left of the conversation's wall timeout;
    /// `None`: what is left.
    #[serde(default)]
    pub timeout: Option<std::time::Duration>,
}

/// The caller's word after a turn, one JSON line from the parent to T.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub(crate) enum Reply {
    /// Run this next.
    Next { next: NextCommand },
    /// The conversation is over.
    End,
}

impl Reply {
    /// The reply as one JSON line.
    pub(crate) fn line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_else(|_| b"{\"reply\":\"end\"}".to_vec());
        v.push(b'\n');
        v
    }
}

/// Reads the caller's reply (one JSON line) from the control socket `fd`; a socket that closed
/// or a line that cannot be read ends the conversation, saying why.
pub(crate) fn read_reply(fd: std::os::fd::RawFd) -> Result<Reply, String> {
    let mut line = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        match nix::unistd::read(fd, &mut b) {
            Ok(0) => return Err("the caller went away during a conversation".to_owned()),
            Ok(n) => {
                line.extend_from_slice(&b[..n]);
                if line.last() == Some(&b'\n') {
                    break;
                }
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("read the caller's word on the next turn: {e}")),
        }
    }
    serde_json::from_slice(&line).map_err(|e| format!("an unreadable word on the next turn: {e}"))
}

/// The spec of the turn `next` starts, and its deadline: `spec` with the turn's command and
/// environment; the conversation's `deadline`, or sooner by the turn's own timeout.
pub(crate) fn next_turn(
    spec: &crate::SandboxSpec,
    next: NextCommand,
    deadline: std::time::Instant,
) -> (crate::SandboxSpec, std::time::Instant) {
    let turn_deadline = next
        .timeout
        .map_or(deadline, |t| deadline.min(std::time::Instant::now() + t));
    let mut s = spec.clone();
    s.command = next.command;
    s.env = next.env;
    (s, turn_deadline)
}

/// What the caller decides after each turn: `Some` runs another turn.
pub type NextTurnFn<'a> = dyn FnMut(&TurnEnd) -> Option<NextCommand> + 'a;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_one_line_that_reads_back() {
        let r = Reply::Next {
            next: NextCommand {
                command: vec!["a".into(), "b\nc".into()],
                env: vec![("K".into(), "v".into())],
                timeout: None,
            },
        };
        let line = r.line();
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        let back: Reply = serde_json::from_slice(&line).unwrap();
        match back {
            Reply::Next { next } => assert_eq!(next.command[1], "b\nc"),
            Reply::End => panic!("read back as the end"),
        }
        assert!(matches!(
            serde_json::from_slice::<Reply>(&Reply::End.line()).unwrap(),
            Reply::End
        ));
    }
}
