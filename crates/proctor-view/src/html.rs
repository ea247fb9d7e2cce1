//! HTML building blocks: escaping, the page shell (styles and script inlined, with the
//! Content-Security-Policy that allows exactly them), tables, outcome
//! badges (a word, not only a colour) and rates written as `k/n (p%)`.

use std::sync::LazyLock;

use base64::Engine as _;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use proctor_report::stats::Rate;
use proctor_score::OutcomeKind;

/// The viewer's styles, inlined into every page.
pub(crate) const STYLE: &str = include_str!("assets/style.css");
/// The viewer's script (filters, sorting, live updates), inlined into every page.
pub(crate) const SCRIPT: &str = include_str!("assets/app.js");

/// `'sha256-…'` of `text`, as a CSP source expression.
pub(crate) fn hash_source(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

/// The policy of a page, as a `<meta>` element carries it: the page's one inline style and one
/// inline script by their hashes, fetches to its own origin only (the live updates and the
/// transcript slices), no image, font, frame or object from anywhere.
pub static PAGE_POLICY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'",
        hash_source(SCRIPT),
        hash_source(STYLE)
    )
});

/// `s` with `&`, `<`, `>`, `"` and `'` escaped, for text and attribute values: for the markup
/// written as text rather than with maud, the SVG pictures (`pictures`, also served as `.svg`
/// files) and the highlighter's spans (`highlight`), which the pages embed as markup proctor
/// made.
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

/// A picture this crate drew (an SVG of `pictures`, built with [`esc`] around every value it
/// holds), embedded in a page as it is: safe because the picture escapes every word it did not
/// write itself (a trial id, a task, a title), as its own tests check.
pub fn made(fragment: String) -> PreEscaped<String> {
    PreEscaped(fragment)
}

/// A whole page: `title`, a breadcrumb trail of (label, href), the body; `live` is the JSON API
/// path the script polls while the page's run is going (none when nothing can change).
pub fn page(title: &str, crumbs: &[(String, String)], body: Markup, live: Option<&str>) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta http-equiv="Content-Security-Policy" content=(*PAGE_POLICY);
                title { (title) " · proctor" }
                // The viewer's own stylesheet, compiled in: no value of a record is in it.
                style { (PreEscaped(STYLE)) }
            }
            body data-live=[live] {
                header {
                    nav aria-label="breadcrumb" {
                        @for (i, (label, href)) in crumbs.iter().enumerate() {
                            @if i > 0 { " " span aria-hidden="true" { "/" } " " }
                            @if href.is_empty() { span { (label) } } @else { a href=(href) { (label) } }
                        }
                    }
                }
                main {
                    (body)
                }
                // The viewer's own script, compiled in (its hash is in the page's policy): no
                // value of a record is in it.
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
    .into_string()
}

/// An outcome as a badge: its label in words, coloured by class (`asked` is neither good nor
/// bad: `other`).
pub fn outcome(kind: OutcomeKind) -> Markup {
    let class = match kind {
        OutcomeKind::Completed | OutcomeKind::RefusedHonestly => "good",
        k if k.is_failure() => "bad",
        k if !k.is_graded() => "void",
        _ => "other",
    };
    html! { span class={ "badge " (class) } { (kind.label()) } }
}

/// A rate as `k/n (p%)`, or `–` when n is 0 (never a made-up 0%).
pub fn rate(r: &Rate) -> String {
    if r.n == 0 {
        return "– (n = 0)".into();
    }
    format!("{}/{} ({:.0}%)", r.k, r.n, 100.0 * r.k as f64 / r.n as f64)
}

/// A table: its id, its header row, and its rows (each a `tr`).
pub fn table(id: &str, head: &[&str], rows: Markup) -> Markup {
    html! {
        table id=(id) {
            thead { tr { @for h in head { th scope="col" { (h) } } } }
            tbody { (rows) }
        }
    }
}

/// Pretty JSON in a `<pre>`: for what is free-form JSON (an assertion's evidence, a rubric, a
/// trial's ledgers, launch and isolation).
pub fn json<T: serde::Serialize + ?Sized>(v: &T) -> Markup {
    // Through a `Value`, so that members are listed by name, as the page always has.
    let text = serde_json::to_value(v)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_default();
    html! { pre class="json" { (text) } }
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
        assert_eq!(rate(&Rate::new(3, 4)), "3/4 (75%)");
        assert_eq!(rate(&Rate::new(0, 0)), "– (n = 0)");
        assert!(outcome(OutcomeKind::RefusedHonestly)
            .into_string()
            .contains(">refused-honestly<"));
        let p = page(
            "t<",
            &[("runs".into(), "/".into())],
            html! { p { "x" } },
            Some("/api/runs"),
        );
        assert!(p.contains("<title>t&lt; · proctor</title>"));
        assert!(p.contains("data-live=\"/api/runs\""));
        assert!(p.contains("<main><p>x</p></main>"), "{p}");
        // The page's own script arrives as it is, so that its hash in the policy holds.
        assert!(p.contains(&format!("<script>{SCRIPT}</script>")));
        let t = table("t", &["a<b"], html! { tr { td { "<script>" } } }).into_string();
        assert_eq!(
            t,
            "<table id=\"t\"><thead><tr><th scope=\"col\">a&lt;b</th></tr></thead><tbody><tr><td>&lt;script&gt;</td></tr></tbody></table>"
        );
    }
}
