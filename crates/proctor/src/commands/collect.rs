//! `proctor status RUN` and `proctor collect RUN`, for a run whose trials ran elsewhere (a
//! Slurm job array, external workers), and `proctor __store-probe FILE`, the Slurm store
//! probe's job. Reading and collecting the run is [`proctor_runner::executor::collect`]'s.

use std::path::Path;

use proctor_runner::executor::collect::{self, NodeResults};
use proctor_runner::executor::slurm::probe;

use crate::cli::Format;
use crate::exit::{Error, Status};
use crate::summary::conclude;

/// `proctor status RUN`: trials finished by outcome, and the Slurm job's tasks.
pub fn status(store_dir: &Path, prefix: &str) -> Result<Status, Error> {
    let p = collect::progress(store_dir, prefix)?;
    let list = p
        .outcomes
        .iter()
        .map(|(o, n)| format!("{o} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "run {} · suite {} · executor {} · {}",
        p.id,
        p.meta.suite_id,
        p.record.as_ref().map_or("local", |r| r.kind.as_str()),
        p.state
    );
    println!(
        "trials: {}/{} finished{}",
        p.finished,
        p.meta.planned_trials,
        if list.is_empty() {
            String::new()
        } else {
            format!(" ({list})")
        }
    );
    for l in &p.lines {
        println!("{l}");
    }
    println!(
        "results: {}",
        if p.results {
            "written (results.json, results.md)"
        } else {
            "not written yet (`proctor collect RUN` writes them)"
        }
    );
    Ok(Status::Success)
}

/// `proctor collect RUN`: results.json and results.md from the trials in the store, the
/// index brought up to date and the run's status recorded; with `--on-node` (the dependent
/// job) the results files only.
pub fn collect(
    store_dir: &Path,
    prefix: &str,
    format: Format,
    on_node: bool,
) -> Result<Status, Error> {
    if on_node {
        match collect::collect_on_node(store_dir, prefix)? {
            NodeResults::Written(dir) => {
                eprintln!("wrote {}/results.json and results.md", dir.display())
            }
            NodeResults::NoTrials(id) => {
                eprintln!("no trial of run {id} is finished: no results to write")
            }
        }
        return Ok(Status::Success);
    }
    let c = collect::collect(store_dir, prefix)?;
    let flags = c
        .executor
        .map(|kind| format!(" --executor {kind}"))
        .unwrap_or_default();
    conclude(&c.session, &c.summary, &c.suite_dir, format, &flags)
}

/// `proctor __store-probe FILE`: on a node, reads the token the submitter wrote and writes it
/// back with this node's name.
pub fn store_probe(file: &Path) -> Result<Status, Error> {
    probe::store_probe(file)?;
    Ok(Status::Success)
}
