//! `proctor cite RUN`: ready-made `verify:fileLine(PATH, /REGEX/)` citations of the rows of a
//! run's results.md ([`proctor_claims::cite`]), printed as text or JSON.

use std::path::{Path, PathBuf};

use proctor_claims::citation;
use proctor_claims::cite::{self, base_description, MdTable, Row, Table};

use crate::cli::{CiteTable, Format};
use crate::exit::{Error, Status};

/// What `cite` was asked for.
pub struct CiteArgs<'a> {
    /// The store folder.
    pub store: &'a Path,
    /// A run (id, prefix, `latest`) or the path of a results.md file.
    pub run: &'a str,
    /// Only these tasks' rows (none: every row).
    pub tasks: &'a [String],
    /// Only these variants' rows (none: every row).
    pub variants: &'a [String],
    /// Which table.
    pub table: CiteTable,
    /// Only these columns are pinned, beside the row's variant and task (none: every column).
    pub columns: &'a [String],
    /// The folder the citations will be written in.
    pub from: Option<&'a Path>,
    /// Output format.
    pub format: Format,
}

/// `proctor cite RUN [--task T] [--variant V]`.
pub fn run(args: &CiteArgs) -> Result<Status, Error> {
    let results = results_file(args.store, args.run)?;
    let request = cite::Request {
        tasks: args.tasks,
        variants: args.variants,
        table: table(args.table),
        columns: args.columns,
        from: args.from,
    };
    let c = cite::cite(&results, &request)?;
    for w in &c.warnings {
        eprintln!("{w}");
    }
    match args.format {
        Format::Text => {
            eprintln!(
                "{} row(s) of the {} table of {}; PATH is relative to {}",
                c.cited.len(),
                c.table.heading,
                results.display(),
                base_description(args.from)
            );
            let blocks: Vec<String> = c
                .cited
                .iter()
                .map(|(row, _, cited)| format!("{}\n{}\n", row.text, citation::code_span(cited)))
                .collect();
            print!("{}", blocks.join("\n"));
        }
        Format::Json => print_json(&results, &c.path, &c.table, &c.cited)?,
    }
    Ok(Status::Success)
}

/// The table `--table` names.
fn table(t: CiteTable) -> Table {
    match t {
        CiteTable::Rates => Table::Rates,
        CiteTable::SideBySide => Table::SideBySide,
        CiteTable::Metrics => Table::Metrics,
        CiteTable::Tokens => Table::Tokens,
        CiteTable::Cost => Table::Cost,
    }
}

/// The results.md to cite: the file named, or the run's in the store.
fn results_file(store_dir: &Path, run: &str) -> Result<PathBuf, Error> {
    if run.contains('/') || run.ends_with(".md") {
        let file = PathBuf::from(run);
        if !file.is_file() {
            return Err(Error::usage(
                format!("{run} is not a file"),
                "pass a run id (or `latest`), or the path of a run's results.md",
            ));
        }
        return Ok(file);
    }
    let store = proctor_runner::overview::open_store(store_dir)?;
    let id = proctor_runner::overview::resolve(&store, run)?;
    let file = store.run_dir(&id).join("results.md");
    if !file.is_file() {
        return Err(Error::usage(
            format!("run {id} has no results.md yet"),
            "a run writes it when it ends; a run on a cluster gets it from `proctor collect RUN`",
        ));
    }
    Ok(file)
}

/// `--format json`: the cited file and each row with its citation.
fn print_json(
    results: &Path,
    path: &str,
    table: &MdTable,
    cited: &[(Row, String, String)],
) -> Result<(), Error> {
    let rows: Vec<serde_json::Value> = cited
        .iter()
        .map(|(row, pattern, citation)| {
            let cells: serde_json::Map<String, serde_json::Value> = table
                .header
                .iter()
                .cloned()
                .zip(row.cells.iter().map(|c| c.clone().into()))
                .collect();
            serde_json::json!({
                "line": row.line, "row": row.text, "cells": cells,
                "regex": pattern, "citation": citation,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "results": results.display().to_string(),
        "path": path,
        "table": table.heading,
        "rows": rows,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?;
    println!("{text}");
    Ok(())
}
