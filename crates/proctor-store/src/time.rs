//! UTC timestamps as the store writes them: RFC 3339 with milliseconds in `run.json` (the
//! compact form at the start of a run id is `proctor_records::RunId`'s).

use std::time::SystemTime;

use jiff::Timestamp;

/// A UTC instant, to the millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Utc(Timestamp);

impl Utc {
    /// The instant of a system time; times outside jiff's range clamp to the epoch.
    pub(crate) fn from_system(t: SystemTime) -> Utc {
        Utc(Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    /// `2026-11-29T22:15:03.123Z`.
    pub(crate) fn rfc3339_millis(&self) -> String {
        self.0.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    }
}

/// The current UTC time as RFC 3339 with milliseconds, e.g. `2026-11-29T22:15:03.123Z`.
///
/// This is the format of `started_at` and `finished_at` in `run.json`; it sorts as text.
pub fn utc_now() -> String {
    Utc::from_system(SystemTime::now()).rfc3339_millis()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn known_instants() {
        let at = |s: u64| Utc::from_system(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0).rfc3339_millis(), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (leap day of a century leap year) 12:34:56
        assert_eq!(at(951_827_696).rfc3339_millis(), "2000-02-29T12:34:56.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_990_503_042);
        assert_eq!(
            Utc::from_system(t).rfc3339_millis(),
            "2026-11-29T22:15:03.042Z"
        );
    }
}
