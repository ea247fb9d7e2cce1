//! The versions of proctor's on-disk formats (`run.json`, `trial.json`): `major.minor`.
//!
//! A minor version adds to a format without changing what was there, so a reader reads any minor
//! version of its own major (an older one lacks only what was added since; a newer one has
//! fields it ignores). A new major version changes the meaning of something, and a reader
//! refuses it by name rather than misread it. A file written before the format carried a
//! version is `1.0`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A format's `major.minor` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FormatVersion {
    /// Changes the meaning of something: readers of another major refuse the file.
    pub major: u32,
    /// Adds without changing: readers of the same major read it.
    pub minor: u32,
}

/// The version of `run.json` this proctor writes. `1.1` added `format_version` itself.
pub const RUN_FORMAT: FormatVersion = FormatVersion { major: 1, minor: 1 };

/// The version of `trial.json` this proctor writes. `1.1` added `format_version` itself.
pub const TRIAL_FORMAT: FormatVersion = FormatVersion { major: 1, minor: 1 };

impl FormatVersion {
    /// The version of a file written before the formats carried one.
    pub const UNVERSIONED: FormatVersion = FormatVersion { major: 1, minor: 0 };

    /// Whether a reader of version `self` reads a file of version `file`: the same major.
    pub fn reads(self, file: FormatVersion) -> bool {
        self.major == file.major
    }
}

impl fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a text is not a `major.minor` version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a format version (write MAJOR.MINOR, e.g. `1.1`)")]
pub struct ParseFormatVersionError(pub String);

impl FromStr for FormatVersion {
    type Err = ParseFormatVersionError;

    fn from_str(s: &str) -> Result<FormatVersion, ParseFormatVersionError> {
        let bad = || ParseFormatVersionError(s.to_string());
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        let number = |n: &str| {
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            n.parse::<u32>().map_err(|_| bad())
        };
        Ok(FormatVersion {
            major: number(major)?,
            minor: number(minor)?,
        })
    }
}

impl Serialize for FormatVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FormatVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FormatVersion, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for FormatVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FormatVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The file's format version, MAJOR.MINOR: a reader reads every minor version of its own major and refuses another major.",
            "type": "string",
            "pattern": "^[0-9]+\\.[0-9]+$"
        })
    }
}

/// The error of a file whose format is of a major version this proctor does not read.
fn unreadable<E: serde::de::Error>(file: &str, found: FormatVersion, ours: FormatVersion) -> E {
    E::custom(format_args!(
        "{file} is format {found}, and this proctor reads format {}.x only: read it with the proctor that wrote it (or a newer one)",
        ours.major
    ))
}

/// Reads a `run.json`'s `format_version`, refusing a major version other than [`RUN_FORMAT`]'s
/// (for `#[serde(deserialize_with)]`).
pub fn run_format<'de, D: Deserializer<'de>>(d: D) -> Result<FormatVersion, D::Error> {
    let found = FormatVersion::deserialize(d)?;
    if RUN_FORMAT.reads(found) {
        Ok(found)
    } else {
        Err(unreadable("run.json", found, RUN_FORMAT))
    }
}

/// Reads a `trial.json`'s `format_version`, refusing a major version other than
/// [`TRIAL_FORMAT`]'s (for `#[serde(deserialize_with)]`).
pub fn trial_format<'de, D: Deserializer<'de>>(d: D) -> Result<FormatVersion, D::Error> {
    let found = FormatVersion::deserialize(d)?;
    if TRIAL_FORMAT.reads(found) {
        Ok(found)
    } else {
        Err(unreadable("trial.json", found, TRIAL_FORMAT))
    }
}

/// [`FormatVersion::UNVERSIONED`], for `#[serde(default)]`: a file without a version is `1.0`.
pub fn unversioned() -> FormatVersion {
    FormatVersion::UNVERSIONED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Run {
        #[serde(default = "unversioned", deserialize_with = "run_format")]
        format_version: FormatVersion,
    }

    #[test]
    fn versions_read_and_write_as_major_dot_minor() {
        assert_eq!(
            "1.12".parse(),
            Ok(FormatVersion {
                major: 1,
                minor: 12
            })
        );
        assert_eq!(RUN_FORMAT.to_string(), "1.1");
        assert_eq!(serde_json::to_value(TRIAL_FORMAT).unwrap(), "1.1");
        for bad in ["1", "1.", ".1", "1.1.1", "v1.1", "1.-1", "1.+1", ""] {
            assert!(bad.parse::<FormatVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_reader_takes_older_and_newer_minors_and_refuses_another_major() {
        let read = |json: &str| serde_json::from_str::<Run>(json).map(|r| r.format_version);
        assert_eq!(read("{}").unwrap(), FormatVersion::UNVERSIONED);
        assert_eq!(read(r#"{"format_version":"1.0"}"#).unwrap().minor, 0);
        assert_eq!(read(r#"{"format_version":"1.7"}"#).unwrap().minor, 7);
        let err = read(r#"{"format_version":"2.0"}"#).unwrap_err().to_string();
        assert!(
            err.starts_with("run.json is format 2.0, and this proctor reads format 1.x only"),
            "{err}"
        );
        assert!(read(r#"{"format_version":"0.9"}"#).is_err());
        assert!(read(r#"{"format_version":1}"#).is_err());
    }
}
