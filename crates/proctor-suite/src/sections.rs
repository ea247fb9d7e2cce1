//! The table sections of a TOML file, grouped by what they define at the top (a table such as
//! `[defaults]` with its subtables, or one element of an array of tables such as one
//! `[[tasks]]` with its `[tasks.success]`), so that a file refused for one of them can be read
//! again without it and the others' problems found too.

use std::ops::Range;

use toml_edit::{ImDocument, Item, Table};

/// The byte ranges of each top-level unit's sections (its header through its last value, and
/// the same for every table below it), in the order the file defines the units. A unit
/// written without a header (dotted keys, inline tables) has none: it cannot be set aside.
pub fn units(text: &str) -> Vec<Vec<Range<usize>>> {
    let Ok(doc) = ImDocument::parse(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (_, item) in doc.as_table().iter() {
        match item {
            Item::Table(t) => out.push(spans_of(t)),
            Item::ArrayOfTables(a) => out.extend(a.iter().map(spans_of)),
            _ => {}
        }
    }
    out.retain(|u| !u.is_empty());
    out
}

/// The spans of `table`'s own section (unless it is dotted, inside its parent's) and of every
/// table below it.
fn spans_of(table: &Table) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = table
        .span()
        .filter(|_| !table.is_dotted())
        .into_iter()
        .collect();
    for (_, item) in table.iter() {
        match item {
            Item::Table(t) => out.extend(spans_of(t)),
            Item::ArrayOfTables(a) => out.extend(a.iter().flat_map(spans_of)),
            _ => {}
        }
    }
    out
}

/// Replaces every byte of `ranges` in `text` but line ends by a space: the sections are gone
/// and every other byte keeps its offset, line and column.
pub fn blank(text: &mut String, ranges: &[Range<usize>]) {
    let mut bytes = std::mem::take(text).into_bytes();
    for r in ranges {
        let end = r.end.min(bytes.len());
        for b in bytes.get_mut(r.start.min(end)..end).into_iter().flatten() {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    // Whole characters were replaced by ASCII spaces: still UTF-8. Were a range to cut one, the
    // lossy reading keeps offsets of the rest as they were.
    *text = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "id = \"s\"\n\n[defaults]\ncpus = 1\n\n[[tasks]]\nid = \"a\"\n\n[tasks.success]\nall = [\n  { check = \"x\" },\n]\n\n[[tasks]]\nid = \"b\"\n";

    #[test]
    fn each_table_and_each_element_is_a_unit_with_its_subtables() {
        let units = units(FILE);
        let texts: Vec<Vec<&str>> = units
            .iter()
            .map(|u| u.iter().map(|r| &FILE[r.clone()]).collect())
            .collect();
        assert_eq!(
            texts,
            [
                vec!["[defaults]\ncpus = 1"],
                vec![
                    "[[tasks]]\nid = \"a\"",
                    "[tasks.success]\nall = [\n  { check = \"x\" },\n]"
                ],
                vec!["[[tasks]]\nid = \"b\""],
            ]
        );
    }

    #[test]
    fn a_blanked_unit_is_gone_and_the_rest_keeps_its_place() {
        let mut text = FILE.to_string();
        blank(&mut text, &units(FILE)[1]);
        assert_eq!(text.len(), FILE.len());
        assert_eq!(text.lines().count(), FILE.lines().count());
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(table["tasks"].as_array().unwrap().len(), 1);
        assert_eq!(text.find("id = \"b\""), FILE.find("id = \"b\""));
    }
}
