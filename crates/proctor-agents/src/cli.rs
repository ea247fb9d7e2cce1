//! Helpers shared by the real-agent adapters: finding the installed CLI, the preflight check,
//! dummy keys and ids, the launch wrapper, and reading transcripts.
//!
//! **Where CLIs are found.** `$PROCTOR_AGENTS_DIR/bin/NAME` (default
//! `~/.cache/proctor/agents/bin/NAME`, where `agents/install.sh` puts its symlinks), then `PATH`.
//!
//! **The launch wrapper.** Every real agent starts as `/bin/sh AGENT_DIR/launch.sh CLI ARGS...`.
//! The script (written into the agent folder by the adapter) makes the CLI's private config
//! directory under `$HOME` (the trial's private home, known only inside the sandbox), copies the
//! adapter's config files there, closes stdin (`</dev/null`: no CLI waits for input, and aider's
//! confirmations take their default), runs the CLI, and then prints the files the CLI wrote for
//! the parser (usage statistics, chat history) to stdout between
//! `@@proctor-begin NAME` / `@@proctor-end NAME` lines. It exits with the CLI's status.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{
    Adapter, AgentError, AgentInfo, AgentOutput, Launch, LaunchContext, NextTurn, SessionContext,
};

/// The variable naming the folder `agents/install.sh` installs into.
pub const AGENTS_DIR_ENV: &str = "PROCTOR_AGENTS_DIR";
/// The launch wrapper's file name in the agent folder.
pub const WRAPPER: &str = "launch.sh";
/// How long `--version` or `--help` may take.
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of a tool's output kept in a [`crate::ToolCall`].
pub const OUTPUT_HEAD: usize = 4096;

/// The install folder: `$PROCTOR_AGENTS_DIR`, else `~/.cache/proctor/agents`.
pub fn agents_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os(AGENTS_DIR_ENV).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/proctor/agents"))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Finds an executable in the install folder's `bin/`, then on `PATH`; the error lists where
/// it looked.
pub fn find_executable(name: &str) -> Result<PathBuf, String> {
    let mut looked = Vec::new();
    if let Some(dir) = agents_dir() {
        let p = dir.join("bin").join(name);
        if is_executable(&p) {
            return Ok(p);
        }
        looked.push(dir.join("bin").display().to_string());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if is_executable(&p) {
                return Ok(p);
            }
        }
        looked.push("PATH".into());
    }
    Err(looked.join(", "))
}

/// What an adapter checks before any trial.
#[derive(Debug, Clone, Copy)]
pub struct CliSpec {
    /// The agent kind (`claude-code`).
    pub agent: &'static str,
    /// The executable's name (`claude`).
    pub executable: &'static str,
    /// The version the adapter was tested with, as pinned in `agents/install.sh`.
    pub tested_version: &'static str,
    /// The arguments that print the help listing the flags (`["exec", "--help"]`).
    pub help: &'static [&'static str],
    /// Every flag (or choice) the adapter passes, each of which must be in the help text.
    pub required: &'static [&'static str],
    /// What proctor configures the CLI's permission layer to do with a shell command
    /// ([`crate::Adapter::shell_permissions`]).
    pub shell_permissions: crate::ShellPermissions,
    /// How the CLI goes on with a session for a conversation's next turn
    /// ([`CliAgent::resume`]); `None` when it has no headless way to.
    pub resume: Option<ResumeSpec>,
}

/// What the preflight checks of a CLI's resume mechanism: the flags its next-turn launch passes.
#[derive(Debug, Clone, Copy)]
pub struct ResumeSpec {
    /// The arguments that print the help listing them (`["exec", "resume", "--help"]`); empty:
    /// the same help as [`CliSpec::help`].
    pub help: &'static [&'static str],
    /// Every flag (or subcommand) the next-turn launch passes beyond [`CliSpec::required`].
    pub required: &'static [&'static str],
}

/// Runs a command with a private throw-away HOME, stdin closed and a time limit; returns its
/// stdout and stderr joined.
pub fn run_capture(exe: &Path, args: &[&str]) -> Result<String, String> {
    let home = std::env::temp_dir().join(format!("proctor-preflight-{}", random_hex(8)));
    std::fs::create_dir_all(&home).map_err(|e| format!("cannot make {}: {e}", home.display()))?;
    let result = (|| {
        let mut child = Command::new(exe)
            .args(args)
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        let mut out = child.stdout.take();
        let mut err = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_end(&mut s);
            }
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_end(&mut s);
            }
            s
        });
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if start.elapsed() > PREFLIGHT_TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "`{} {}` did not finish within {}s",
                        exe.display(),
                        args.join(" "),
                        PREFLIGHT_TIMEOUT.as_secs()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("cannot wait for {}: {e}", exe.display())),
            }
        };
        let mut text = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
        text.push_str(&String::from_utf8_lossy(
            &err_reader.join().unwrap_or_default(),
        ));
        if !status.success() && text.trim().is_empty() {
            return Err(format!(
                "`{} {}` failed ({status})",
                exe.display(),
                args.join(" ")
            ));
        }
        Ok(text)
    })();
    let _ = std::fs::remove_dir_all(&home);
    result
}

/// The first `N.N.N` (or `N.N`) in a version text.
pub fn parse_version(text: &str) -> Option<String> {
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-')) {
        let w = word.trim_start_matches('v').trim_end_matches('.');
        let parts: Vec<&str> = w.split('.').collect();
        if parts.len() >= 2
            && parts[..2]
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        {
            return Some(w.to_string());
        }
    }
    None
}

/// The preflight every real adapter runs: find the CLI, read `--version`, and check each
/// required flag against the help text. The error names the missing flag.
pub fn preflight(spec: &CliSpec) -> Result<AgentInfo, AgentError> {
    let exe = find_executable(spec.executable).map_err(|looked| AgentError::NotInstalled {
        agent: spec.agent,
        executable: spec.executable,
        looked,
    })?;
    let version_text =
        run_capture(&exe, &["--version"]).map_err(|message| AgentError::Preflight {
            agent: spec.agent,
            message,
        })?;
    let version = parse_version(&version_text).ok_or_else(|| AgentError::Preflight {
        agent: spec.agent,
        message: format!(
            "cannot read a version from `{} --version`: {}",
            spec.executable,
            version_text.trim()
        ),
    })?;
    // The help text (a second start of the CLI, 100-250 ms for a Node one) is read only when
    // this executable, at this version, has not passed the same check before.
    let checked = FlagsChecked::of(spec, &exe, &version);
    let cache = agents_dir().map(|d| d.join(FLAGS_CACHE_DIR).join(format!("{}.json", spec.agent)));
    if !checked
        .as_ref()
        .is_some_and(|c| cache.as_deref().is_some_and(|f| c.is_recorded_in(f)))
    {
        let help = run_capture(&exe, spec.help).map_err(|message| AgentError::Preflight {
            agent: spec.agent,
            message,
        })?;
        check_flags(spec, &version, &help)?;
        check_resume_flags(spec, &exe, &version, &help)?;
        if let (Some(c), Some(f)) = (&checked, &cache) {
            c.record_in(f);
        }
    }
    Ok(AgentInfo {
        agent: spec.agent.into(),
        executable: exe,
        version,
        tested_version: spec.tested_version.into(),
    })
}

/// The folder of the install folder (`agents_dir`) that remembers which executables passed the
/// flags check, one file per agent kind.
pub const FLAGS_CACHE_DIR: &str = "preflight";

/// That an executable passed the flags check: which file it is (its canonical path, size,
/// modification time and inode: a reinstall or an edit makes another), the version it reported
/// and the flags checked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FlagsChecked {
    executable: PathBuf,
    size: u64,
    modified_ns: i128,
    inode: u64,
    version: String,
    flags: Vec<String>,
}

impl FlagsChecked {
    /// What `exe` (which reported `version`) is now, for `spec`'s flags; `None` when it cannot
    /// be read (then the check always runs).
    fn of(spec: &CliSpec, exe: &Path, version: &str) -> Option<FlagsChecked> {
        use std::os::unix::fs::MetadataExt;
        let real = exe.canonicalize().ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        Some(FlagsChecked {
            executable: real,
            size: meta.len(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            inode: meta.ino(),
            version: version.to_string(),
            flags: spec
                .help
                .iter()
                .chain(spec.required)
                .chain(
                    spec.resume
                        .iter()
                        .flat_map(|r| r.help.iter().chain(r.required)),
                )
                .map(|f| f.to_string())
                .collect(),
        })
    }

    /// Whether `file` records this very check as passed.
    fn is_recorded_in(&self, file: &Path) -> bool {
        std::fs::read(file)
            .ok()
            .and_then(|t| serde_json::from_slice::<FlagsChecked>(&t).ok())
            .is_some_and(|c| &c == self)
    }

    /// Records the check as passed in `file` (best effort: an install folder that cannot be
    /// written only means the check runs again next time).
    fn record_in(&self, file: &Path) {
        let Some(dir) = file.parent() else { return };
        let Ok(text) = serde_json::to_vec(self) else {
            return;
        };
        // A failed write removes its temporary file; the error itself is of no use here.
        if std::fs::create_dir_all(dir).is_ok() {
            let _ = proctor_fs::atomic_write_unsynced(file, &text);
        }
    }
}

/// Checks that every required flag appears in `help`; the error names the first one missing.
pub fn check_flags(spec: &CliSpec, version: &str, help: &str) -> Result<(), AgentError> {
    check_listed(spec, version, spec.help, help, spec.required)
}

/// Checks that every flag in `flags` appears in `help`, the text `help_args` printed.
fn check_listed(
    spec: &CliSpec,
    version: &str,
    help_args: &[&str],
    help: &str,
    flags: &[&str],
) -> Result<(), AgentError> {
    for flag in flags {
        if !contains_flag(help, flag) {
            return Err(AgentError::Preflight {
                agent: spec.agent,
                message: format!(
                    "{} {version} lacks `{flag}` in `{} {}` (this adapter needs it; tested with {}, which agents/install.sh installs)",
                    spec.executable,
                    spec.executable,
                    help_args.join(" "),
                    spec.tested_version
                ),
            });
        }
    }
    Ok(())
}

/// Checks the flags of the CLI's resume mechanism, reading its own help when it has one.
fn check_resume_flags(
    spec: &CliSpec,
    exe: &Path,
    version: &str,
    help: &str,
) -> Result<(), AgentError> {
    let Some(resume) = &spec.resume else {
        return Ok(());
    };
    if resume.help.is_empty() {
        return check_listed(spec, version, spec.help, help, resume.required);
    }
    let own = run_capture(exe, resume.help).map_err(|message| AgentError::Preflight {
        agent: spec.agent,
        message,
    })?;
    check_listed(spec, version, resume.help, &own, resume.required)
}

/// Whether `flag` appears in `help` as a whole word (`--json` does not match `--json-schema`).
fn contains_flag(help: &str, flag: &str) -> bool {
    let bytes = help.as_bytes();
    let mut start = 0;
    while let Some(pos) = help[start..].find(flag) {
        let at = start + pos;
        let end = at + flag.len();
        let before_ok = at == 0 || {
            let c = bytes[at - 1] as char;
            !(c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        let after_ok = end >= bytes.len() || {
            let c = bytes[end] as char;
            !(c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if before_ok && after_ok {
            return true;
        }
        start = at + 1;
    }
    false
}

/// `n` random bytes as hex, from `/dev/urandom` (falling back to a time-and-pid hash).
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        use std::hash::{BuildHasher, Hasher};
        for (i, b) in buf.iter_mut().enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u32(std::process::id());
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            *b = h.finish() as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A long random dummy key: CLIs that mask their key in output then mask nothing real.
pub fn dummy_key(prefix: &str) -> String {
    format!("{prefix}proctor-mock-{}", random_hex(24))
}

/// A random version-4 UUID.
pub fn uuid_v4() -> String {
    let h = random_hex(16);
    let mut b: Vec<char> = h.chars().collect();
    b[12] = '4';
    let variant = u8::from_str_radix(&h[16..17], 16).unwrap_or(0) & 0x3 | 0x8;
    b[16] = char::from_digit(u32::from(variant), 16).unwrap_or('8');
    let s: String = b.into_iter().collect();
    format!(
        "{}-{}-{}-{}-{}",
        &s[0..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    )
}

/// Quotes a word for `sh` (proctor's one quoting rule, [`proctor_suite::shell::quote`]).
pub use proctor_suite::shell::quote as sh_quote;

/// The launch wrapper's parts (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Wrapper {
    /// Shell lines run first (make config dirs, copy files, export variables).
    pub setup: Vec<String>,
    /// Shell words put right after the executable, before the adapter's arguments (already
    /// quoted; may use `$HOME`).
    pub extra_args: Vec<String>,
    /// Files printed after the CLI exits: marker name, shell path expression.
    pub captures: Vec<(String, String)>,
}

/// The text of `launch.sh` for an agent.
pub fn wrapper_script(agent: &str, w: &Wrapper) -> String {
    let mut s = format!(
        "#!/bin/sh\n# proctor launch wrapper for {agent}: private config under $HOME, stdin closed,\n# then the CLI; files it wrote for the parser follow its output between @@proctor markers.\n"
    );
    for line in &w.setup {
        s.push_str(line);
        s.push('\n');
    }
    s.push_str("exe=$1\nshift\n\"$exe\"");
    for a in &w.extra_args {
        s.push(' ');
        s.push_str(a);
    }
    s.push_str(" \"$@\" </dev/null\nrc=$?\n");
    for (name, path) in &w.captures {
        s.push_str(&format!(
            "if [ -f {path} ]; then printf '\\n@@proctor-begin {name}\\n'; cat {path}; printf '\\n@@proctor-end {name}\\n'; fi\n"
        ));
    }
    s.push_str("exit $rc\n");
    s
}

/// What a real agent CLI's adapter decides for one trial; [`CliAgent`]'s shared part finds the
/// endpoint and the executable and writes the wrapper around it.
#[derive(Debug, Default)]
pub struct CliCommand {
    /// The CLI's arguments (after the executable).
    pub args: Vec<String>,
    /// The environment it is given.
    pub env: Vec<(String, String)>,
    /// What the wrapper script does around it.
    pub wrapper: Wrapper,
    /// Files written into the agent folder for it (configuration, rules).
    pub files: Vec<(String, Vec<u8>)>,
}

/// A real agent CLI (Claude Code, Codex, Copilot, Gemini, opencode, aider): its adapter says
/// what to check, how to start it and how to read it; launching from the environment or a
/// session, finding the endpoint and the executable, reading the output as text and the
/// preflight are the same for all of them ([`crate::Adapter`] is implemented once, here).
pub trait CliAgent: Send + Sync {
    /// What the preflight checks; its agent name and executable are used at launch too.
    fn spec(&self) -> &'static CliSpec;

    /// The command for one trial, given the model endpoint `base` (no trailing `/v1`) and the
    /// installed executable `exe`.
    fn command(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        exe: &Path,
    ) -> CliCommand;

    /// Reads the CLI's stdout and stderr (as text, invalid UTF-8 replaced).
    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput;

    /// The command for a conversation's next turn (see [`crate::Adapter::continue_session`]):
    /// the CLI's own resume mechanism, in the same HOME and workspace, with `ctx.prompt` the
    /// user's reply. The default: the CLI cannot go on headless.
    fn resume(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        exe: &Path,
        next: &NextTurn,
    ) -> Result<CliCommand, AgentError> {
        let _ = (ctx, session, base, exe, next);
        Err(AgentError::NoConversation)
    }
}

/// The session id a next turn resumes, or the error saying the last turn reported none.
pub fn resumed_id(agent: &'static str, next: &NextTurn) -> Result<String, AgentError> {
    next.session_id
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or(AgentError::NoSessionId { agent })
}

impl<T: CliAgent> Adapter for T {
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError> {
        self.launch_session(ctx, &SessionContext::from_env())
    }

    fn launch_session(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
    ) -> Result<Launch, AgentError> {
        let spec = self.spec();
        let base = base_url(spec.agent, session)?;
        let exe = executable_for(spec.agent, spec.executable)?;
        let c = self.command(ctx, session, base, &exe);
        Ok(wrapped_launch(
            spec.agent, ctx, &exe, c.args, c.env, &c.wrapper, c.files,
        ))
    }

    fn continue_session(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        next: &NextTurn,
    ) -> Result<Launch, AgentError> {
        let spec = self.spec();
        if spec.resume.is_none() {
            return Err(AgentError::NoConversation);
        }
        let base = base_url(spec.agent, session)?;
        let exe = executable_for(spec.agent, spec.executable)?;
        let c = self.resume(ctx, session, base, &exe, next)?;
        Ok(wrapped_launch(
            spec.agent, ctx, &exe, c.args, c.env, &c.wrapper, c.files,
        ))
    }

    fn read(&self, stdout: &[u8], stderr: &[u8]) -> AgentOutput {
        self.parse(
            &String::from_utf8_lossy(stdout),
            &String::from_utf8_lossy(stderr),
        )
    }

    fn shell_permissions(&self) -> crate::ShellPermissions {
        self.spec().shell_permissions
    }

    fn preflight(&self) -> Result<Option<AgentInfo>, AgentError> {
        preflight(self.spec()).map(Some)
    }
}

/// A launch through the wrapper: `/bin/sh AGENT_DIR/launch.sh EXE ARGS...`, with the wrapper
/// and `files` written into the agent folder.
pub fn wrapped_launch(
    agent: &str,
    ctx: &LaunchContext,
    exe: &Path,
    args: Vec<String>,
    env: Vec<(String, String)>,
    wrapper: &Wrapper,
    mut files: Vec<(String, Vec<u8>)>,
) -> Launch {
    files.push((WRAPPER.into(), wrapper_script(agent, wrapper).into_bytes()));
    let mut argv = vec![
        "/bin/sh".to_string(),
        ctx.agent_dir.join(WRAPPER).display().to_string(),
        exe.display().to_string(),
    ];
    argv.extend(args);
    Launch { argv, env, files }
}

/// Where the CLI's executable is in a [`wrapped_launch`] command line (`/bin/sh
/// AGENT_DIR/launch.sh EXE ARGS...`), if `argv` is one.
pub fn wrapped_executable(argv: &[String]) -> Option<usize> {
    let is_wrapper = argv
        .get(1)
        .is_some_and(|w| Path::new(w).file_name().is_some_and(|n| n == WRAPPER));
    (argv.first().is_some_and(|s| s == "/bin/sh") && is_wrapper && argv.len() > 2).then_some(2)
}

/// The installed executable for a launch (the same path is visible inside the sandbox, which
/// sees the host file system read-only).
pub fn executable_for(agent: &'static str, name: &'static str) -> Result<PathBuf, AgentError> {
    find_executable(name).map_err(|looked| AgentError::NotInstalled {
        agent,
        executable: name,
        looked,
    })
}

/// The model endpoint of a session, without a trailing `/`.
pub fn base_url(agent: &'static str, session: &SessionContext) -> Result<String, AgentError> {
    session
        .model_base_url
        .as_deref()
        .map(|u| u.trim_end_matches('/').to_string())
        .filter(|u| !u.is_empty())
        .ok_or(AgentError::NoModelEndpoint { agent })
}

/// The key of a session, or a fresh dummy key.
pub fn api_key(session: &SessionContext, prefix: &str) -> String {
    session.api_key.clone().unwrap_or_else(|| dummy_key(prefix))
}

/// Splits the wrapper's captured files off stdout: the rest, and name → content.
pub fn split_captures(stdout: &str) -> (String, BTreeMap<String, String>) {
    let mut rest = String::new();
    let mut captures = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in stdout.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some((name, mut body)) = current.take() {
            if bare == format!("@@proctor-end {name}") {
                if body.ends_with('\n') {
                    body.pop();
                }
                captures.insert(name, body);
            } else {
                body.push_str(line);
                current = Some((name, body));
            }
        } else if let Some(name) = bare.strip_prefix("@@proctor-begin ") {
            if rest.ends_with("\n\n") {
                rest.pop();
            }
            current = Some((name.to_string(), String::new()));
        } else {
            rest.push_str(line);
        }
    }
    if let Some((name, body)) = current {
        captures.insert(name, body);
    }
    (rest, captures)
}

/// Every line of `text` that is a JSON object, in order, with its length in bytes; parsed one at
/// a time, so only what the caller keeps stays in memory.
pub fn json_lines(text: &str) -> impl Iterator<Item = (Value, usize)> + '_ {
    text.lines().filter_map(|l| {
        let l = l.trim();
        if l.starts_with('{') {
            serde_json::from_str::<Value>(l).ok().map(|v| (v, l.len()))
        } else {
            None
        }
    })
}

/// At most [`OUTPUT_HEAD`] bytes of `s`, cut at a character boundary.
pub fn head(s: &str) -> String {
    head_of(s, OUTPUT_HEAD).to_string()
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub fn head_of(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A string field of a JSON value, if present.
pub fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A non-negative integer field of a JSON value, if present.
pub fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapped_executable_is_found_only_in_a_wrapper_launch() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let wrapped = v(&[
            "/bin/sh",
            "/run/proctor/agent/launch.sh",
            "/opt/claude",
            "-p",
        ]);
        assert_eq!(wrapped_executable(&wrapped), Some(2));
        assert_eq!(wrapped_executable(&v(&["/bin/sh", "-c", "x"])), None);
        assert_eq!(wrapped_executable(&v(&["/bin/sh", "/a/launch.sh"])), None);
        assert_eq!(wrapped_executable(&v(&["bash", "/a/launch.sh", "x"])), None);
    }

    #[test]
    fn versions_are_read_from_each_cli_style() {
        assert_eq!(
            parse_version("2.1.328 (Claude Code)").as_deref(),
            Some("2.1.328")
        );
        assert_eq!(
            parse_version("codex-cli 0.169.0").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(
            parse_version("GitHub Copilot CLI 1.0.102.\nRun 'copilot update'").as_deref(),
            Some("1.0.102")
        );
        assert_eq!(parse_version("aider 0.86.2").as_deref(), Some("0.86.2"));
        assert_eq!(parse_version("0.61.0").as_deref(), Some("0.61.0"));
        assert_eq!(parse_version("no version"), None);
    }

    #[test]
    fn flags_match_as_whole_words() {
        assert!(contains_flag("  --json   Print events", "--json"));
        assert!(!contains_flag("  --json-schema <s>", "--json"));
        assert!(contains_flag(
            "choices: \"acceptEdits\", \"auto\"",
            "acceptEdits"
        ));
        let spec = CliSpec {
            agent: "codex",
            executable: "codex",
            tested_version: "0.169.0",
            help: &["exec", "--help"],
            required: &["--json", "--ephemeral"],
            shell_permissions: crate::ShellPermissions::RunsEverything,
            resume: None,
        };
        let e = check_flags(&spec, "0.1.0", "--json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`--ephemeral`"), "{e}");
        assert!(e.contains("0.1.0"), "{e}");
    }

    #[test]
    fn captures_are_split_off() {
        let out = "{\"a\":1}\n\n@@proctor-begin usage\n{\"x\":\n2}\n@@proctor-end usage\n";
        let (rest, caps) = split_captures(out);
        assert_eq!(rest, "{\"a\":1}\n");
        assert_eq!(caps["usage"], "{\"x\":\n2}");
    }

    #[test]
    fn the_wrapper_runs_the_cli_and_prints_captures() {
        let dir = tempfile::tempdir().unwrap();
        let w = Wrapper {
            setup: vec![
                "mkdir -p \"$HOME/.x\"".into(),
                "echo 42 > \"$HOME/.x/u\"".into(),
            ],
            extra_args: vec![
                "-c".into(),
                "'echo \"arg=$0 $1\"; exit 3'".into(),
                "\"$HOME/.x/u\"".into(),
            ],
            captures: vec![("usage".into(), "\"$HOME/.x/u\"".into())],
        };
        let script = dir.path().join("launch.sh");
        std::fs::write(&script, wrapper_script("test", &w)).unwrap();
        let out = Command::new("/bin/sh")
            .arg(&script)
            .args(["sh", "last"])
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        let text = String::from_utf8_lossy(&out.stdout);
        let (rest, caps) = split_captures(&text);
        assert!(
            rest.contains(&format!("arg={}/.x/u last", dir.path().display())),
            "{rest}"
        );
        assert_eq!(caps["usage"], "42\n");
    }

    #[test]
    fn keys_and_ids_are_random_and_well_formed() {
        let a = dummy_key("sk-");
        assert!(a.len() > 40 && a.starts_with("sk-"));
        assert_ne!(a, dummy_key("sk-"));
        let u = uuid_v4();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!("89ab".contains(&u[19..20]), "{u}");
    }

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("abc"), "abc");
        assert_eq!(sh_quote("a b'c"), "'a b'\\''c'");
        assert_eq!(sh_quote(""), "''");
    }
}
