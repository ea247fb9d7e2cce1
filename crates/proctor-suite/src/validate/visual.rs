//! `visual` assertions: one page or URL, a selector in CSS syntax, exactly one test, and a
//! reference image that is a PNG in the suite's hidden parts.

use std::ops::Range;

use toml::Spanned;

use super::paths::path_escape;
use super::paths::suite_parts;
use super::Validator;
use crate::assertion::Visual;
use crate::problem::ProblemKind;

/// The PNG signature a reference image starts with.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

impl Validator<'_> {
    /// A `visual` assertion: where it looks, what it tests, and that what it needs exists.
    pub(super) fn visual(&mut self, span: Range<usize>, v: &Visual) {
        self.visual_target(span.clone(), v);
        self.visual_test(span.clone(), v);
        if let Some(sel) = &v.selector {
            self.css_selector(sel);
        }
        if let Some(re) = &v.matches {
            self.regex(re);
        }
        if let Some(shot) = &v.screenshot {
            self.reference_image(shot);
        }
        if let Some(d) = &v.max_diff {
            let bad = !(0.0..=1.0).contains(d.get_ref());
            if bad || v.screenshot.is_none() {
                let (msg, help) = if bad {
                    (
                        format!("`max_diff` is {}, not a share of pixels", d.get_ref()),
                        "write a share between 0 and 1, such as 0.01 (1% of the pixels)",
                    )
                } else {
                    (
                        "`max_diff` without a `screenshot` compares nothing".to_string(),
                        "add `screenshot = \"holdout/TASK/ref.png\"`, or drop `max_diff`",
                    )
                };
                let p = self
                    .at(ProblemKind::InvalidValue, d.span(), msg)
                    .with_label("not used as written")
                    .with_help(help);
                self.out.push(p);
            }
        }
    }

    /// Exactly one of `page` and `url`: a workspace path, or an HTTP URL on the trial's loopback
    /// that one of the suite's services serves.
    fn visual_target(&mut self, span: Range<usize>, v: &Visual) {
        match (&v.page, &v.url) {
            (Some(page), None) => {
                if let Some(why) = path_escape(page.get_ref()) {
                    let p = self
                        .at(
                            ProblemKind::BadPath,
                            page.span(),
                            format!("`visual` page `{}` {why}", page.get_ref()),
                        )
                        .with_label("must stay inside the workspace")
                        .with_help("write a workspace-relative path such as \"index.html\"");
                    self.out.push(p);
                }
            }
            (None, Some(url)) => self.visual_url(url),
            (page, url) => {
                let given = if page.is_some() { "both" } else { "neither" };
                let p = self
                    .at(
                        ProblemKind::Inconsistent,
                        span,
                        "a `visual` assertion looks at exactly one of `page` and `url`",
                    )
                    .with_label(format!("{given} given"))
                    .with_help("e.g. `page = \"index.html\"` (a workspace file) or `url = \"http://127.0.0.1:8080/\"` (a service of the suite)");
                self.out.push(p);
                let _ = url;
            }
        }
    }

    /// A `url` is plain HTTP on the trial's loopback, where only the suite's services listen.
    fn visual_url(&mut self, url: &Spanned<String>) {
        let u = url.get_ref();
        let loopback = [
            "http://127.0.0.1:",
            "http://localhost:",
            "http://127.0.0.1/",
            "http://localhost/",
        ]
        .iter()
        .any(|p| u.starts_with(p));
        if !loopback {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    url.span(),
                    format!("`visual` url `{u}` is not on the trial's loopback"),
                )
                .with_label("the browser has no network but the trial's loopback")
                .with_help(
                    "write http://127.0.0.1:PORT/PATH, served by one of the suite's [[services]]",
                );
            self.out.push(p);
        } else if self.suite.file.services.is_empty() {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    url.span(),
                    format!("`visual` url `{u}` needs a service, and the suite has none"),
                )
                .with_label("nothing listens there")
                .with_help("add a [[services]] entry that serves it, or look at a workspace file with `page = \"...\"`");
            self.out.push(p);
        }
    }

    /// Exactly one test, and a selector for every test but a screenshot of the whole window.
    fn visual_test(&mut self, span: Range<usize>, v: &Visual) {
        let given = [
            v.text.is_some(),
            v.matches.is_some(),
            v.visible.is_some(),
            v.count.is_some(),
            v.screenshot.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if given != 1 {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    span.clone(),
                    "a `visual` assertion needs exactly one of `text`, `matches`, `visible`, `count` or `screenshot`",
                )
                .with_label(format!("{given} given"))
                .with_help("write one assertion per test, e.g. `text = \"Ready\"` in one and `visible = true` in another");
            self.out.push(p);
        }
        if v.selector.is_none() && v.screenshot.is_none() && given > 0 {
            let p = self
                .at(
                    ProblemKind::MissingKey,
                    span,
                    "this `visual` test needs a `selector`",
                )
                .with_label("which elements?")
                .with_help("add `selector = \"#status\"` (CSS); only a screenshot of the whole window goes without one");
            self.out.push(p);
        }
    }

    /// A selector in CSS syntax, as browsers read it.
    fn css_selector(&mut self, sel: &Spanned<String>) {
        if let Err(e) = scraper::Selector::parse(sel.get_ref()) {
            let p = self
                .at(
                    ProblemKind::BadPattern,
                    sel.span(),
                    format!("the selector `{}` is not CSS: {e}", sel.get_ref()),
                )
                .with_label("invalid selector")
                .with_help("write a CSS selector such as \"#status\", \"ul > li.item\" or \"[data-state=ready]\"");
            self.out.push(p);
        }
    }

    /// A reference image: a suite path under `holdout/` (agents never see it) naming a PNG.
    fn reference_image(&mut self, shot: &Spanned<String>) {
        let rel = shot.get_ref();
        let hidden = suite_parts(rel).is_some_and(|parts| parts.first() == Some(&"holdout"));
        if !hidden {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    shot.span(),
                    format!("the reference image `{rel}` is not under holdout/"),
                )
                .with_label("agents could see it")
                .with_help("keep reference images with the hidden parts of the suite, e.g. \"holdout/TASK/ref.png\"");
            self.out.push(p);
            return;
        }
        let path = self.suite.root.join(rel);
        let problem = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some((
                format!("the reference image `{rel}` does not exist"),
                "no such file",
            )),
            Err(e) => Some((
                format!("the reference image `{rel}` cannot be read: {e}"),
                "unreadable",
            )),
            Ok(bytes) if !bytes.starts_with(PNG_SIGNATURE) => Some((
                format!("the reference image `{rel}` is not a PNG"),
                "not a PNG",
            )),
            Ok(_) => None,
        };
        if let Some((msg, label)) = problem {
            let p = self
                .at(ProblemKind::BadPath, shot.span(), msg)
                .with_label(label)
                .with_help("save the expected screenshot as a PNG there (a first run's screenshot, kept in the trial's folder as visual/N.png, is one)");
            self.out.push(p);
        }
    }
}
