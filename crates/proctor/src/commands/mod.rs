//! One module per command; each returns the exit status or an [`Error`].

mod cite;
mod collect;
mod compare;
mod demo;
mod export;
mod images;
mod init;
mod inspect;
mod mock_model;
mod oracle;
mod reason_lists;
mod rescore;
mod run;
mod service_file;
mod sit;
mod suites;
mod validate;
mod verify;
mod view;
mod worker;

use std::path::Path;

use proctor_runner::provision::Images;
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
            config,
            image_cache,
            ..
        } => validate::run(
            &suite,
            format,
            &tasks,
            config.as_deref(),
            image_cache.as_deref(),
        ),
        Command::Validate {
            suite,
            store,
            oracle_variant,
            config,
            image_cache,
            jobs,
            resume,
            json,
            build,
            ..
        } => validate_oracle(
            &suite,
            oracle::Asked {
                store: store.as_deref(),
                oracle: oracle_variant.as_deref(),
                jobs,
                resume,
                json: json.as_deref(),
                build,
            },
            Images {
                config: config.as_deref(),
                cache: image_cache.as_deref(),
            },
        ),
        Command::Suites { dir } => suites::run(&dir),
        Command::Run(args) => run::run(args),
        Command::Sit(args) => sit::run(args),
        Command::Demo { store } => demo::run(&store),
        Command::Worker(args) => worker::run(&args),
        Command::Status { run, store } => collect::status(&store, &run),
        Command::Collect {
            run,
            store,
            format,
            on_node,
        } => collect::collect(&store, &run, format, on_node),
        Command::StoreProbe { file } => collect::store_probe(&file),
        other => read_store(other),
    }
}

/// The commands that read runs and claims: `verify`, `cite`, `list`, `show`, `reindex`; the
/// rest go on to [`compare_or_export`].
fn read_store(command: Command) -> Result<Status, Error> {
    match command {
        Command::Verify { files, format } => verify::run(&files, format),
        Command::Cite {
            run,
            tasks,
            variants,
            table,
            columns,
            from,
            store,
            format,
        } => cite::run(&cite::CiteArgs {
            store: &store,
            run: &run,
            tasks: &tasks,
            variants: &variants,
            table,
            columns: &columns,
            from: from.as_deref(),
            format,
        }),
        Command::List { store, format } => inspect::list(&store, format),
        Command::Show {
            run,
            trial,
            task,
            outcome,
            store,
            format,
            scoring,
            service,
            offset,
            bytes,
        } => match (service.as_deref(), trial.as_deref()) {
            (Some(path), Some(trial)) => service_file::show(&service_file::Request {
                store: &store,
                run: &run,
                trial,
                path,
                offset,
                bytes,
                format,
            }),
            (Some(_), None) => Err(crate::exit::Error::usage(
                "--service pages a file of one trial's service, so it needs a trial",
                format!("write `proctor show {run} TRIAL --service NAME/FILE`"),
            )),
            (None, _) => inspect::show(
                &store,
                &run,
                trial.as_deref(),
                &inspect::Only {
                    task: task.as_deref(),
                    outcome,
                },
                format,
                scoring,
            ),
        },
        Command::Reindex { store } => inspect::reindex(&store),
        other => compare_or_export(other),
    }
}

/// The commands that read runs to set them side by side or carry them out: `compare`,
/// `export`; the rest go on to [`tools`].
fn compare_or_export(command: Command) -> Result<Status, Error> {
    match command {
        Command::Compare {
            runs,
            variants,
            variant,
            gate,
            pass_k_max,
            junit,
            allow_mixed_runs,
            store,
            format,
            scoring,
        } => compare::run(compare::CompareArgs {
            store: &store,
            runs: &runs,
            variants: variants.as_deref(),
            variant: variant.as_deref(),
            gate,
            pass_k_max,
            allow_mixed_runs,
            junit: junit.as_deref(),
            format,
            scoring,
        }),
        Command::Export {
            run,
            html,
            atif,
            junit,
            store,
            scoring,
        } => export::run(
            &store,
            &run,
            export::Formats {
                html: html.as_deref(),
                atif: atif.as_deref(),
                junit: junit.as_deref(),
            },
            scoring,
        ),
        other => tools(other),
    }
}

/// The other tools: `mock-model`, `import`, `images`, `schema`, `view`, `rescore`.
fn tools(command: Command) -> Result<Status, Error> {
    match command {
        Command::MockModel {
            script,
            seed,
            listen,
            log,
            faults,
            require_key_env,
            tls_cert,
            tls_key,
        } => mock_model::run(
            &script,
            seed,
            &listen,
            log,
            &faults,
            require_key_env.as_deref(),
            (tls_cert, tls_key),
        ),
        Command::Import {
            format,
            dirs,
            out,
            id,
            name,
            no_build,
            image_cache,
            config,
            description,
        } => {
            if description.is_some() && format == crate::cli::ImportFormat::Harbor {
                return Err(Error::usage(
                    "--description chooses among a Terminal-Bench task's `descriptions`; Harbor tasks have one instruction.md",
                    "drop --description, or import with `proctor import terminal-bench`",
                ));
            }
            let build = if no_build {
                None
            } else {
                Some(proctor_import::BuildImages {
                    cache_dir: proctor_runner::provision::cache_dir(image_cache.as_deref())?,
                    registries: proctor_runner::provision::registry_config(config.as_deref())?,
                    progress: Some(proctor_import::Progress(std::sync::Arc::new(
                        |line: &str| eprintln!("{line}"),
                    ))),
                })
            };
            let options = proctor_import::ImportOptions {
                suite_id: id,
                name,
                build,
                description,
            };
            import(format, &dirs, &out, &options)
        }
        Command::Images {
            action,
            image_cache,
            config,
        } => images::run(action, image_cache.as_deref(), config.as_deref()),
        Command::Schema { document } => schema(document),
        Command::View {
            store,
            listen,
            allow_hosts,
        } => view::view(&store, listen, &allow_hosts),
        Command::Rescore {
            run,
            suite,
            suite_from,
            store,
            image_cache,
            config,
        } => rescore::run(
            &store,
            &run,
            match (suite, suite_from) {
                (Some(dir), _) => proctor_runner::rescoring::RulesFrom::Folder(dir),
                (None, Some(crate::cli::SuiteFrom::Folder)) => {
                    proctor_runner::rescoring::RulesFrom::RunFolder
                }
                (None, _) => proctor_runner::rescoring::RulesFrom::Run,
            },
            Images {
                cache: image_cache.as_deref(),
                config: config.as_deref(),
            },
        ),
        // `dispatch` and `read_store` send only the commands above here.
        other => Err(Error::Other(anyhow::anyhow!(
            "proctor has no handler for {other:?}"
        ))),
    }
}

/// `validate SUITE --oracle`: the static checks (with `--config`), then, when they pass, the
/// oracle run, which has each task's image (`--image-cache`) itself.
fn validate_oracle(
    suite: &Path,
    asked: oracle::Asked<'_>,
    images: Images<'_>,
) -> Result<Status, Error> {
    // The images are had task by task by the oracle check: one that cannot be had is that
    // task's failure, not the suite's.
    let status = validate::run(suite, Format::Text, &[], images.config, None)?;
    if status != Status::Success {
        return Ok(status);
    }
    let dir = suite.canonicalize().map_err(|e| {
        Error::usage(
            format!("cannot resolve {}: {e}", suite.display()),
            "pass a suite folder",
        )
    })?;
    oracle::run(open_suite(&dir)?, asked, images)
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
    Ok(proctor_runner::stored_suite::open_suite(dir)?)
}

/// `proctor import FORMAT DIR... --out SUITE`: the suite is written whole or not at all; the
/// report (imported, skipped with the reason, every unknown field) goes to stderr.
fn import(
    format: crate::cli::ImportFormat,
    dirs: &[std::path::PathBuf],
    out: &Path,
    options: &proctor_import::ImportOptions,
) -> Result<Status, Error> {
    let result = match format {
        crate::cli::ImportFormat::Harbor => proctor_import::import_harbor(dirs, out, options),
        crate::cli::ImportFormat::TerminalBench => {
            proctor_import::import_terminal_bench(dirs, out, options)
        }
    };
    match result {
        Ok(report) => {
            eprint!("{report}");
            eprintln!(
                "wrote {}; check it with `proctor validate {} --oracle`",
                out.display(),
                out.display()
            );
            Ok(Status::Success)
        }
        Err(proctor_import::ImportError::NothingImported { report }) => {
            eprint!("{report}");
            Err(Error::usage(
                "no task could be imported",
                "see the reasons above; docs/import.md says what each format needs",
            ))
        }
        Err(e) => Err(Error::usage(e.to_string(), "see docs/import.md")),
    }
}
