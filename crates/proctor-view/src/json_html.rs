//! Any JSON value as HTML a person reads: an object as a table of its keys, an array of objects
//! as a table with a column per key, scalars as text; past a few levels, or past a few hundred
//! rows, compact JSON and a count.

use maud::{html, Markup};
use serde_json::Value;

/// Levels of nesting shown as tables; deeper values are compact JSON.
const DEPTH: usize = 3;
/// Rows of one table; the rest are counted.
const ROWS: usize = 200;
/// Characters of one string.
const CHARS: usize = 2000;

/// `v` as HTML.
pub fn value(v: &Value) -> Markup {
    at(v, 0)
}

fn at(v: &Value, depth: usize) -> Markup {
    match v {
        Value::Null => html! { "–" },
        Value::Bool(b) => html! { (b) },
        Value::Number(n) => html! { (n.to_string()) },
        Value::String(s) => text(s),
        Value::Array(items) if items.is_empty() => html! { "(none)" },
        Value::Object(map) if map.is_empty() => html! { "(empty)" },
        _ if depth >= DEPTH => html! { code { (text(&v.to_string())) } },
        Value::Array(items) if items.iter().all(Value::is_object) => records(items, depth),
        Value::Array(items) if items.iter().all(|x| !x.is_object() && !x.is_array()) => html! {
            @for (i, x) in items.iter().enumerate() {
                @if i > 0 { ", " }
                (at(x, depth + 1))
            }
        },
        Value::Array(items) => list(items, depth),
        Value::Object(map) => html! {
            table class="kv" {
                tbody {
                    @for (k, x) in map {
                        tr { th scope="row" { (k) } td { (at(x, depth + 1)) } }
                    }
                }
            }
        },
    }
}

/// A string, cut past [`CHARS`] characters.
fn text(s: &str) -> Markup {
    let count = s.chars().count();
    if count <= CHARS {
        return html! { (s) };
    }
    let cut: String = s.chars().take(CHARS).collect();
    html! { (cut) "… (" (count) " characters in all)" }
}

/// An array of objects: one row per object, one column per key (in order of first appearance).
fn records(items: &[Value], depth: usize) -> Markup {
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
    html! {
        table class="records" {
            thead { tr { @for k in &keys { th scope="col" { (k) } } } }
            tbody {
                @for item in items.iter().take(ROWS) {
                    tr {
                        @for k in &keys {
                            td { @if let Some(x) = item.get(*k) { (at(x, depth + 1)) } }
                        }
                    }
                }
            }
        }
        (more(items.len()))
    }
}

/// A mixed array: one item per line.
fn list(items: &[Value], depth: usize) -> Markup {
    html! {
        ol class="values" { @for item in items.iter().take(ROWS) { li { (at(item, depth + 1)) } } }
        (more(items.len()))
    }
}

/// A note of the items past [`ROWS`].
fn more(n: usize) -> Markup {
    html! {
        @if n > ROWS {
            p class="note" { (n - ROWS) " more not shown (the JSON API has them all)." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_records_become_tables() {
        let v = serde_json::json!({"messages": [{"id": "m-1", "text": "<hi>"}, {"id": "m-2", "pinned": true}], "n": 2});
        let html = value(&v).into_string();
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
        assert!(value(&deep)
            .into_string()
            .contains("<code>{&quot;d&quot;:1}</code>"));
        // A service's state is the service's (and so the agent's) to write: it arrives escaped.
        let evil = serde_json::json!({"<script>": ["<img src=x onerror=alert(1)>", {"k": "</td><script>"}]});
        let html = value(&evil).into_string();
        assert!(
            !html.contains("<script>") && !html.contains("<img"),
            "{html}"
        );
    }
}
