//! Any JSON value as HTML a person reads: an object as a table of its keys, an array of objects
//! as a table with a column per key, scalars as text; past a few levels, or past a few hundred
//! rows, compact JSON and a count.

use std::fmt::Write;

use serde_json::Value;

use crate::html::esc;

/// Levels of nesting shown as tables; deeper values are compact JSON.
const DEPTH: usize = 3;
/// Rows of one table; the rest are counted.
const ROWS: usize = 200;
/// Characters of one string.
const CHARS: usize = 2000;

/// `v` as HTML.
pub fn value(v: &Value) -> String {
    at(v, 0)
}

fn at(v: &Value, depth: usize) -> String {
    match v {
        Value::Null => "–".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => text(s),
        Value::Array(items) if items.is_empty() => "(none)".into(),
        Value::Object(map) if map.is_empty() => "(empty)".into(),
        _ if depth >= DEPTH => format!("<code>{}</code>", text(&v.to_string())),
        Value::Array(items) if items.iter().all(Value::is_object) => records(items, depth),
        Value::Array(items) if items.iter().all(|x| !x.is_object() && !x.is_array()) => items
            .iter()
            .map(|x| at(x, depth + 1))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Array(items) => list(items, depth),
        Value::Object(map) => {
            let mut s = String::from("<table class=\"kv\"><tbody>");
            for (k, x) in map {
                let _ = write!(
                    s,
                    "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
                    esc(k),
                    at(x, depth + 1)
                );
            }
            s.push_str("</tbody></table>");
            s
        }
    }
}

/// A string, escaped, cut past [`CHARS`] characters.
fn text(s: &str) -> String {
    if s.chars().count() <= CHARS {
        return esc(s);
    }
    let cut: String = s.chars().take(CHARS).collect();
    format!("{}… ({} characters in all)", esc(&cut), s.chars().count())
}

/// An array of objects: one row per object, one column per key (in order of first appearance).
fn records(items: &[Value], depth: usize) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for item in items.iter().take(ROWS) {
        if let Some(map) = item.as_object() {
            for k in map.keys() {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
    }
    let mut s = String::from("<table class=\"records\"><thead><tr>");
    for k in &keys {
        let _ = write!(s, "<th scope=\"col\">{}</th>", esc(k));
    }
    s.push_str("</tr></thead><tbody>");
    for item in items.iter().take(ROWS) {
        s.push_str("<tr>");
        for k in &keys {
            let cell = item.get(*k).map_or_else(String::new, |x| at(x, depth + 1));
            let _ = write!(s, "<td>{cell}</td>");
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s.push_str(&more(items.len()));
    s
}

/// A mixed array: one item per line.
fn list(items: &[Value], depth: usize) -> String {
    let mut s = String::from("<ol class=\"values\">");
    for item in items.iter().take(ROWS) {
        let _ = write!(s, "<li>{}</li>", at(item, depth + 1));
    }
    s.push_str("</ol>");
    s.push_str(&more(items.len()));
    s
}

/// A note of the items past [`ROWS`].
fn more(n: usize) -> String {
    if n > ROWS {
        format!(
            "<p class=\"note\">{} more not shown (the JSON API has them all).</p>",
            n - ROWS
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_records_become_tables() {
        let v = serde_json::json!({"messages": [{"id": "m-1", "text": "<hi>"}, {"id": "m-2", "pinned": true}], "n": 2});
        let html = value(&v);
        assert!(html.starts_with("<table class=\"kv\">"), "{html}");
        assert!(
            html.contains(
                "<th scope=\"col\">id</th><th scope=\"col\">text</th><th scope=\"col\">pinned</th>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<td>m-2</td><td></td><td>true</td>"),
            "{html}"
        );
        assert!(html.contains("&lt;hi&gt;"), "{html}");
        let deep = serde_json::json!({"a": {"b": {"c": {"d": 1}}}});
        assert!(value(&deep).contains("<code>{&quot;d&quot;:1}</code>"));
    }
}
