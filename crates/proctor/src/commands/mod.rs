//! One module per command; each returns the exit status or an [`Error`].

mod compare;
mod demo;
mod evidence;
mod init;
mod inspect;
mod mock_model;
mod models;
mod oracle;
mod rescore;
mod run;
mod suites;
mod validate;

use std::path::Path;

use proctor_suite::Suite;

use crate::cli::{Cli, Command, Format, SchemaDoc};
use crate::exit::{Error, Status};

/// Runs the command the user asked for.
pub fn dispatch(cli: Cli) -> Result<Status, Error> {
    match cli.command {
        Command::Init { dir } => init::run(&dir),
        Command::Validate {
            suite,
            format,
            oracle: false,
            tasks,
            ..
        } => validate::run(&suite, format, &tasks),
        Command::Validate {
            suite,
            store,
            oracle_variant,
            ..
        } => validate_oracle(&suite, store.as_deref(), oracle_variant.as_deref()),
        Command::Suites { dir } => suites::run(&dir),
        Command::Run(args) => run::run(args),
        Command::Demo { store } => demo::run(&store),
        Command::List { store, format } => inspect::list(&store, format),
        Command::Show {
            run,
            trial,
            store,
            format,
        } => inspect::show(&store, &run, trial.as_deref(), format),
        Command::Reindex { store } => inspect::reindex(&store),
        Command::MockModel {
            script,
            listen,
            log,
            faults,
            require_key_env,
            tls_cert,
            tls_key,
        } => mock_model::run(
            &script,
            &listen,
            log,
            &faults,
            require_key_env.as_deref(),
            tls_cert,
            tls_key,
        ),
        Command::Compare {
            runs,
            variants,
            variant,
            gate,
            store,
            format,
        } => compare::run(compare::CompareArgs {
            store: &store,
            runs: &runs,
            variants: variants.as_deref(),
            variant: variant.as_deref(),
            gate,
            format,
        }),
        Command::Schema { document } => schema(document),
        Command::Rescore { run, suite, store } => rescore::run(&store, &run, suite.as_deref()),
    }
}

/// `validate SUITE --oracle`: the static checks, then, when they pass, the oracle run.
fn validate_oracle(
    suite: &Path,
    store: Option<&Path>,
    oracle_variant: Option<&str>,
) -> Result<Status, Error> {
    let status = validate::run(suite, Format::Text, &[])?;
    if status != Status::Success {
        return Ok(status);
    }
    let dir = suite.canonicalize().map_err(|e| {
        Error::usage(
            format!("cannot resolve {}: {e}", suite.display()),
            "pass a suite folder",
        )
    })?;
    oracle::run(open_suite(&dir)?, store, oracle_variant)
}

/// `proctor schema DOCUMENT`: the JSON Schema, on stdout.
fn schema(document: SchemaDoc) -> Result<Status, Error> {
    let schema = match document {
        SchemaDoc::Results => proctor_runner::results::json_schema(),
        SchemaDoc::Comparison => proctor_report::comparison_json_schema(),
        SchemaDoc::Gates => proctor_report::gate_json_schema(),
        SchemaDoc::Suite => proctor_suite::model::json_schema(),
    };
    let text = serde_json::to_string_pretty(&schema).map_err(anyhow::Error::new)?;
    println!("{text}");
    Ok(Status::Success)
}

/// Opens a suite, or fails with every problem it has.
pub fn open_suite(dir: &Path) -> Result<Suite, Error> {
    Suite::open(dir).map_err(|problems| Error::InvalidSuite {
        suite: dir.display().to_string(),
        problems,
    })
}
