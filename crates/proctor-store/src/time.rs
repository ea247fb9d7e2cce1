//! UTC timestamps without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// A broken-down UTC time, to the millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Utc {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millis: u32,
}

impl Utc {
    /// Breaks a system time down; times before 1970 clamp to the epoch.
    pub(crate) fn from_system(t: SystemTime) -> Utc {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs();
        let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        // `rem` < 86_400, so the casts below cannot truncate.
        Utc {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
            millis: d.subsec_millis(),
        }
    }

    /// `2026-11-29T22:15:03.123Z`.
    pub(crate) fn rfc3339_millis(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second, self.millis
        )
    }

    /// `20261129-221503`, the time part of a run id.
    pub(crate) fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    (if m <= 2 { y + 1 } else { y }, m, d)
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
    use std::time::Duration;

    #[test]
    fn known_instants() {
        let at = |s: u64| Utc::from_system(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0).rfc3339_millis(), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (leap day of a century leap year) 12:34:56
        assert_eq!(at(951_827_696).rfc3339_millis(), "2000-02-29T12:34:56.000Z");
        // 2026-11-29 22:15:03
        assert_eq!(at(1_795_990_503).compact(), "20261129-221503");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_990_503_042);
        assert_eq!(
            Utc::from_system(t).rfc3339_millis(),
            "2026-11-29T22:15:03.042Z"
        );
    }
}
