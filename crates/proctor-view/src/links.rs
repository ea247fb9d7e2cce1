//! Where the viewer's pages link to: a trial's page (served or in an export), a file's path and
//! a query's value, percent-encoded.

/// `s` percent-encoded for a URL's query (everything but unreserved characters).
pub fn url_encode(s: &str) -> String {
    /// What stays as it is: RFC 3986's unreserved characters.
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, KEEP).to_string()
}

/// Where a trial's page is: its own URL when served, its anchor in an export (a URL, not yet
/// escaped).
pub(crate) fn trial_href(base: &str, run: &str, trial: &str) -> String {
    if base.is_empty() {
        format!("/runs/{run}/trials/{trial}")
    } else {
        format!("#trial-{trial}")
    }
}

/// A relative path percent-encoded segment by segment for a URL's path.
pub(crate) fn url_path(path: &str) -> String {
    path.split('/')
        .map(url_encode)
        .collect::<Vec<_>>()
        .join("/")
}
