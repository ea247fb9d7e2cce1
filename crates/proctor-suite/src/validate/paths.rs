//! How a path written in the suite is read: refused when it escapes the suite, as its parts,
//! and how it meets another (a hidden part, a skipped folder). Shared by the checks of the
//! suite's folders, its hidden parts and the assertions' paths.

use std::path::{Component, Path};

/// Why a path written in the suite may not be used, if it may not.
pub(super) fn path_escape(p: &str) -> Option<&'static str> {
    let path = Path::new(p);
    if p.is_empty() {
        return Some("is empty");
    }
    if path.is_absolute() {
        return Some("is absolute");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Some("climbs out with `..`");
    }
    None
}

/// A suite path as its normal components (`.` and empty parts dropped); `[]` is the suite root.
/// `None` for a path [`path_escape`] refuses.
pub(super) fn suite_parts(p: &str) -> Option<Vec<&str>> {
    if path_escape(p).is_some() {
        return None;
    }
    Path::new(p)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect()
}

/// How a path written in the suite meets a hidden part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Overlap {
    /// The path is the hidden part.
    Is,
    /// The hidden part lies inside the path.
    Contains,
    /// The path lies inside the hidden part.
    Inside,
}

impl Overlap {
    /// How `path` meets `hidden` (both as components), if it does.
    pub(super) fn of(path: &[&str], hidden: &[&str]) -> Option<Overlap> {
        if path == hidden {
            Some(Overlap::Is)
        } else if hidden.starts_with(path) {
            Some(Overlap::Contains)
        } else if path.starts_with(hidden) {
            Some(Overlap::Inside)
        } else {
            None
        }
    }

    /// The verb the problem's message uses for this overlap.
    pub(super) fn verb(self) -> &'static str {
        match self {
            Overlap::Is => "is",
            Overlap::Contains => "contains",
            Overlap::Inside => "lies inside",
        }
    }
}
