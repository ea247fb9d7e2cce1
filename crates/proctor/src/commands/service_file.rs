//! `proctor show RUN TRIAL --service NAME/FILE`: a page of a file a trial's service left (its
//! state, its event log), for a state or event log too large for the trial's record. Only the page
//! is read, never the whole file.

use std::path::Path;

use proctor_store::page::{read_page, PageError};

use crate::cli::Format;
use crate::exit::{Error, Status};

/// What to page: `path` (`NAME/FILE`) under the trial's `services/` folder, from `offset`, at
/// most `bytes` (0: the default page size).
pub struct Request<'a> {
    /// The store folder.
    pub store: &'a Path,
    /// The run (id, prefix or `latest`).
    pub run: &'a str,
    /// The trial's id.
    pub trial: &'a str,
    /// `NAME/FILE` under the trial's `services/` folder.
    pub path: &'a str,
    /// Where the page starts, in bytes.
    pub offset: u64,
    /// At most how many bytes.
    pub bytes: u64,
    /// Text (the page escaped for the terminal, where it is on stderr) or JSON.
    pub format: Format,
}

/// Prints the page on stdout (text escaped for a terminal, or JSON) and, for text, where it is
/// and the command for the next page on stderr.
pub fn show(req: &Request) -> Result<Status, Error> {
    let store = proctor_runner::overview::open_store(req.store)?;
    let id = proctor_runner::overview::resolve(&store, req.run)?;
    // The trial must be a finished one: its folder is then the store's, not a trial still running.
    if let Err(e) = store.read_trial::<serde_json::Value>(&id, req.trial) {
        return Err(Error::usage(
            e.to_string(),
            format!("`proctor show {id}` lists the trials of this run"),
        ));
    }
    let base = store
        .run_dir(&id)
        .join(proctor_store::TRIALS_DIR)
        .join(req.trial)
        .join("services");
    let page = read_page(&base, req.path, req.offset, req.bytes).map_err(|e| {
        let hint = match e {
            PageError::Missing(_) | PageError::BadPath(_) => format!(
                "name a file of the trial's services folder as NAME/FILE, e.g. `--service chat/events.jsonl`; `proctor show {id} {}` lists each service's files",
                req.trial
            ),
            _ => "only a regular file the service wrote is shown".to_string(),
        };
        Error::usage(e.to_string(), hint)
    })?;
    if req.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&page).map_err(anyhow::Error::new)?
        );
        return Ok(Status::Success);
    }
    print!("{}", proctor_report::escape_text(&page.text));
    if !page.text.is_empty() && !page.text.ends_with('\n') {
        println!();
    }
    eprintln!(
        "services/{}: bytes {}–{} of {}",
        req.path,
        page.offset,
        page.offset + page.bytes,
        page.total_bytes
    );
    match page.next_offset {
        Some(next) => eprintln!(
            "next page: proctor show {id} {} --service {} --offset {next}",
            req.trial, req.path
        ),
        None => eprintln!("(the end of the file)"),
    }
    Ok(Status::Success)
}
