//! A task in steps (`[[tasks.steps]]`): ordered steps in one sandbox, each with its own
//! instruction and its own check, run in the trial between the agent's turns, as Harbor runs a
//! multi-step task.
//!
//! Each step is three turns of the sandbox (see [`proctor_sandbox::turns`]): **prepare** lays
//! the step's `workdir/` files into the workspace from a read-only folder at
//! [`UPLOAD_INSIDE`], runs its `setup.sh` and its healthcheck; **agent** runs the agent with the
//! step's prompt (a fresh session, as Harbor starts the agent anew each step; a scripted agent
//! takes its next `[[turns]]` entry); **check** runs the step's check with its tests laid at
//! [`TESTS_INSIDE`] and a fresh [`LOGS_INSIDE`]`/verifier/` for its reward. Between turns no
//! process of the agent is alive: the tests are laid in only for the check and taken away
//! after, and the host reads what the check wrote without following any link.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_agents::{Adapter, NextTurn};
use proctor_sandbox::turns::{NextCommand, TurnEnd};
use proctor_score::{StepResult, StepsRecord};
use proctor_suite::model::StepReward;

use crate::trial::conversation::{Relaunch, Said, Spoken};

/// Where a step's tests are, inside the sandbox, while its check runs (empty otherwise).
pub const TESTS_INSIDE: &str = "/tests";
/// Where a step's check writes its reward (`verifier/reward.txt`) and its output.
pub const LOGS_INSIDE: &str = "/logs";
/// Where a step's `workdir/` files are, inside the sandbox, while it is prepared.
pub const UPLOAD_INSIDE: &str = "/run/proctor/step";

/// The exit status of a prepare turn whose files could not be laid in.
const UPLOAD_FAILED: i32 = 90;
/// The exit status of a prepare turn whose `setup.sh` failed.
const SETUP_FAILED: i32 = 91;
/// The exit status of a prepare turn whose healthcheck never passed.
const HEALTHCHECK_FAILED: i32 = 92;
/// Bytes of a check's output kept in the record.
const OUTPUT_HEAD: usize = 4096;

/// One step, resolved from the suite.
#[derive(Debug, Clone)]
pub struct StepPlan {
    /// Its name.
    pub name: String,
    /// What the agent is asked.
    pub prompt: String,
    /// The check's command line (`sh -c`).
    pub check: String,
    /// The least reward that lets the next step run.
    pub min_reward: Option<f64>,
    /// The agent's time for the step.
    pub timeout: Duration,
    /// The check's time.
    pub check_timeout: Duration,
    /// The check's own variables.
    pub check_env: Vec<(String, String)>,
    /// The healthcheck: command, seconds between tries, tries.
    pub healthcheck: Option<(String, u64, u32)>,
    /// Host folders laid at `/tests` for the check, in order (the shared one first).
    pub tests: Vec<PathBuf>,
    /// The host folder of the step's `workdir/` files, if it has one.
    pub workdir: Option<PathBuf>,
}

/// The host folders bound into the trial for its steps.
#[derive(Debug, Clone)]
pub struct StepDirs {
    /// Bound read-only at [`TESTS_INSIDE`].
    pub tests: PathBuf,
    /// Bound at [`LOGS_INSIDE`].
    pub logs: PathBuf,
    /// Bound read-only at [`UPLOAD_INSIDE`].
    pub upload: PathBuf,
    /// Where each step's check output and setup output are kept as evidence.
    pub evidence: PathBuf,
}

impl StepDirs {
    /// The binds of these folders.
    pub fn binds(&self) -> Vec<proctor_sandbox::Bind> {
        let bind = |host: &Path, inside: &str, read_only| proctor_sandbox::Bind {
            host: host.to_path_buf(),
            inside: PathBuf::from(inside),
            read_only,
        };
        vec![
            bind(&self.tests, TESTS_INSIDE, true),
            bind(&self.logs, LOGS_INSIDE, false),
            bind(&self.upload, UPLOAD_INSIDE, true),
        ]
    }
}

/// Everything the runner needs to run a task's steps, made at launch.
#[derive(Debug, Clone)]
pub struct StepsPlan {
    /// The steps, in order.
    pub steps: Vec<StepPlan>,
    /// How their rewards make the trial's.
    pub strategy: StepReward,
    /// How the agent is started for each step.
    pub relaunch: Relaunch,
    /// Whether the agent is proctor's scripted agent (it takes its steps' turns in order).
    pub scripted: bool,
    /// The folders bound for the steps.
    pub dirs: StepDirs,
    /// The shims' folder inside the trial: a step's preparation and check run without it on
    /// `PATH`, so that what they call is never logged as the agent's interface call.
    pub shims: PathBuf,
}

/// Which turn of which step ran last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prepare(usize),
    Agent(usize),
    Check(usize),
}

/// The steps as they run: the phase just run and what each step gave.
#[derive(Debug, Clone)]
pub struct StepsRun {
    phase: Phase,
    results: Vec<StepResult>,
    stopped_early: Option<String>,
}

impl Default for StepsRun {
    fn default() -> Self {
        StepsRun {
            phase: Phase::Prepare(0),
            results: Vec::new(),
            stopped_early: None,
        }
    }
}

impl StepsPlan {
    /// The most turns the steps take: three each, and one more allowed so that the last
    /// check's end is reported (the sandbox asks for a next turn only while one may follow).
    pub fn max_turns(&self) -> u32 {
        u32::try_from(self.steps.len() * 3 + 1).unwrap_or(u32::MAX)
    }

    /// The whole trial's time: each step's agent and check time, and a minute for its
    /// preparation.
    pub fn wall_timeout(&self) -> Duration {
        self.steps
            .iter()
            .map(|s| s.timeout + s.check_timeout + Duration::from_secs(60))
            .sum()
    }

    /// The first turn: the first step's preparation (its files laid in before the sandbox
    /// starts).
    pub fn first(&self) -> Result<NextCommand, String> {
        self.prepare(0)
    }

    /// What follows the turn that ended, recorded in `run` and `spoken`; `None` ends the steps.
    pub fn next(
        &self,
        adapter: &dyn Adapter,
        end: &TurnEnd,
        run: &mut StepsRun,
        spoken: &mut Spoken,
    ) -> Option<NextCommand> {
        let next = match run.phase {
            Phase::Prepare(i) => self.after_prepare(i, end, run, adapter, spoken),
            Phase::Agent(i) => self.check(i),
            Phase::Check(i) => self.after_check(i, end, run),
        };
        match next {
            Ok(Some((phase, command))) => {
                run.phase = phase;
                Some(command)
            }
            Ok(None) => None,
            Err(why) => {
                run.stopped_early.get_or_insert(why);
                None
            }
        }
    }

    /// After a step's preparation: its agent turn, or the end when it failed.
    fn after_prepare(
        &self,
        i: usize,
        end: &TurnEnd,
        run: &mut StepsRun,
        adapter: &dyn Adapter,
        spoken: &mut Spoken,
    ) -> Result<Option<(Phase, NextCommand)>, String> {
        let step = &self.steps[i];
        let _ = clear(&self.dirs.upload);
        let setup = read_head(&self.dirs.logs, "setup/output.txt");
        keep(&self.dirs.evidence, &step.name, "setup.txt", &setup);
        let failed = match end.exit.and_then(|e| e.code) {
            Some(0) => None,
            Some(UPLOAD_FAILED) => Some("its files could not be laid in".to_string()),
            Some(SETUP_FAILED) => Some("its setup.sh failed".to_string()),
            Some(HEALTHCHECK_FAILED) => Some("its healthcheck never passed".to_string()),
            _ => Some(format!("its preparation ended badly ({:?})", end.exit)),
        };
        if let Some(why) = failed {
            run.results.push(StepResult {
                name: step.name.clone(),
                error: Some(why.clone()),
                ..StepResult::default()
            });
            return Err(format!("step `{}`: {why}", step.name));
        }
        let mut command = if self.scripted && i > 0 {
            let next = NextTurn {
                turn: i + 1,
                session_id: None,
            };
            self.relaunch.go_on(adapter, &step.prompt, &next)?
        } else {
            self.relaunch.fresh(adapter, &step.prompt)?
        };
        command.timeout = Some(step.timeout);
        spoken.said.push(Said {
            turn: end.turn + 1,
            prompt: step.prompt.clone(),
            by: Some(format!("step {}", step.name)),
        });
        Ok(Some((Phase::Agent(i), command)))
    }

    /// The check turn of step `i`: its tests laid at `/tests`, a fresh `/logs/verifier/`.
    fn check(&self, i: usize) -> Result<Option<(Phase, NextCommand)>, String> {
        let step = &self.steps[i];
        fresh_logs(&self.dirs.logs, "verifier")
            .map_err(|e| format!("step `{}`: its logs folder: {e}", step.name))?;
        clear(&self.dirs.tests)
            .and_then(|()| {
                step.tests
                    .iter()
                    .filter(|d| d.is_dir())
                    .try_for_each(|d| crate::layers::copy_tree(d, &self.dirs.tests))
            })
            .map_err(|e| format!("step `{}`: its tests could not be laid in: {e}", step.name))?;
        let script = format!(
            "( {} ) > {LOGS_INSIDE}/verifier/output.txt 2>&1",
            step.check
        );
        let mut env = self.own_env();
        env.retain(|(k, _)| !step.check_env.iter().any(|(c, _)| c == k));
        env.extend(step.check_env.iter().cloned());
        Ok(Some((
            Phase::Check(i),
            NextCommand {
                command: vec!["sh".into(), "-c".into(), script],
                env,
                timeout: Some(step.check_timeout),
            },
        )))
    }

    /// After step `i`'s check: its reward recorded, then the next step's preparation, or the
    /// end (the last step, or a reward under `min_reward`).
    fn after_check(
        &self,
        i: usize,
        end: &TurnEnd,
        run: &mut StepsRun,
    ) -> Result<Option<(Phase, NextCommand)>, String> {
        let step = &self.steps[i];
        let _ = clear(&self.dirs.tests);
        let output = read_head(&self.dirs.logs, "verifier/output.txt");
        keep(&self.dirs.evidence, &step.name, "check.txt", &output);
        let exit = end.exit.and_then(|e| e.code);
        let (reward, from) = reward(&self.dirs.logs, exit);
        run.results.push(StepResult {
            name: step.name.clone(),
            reward: Some(reward),
            reward_from: Some(from.to_string()),
            check_exit: exit,
            check_timed_out: end.timed_out,
            check_output: String::from_utf8_lossy(&output).into_owned(),
            error: end.exec_failed.clone(),
        });
        if let Some(min) = step.min_reward.filter(|m| reward < *m) {
            return Err(format!(
                "step `{}` earned {reward}, under its min_reward {min}",
                step.name
            ));
        }
        if i + 1 == self.steps.len() {
            return Ok(None);
        }
        self.prepare(i + 1)
            .map(|c| Some((Phase::Prepare(i + 1), c)))
    }

    /// The preparation turn of step `i`: its `workdir/` files copied into the workspace from
    /// [`UPLOAD_INSIDE`], its `setup.sh` run (then deleted), its healthcheck tried.
    fn prepare(&self, i: usize) -> Result<NextCommand, String> {
        let step = &self.steps[i];
        fresh_logs(&self.dirs.logs, "setup")
            .and_then(|()| clear(&self.dirs.upload))
            .and_then(|()| match &step.workdir {
                Some(w) if w.is_dir() => {
                    crate::layers::copy_tree(w, &self.dirs.upload.join("workdir"))
                }
                _ => Ok(()),
            })
            .map_err(|e| format!("step `{}`: its files: {e}", step.name))?;
        let health = match &step.healthcheck {
            Some((cmd, interval, retries)) => format!(
                "i=0; until sh -c {cmd}; do i=$((i+1)); if [ \"$i\" -ge {retries} ]; then exit {HEALTHCHECK_FAILED}; fi; sleep {interval}; done; ",
                cmd = shell_quote(cmd),
                retries = (*retries).max(1),
            ),
            None => String::new(),
        };
        let up = format!("{UPLOAD_INSIDE}/workdir");
        let script = format!(
            "exec > {LOGS_INSIDE}/setup/output.txt 2>&1; \
             if [ -d {up} ]; then cp -a {up}/. ./ || exit {UPLOAD_FAILED}; \
             if [ -f {up}/setup.sh ]; then bash ./setup.sh || exit {SETUP_FAILED}; rm -f ./setup.sh; fi; fi; \
             {health}exit 0"
        );
        Ok(NextCommand {
            command: vec!["sh".into(), "-c".into(), script],
            env: self.own_env(),
            timeout: Some(Duration::from_secs(60)),
        })
    }

    /// The environment of a step's own turns (its preparation and check): the agent's, with
    /// the shims' folder taken off `PATH`.
    fn own_env(&self) -> Vec<(String, String)> {
        let shims = self.shims.to_string_lossy();
        self.relaunch
            .base_env
            .iter()
            .map(|(k, v)| match k.as_str() {
                "PATH" => {
                    let kept: Vec<&str> = v.split(':').filter(|p| *p != shims).collect();
                    (k.clone(), kept.join(":"))
                }
                _ => (k.clone(), v.clone()),
            })
            .collect()
    }

    /// The steps' record: every step that ran, the trial's reward by the strategy, and why the
    /// steps stopped early.
    pub fn record(&self, run: StepsRun, ended: Option<&str>) -> StepsRecord {
        let rewards: Vec<f64> = run
            .results
            .iter()
            .map(|r| r.reward.unwrap_or(0.0))
            .collect();
        let finished =
            run.results.len() == self.steps.len() && run.results.iter().all(|r| r.reward.is_some());
        let reward = match self.strategy {
            StepReward::Mean => rewards.iter().sum::<f64>() / self.steps.len().max(1) as f64,
            StepReward::Final if finished => rewards.last().copied().unwrap_or(0.0),
            StepReward::Final => 0.0,
        };
        let stopped_early = run.stopped_early.or_else(|| {
            (!finished).then(|| {
                ended
                    .unwrap_or("the trial ended before the last step")
                    .to_string()
            })
        });
        StepsRecord {
            steps: run.results,
            strategy: self.strategy.as_str().to_string(),
            reward,
            stopped_early,
        }
    }
}

/// The reward the check wrote (`verifier/reward.txt`: a number; `verifier/reward.json`:
/// `{"reward": N}`), else its exit status (0 is 1, anything else 0); and where it came from.
fn reward(logs: &Path, exit: Option<i32>) -> (f64, &'static str) {
    let text = |name: &str| {
        String::from_utf8_lossy(&read_head(logs, name))
            .trim()
            .to_string()
    };
    if let Ok(r) = text("verifier/reward.txt").parse::<f64>() {
        if r.is_finite() {
            return (r, "reward.txt");
        }
    }
    let json: Option<serde_json::Value> = serde_json::from_str(&text("verifier/reward.json")).ok();
    if let Some(r) = json.as_ref().and_then(|v| v["reward"].as_f64()) {
        return (r, "reward.json");
    }
    (if exit == Some(0) { 1.0 } else { 0.0 }, "exit")
}

/// The first bytes of `rel` under `dir`, read without following a link anywhere and only if
/// it is a regular file (what the trial wrote there is never followed out of it).
fn read_head(dir: &Path, rel: &str) -> Vec<u8> {
    use std::io::Read;
    let Ok(b) = proctor_fs::beneath::Beneath::open(dir) else {
        return Vec::new();
    };
    let is_file = std::fs::symlink_metadata(dir.join(rel)).is_ok_and(|m| m.file_type().is_file());
    if !is_file {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Ok(f) = b.open_file(Path::new(rel)) {
        let _ = f.take(OUTPUT_HEAD as u64).read_to_end(&mut out);
    }
    out
}

/// Keeps a step's output in the trial's evidence as `steps/NAME/FILE`.
fn keep(evidence: &Path, step: &str, file: &str, bytes: &[u8]) {
    let dir = evidence.join(step);
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(file), bytes);
    }
}

/// Empties the folder `dir` (whatever the trial left in it, never followed), keeping the
/// folder itself: it is bound into the trial, which sees this folder, not one made anew.
fn clear(dir: &Path) -> std::io::Result<()> {
    use proctor_fs::beneath::{clear_at, list, Beneath};
    make_open(dir)?;
    let b = Beneath::open(dir)?;
    for name in list(b.fd())? {
        clear_at(b.fd(), &name)?;
    }
    Ok(())
}

/// Makes `logs` hold nothing but an empty, writable `name/`.
fn fresh_logs(logs: &Path, name: &str) -> std::io::Result<()> {
    clear(logs)?;
    make_open(&logs.join(name))
}

/// Creates the folder `dir`, writable by whatever id the trial runs as.
fn make_open(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}

/// `s` as one single-quoted shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reward_comes_from_reward_txt_then_reward_json_then_the_exit_status() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("verifier")).unwrap();
        assert_eq!(reward(d.path(), Some(0)), (1.0, "exit"));
        assert_eq!(reward(d.path(), Some(3)), (0.0, "exit"));
        std::fs::write(d.path().join("verifier/reward.json"), r#"{"reward": 0.25}"#).unwrap();
        assert_eq!(reward(d.path(), Some(0)), (0.25, "reward.json"));
        std::fs::write(d.path().join("verifier/reward.txt"), "0.5\n").unwrap();
        assert_eq!(reward(d.path(), Some(1)), (0.5, "reward.txt"));
    }

    #[test]
    fn what_the_trial_wrote_is_never_followed_out_of_its_folder() {
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("secret");
        std::fs::write(&secret, "1\n").unwrap();
        let logs = d.path().join("logs");
        std::fs::create_dir_all(logs.join("verifier")).unwrap();
        std::os::unix::fs::symlink(&secret, logs.join("verifier/reward.txt")).unwrap();
        assert_eq!(reward(&logs, Some(1)), (0.0, "exit"), "a link is not read");
        std::fs::remove_dir_all(logs.join("verifier")).unwrap();
        std::os::unix::fs::symlink(d.path(), logs.join("verifier")).unwrap();
        std::fs::write(d.path().join("reward.txt"), "1").unwrap();
        assert_eq!(reward(&logs, Some(1)), (0.0, "exit"), "nor a linked folder");
    }

    #[test]
    fn the_trial_s_reward_is_the_mean_or_the_final_step_s() {
        let plan = |strategy| StepsPlan {
            steps: vec![step("a"), step("b")],
            strategy,
            relaunch: crate::trial::conversation::tests_relaunch(),
            scripted: true,
            dirs: StepDirs {
                tests: "/x".into(),
                logs: "/x".into(),
                upload: "/x".into(),
                evidence: "/x".into(),
            },
            shims: "/run/proctor/shims".into(),
        };
        let run = |rewards: &[f64]| StepsRun {
            phase: Phase::Check(1),
            results: rewards
                .iter()
                .map(|r| StepResult {
                    reward: Some(*r),
                    ..StepResult::default()
                })
                .collect(),
            stopped_early: None,
        };
        assert_eq!(
            plan(StepReward::Mean).record(run(&[1.0, 0.5]), None).reward,
            0.75
        );
        assert_eq!(
            plan(StepReward::Final)
                .record(run(&[0.0, 1.0]), None)
                .reward,
            1.0
        );
        let early = plan(StepReward::Mean).record(run(&[1.0]), None);
        assert_eq!(early.reward, 0.5, "a step not reached counts 0");
        assert!(early.stopped_early.is_some());
        assert_eq!(
            plan(StepReward::Final).record(run(&[1.0]), None).reward,
            0.0
        );
    }

    fn step(name: &str) -> StepPlan {
        StepPlan {
            name: name.into(),
            prompt: String::new(),
            check: "true".into(),
            min_reward: None,
            timeout: Duration::from_secs(1),
            check_timeout: Duration::from_secs(1),
            check_env: Vec::new(),
            healthcheck: None,
            tests: Vec::new(),
            workdir: None,
        }
    }
}
