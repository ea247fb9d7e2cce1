//! `proctor sit SUITE --task T --as NAME`: a person sits the trial an agent would get (the same
//! fresh sandbox, workspace, services, guard and shims), in their shell on a terminal, with the
//! prompt printed first. When they leave the shell the full stop runs, they give their answer,
//! and the sitting is graded by the task's rules into a run of its own, as variant `human:NAME`.
//!
//! The sitting's run is [`proctor_runner::sit::Sitting`]'s; this command checks the arguments,
//! holds the terminal ([`crate::terminal`]) and asks the questions.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use proctor_runner::calls::CallsLog;
use proctor_runner::conclusion::Tally;
use proctor_runner::record::{AnswerFrom, SittingRecord};
use proctor_runner::request::open_suite_and_store;
use proctor_runner::sit::{self, SitError, Sitting, SittingOptions};
use proctor_runner::trial::execute::{execute_on, Executed};
use proctor_runner::trial::launch::Launched;
use proctor_runner::trial::{Attendance, Stage, TrialError, TrialPaths};
use proctor_runner::{access, provision};
use proctor_sandbox::Capped;

use crate::cli::{Format, SitArgs};
use crate::exit::{Error, Status};
use crate::summary::{print_summary, status_of, Reporter};
use crate::terminal::{self, RawMode, Relay, Shown};

/// Sits the task.
pub fn run(args: SitArgs) -> Result<Status, Error> {
    if !terminal::is_terminal(std::io::stdin().as_fd()) {
        return Err(Error::usage(
            "proctor sit needs a terminal on its standard input: a person sits the trial",
            "run it in a terminal (or in tmux); a trial without a person is a `script` or `command` variant run with `proctor run`",
        ));
    }
    if !sit::valid_name(&args.person) {
        return Err(Error::usage(
            SitError::BadName(args.person.clone()).to_string(),
            "for example --as dana",
        ));
    }
    let notes = read_notes(&args)?;
    let (suite, store, options) = prepare(&args)?;
    let interrupted = interrupt_flag()?;
    let images = options.images.clone();
    let shell = options.shell.clone();
    let sitting = Sitting::start(suite, &store, options).map_err(proctor_runner::RunError::from)?;
    provision::record_in_run(sitting.run(), &images)?;
    for n in sitting.isolation_notes() {
        eprintln!(
            "note: {n}; the sitting is recorded with isolation = \"{}\"",
            sitting.isolation().label()
        );
    }
    introduce(&sitting, &args, &shell);
    let mut seat = TerminalSeat {
        interrupted: interrupted.clone(),
        answer: args.answer.clone(),
        notes,
        shown: Shown::default(),
        asked: None,
    };
    let record = sitting
        .sit(&mut seat)
        .map_err(proctor_runner::RunError::from)?;
    if interrupted.load(Ordering::SeqCst) {
        sitting
            .abandon("interrupted: the sitting was cut short and is not recorded")
            .map_err(proctor_runner::RunError::from)?;
        eprintln!(
            "\ninterrupted: the sitting is not recorded (run {} is left interrupted, with no trial)",
            sitting.run().id()
        );
        return Ok(Status::Unfinished);
    }
    let (answer_from, notes) = seat.asked.take().unwrap_or((AnswerFrom::Flag, None));
    let record_of_sitting = SittingRecord {
        person: args.person.clone(),
        answer_from,
        notes,
        timeout_seconds: args.timeout,
        terminal_bytes: seat.shown.bytes,
        terminal_cut: seat.shown.cut,
    };
    let outcome = format!("{}: {}", record.outcome.label(), record.reason);
    let report = sitting
        .record(record, record_of_sitting)
        .map_err(proctor_runner::RunError::from)?;
    let run = sitting.run();
    eprintln!("\ngraded: {outcome}");
    print_summary(
        report.as_ref(),
        Format::Text,
        run.id().as_str(),
        &run.dir().display().to_string(),
    )?;
    eprintln!("stored in {}", run.dir().display());
    let tally = match &report {
        Some(r) => Tally::of(&r.overall),
        None => Tally::from_records(run)?,
    };
    Ok(status_of(tally.verdict()))
}

/// The notes file `--notes` names, read.
fn read_notes(args: &SitArgs) -> Result<Option<String>, Error> {
    match &args.notes {
        Some(path) => Ok(Some(std::fs::read_to_string(path).map_err(|e| {
            Error::usage(
                format!("cannot read the notes in {}: {e}", path.display()),
                "--notes takes a text file",
            )
        })?)),
        None => Ok(None),
    }
}

/// The suite (with only the sat task checked), the store, and the sitting's options: its
/// task's image pulled, the shell to sit in.
fn prepare(
    args: &SitArgs,
) -> Result<(proctor_suite::Suite, proctor_store::Store, SittingOptions), Error> {
    let (suite, store) = open_suite_and_store(
        &args.suite,
        std::slice::from_ref(&args.task),
        &args.store,
        &mut Reporter::default(),
    )?;
    let images = provision::for_tasks(
        &suite,
        &[args.task.as_str()],
        args.config.as_deref(),
        args.image_cache.as_deref(),
    )?;
    // Inside an image the host's shells may not exist: its own `sh` is the one sure to.
    let shell = if images.is_empty() {
        shell()
    } else {
        vec!["/bin/sh".to_string()]
    };
    let options = SittingOptions {
        person: args.person.clone(),
        task: args.task.clone(),
        shell: shell.clone(),
        env: std::env::var("TERM")
            .ok()
            .filter(|t| !t.is_empty())
            .map(|t| BTreeMap::from([("TERM".to_string(), t)]))
            .unwrap_or_default(),
        timeout: args.timeout.map(Duration::from_secs),
        isolation: args.isolation.into(),
        scratch: args.scratch.clone(),
        grace: Duration::from_secs(2),
        images: images.clone(),
        browser: access::browser_for(&suite, args.config.as_deref())?,
    };
    Ok((suite, store, options))
}

/// The shell the person gets: `$SHELL` when it names an executable by its absolute path, else
/// `/bin/sh`.
fn shell() -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let theirs = std::env::var("SHELL").ok().filter(|s| {
        let p = std::path::Path::new(s);
        p.is_absolute()
            && std::fs::metadata(p)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    vec![theirs.unwrap_or_else(|| "/bin/sh".to_string())]
}

/// Tells the person what they are sitting, and the prompt, before the shell starts.
fn introduce(sitting: &Sitting, args: &SitArgs, shell: &[String]) {
    let trial = sitting.trial();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "proctor sit · run {} · task {} · as {} ({}) · isolation {}",
        sitting.run().id(),
        trial.task,
        args.person,
        trial.variant,
        sitting.isolation().label()
    );
    let _ = writeln!(
        err,
        "You are in the agent's seat: the same fresh sandbox, workspace and services an agent gets; \
         the interface commands are logged as an agent's calls are.\n\
         The task, exactly as an agent is given it:\n"
    );
    for line in sitting.prompt().lines() {
        let _ = writeln!(err, "    {line}");
    }
    let timeout = match args.timeout {
        Some(s) => format!("The sitting stops after {s} s. "),
        None => String::new(),
    };
    let _ = writeln!(
        err,
        "\n{timeout}Leave the shell ({}) with `exit` or Ctrl-D when you are done; you will then be asked for your answer.\n",
        shell.join(" ")
    );
}

/// A flag set by Ctrl-C (outside the shell, where the terminal is in its normal mode), SIGTERM
/// or a hangup; the first one also stops every process of the sitting.
fn interrupt_flag() -> Result<Arc<AtomicBool>, Error> {
    let flag = proctor_runner::engine::install_interrupt_handler(|| {})
        .context("cannot install the interrupt handler")?;
    signal_hook::flag::register(signal_hook::consts::SIGHUP, flag.clone())
        .context("cannot install the hangup handler")?;
    Ok(flag)
}

/// The person at this terminal, in the agent's seat.
struct TerminalSeat {
    /// Set when the sitting is interrupted.
    interrupted: Arc<AtomicBool>,
    /// `--answer`.
    answer: Option<String>,
    /// `--notes`, read.
    notes: Option<String>,
    /// What the terminal showed.
    shown: Shown,
    /// Where the answer came from and the notes, once the shell ended.
    asked: Option<(AnswerFrom, Option<String>)>,
}

impl Attendance for TerminalSeat {
    fn execute(
        &mut self,
        launched: &mut Launched,
        calls_log: &mut CallsLog,
        paths: &TrialPaths,
    ) -> Result<Executed, TrialError> {
        let harness = |what: &str, e: std::io::Error| {
            TrialError::harness(Stage::Execute, format!("{what}: {e}"))
        };
        let log = sit::terminal_log(paths);
        let file =
            File::create(&log).map_err(|e| harness("cannot keep the terminal's output", e))?;
        let bound = launched
            .record
            .limits
            .as_ref()
            .map_or(u64::MAX, |l| l.output_mb.saturating_mul(1 << 20));
        let stdin = std::io::stdin();
        let pty = terminal::open_pty(terminal::window_size(stdin.as_fd()).as_ref())
            .map_err(|e| harness("cannot open a pseudo-terminal", e))?;
        let executed = {
            let raw =
                RawMode::enter().map_err(|e| harness("cannot put the terminal in raw mode", e))?;
            let relay = Relay::start(pty.master, Capped::new("terminal", file, bound))
                .map_err(|e| harness("cannot relay the terminal", e))?;
            let executed = execute_on(&launched.spec, calls_log, paths, Some(pty.slave.as_fd()));
            drop(pty.slave);
            self.shown = relay
                .finish()
                .map_err(|e| harness("the terminal relay failed", e))?;
            drop(raw);
            executed
        };
        sit::keep_terminal_log(&log, paths)
            .map_err(|e| harness("cannot keep the terminal's output", e))?;
        let executed = executed?;
        if executed.report.not_started.is_none() && !self.interrupted.load(Ordering::SeqCst) {
            launched.given_answer = Some(self.ask());
        }
        Ok(executed)
    }
}

impl TerminalSeat {
    /// After the full stop: the answer (unless given) and the notes (unless given); gives the
    /// answer and remembers where it came from.
    fn ask(&mut self) -> String {
        eprintln!(
            "\n── you left the shell; the trial has fully stopped (no process of it is left) ──"
        );
        let (answer, from) = match self.answer.take() {
            Some(a) => (a, AnswerFrom::Flag),
            None => {
                eprintln!(
                    "Your answer to the task, on one line (what you would tell the person who asked):"
                );
                eprint!("> ");
                let a = terminal::read_line(&self.interrupted).unwrap_or_default();
                (a, AnswerFrom::Asked)
            }
        };
        let notes = match self.notes.take() {
            Some(n) => Some(n),
            None if self.interrupted.load(Ordering::SeqCst) => None,
            None => self.ask_notes(),
        };
        self.asked = Some((from, notes.filter(|n| !n.trim().is_empty())));
        answer
    }

    /// Notes typed at the end: lines until an empty one.
    fn ask_notes(&self) -> Option<String> {
        eprintln!("Notes for the record (optional; an empty line ends them):");
        let mut notes = String::new();
        loop {
            eprint!("  ");
            match terminal::read_line(&self.interrupted) {
                Some(line) if !line.trim().is_empty() => {
                    notes.push_str(&line);
                    notes.push('\n');
                }
                _ => break,
            }
        }
        (!notes.is_empty()).then_some(notes)
    }
}
