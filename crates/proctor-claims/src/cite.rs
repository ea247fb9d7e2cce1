//! Ready-made `verify:fileLine(PATH, /REGEX/)` citations of the rows of a run's results.md
//! (`proctor cite`), so that a claim ("with `--text` the sends pass 2/2") is written from the
//! evidence and `proctor verify` can check it for as long as it stands.
//!
//! Each citation's REGEX matches its row exactly, every cell of it, anchored at both ends, with
//! any spacing around the `|` separators (so a table re-padded by a Markdown formatter still
//! matches). PATH is written relative to the folder the citation will be written in (`from`),
//! by default the root of the current git repository, which `verify` looks in when PATH is not
//! beside the citing file.

use std::path::{Path, PathBuf};

use crate::citation;
use crate::error::ClaimsError;
use crate::verify::repository_root;

/// The tables of a results.md a citation can be made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `## Rates`: n, success, completion, failure and each outcome per variant and task.
    Rates,
    /// `## Variants side by side`: one row per task, one column per variant.
    SideBySide,
    /// `## Interface metrics`: medians of calls, wrong turns, errors and time.
    Metrics,
    /// `## Tokens and requests`: medians of tokens and requests.
    Tokens,
    /// `## Cost ledgers`: totals per variant.
    Cost,
}

/// What to cite.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Only these tasks' rows (none: every row).
    pub tasks: &'a [String],
    /// Only these variants' rows (none: every row).
    pub variants: &'a [String],
    /// Which table.
    pub table: Table,
    /// Only these columns are pinned, beside the row's variant and task (none: every column).
    pub columns: &'a [String],
    /// The folder the citations will be written in.
    pub from: Option<&'a Path>,
}

/// The citations of a results.md's rows.
#[derive(Debug)]
pub struct Citations {
    /// The table cited.
    pub table: MdTable,
    /// PATH, as the citations write it.
    pub path: String,
    /// Each row cited, with its REGEX and its citation.
    pub cited: Vec<(Row, String, String)>,
    /// What the user should know (a path that holds only on this machine, a file git ignores).
    pub warnings: Vec<String>,
}

/// Cites the rows `request` asks for of the results.md at `results`.
pub fn cite(results: &Path, request: &Request) -> Result<Citations, ClaimsError> {
    let text = std::fs::read_to_string(results)
        .map_err(|e| ClaimsError::io(format!("cannot read {}", results.display()), e))?;
    let table = find_table(&text, request.table, results)?;
    let rows = select(&table, request.tasks, request.variants)?;
    let pinned = pinned_cells(&table, request.columns)?;
    let mut warnings = Vec::new();
    let path = cited_path(results, request.from, &mut warnings)?;
    if ignored_by_git(results) {
        warnings.push(format!(
            "warning: git ignores {}: a checkout (CI's) will not have it, and `proctor verify` \
             will report that it does not exist; copy it into the repository and cite the copy \
             (`proctor cite COPY.md`)",
            results.display()
        ));
    }
    let cited = rows
        .into_iter()
        .map(|row| {
            let pattern = row_pattern(&row.cells, pinned.as_deref());
            let citation = citation::format(&path, &pattern);
            (row, pattern, citation)
        })
        .collect();
    Ok(Citations {
        table,
        path,
        cited,
        warnings,
    })
}

impl Table {
    /// The `## ` heading the table starts with.
    pub fn heading(self) -> &'static str {
        match self {
            Table::Rates => "Rates",
            Table::SideBySide => "Variants side by side",
            Table::Metrics => "Interface metrics",
            Table::Tokens => "Tokens and requests",
            Table::Cost => "Cost ledgers",
        }
    }
}

/// One table of a results.md: its `##` heading, its header cells and its body rows.
#[derive(Debug)]
pub struct MdTable {
    /// The heading above it.
    pub heading: String,
    /// Its header cells.
    pub header: Vec<String>,
    /// Its body rows.
    pub rows: Vec<Row>,
}

/// A body row of a table.
#[derive(Debug, Clone)]
pub struct Row {
    /// 1-based line in the file.
    pub line: usize,
    /// The line as written.
    pub text: String,
    /// Its cells as written (trimmed; a `\|` stays escaped).
    pub cells: Vec<String>,
}

/// The table asked for, from the text of a results.md.
fn find_table(text: &str, which: Table, file: &Path) -> Result<MdTable, ClaimsError> {
    let heading = which.heading();
    tables(text)
        .into_iter()
        .find(|t| t.heading.starts_with(heading))
        .ok_or_else(|| {
            ClaimsError::usage(
                format!("{} has no `## {heading}` table", file.display()),
                "cite a results.md that proctor wrote (a run's, or a copy of one)",
            )
        })
}

/// The Markdown tables of a text, each with the `##` heading above it.
fn tables(text: &str) -> Vec<MdTable> {
    let mut found = Vec::new();
    let mut heading = String::new();
    let mut current: Option<MdTable> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(h) = line.strip_prefix("## ") {
            heading = h.trim().to_string();
        }
        if !line.trim_start().starts_with('|') {
            found.extend(current.take());
            continue;
        }
        let cells = split_cells(line);
        match &mut current {
            None => {
                current = Some(MdTable {
                    heading: heading.clone(),
                    header: cells,
                    rows: Vec::new(),
                })
            }
            Some(_) if is_separator(&cells) => {}
            Some(t) => t.rows.push(Row {
                line: i + 1,
                text: line.to_string(),
                cells,
            }),
        }
    }
    found.extend(current);
    found
}

/// The cells of a table row, trimmed; a `|` escaped as `\|` stays in its cell.
fn split_cells(line: &str) -> Vec<String> {
    let inner = line.trim();
    let inner = inner.strip_prefix('|').unwrap_or(inner);
    let inner = match inner.strip_suffix('|') {
        Some(s) if !s.ends_with('\\') => s,
        _ => inner,
    };
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cell.push(c);
                cell.extend(chars.next());
            }
            '|' => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

/// Whether a row is a table's `|---|---|` separator.
fn is_separator(cells: &[String]) -> bool {
    cells
        .iter()
        .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')))
}

/// The rows of the tasks and variants asked for (all when none is named).
fn select(table: &MdTable, tasks: &[String], variants: &[String]) -> Result<Vec<Row>, ClaimsError> {
    let task_col = filter_column(table, "task", tasks)?;
    let variant_col = filter_column(table, "variant", variants)?;
    let keep = |row: &Row, col: Option<usize>, wanted: &[String]| {
        col.is_none_or(|c| row.cells.get(c).is_some_and(|v| wanted.contains(v)))
    };
    let rows: Vec<Row> = table
        .rows
        .iter()
        .filter(|r| keep(r, task_col, tasks) && keep(r, variant_col, variants))
        .cloned()
        .collect();
    if rows.is_empty() {
        return Err(ClaimsError::usage(
            format!(
                "the {} table has no row for these tasks and variants",
                table.heading
            ),
            "`proctor show RUN` lists a run's tasks and variants",
        ));
    }
    Ok(rows)
}

/// The column a filter reads (None when nothing is asked), checking that each value asked for
/// is in it.
fn filter_column(
    table: &MdTable,
    name: &str,
    wanted: &[String],
) -> Result<Option<usize>, ClaimsError> {
    if wanted.is_empty() {
        return Ok(None);
    }
    let Some(col) = table.header.iter().position(|h| h == name) else {
        return Err(ClaimsError::usage(
            format!("the {} table has no {name} column", table.heading),
            format!("cite it without --{name}, or choose another --table"),
        ));
    };
    let present: Vec<&str> = table
        .rows
        .iter()
        .filter_map(|r| r.cells.get(col).map(String::as_str))
        .collect();
    if let Some(missing) = wanted.iter().find(|w| !present.contains(&w.as_str())) {
        let mut seen = std::collections::HashSet::new();
        let listed: Vec<&str> = present.into_iter().filter(|v| seen.insert(*v)).collect();
        return Err(ClaimsError::usage(
            format!("the {} table has no {name} `{missing}`", table.heading),
            format!("its {name}s are: {}", listed.join(", ")),
        ));
    }
    Ok(Some(col))
}

/// A cell of any content (a `\|` inside it included) and the `|` after it.
const ANY_CELL: &str = "(?:[^|\\\\]|\\\\.)*\\|";

/// A regex matching this row: each cell `pinned` exactly (all when None), any spacing around
/// the separators, the other cells whatever they hold.
fn row_pattern(cells: &[String], pinned: Option<&[bool]>) -> String {
    let mut pattern = String::from("^\\|");
    let mut skipped = 0;
    for (i, cell) in cells.iter().enumerate() {
        if !pinned.is_none_or(|p| p.get(i).copied().unwrap_or(false)) {
            skipped += 1;
            continue;
        }
        push_skipped(&mut pattern, std::mem::take(&mut skipped));
        if !cell.is_empty() {
            pattern.push_str("\\s*");
            pattern.push_str(&citation::escape(cell));
        }
        pattern.push_str("\\s*\\|");
    }
    push_skipped(&mut pattern, skipped);
    pattern.push_str("\\s*$");
    pattern
}

/// Appends a match of `n` cells of any content.
fn push_skipped(pattern: &mut String, n: usize) {
    match n {
        0 => {}
        1 => pattern.push_str(ANY_CELL),
        n => pattern.push_str(&format!("(?:{ANY_CELL}){{{n}}}")),
    }
}

/// Which cells a citation pins, when only some `columns` are asked for: those, and the row's
/// key (its `variant` and `task` cells). None pins every cell.
fn pinned_cells(table: &MdTable, columns: &[String]) -> Result<Option<Vec<bool>>, ClaimsError> {
    if columns.is_empty() {
        return Ok(None);
    }
    if let Some(unknown) = columns.iter().find(|c| !table.header.contains(c)) {
        return Err(ClaimsError::usage(
            format!("the {} table has no column `{unknown}`", table.heading),
            format!("its columns are: {}", table.header.join(", ")),
        ));
    }
    Ok(Some(
        table
            .header
            .iter()
            .map(|h| h == "variant" || h == "task" || columns.contains(h))
            .collect(),
    ))
}

/// How `results` is written in a citation made in `from` (default: the repository root of the
/// current folder, else the current folder). Checked to parse back as written.
fn cited_path(
    results: &Path,
    from: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<String, ClaimsError> {
    let results = results
        .canonicalize()
        .map_err(|e| ClaimsError::io(format!("cannot resolve {}", results.display()), e))?;
    let base = base_dir(from)?;
    let inside = results.starts_with(&base);
    let path = match pathdiff::diff_paths(&results, &base) {
        Some(rel) if inside || from.is_some() => rel,
        _ => {
            warnings.push(format!(
                "warning: {} is outside the repository at {}: the citations name it by its \
                 absolute path, which holds only on this machine",
                results.display(),
                base.display()
            ));
            results.clone()
        }
    };
    let path = path.to_str().map(str::to_string).ok_or_else(|| {
        ClaimsError::usage(
            format!("{} is not valid UTF-8", path.display()),
            "cite a results.md whose path is UTF-8",
        )
    })?;
    let parsed = citation::scan(&citation::format(&path, "x"));
    match parsed.first() {
        Some(Ok(c)) if c.path == path => Ok(path),
        _ => Err(ClaimsError::usage(
            format!("the path {path:?} cannot be written in a citation"),
            "copy the results.md to a path without `, /` and without leading or trailing spaces, \
             and cite the copy",
        )),
    }
}

/// Whether `file` is in a git repository that ignores it (`git check-ignore`; false when git
/// is not installed or the file is in no repository).
fn ignored_by_git(file: &Path) -> bool {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if repository_root(dir).is_none() {
        return false;
    }
    let Some(name) = file.file_name() else {
        return false;
    };
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["check-ignore", "-q", "--"])
        .arg(name)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.code() == Some(0))
}

/// The folder PATH is relative to, canonical.
fn base_dir(from: Option<&Path>) -> Result<PathBuf, ClaimsError> {
    if let Some(dir) = from {
        if !dir.is_dir() {
            return Err(ClaimsError::usage(
                format!("--from {}: not a folder", dir.display()),
                "pass the folder of the Markdown file the citations will be written in",
            ));
        }
        return dir
            .canonicalize()
            .map_err(|e| ClaimsError::io(format!("cannot resolve {}", dir.display()), e));
    }
    let cwd = std::env::current_dir()
        .map_err(|e| ClaimsError::io("cannot read the current folder", e))?;
    Ok(repository_root(&cwd).unwrap_or(cwd))
}

/// Says what PATH is relative to, for the note on stderr.
pub fn base_description(from: Option<&Path>) -> String {
    match (from, base_dir(from)) {
        (Some(dir), _) => format!("{} (--from)", dir.display()),
        (None, Ok(base)) => match std::env::current_dir()
            .ok()
            .and_then(|c| repository_root(&c))
        {
            Some(_) => format!("the repository root {}", base.display()),
            None => format!(
                "the current folder {} (not in a git repository)",
                base.display()
            ),
        },
        (None, Err(_)) => "the current folder".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESULTS: &str = "\
# Results: suite `s`

## Rates

| variant | task | n | success | flag |
|---|---|---|---|---|
| text | send | 2 | 2/2 (100%) |  |
| json | send | 2 | 1/2 (50%) | a \\| b |
| (all variants) | (all tasks) | 4 | 3/4 (75%) |  |

## Cost ledgers (totals)

| variant | money |
|---|---|
| text | $0.10 |
";

    #[test]
    fn tables_are_read_with_their_heading_rows_and_lines() {
        let t = tables(RESULTS);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].heading, "Rates");
        assert_eq!(t[0].header, ["variant", "task", "n", "success", "flag"]);
        assert_eq!(t[0].rows.len(), 3);
        assert_eq!(t[0].rows[0].line, 7);
        assert_eq!(t[0].rows[1].cells[4], "a \\| b");
        assert_eq!(t[1].heading, "Cost ledgers (totals)");
    }

    #[test]
    fn a_row_pattern_matches_its_row_padded_and_no_other() {
        let t = tables(RESULTS);
        for row in &t[0].rows {
            let re = regex::Regex::new(&row_pattern(&row.cells, None)).unwrap();
            assert!(re.is_match(&row.text), "{} on {}", re, row.text);
            let padded = row.text.replace(" | ", "   |   ");
            assert!(re.is_match(&padded), "{re} on {padded}");
            let others = t[0].rows.iter().filter(|r| r.line != row.line);
            for other in others {
                assert!(!re.is_match(&other.text), "{re} on {}", other.text);
            }
        }
        let re = regex::Regex::new(&row_pattern(&t[0].rows[0].cells, None)).unwrap();
        assert!(!re.is_match("| text | send | 2 | 1/2 (50%) |  |"));
        assert!(!re.is_match("| text | send | 2 | 2/2 (100%) |  | extra |"));
    }

    #[test]
    fn pinning_columns_lets_the_other_cells_change() {
        let t = tables(RESULTS);
        let pinned = pinned_cells(&t[0], &["success".into()]).unwrap().unwrap();
        assert_eq!(pinned, [true, true, false, true, false]);
        let pattern = row_pattern(&t[0].rows[1].cells, Some(&pinned));
        assert_eq!(
            pattern,
            "^\\|\\s*json\\s*\\|\\s*send\\s*\\|(?:[^|\\\\]|\\\\.)*\\|\\s*1\\/2 \\(50%\\)\\s*\\|(?:[^|\\\\]|\\\\.)*\\|\\s*$"
        );
        let re = regex::Regex::new(&pattern).unwrap();
        assert!(re.is_match(&t[0].rows[1].text));
        assert!(re.is_match("| json | send | 3 | 1/2 (50%) | x \\| y |"));
        assert!(!re.is_match("| json | send | 2 | 2/2 (100%) | a \\| b |"));
        assert!(!re.is_match("| text | send | 2 | 1/2 (50%) |  |"));
        let c = citation::scan(&citation::format("r.md", &pattern));
        assert_eq!(c[0].as_ref().unwrap().pattern, pattern);
        assert!(pinned_cells(&t[0], &["sucess".into()]).is_err());
    }

    #[test]
    fn selecting_by_task_and_variant() {
        let t = tables(RESULTS);
        let rows = select(&t[0], &["send".into()], &["json".into()]).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].cells[0], "json");
        let all = select(&t[0], &[], &[]).unwrap();
        assert_eq!(all.len(), 3);
        let totals = select(&t[0], &["(all tasks)".into()], &[]).unwrap();
        assert_eq!(totals[0].cells[3], "3/4 (75%)");
    }

    #[test]
    fn an_unknown_task_is_a_usage_error_listing_the_tasks() {
        let t = tables(RESULTS);
        let Err(ClaimsError::Usage { message, hint }) = select(&t[0], &["sned".into()], &[]) else {
            panic!("expected a usage error");
        };
        assert_eq!(message, "the Rates table has no task `sned`");
        assert_eq!(hint, "its tasks are: send, (all tasks)");
    }

    #[test]
    fn a_filter_on_a_column_the_table_lacks_is_a_usage_error() {
        let t = tables(RESULTS);
        assert!(select(&t[1], &["send".into()], &[]).is_err());
    }
}
