//! `proctor rescore RUN`: the saved end states scored again, with the rules of the run's own
//! copy of its suite (the default), of the suite folder it was read from (`--suite-from
//! folder`) or of another suite folder (`--suite DIR`); writes
//! `results.rescored-TIMESTAMP.{json,md}` beside the run's own results and lists every trial
//! whose outcome changed. Rescoring is [`proctor_runner::rescoring`]'s; this module prints.

use std::path::Path;

use proctor_report::Table;
use proctor_runner::provision::Images;
use proctor_runner::rescore::Changed;
use proctor_runner::rescoring::{rescore_run, RulesFrom};

use crate::exit::{Error, Status};

/// Rescores a run. Exits `Unfinished` (3) when any trial's outcome became errored or
/// ungradeable (its end state could not be graded again), or when a trial's `trial.json` is
/// there but cannot be read (each is named on stderr).
pub fn run(
    store_dir: &Path,
    run: &str,
    rules: RulesFrom,
    images: Images<'_>,
) -> Result<Status, Error> {
    let done = rescore_run(store_dir, run, rules, images, &mut |n| eprintln!("{n}"))?;
    let rescored = &done.rescored;
    let id = &done.id;
    for d in &rescored.damaged {
        eprintln!(
            "warning: trial {} was not rescored: {} (`proctor run SUITE --resume {id}` runs it again)",
            d.trial_id, d.reason
        );
    }
    if !done.written {
        eprintln!("no trial of run {id} could be read; nothing was rescored and nothing written");
        return Ok(Status::Unfinished);
    }
    eprintln!(
        "rescored {} trial(s) of run {id} in {:.2}s with the rules of {}",
        rescored.trials,
        done.seconds,
        done.from.describe()
    );
    for u in &rescored.unrescored {
        eprintln!(
            "warning: trial {} was not rescored and keeps its old verdict: {}",
            u.trial, u.why
        );
    }
    print_changed(&rescored.changed, rescored.unrescored.len());
    eprintln!(
        "wrote {}",
        done.dir.join(format!("{}.json", done.stem)).display()
    );
    if !rescored.unrescored.is_empty() {
        eprintln!(
            "{} trial(s) could not be rescored (listed above)",
            rescored.unrescored.len()
        );
        return Ok(Status::Unfinished);
    }
    if !rescored.damaged.is_empty() {
        eprintln!(
            "{} trial(s) have an unreadable trial.json (listed above)",
            rescored.damaged.len()
        );
        return Ok(Status::Unfinished);
    }
    Ok(status(&rescored.changed))
}

/// Every trial whose outcome changed, with the new reason; "no outcome changed" only when
/// every trial was rescored (`unrescored` of them were not).
fn print_changed(changed: &[Changed], unrescored: usize) {
    if changed.is_empty() {
        if unrescored == 0 {
            eprintln!("no outcome changed");
        } else {
            eprintln!("no outcome of the trials rescored changed");
        }
        return;
    }
    let mut t = Table::new(&["TRIAL", "BEFORE", "AFTER", "REASON"]);
    for c in changed {
        t.row([
            c.trial.clone(),
            c.before.to_string(),
            c.after.to_string(),
            c.reason.clone(),
        ]);
    }
    print!("{}", t.text());
    eprintln!("{} outcome(s) changed", changed.len());
}

/// Success, unless a trial whose end state graded before no longer does: the rescore could not
/// grade it.
fn status(changed: &[Changed]) -> Status {
    let ungraded = changed.iter().filter(|c| !c.after.is_graded()).count();
    if ungraded == 0 {
        return Status::Success;
    }
    eprintln!("{ungraded} trial(s) became errored or ungradeable (listed above with the reason)");
    Status::Unfinished
}
