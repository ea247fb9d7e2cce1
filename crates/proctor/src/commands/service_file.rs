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
    let store = super::inspect::open(req.store)?;
    let id = super::inspect::resolve(&store, req.run)?;
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

/// `show RUN TRIAL`'s services section: each service's state and events, how much of them the
/// record holds, and the `--service` command that pages what it leaves out.
pub fn summary_lines(
    run: &str,
    trial: &str,
    services: &std::collections::BTreeMap<String, proctor_score::endstate::ServiceEnd>,
) -> Vec<String> {
    use proctor_report::escape_line;
    if services.is_empty() {
        return Vec::new();
    }
    let page = |file: &str| format!("proctor show {run} {trial} --service {file}");
    let mut out = vec!["services".to_string()];
    for (name, end) in services {
        let name_shown = escape_line(name);
        let state = match (&end.state, end.state_omitted_bytes, &end.state_error) {
            (Some(v), _, _) => format!(
                "state {} bytes of JSON, in the record (`--format json` prints it)",
                proctor_score::endstate::json_len(v)
            ),
            (None, Some(bytes), _) => format!(
                "state {bytes} bytes of JSON: graded whole, too large for the record; page it: {}",
                page(&format!(
                    "{name}/{}",
                    end.state_file.as_deref().unwrap_or("STATE_FILE")
                ))
            ),
            (None, None, Some(why)) => format!("no state: {}", escape_line(why)),
            (None, None, None) => "no state".to_string(),
        };
        out.push(format!("  {name_shown:<10} {}", escape_line(&state)));
        let listed = end.events.len() as u64;
        let events = if end.events_omitted > 0 {
            format!(
                "events {} ({listed} in the record, every one graded); page them: {}",
                listed + end.events_omitted,
                page(&format!("{name}/events.jsonl"))
            )
        } else {
            format!("events {listed}")
        };
        out.push(format!("  {:<10} {}", "", escape_line(&events)));
    }
    out
}
