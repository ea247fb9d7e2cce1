//! `proctor demo`: the bundled example suites, run end to end with their scripted agents, so a
//! new user sees a whole run (sandboxes, shims, services, holdout checks, the store) in seconds.

use std::path::{Path, PathBuf};

use crate::cli::{Format, IsolationArg, RunArgs, TrialModeArg};
use crate::commands::run;
use crate::exit::{Error, Status};

/// Where the bundled examples are: beside the current folder, or in the source tree proctor was
/// built from.
fn examples_dir() -> Option<PathBuf> {
    let candidates = [
        PathBuf::from("examples"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"),
    ];
    candidates
        .into_iter()
        .find(|p| p.join("traps/suite.toml").is_file())
}

/// Runs `examples/traps` and, when its tools are built, `examples/chat-ax`.
pub fn run(store: &Path) -> Result<Status, Error> {
    let Some(examples) = examples_dir() else {
        return Err(Error::usage(
            "cannot find the bundled examples (examples/traps/suite.toml)",
            "run `proctor demo` from the proctor source folder",
        ));
    };
    let mut suites = vec![examples.join("traps")];
    let dirs = proctor_runner::allow::search_path();
    if proctor_runner::allow::which("chat", &dirs).is_some()
        && proctor_runner::allow::which("chat-mock", &dirs).is_some()
    {
        suites.push(examples.join("chat-ax"));
    } else {
        eprintln!("note: skipping examples/chat-ax: its `chat` and `chat-mock` tools are not built; `cargo build --release` builds them");
    }
    let mut worst = Status::Success;
    for suite in suites {
        eprintln!("\n== {} ==", suite.display());
        // The scripted variants only: the real-CLI variants of chat-ax need agents/install.sh.
        let variants = if suite.ends_with("chat-ax") {
            vec!["oracle".to_string(), "naive".to_string()]
        } else {
            Vec::new()
        };
        let args = RunArgs {
            suite,
            variants,
            tasks: Vec::new(),
            trials: Some(2),
            trial_mode: TrialModeArg::Dev,
            dry_run: false,
            format: Format::Text,
            jobs: None,
            resume: None,
            store: store.to_path_buf(),
            isolation: IsolationArg::Auto,
            scratch: None,
            models: Vec::new(),
            config: None,
            image_cache: None,
            build: false,
            executor: "local".to_string(),
            slurm: Box::default(),
            junit: None,
        };
        let status = run::run(args)?;
        if status as u8 > worst as u8 {
            worst = status;
        }
    }
    eprintln!("\nThe oracle variants complete every task; the trap-falling variants do not. That difference is the demo.");
    // The demo's point is that some trials fail: that is not a failure of the demo.
    Ok(match worst {
        Status::NotSucceeded => Status::Success,
        other => other,
    })
}
