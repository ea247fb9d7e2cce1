//! The spans `suite.toml`'s typed model keeps no span for, from a second, lenient read.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

/// A second, lenient read of `suite.toml` for the spans of values the typed model keeps without
/// one. Its lists are in file order, like those of the typed model.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Spans {
    #[serde(default)]
    pub(super) development_trials: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) release_trials: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) report: ReportSpans,
    #[serde(default)]
    pub(super) defaults: AllowSpan,
    #[serde(default)]
    pub(super) variants: Vec<AllowSpan>,
    #[serde(default)]
    pub(super) tasks: Vec<TaskSpans>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ReportSpans {
    #[serde(default)]
    pub(super) underpowered_below: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct AllowSpan {
    #[serde(default)]
    pub(super) allow: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct TaskSpans {
    #[serde(default)]
    pub(super) allow: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) expect: Option<Spanned<toml::Value>>,
}

/// The span of a value the lenient read found, or the file's start.
pub(super) fn span_of(value: &Option<Spanned<toml::Value>>) -> Range<usize> {
    value.as_ref().map_or(0..0, Spanned::span)
}
