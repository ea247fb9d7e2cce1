//! RFC 3339 timestamps for records.

use std::time::SystemTime;

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC); a time outside the calendar's range reads as the
/// epoch.
pub(crate) fn rfc3339_millis(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_utc_with_millis() {
        assert_eq!(rfc3339_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_764_456_003_042);
        assert_eq!(rfc3339_millis(t), "2025-11-29T22:40:03.042Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339_millis(leap), "2000-02-29T00:00:00.000Z");
    }
}
