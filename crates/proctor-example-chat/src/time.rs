//! A tiny civil-time helper: the mock's clock is the fixtures' `now` plus one minute per
//! mutation, so timestamps are deterministic and need no wall clock.

/// Minutes since 1970-01-01T00:00 for `YYYY-MM-DDTHH:MM`.
pub fn parse_minutes(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 16 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
    );
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 1440 + h * 60 + mi)
}

/// `YYYY-MM-DDTHH:MM` for minutes since the epoch.
pub fn format_minutes(m: i64) -> String {
    let (days, rem) = (m.div_euclid(1440), m.rem_euclid(1440));
    let (y, mo, d) = civil_from_days(days);
    format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}", rem / 60, rem % 60)
}

/// `Nov 27 11:10` for `2026-11-27T11:10` (falls back to the input).
pub fn display(s: &str) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    match parse_minutes(s) {
        Some(_) => {
            let mo: usize = s[5..7].parse().unwrap_or(1);
            format!("{} {} {}", MONTHS[mo - 1], &s[8..10], &s[11..16])
        }
        None => s.to_string(),
    }
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's algorithms.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
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
