//! Run ids: `YYYYMMDD-HHMMSS-xxxx`, UTC to the second plus four random hex digits. The store
//! makes them and names each run's folder with one; every record that names a run holds one.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The error of reading a [`RunId`] from text that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a run id (expected YYYYMMDD-HHMMSS-xxxx, e.g. 20261129-221503-7f3a)")]
pub struct ParseRunIdError(pub String);

/// The length of every run id: `20261129-221503-7f3a`.
const LEN: usize = 20;

/// The id of one run: `20261129-221503-7f3a`.
///
/// Ids sort by the UTC second their run started (text order is time order), and the four random
/// hex digits keep runs started in the same second apart; the store's `Store::create_run` also
/// refuses to reuse a folder, so an id is unique within its store. Any unique prefix of an id
/// names the run (see `Store::resolve_run`).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
// The description `schemas/run.schema.json` has always had (written when the id was the store's).
#[schemars(
    description = "The id of one run: `20261129-221503-7f3a`.\n\nIds sort by the UTC second their run started (text order is time order), and the four random\nhex digits keep runs started in the same second apart; [`crate::Store::create_run`] also\nrefuses to reuse a folder, so an id is unique within its store. Any unique prefix of an id\nnames the run (see [`crate::Store::resolve_run`])."
)]
pub struct RunId(String);

impl RunId {
    /// A fresh id for a run starting now.
    pub fn generate() -> RunId {
        RunId::at(SystemTime::now(), random_u16())
    }

    /// The id for a run starting at `time` with the given random part; for callers that need a
    /// deterministic id (tests, imports).
    pub fn at(time: SystemTime, random: u16) -> RunId {
        RunId(format!("{}-{random:04x}", compact(time)))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `20261129-221503`, the time part of a run id: `time` in UTC to the second (a time outside
/// jiff's range is the epoch's).
fn compact(time: SystemTime) -> String {
    let t = Timestamp::try_from(time).unwrap_or(Timestamp::UNIX_EPOCH);
    t.strftime("%Y%m%d-%H%M%S").to_string()
}

/// Sixteen bits that differ between calls, processes and machines. Not cryptographic: they only
/// separate runs that start in the same second.
fn random_u16() -> u16 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    h.write_u128(nanos);
    let x = h.finish();
    (x ^ (x >> 16) ^ (x >> 32) ^ (x >> 48)) as u16
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = ParseRunIdError;

    fn from_str(s: &str) -> Result<RunId, ParseRunIdError> {
        let b = s.as_bytes();
        let ok = b.len() == LEN
            && b.iter().enumerate().all(|(i, &c)| match i {
                8 | 15 => c == b'-',
                0..=14 => c.is_ascii_digit(),
                _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
            });
        if ok {
            Ok(RunId(s.to_string()))
        } else {
            Err(ParseRunIdError(s.to_string()))
        }
    }
}

impl TryFrom<String> for RunId {
    type Error = ParseRunIdError;

    fn try_from(s: String) -> Result<RunId, ParseRunIdError> {
        s.parse()
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn format_and_parse_round_trip() {
        let id = RunId::at(UNIX_EPOCH + Duration::from_secs(1_795_990_503), 0x7f3a);
        assert_eq!(id.as_str(), "20261129-221503-7f3a");
        assert_eq!(id.to_string().parse::<RunId>().ok(), Some(id.clone()));
        let json = serde_json::to_string(&id).ok();
        assert_eq!(json.as_deref(), Some("\"20261129-221503-7f3a\""));
        assert!(serde_json::from_str::<RunId>("\"nope\"").is_err());
    }

    #[test]
    fn the_time_part_is_utc_to_the_second() {
        // 2026-11-29 22:15:03
        let at = |s: u64| compact(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(1_795_990_503), "20261129-221503");
        assert_eq!(at(0), "19700101-000000");
    }

    #[test]
    fn rejects_malformed_ids() {
        for bad in [
            "",
            "20261129-221503",
            "20261129-221503-7F3A",
            "20261129-221503-7f3g",
            "20261129_221503-7f3a",
            "2026112a-221503-7f3a",
            "20261129-221503-7f3a0",
            "../../../etc/passwd0",
        ] {
            assert!(bad.parse::<RunId>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn ids_sort_by_time() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_990_503);
        let earlier = RunId::at(t, 0xffff);
        let later = RunId::at(t + Duration::from_secs(1), 0x0000);
        assert!(earlier < later);
        let a = RunId::generate();
        let b = RunId::generate();
        assert!(a.as_str().len() == LEN && b.as_str().len() == LEN);
    }
}
