//! A lab for trial tests: a suite and a store in a folder under the build's target directory
//! (not /tmp, so that hiding the suite from the agent is really exercised), runs of the real
//! binary (optionally as the unprivileged user 65534), and readers for what the store holds.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A suite folder and a store folder for one test.
pub struct Lab {
    /// The test's folder.
    pub root: PathBuf,
}

/// Who runs proctor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum As {
    /// The test's own user.
    Me,
    /// uid/gid 65534 through `setpriv` (only possible when the tests run as root).
    Nobody,
}

/// Whether the tests run as root, so that `As::Nobody` is possible.
pub fn is_root() -> bool {
    // SAFETY: getuid(2) cannot fail.
    unsafe { libc_getuid() == 0 }
}

extern "C" {
    #[link_name = "getuid"]
    fn libc_getuid() -> u32;
}

/// The users a test should run as: itself, and also 65534 when it is root.
pub fn users() -> Vec<As> {
    if is_root() {
        vec![As::Me, As::Nobody]
    } else {
        vec![As::Me]
    }
}

/// Hands the lab to uid 65534, as if that user had written the suite: an unprivileged user
/// runs proctor on their own files.
fn open_up(p: &Path) {
    for entry in walkdir::WalkDir::new(p).into_iter().filter_map(Result::ok) {
        let _ = std::os::unix::fs::lchown(entry.path(), Some(65534), Some(65534));
    }
    // The folders above the lab must be traversable.
    let mut dir = p.parent();
    while let Some(d) = dir {
        if let Ok(meta) = std::fs::metadata(d) {
            let mode = meta.permissions().mode();
            if mode & 0o001 == 0 {
                let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o011));
            }
        }
        dir = d.parent();
    }
}

/// Copies the tree `from` (a bundled example, a fixture) into `to`, folders and files.
pub fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from)
        .into_iter()
        .filter_map(Result::ok)
    {
        let dest = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Whether a trial record shows real isolation: namespaces, and an overlay workspace unless
/// `copy` was asked for. When it does not, the test is skipped with the reason printed, except
/// under `CI`, where that fails it: a real part must never pass as a skip there.
pub fn real_isolation(record: &serde_json::Value, copy: bool) -> bool {
    let iso = &record["isolation"];
    let real = (copy || iso["workspace"] == "overlay")
        && iso["namespaces"].as_array().is_some_and(|n| !n.is_empty());
    if !real {
        let why = format!("no namespaces or overlay here: {iso:#}");
        super::skip(&why);
    }
    real
}

/// The workspace paths a trial record lists as changed, in its order.
pub fn change_paths(record: &serde_json::Value) -> Vec<&str> {
    record["end_state"]["changes"]
        .as_array()
        .map(|changes| changes.iter().filter_map(|c| c["path"].as_str()).collect())
        .unwrap_or_default()
}

/// What a run printed.
#[derive(Debug)]
pub struct RunOut {
    /// Exit status.
    pub code: i32,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

impl RunOut {
    fn of(out: &std::process::Output) -> RunOut {
        RunOut {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn read_all(from: &mut impl std::io::Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = from.read_to_end(&mut bytes);
    bytes
}

/// `[[variants]]` tables, one scripted agent per id, each with its script folder
/// `agents/ID`.
pub fn script_variants(ids: &[&str]) -> String {
    ids.iter()
        .map(|v| {
            format!("[[variants]]\nid = \"{v}\"\nagent = \"script\"\nscript = \"agents/{v}\"\n\n")
        })
        .collect()
}

impl Lab {
    /// A fresh lab named after the test.
    pub fn new(name: &str) -> Lab {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("labs")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("suite/fixture")).unwrap();
        std::fs::create_dir_all(root.join("store")).unwrap();
        Lab { root }
    }

    /// The suite folder.
    pub fn suite(&self) -> PathBuf {
        self.root.join("suite")
    }

    /// The store folder.
    pub fn store(&self) -> PathBuf {
        self.root.join("store")
    }

    /// Writes a file in the suite.
    pub fn write(&self, rel: &str, content: &str) -> &Lab {
        let p = self.suite().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        self
    }

    /// Writes an executable file in the suite.
    pub fn write_exec(&self, rel: &str, content: &str) -> &Lab {
        self.write(rel, content);
        std::fs::set_permissions(
            self.suite().join(rel),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        self
    }

    /// A one-task suite whose `script` variant `agent` runs `steps` (shell lines), with
    /// `extra` appended to the task table (before its success table).
    pub fn one_task(
        &self,
        task_extra: &str,
        success: &str,
        steps: &[&str],
        answer_from_last_step: bool,
    ) -> &Lab {
        self.write(
            "suite.toml",
            &format!(
                "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Do the thing.\"\n{task_extra}\n\n[tasks.success]\nall = [{success}]\n"
            ),
        );
        let mut script = String::new();
        if answer_from_last_step {
            script.push_str(&format!("answer_from_step = {}\n", steps.len()));
        } else {
            script.push_str("answer = \"done\"\n");
        }
        for s in steps {
            script.push_str(&format!("\n[[steps]]\nrun = '''{s}'''\n"));
        }
        self.write("agents/agent/t.toml", &script)
    }

    /// `proctor ARGS` as `who`, in the lab's folder.
    pub fn proctor(&self, who: As, args: &[&str]) -> RunOut {
        self.proctor_env(who, args, &[])
    }

    /// `proctor show ARGS --store STORE` of the lab's store, as `who`.
    pub fn show(&self, who: As, args: &[&str]) -> RunOut {
        let store = self.store();
        let mut all = vec!["show"];
        all.extend_from_slice(args);
        all.extend(["--store", store.to_str().unwrap()]);
        self.proctor(who, &all)
    }

    /// `proctor rescore RUN --store STORE` of the lab's store, as `who`.
    pub fn rescore(&self, who: As, run: &str) -> RunOut {
        let store = self.store();
        self.proctor(who, &["rescore", run, "--store", store.to_str().unwrap()])
    }

    /// Asserts that `proctor validate` refuses the lab's suite with a diagnostic saying
    /// `expected`, wherever the report wrapped it (see [`super::unwrapped`]); `case` names the
    /// case in a failure.
    pub fn assert_validate_refuses(&self, expected: &str, case: &str) {
        let out = self.proctor(As::Me, &["validate", self.suite().to_str().unwrap()]);
        assert_ne!(out.code, 0, "{case}: validate accepted it:\n{}", out.stderr);
        assert!(
            super::unwrapped(&out.stderr).contains(expected),
            "{case}: expected {expected:?} in:\n{}",
            out.stderr
        );
    }

    /// `proctor ARGS` as `who`, with `env` added to proctor's own environment.
    pub fn proctor_env(&self, who: As, args: &[&str], env: &[(&str, &str)]) -> RunOut {
        let out = self.command(who, args, env).output().unwrap();
        RunOut::of(&out)
    }

    /// [`Lab::proctor_env`], also giving the proctor process's peak RSS in KiB (its `VmHWM`,
    /// read from /proc while it runs; `setpriv` execs proctor in the same process).
    pub fn proctor_peak_rss(&self, who: As, args: &[&str], env: &[(&str, &str)]) -> (RunOut, u64) {
        use std::process::Stdio;
        let mut child = self
            .command(who, args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = format!("/proc/{}/status", child.id());
        let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let readers = [
            std::thread::spawn(move || read_all(&mut stdout)),
            std::thread::spawn(move || read_all(&mut stderr)),
        ];
        let mut peak = 0u64;
        while child.try_wait().unwrap().is_none() {
            let hwm = std::fs::read_to_string(&status).unwrap_or_default();
            if let Some(kib) = hwm
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kib);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let code = child.wait().unwrap().code().unwrap_or(-1);
        let [out, err] = readers.map(|r| r.join().unwrap());
        let run = RunOut {
            code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        };
        (run, peak)
    }

    /// The command line of `proctor ARGS` as `who`, in the lab, with `env` added.
    fn command(&self, who: As, args: &[&str], env: &[(&str, &str)]) -> Command {
        let bin = assert_cmd::cargo::cargo_bin("proctor");
        let mut cmd = match who {
            As::Me => Command::new(&bin),
            As::Nobody => {
                open_up(&self.root);
                let mut c = Command::new("setpriv");
                c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
                    .arg(&bin);
                c
            }
        };
        cmd.args(args).env("NO_COLOR", "1").current_dir(&self.root);
        cmd.envs(env.iter().copied());
        cmd
    }

    /// `proctor run SUITE --store STORE --trials 1 EXTRA...` of a one-trial task `t`, as
    /// `who`: the record of `t.agent.0`, after checking that the run graded it (exit 0 or 1,
    /// never 3); `None` (outside CI) when the machine gave it no real isolation.
    pub fn run_graded(&self, who: As, copy: bool, extra: &[&str]) -> Option<serde_json::Value> {
        let mut args = vec!["--trials", "1"];
        if copy {
            args.extend(["--isolation", "copy"]);
        }
        args.extend_from_slice(extra);
        let out = self.run(who, &args);
        let record = self.record("t.agent.0");
        if !real_isolation(&record, copy) {
            return None;
        }
        assert!(
            out.code == 0 || out.code == 1,
            "{who:?}: exit {}: {}\n{record:#}",
            out.code,
            out.stderr
        );
        Some(record)
    }

    /// `proctor run SUITE --store STORE EXTRA...`.
    pub fn run(&self, who: As, extra: &[&str]) -> RunOut {
        self.run_env(who, extra, &[])
    }

    /// [`Lab::run`], with `env` added to proctor's own environment.
    pub fn run_env(&self, who: As, extra: &[&str], env: &[(&str, &str)]) -> RunOut {
        let suite = self.suite();
        let store = self.store();
        let mut args = vec![
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.proctor_env(who, &args, env)
    }

    /// The only run in the store.
    pub fn run_dir(&self) -> PathBuf {
        let runs: Vec<_> = std::fs::read_dir(self.store().join("runs"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        assert_eq!(runs.len(), 1, "expected one run, found {runs:?}");
        runs[0].clone()
    }

    /// `proctor export RUN --html LAB/NAME --store STORE`: its output, and the page's path.
    pub fn export_html(&self, run: &str, name: &str) -> (RunOut, PathBuf) {
        let page = self.root.join(name);
        let out = self.proctor(
            As::Me,
            &[
                "export",
                run,
                "--html",
                page.to_str().unwrap(),
                "--store",
                self.store().to_str().unwrap(),
            ],
        );
        (out, page)
    }

    /// The id of the only run.
    pub fn run_id(&self) -> String {
        self.run_dir()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// A trial's folder in the only run.
    pub fn trial_dir(&self, id: &str) -> PathBuf {
        self.run_dir().join("trials").join(id)
    }

    /// A trial's full record (`trial.json`'s `record`).
    pub fn record(&self, id: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.trial_dir(id).join("trial.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["record"].clone()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}
