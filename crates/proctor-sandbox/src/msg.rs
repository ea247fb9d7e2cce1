//! The JSON-lines protocol on the control socket from the sandbox init back to [`crate::run`].

use serde::{Deserialize, Serialize};

use crate::report::{BoundsReport, Exit, Isolation, ServiceReport};

/// One status message; each is written as one JSON line. Externally tagged (`"done"`,
/// `{"agent_exit":{...}}`): read without buffering the message first, as a tag inside it would
/// need.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Msg {
    /// From S, first: its own pidfd travels with this message.
    Init,
    /// From S: the trial init T was forked; its pidfd travels with this message.
    Started { trial_pid: i32 },
    /// From T: the root is built; this is what is in effect.
    Isolation { isolation: Box<Isolation> },
    /// From T, on the internet network: its network namespace, its user namespace and the
    /// resolver's socket travel with this message, in that order. T waits for one byte back on
    /// the control socket (`1`: the way out is up) before anything of the trial starts.
    Network,
    /// From T: a service was started and probed (one per service attempted).
    Service { report: ServiceReport },
    /// From T: the agent will not start, and why.
    NotStarted { reason: String },
    /// From T: the agent phase begins (the wall clock starts).
    AgentStarted,
    /// From A: the agent command could not be executed.
    AgentExecFailed { reason: String },
    /// From A: the agent's main process ended like this.
    AgentExit { exit: Exit },
    /// From T: the agent's whole tree is gone.
    AgentStopped {
        timed_out: bool,
        wall_us: u64,
        cpu_us: Option<u64>,
    },
    /// From T, in a conversation: the turn whose `AgentStopped` came last is over; its output
    /// ends at these offsets of the agent's stdout and stderr files. With `can_go_on`, T waits
    /// for the caller's [`crate::turns::Reply`] on the control socket.
    TurnEnded {
        stdout_end: u64,
        stderr_end: u64,
        can_go_on: bool,
    },
    /// From T, while it moves what the agent left off the trial's disk (a tree of 10,000
    /// levels takes a while on a busy machine): still at work. The watchdog waits
    /// [`crate::run::MOVING_MARGIN`] more each time, up to [`crate::run::MOVING_MAX`] after the
    /// agent stopped.
    Moving,
    /// From T, before `Done`: what the trial ran into of its limits.
    Bounds { bounds: BoundsReport },
    /// From T: a service's main process ended like this.
    ServiceExit { name: String, exit: Exit },
    /// From any stage: a harness fault; the run fails with this message.
    Error { message: String },
    /// From T: everything is stopped; nothing more follows.
    Done,
}

/// The line for a message that cannot be encoded even as an error: read as a [`Msg::Error`].
const UNENCODABLE: &[u8] = br#"{"error":{"message":"cannot encode a status message"}}"#;

impl Msg {
    /// The message as one JSON line.
    pub(crate) fn line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_else(|e| {
            // An error message holds only a string, which always encodes; the text of `e` is
            // escaped like any other, so the line stays one line of valid JSON.
            let fallback = Msg::Error {
                message: format!("cannot encode a status message: {e}"),
            };
            serde_json::to_vec(&fallback).unwrap_or_else(|_| UNENCODABLE.to_vec())
        });
        v.push(b'\n');
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_line_reads_back_as_written() {
        for msg in [
            Msg::Done,
            Msg::AgentStarted,
            Msg::Started { trial_pid: 1 },
            Msg::AgentExit {
                exit: Exit {
                    code: Some(3),
                    signal: None,
                },
            },
            Msg::Error {
                message: "no \"quotes\" lost".into(),
            },
        ] {
            let line = msg.line();
            assert_eq!(line.last(), Some(&b'\n'));
            let back: Msg = serde_json::from_slice(&line).expect("reads back");
            assert_eq!(format!("{back:?}"), format!("{msg:?}"));
        }
        assert!(matches!(
            serde_json::from_slice::<Msg>(UNENCODABLE),
            Ok(Msg::Error { .. })
        ));
    }
}
