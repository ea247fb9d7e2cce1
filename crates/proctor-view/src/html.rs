//! HTML building blocks: escaping, the page shell (styles and script inlined), tables, outcome
//! badges (a word, not only a colour) and rates written as `k/n (p%)`.

use std::fmt::Write;

use proctor_score::OutcomeKind;

/// The viewer's styles, inlined into every page.
pub(crate) const STYLE: &str = include_str!("assets/style.css");
/// The viewer's script (filters, sorting, live updates), inlined into every page.
pub(crate) const SCRIPT: &str = include_str!("assets/app.js");

/// `s` with `&`, `<`, `>`, `"` and `'` escaped, for text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `title`, a breadcrumb trail of (label, href), the body; `live` is the JSON API
/// path the script polls while the page's run is going (none when nothing can change).
pub fn page(title: &str, crumbs: &[(String, String)], body: &str, live: Option<&str>) -> String {
    let mut nav = String::new();
    for (i, (label, href)) in crumbs.iter().enumerate() {
        if i > 0 {
            nav.push_str(" <span aria-hidden=\"true\">/</span> ");
        }
        if href.is_empty() {
            let _ = write!(nav, "<span>{}</span>", esc(label));
        } else {
            let _ = write!(nav, "<a href=\"{}\">{}</a>", esc(href), esc(label));
        }
    }
    let live = live
        .map(|l| format!(" data-live=\"{}\"", esc(l)))
        .unwrap_or_default();
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n<title>{title} · proctor</title>\n<style>{STYLE}</style>\n</head>\n<body{live}>\n<header><nav aria-label=\"breadcrumb\">{nav}</nav></header>\n<main>\n{body}\n</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        title = esc(title),
        policy = esc(&crate::security::PAGE_POLICY),
    )
}

/// An outcome as a badge: its label in words, coloured by class (`asked` is neither good nor
/// bad: `other`).
pub fn outcome(kind: OutcomeKind) -> String {
    let class = match kind {
        OutcomeKind::Completed | OutcomeKind::RefusedHonestly => "good",
        k if k.is_failure() => "bad",
        k if !k.is_graded() => "void",
        _ => "other",
    };
    format!("<span class=\"badge {class}\">{}</span>", esc(kind.label()))
}

/// A rate `{k, n, rate}` as `k/n (p%)`, or `–` when n is 0 (never a made-up 0%).
pub fn rate(r: Option<&serde_json::Value>) -> String {
    let Some(r) = r else {
        return "–".into();
    };
    let k = r.get("k").and_then(|v| v.as_u64()).unwrap_or(0);
    let n = r.get("n").and_then(|v| v.as_u64()).unwrap_or(0);
    if n == 0 {
        return "– (n = 0)".into();
    }
    format!("{k}/{n} ({:.0}%)", 100.0 * k as f64 / n as f64)
}

/// A table with a header row; each row's cells are HTML already; `attrs` go on each `<tr>`.
pub fn table(id: &str, head: &[&str], rows: &[(String, Vec<String>)]) -> String {
    let mut s = format!("<table id=\"{}\"><thead><tr>", esc(id));
    for h in head {
        let _ = write!(s, "<th scope=\"col\">{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for (attrs, cells) in rows {
        let _ = write!(s, "<tr{attrs}>");
        for c in cells {
            let _ = write!(s, "<td>{c}</td>");
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// Pretty JSON in a `<pre>`.
pub fn json(v: &serde_json::Value) -> String {
    format!(
        "<pre class=\"json\">{}</pre>",
        esc(&serde_json::to_string_pretty(v).unwrap_or_default())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_rates_keep_their_n() {
        assert_eq!(
            esc("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
        let r = serde_json::json!({"k": 3, "n": 4, "rate": 0.75});
        assert_eq!(rate(Some(&r)), "3/4 (75%)");
        assert_eq!(
            rate(Some(&serde_json::json!({"k": 0, "n": 0}))),
            "– (n = 0)"
        );
        assert!(outcome(OutcomeKind::RefusedHonestly).contains(">refused-honestly<"));
        let p = page(
            "t<",
            &[("runs".into(), "/".into())],
            "<p>x</p>",
            Some("/api/runs"),
        );
        assert!(p.contains("<title>t&lt; · proctor</title>"));
        assert!(p.contains("data-live=\"/api/runs\""));
    }
}
