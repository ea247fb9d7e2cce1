//! A trial held as a conversation (a task with a `[tasks.user]`): after each turn of the agent
//! proctor reads the turn's answer with the agent's adapter, asks the task's simulated user for
//! a reply and, when there is one, has the adapter continue its session with the reply as the
//! next prompt, in the same sandbox (see [`proctor_sandbox::turns`]). What was said, by which
//! rule, and why the conversation ended are kept for the capture.

use std::path::{Path, PathBuf};

use proctor_agents::{Adapter, AgentError, AgentOutput, LaunchContext, NextTurn, SessionContext};
use proctor_sandbox::turns::{NextCommand, TurnEnd};
use proctor_sandbox::TurnReport;
use proctor_score::{Conversation, ConversationTurn};
use proctor_suite::model::User;

use crate::trial::user_model::UserModel;

/// How the agent is started again in a trial's sandbox after its first turn: what the first
/// launch was made from, so each later command line and environment is made the same way.
#[derive(Debug, Clone)]
pub struct Relaunch {
    /// The first turn's launch context; a later turn gets its own prompt.
    pub launch: LaunchContext,
    /// The model endpoint, allow-list and key the session was started with.
    pub session: SessionContext,
    /// The first turn's own environment (what the adapter added), replaced turn by turn.
    pub first_env: Vec<(String, String)>,
    /// The first turn's full environment.
    pub base_env: Vec<(String, String)>,
    /// Where the agent's launch files go, on the host.
    pub agent_dir: PathBuf,
    /// For a real CLI: the shims folder that login shells keep first on `PATH`.
    pub login_wrap: Option<PathBuf>,
    /// For a real CLI run from a launcher inside an image: the launcher, in place of the
    /// executable the adapter names.
    pub launcher: Option<String>,
}

/// What the runner needs to start the agent's later turns in a conversation, made at launch.
#[derive(Debug)]
pub struct TurnPlan {
    /// The task's simulated user.
    pub user: User,
    /// The model that plays the user when no reply rule matches, started, if the user is
    /// model-played.
    pub model_user: Option<std::sync::Mutex<UserModel>>,
    /// How the agent is started again.
    pub relaunch: Relaunch,
    /// The agent's stdout and stderr files, on the host.
    pub output: [PathBuf; 2],
}

/// What the user said to open one turn (turn 1: the task's prompt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    /// The turn it opened, from 1.
    pub turn: usize,
    /// The words.
    pub prompt: String,
    /// The rule that said it: `replies[N]` or `otherwise`; `None` for the task's prompt.
    pub by: Option<String>,
}

/// The conversation as the execute stage saw it: what opened each turn and why it ended.
#[derive(Debug, Clone, Default)]
pub struct Spoken {
    /// What opened each turn, in order.
    pub said: Vec<Said>,
    /// Why no further turn followed (empty until the conversation ended).
    pub ended: String,
    /// When each turn (of the sandbox, counted from 1) ended, in seconds on the calls log's
    /// clock; the last turn's end is not told (it ended with the trial).
    pub ends: Vec<(usize, f64)>,
}

impl Spoken {
    /// The calls log's seconds at which sandbox turn `turn` began and ended (`None`: with the
    /// trial), from the ends recorded.
    fn window(&self, turn: usize) -> (f64, Option<f64>) {
        let end_of = |t: usize| self.ends.iter().find(|(n, _)| *n == t).map(|(_, s)| *s);
        let began = turn
            .checked_sub(1)
            .and_then(end_of)
            .unwrap_or(f64::NEG_INFINITY);
        (began, end_of(turn))
    }
}

impl TurnPlan {
    /// Decides what follows the turn that ended (`end`, its output read with `adapter`), and
    /// records it in `spoken`: the next turn's command, or `None` when the conversation ends.
    pub fn next(
        &self,
        adapter: &dyn Adapter,
        end: &TurnEnd,
        previous: (u64, u64),
        spoken: &mut Spoken,
    ) -> Option<NextCommand> {
        if let Some(why) = &end.exec_failed {
            spoken.ended = format!("turn {} could not start: {why}", end.turn);
            return None;
        }
        let out = read_range(
            adapter,
            &self.output,
            previous,
            (end.stdout_end, end.stderr_end),
        );
        let (by, say) = match self.reply(&out.answer) {
            Ok(reply) => reply,
            Err(why) => {
                spoken.ended = why;
                return None;
            }
        };
        let next = NextTurn {
            turn: end.turn + 1,
            session_id: out.session_id.clone(),
        };
        let command = match self.relaunch.go_on(adapter, &say, &next) {
            Ok(c) => c,
            Err(why) => {
                spoken.ended = why;
                return None;
            }
        };
        spoken.said.push(Said {
            turn: next.turn,
            prompt: say,
            by: Some(by),
        });
        Some(command)
    }

    /// What the user says to `answer` and who said it (`replies[N]`, `otherwise` or `model`);
    /// `Err` says why the conversation ends instead.
    fn reply(&self, answer: &str) -> Result<(String, String), String> {
        let mut model = self
            .model_user
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if let Some((rule, say)) = self.user.reply_to(answer) {
            if let Some(model) = model.as_mut() {
                model.heard(answer, say);
            }
            let by = rule.map_or("otherwise".to_string(), |i| format!("replies[{i}]"));
            return Ok((by, say.to_string()));
        }
        let Some(model) = model.as_mut() else {
            return Err("the user had no reply to the agent's answer".to_string());
        };
        match model.reply(answer) {
            Ok(Some(say)) => Ok(("model".to_string(), say)),
            Ok(None) => Err("the user (played by its model) ended the conversation".to_string()),
            Err(why) => Err(format!("the user's model failed: {why}")),
        }
    }
}

impl Relaunch {
    /// The agent's next turn in the same session, with `prompt`: the adapter's continuation
    /// (see [`Adapter::continue_session`]); `Err` says why the agent cannot go on.
    pub fn go_on(
        &self,
        adapter: &dyn Adapter,
        prompt: &str,
        next: &NextTurn,
    ) -> Result<NextCommand, String> {
        let ctx = LaunchContext {
            prompt: prompt.to_string(),
            ..self.launch.clone()
        };
        match adapter.continue_session(&ctx, &self.session, next) {
            Ok(launch) => self.command_of(launch),
            Err(AgentError::NoConversation) => {
                Err("the agent has no further turn (it cannot go on)".to_string())
            }
            Err(e) => Err(format!("the agent could not go on: {e}")),
        }
    }

    /// A fresh session of the agent with `prompt`, as its first turn was started.
    pub fn fresh(&self, adapter: &dyn Adapter, prompt: &str) -> Result<NextCommand, String> {
        let ctx = LaunchContext {
            prompt: prompt.to_string(),
            ..self.launch.clone()
        };
        match adapter.launch_session(&ctx, &self.session) {
            Ok(launch) => self.command_of(launch),
            Err(e) => Err(format!("the agent could not start: {e}")),
        }
    }

    /// The sandbox's command for an adapter's launch: its files written, its command line and
    /// environment made as the first turn's were.
    fn command_of(&self, launch: proctor_agents::Launch) -> Result<NextCommand, String> {
        write_files(&self.agent_dir, &launch.files)
            .map_err(|e| format!("the next turn's files could not be written: {e}"))?;
        Ok(NextCommand {
            command: self.command(launch.argv),
            env: self.env(&launch.env),
            timeout: None,
        })
    }

    /// The next turn's command line, as the first turn's was made from the adapter's.
    fn command(&self, mut argv: Vec<String>) -> Vec<String> {
        if let (Some(launcher), Some(slot)) = (
            &self.launcher,
            proctor_agents::cli::wrapped_executable(&argv),
        ) {
            argv[slot] = launcher.clone();
        }
        match &self.login_wrap {
            Some(shims) => crate::trial::env::login_path_wrapper(shims, &argv),
            None => argv,
        }
    }

    /// The next turn's environment: the first turn's, with what the adapter set for the first
    /// turn replaced by what it sets for this one.
    pub fn env(&self, turn: &[(String, String)]) -> Vec<(String, String)> {
        let own = |k: &str| {
            self.first_env.iter().any(|(f, _)| f == k) || turn.iter().any(|(t, _)| t == k)
        };
        let mut env: Vec<(String, String)> = self
            .base_env
            .iter()
            .filter(|(k, _)| !own(k))
            .cloned()
            .collect();
        env.extend(turn.iter().cloned());
        env
    }
}

/// Writes a turn's launch files into the agent folder.
fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    files
        .iter()
        .try_for_each(|(name, bytes)| std::fs::write(dir.join(name), bytes))
}

/// The agent's output between two offsets of its stdout and stderr files, read by `adapter`.
fn read_range(
    adapter: &dyn Adapter,
    [stdout, stderr]: &[PathBuf; 2],
    from: (u64, u64),
    to: (u64, u64),
) -> AgentOutput {
    // Only the turn's part is read: a long conversation's output is not read again per turn.
    let slice = |path: &Path, a: u64, b: u64| -> Vec<u8> {
        use std::io::{Read, Seek, SeekFrom};
        let mut bytes = Vec::new();
        if let Ok(mut f) = std::fs::File::open(path) {
            if f.seek(SeekFrom::Start(a)).is_ok() {
                let _ = f.take(b.saturating_sub(a)).read_to_end(&mut bytes);
            }
        }
        bytes
    };
    adapter.read(&slice(stdout, from.0, to.0), &slice(stderr, from.1, to.1))
}

/// Each turn's output read with `adapter` from the whole of the agent's stdout and stderr,
/// split where the turns ended.
pub fn read_turns(
    adapter: &dyn Adapter,
    stdout: &[u8],
    stderr: &[u8],
    turns: &[TurnReport],
) -> Vec<AgentOutput> {
    let mut from = (0usize, 0usize);
    turns
        .iter()
        .map(|t| {
            let cut = |bytes: &[u8], a: usize, b: u64| -> (Vec<u8>, usize) {
                let end = (b as usize).clamp(a.min(bytes.len()), bytes.len());
                (bytes[a.min(end)..end].to_vec(), end)
            };
            let (out, out_end) = cut(stdout, from.0, t.stdout_end);
            let (err, err_end) = cut(stderr, from.1, t.stderr_end);
            from = (out_end, err_end);
            adapter.read(&out, &err)
        })
        .collect()
}

/// The agent turns' outputs as one: the last turn's answer and session, everything else of
/// every turn in order (usage and cost summed), with a `user` event opening each turn's
/// transcript after the first (`said[i]` opened `turns[i]`).
pub fn merge(turns: Vec<AgentOutput>, said: &[Said]) -> AgentOutput {
    let mut all = AgentOutput::default();
    for (i, out) in turns.into_iter().enumerate() {
        if let Some(s) = said.get(i).filter(|_| i > 0) {
            let event = serde_json::json!({"type": "user", "turn": i + 1, "text": s.prompt});
            let len = event.to_string().len();
            all.keep_event(event, len);
        }
        for event in out.transcript {
            let len = event.to_string().len();
            all.keep_event(event, len);
        }
        all.events_dropped += out.events_dropped;
        all.answer = out.answer;
        all.session_id = out.session_id.or(all.session_id);
        all.tool_calls.extend(out.tool_calls);
        all.denied.extend(out.denied);
        all.errors.extend(out.errors);
        if let Some(u) = &out.usage {
            all.usage.get_or_insert_with(Default::default).add(u);
        }
        all.cost_usd = match (all.cost_usd, out.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
    all
}

/// The conversation as the trial record keeps it: each turn's prompt, the rule that said it,
/// its answer (as given, already bounded by the caller), how it ended, where its output ends and
/// the calls made in it (by their time on the calls log's clock); `turns` are the sandbox's.
pub fn record(
    spoken: &Spoken,
    turns: &[TurnReport],
    answers: Vec<String>,
    calls: &[proctor_score::CallRecord],
) -> Conversation {
    let mut answers = answers.into_iter();
    let turns = spoken
        .said
        .iter()
        .enumerate()
        .filter_map(|(i, said)| {
            let t = turns.get(said.turn.checked_sub(1)?)?;
            let (began, ended) = spoken.window(said.turn);
            let calls = calls
                .iter()
                .filter(|c| c.start > began && ended.is_none_or(|e| c.start <= e))
                .map(|c| c.seq)
                .collect();
            Some(ConversationTurn {
                turn: i + 1,
                prompt: said.prompt.clone(),
                said_by: said.by.clone(),
                answer: answers.next().unwrap_or_default(),
                exit_code: t.exit.as_ref().and_then(|e| e.code),
                signal: t.exit.as_ref().and_then(|e| e.signal),
                timed_out: t.timed_out,
                not_run: t.exec_failed.clone(),
                started_seconds: t.started.as_secs_f64(),
                wall_seconds: t.wall.as_secs_f64(),
                stdout_end: t.stdout_end,
                stderr_end: t.stderr_end,
                calls,
            })
        })
        .collect();
    Conversation {
        turns,
        ended: spoken.ended.clone(),
        user_model: None,
    }
}

/// The outputs of the agent's turns among all of a trial's turns (in a task in steps, the
/// others are its steps' preparations and checks): `said[i]` opened the turn whose output is
/// the i-th given.
pub fn agent_outputs(all: Vec<AgentOutput>, said: &[Said]) -> Vec<AgentOutput> {
    let mut all: Vec<Option<AgentOutput>> = all.into_iter().map(Some).collect();
    said.iter()
        .map(|s| {
            s.turn
                .checked_sub(1)
                .and_then(|i| all.get_mut(i))
                .and_then(Option::take)
                .unwrap_or_default()
        })
        .collect()
}

/// A relaunch for unit tests of what is built on it.
#[cfg(test)]
pub(crate) fn tests_relaunch() -> Relaunch {
    tests::relaunch()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn relaunch() -> Relaunch {
        Relaunch {
            launch: LaunchContext {
                prompt: "first".into(),
                workspace: "/workspace".into(),
                model: None,
                proctor: "/run/proctor/bin/proctor".into(),
                agent_dir: "/run/proctor/agent".into(),
            },
            session: SessionContext::default(),
            first_env: vec![("TURN_FILE".into(), "1".into())],
            base_env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("TURN_FILE".into(), "1".into()),
            ],
            agent_dir: "/nonexistent".into(),
            login_wrap: None,
            launcher: None,
        }
    }

    #[test]
    fn a_later_turn_keeps_the_trial_s_environment_and_takes_the_adapter_s_new_one() {
        let env = relaunch().env(&[("RESUME".into(), "abc".into())]);
        assert_eq!(
            env,
            vec![
                ("PATH".to_string(), "/usr/bin".to_string()),
                ("RESUME".to_string(), "abc".to_string())
            ]
        );
    }

    #[test]
    fn the_turns_are_split_where_each_ended_and_merged_in_order() {
        let adapter = proctor_agents::command::CommandAdapter::new(vec!["x".into()]);
        let turns = [
            TurnReport {
                stdout_end: 4,
                stderr_end: 0,
                ..Default::default()
            },
            TurnReport {
                stdout_end: 9,
                stderr_end: 2,
                ..Default::default()
            },
        ];
        let outs = read_turns(&adapter, b"ask?done.", b"e!", &turns);
        assert_eq!(outs[0].answer, "ask?");
        assert_eq!(outs[1].answer, "done.");
        let said = [
            Said {
                turn: 1,
                prompt: "Deploy the app.".into(),
                by: None,
            },
            Said {
                turn: 2,
                prompt: "production".into(),
                by: Some("replies[0]".into()),
            },
        ];
        let merged = merge(outs, &said);
        assert_eq!(merged.answer, "done.");
        assert!(merged
            .transcript
            .iter()
            .any(|e| e["type"] == "user" && e["text"] == "production"));
    }
}
