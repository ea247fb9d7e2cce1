//! A tiny civil-time helper: the mock's clock is the fixtures' `now` plus one minute per
//! mutation, so timestamps are deterministic and need no wall clock.

use jiff::civil::DateTime;
use jiff::{Span, ToSpan};

/// The clock's origin: minutes are counted from 1970-01-01T00:00.
const EPOCH: DateTime = DateTime::constant(1970, 1, 1, 0, 0, 0, 0);

/// Minutes since 1970-01-01T00:00 for `YYYY-MM-DDTHH:MM`.
pub fn parse_minutes(s: &str) -> Option<i64> {
    let t = DateTime::strptime("%Y-%m-%dT%H:%M", s).ok()?;
    // Exactly that shape: no seconds, no other widths.
    if t.strftime("%Y-%m-%dT%H:%M").to_string() != s {
        return None;
    }
    let span: Span = EPOCH.until((jiff::Unit::Minute, t)).ok()?;
    Some(span.get_minutes())
}

/// `YYYY-MM-DDTHH:MM` for minutes since the epoch.
pub fn format_minutes(m: i64) -> String {
    EPOCH
        .checked_add(m.minutes())
        .unwrap_or(EPOCH)
        .strftime("%Y-%m-%dT%H:%M")
        .to_string()
}

/// `Nov 27 11:10` for `2026-11-27T11:10` (falls back to the input).
pub fn display(s: &str) -> String {
    match parse_minutes(s) {
        Some(m) => EPOCH
            .checked_add(m.minutes())
            .map_or_else(|_| s.to_string(), |t| t.strftime("%b %d %H:%M").to_string()),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rollover() {
        let m = parse_minutes("2026-11-30T23:59").unwrap();
        assert_eq!(format_minutes(m), "2026-11-30T23:59");
        assert_eq!(format_minutes(m + 1), "2026-12-01T00:00");
        assert_eq!(
            format_minutes(parse_minutes("2028-02-28T12:00").unwrap() + 1440),
            "2028-02-29T12:00"
        );
        assert_eq!(parse_minutes("1970-01-01T00:00"), Some(0));
    }

    #[test]
    fn rejects_bad_times() {
        for s in [
            "2026-11-31T10:00",
            "2026-13-01T10:00",
            "2026-11-01 10:00",
            "2026-11-01T24:00",
            "",
        ] {
            assert_eq!(parse_minutes(s), None, "{s}");
        }
    }

    #[test]
    fn displays() {
        assert_eq!(display("2026-11-27T11:10"), "Nov 27 11:10");
        assert_eq!(display("soon"), "soon");
    }
}
