//! When to try a failed request again: exponential backoff with jitter, or what the upstream's
//! `retry-after` says.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use crate::config::RetrySettings;

/// The wait before try `failed + 1`, after `failed` tries (1-based) failed: the upstream's
/// `retry-after` if it sent one, else `base * 2^(failed-1)` with equal jitter; at most
/// `max_delay_ms` either way. `unit` is a random number in [0, 1).
pub(crate) fn delay(
    settings: &RetrySettings,
    failed: u32,
    retry_after: Option<Duration>,
    unit: f64,
) -> Duration {
    let max = Duration::from_millis(settings.max_delay_ms);
    if let Some(d) = retry_after {
        return d.min(max);
    }
    let exp = settings
        .base_delay_ms
        .saturating_mul(1u64 << failed.saturating_sub(1).min(32))
        .min(settings.max_delay_ms) as f64;
    Duration::from_secs_f64((exp / 2.0 + exp / 2.0 * unit.clamp(0.0, 1.0)) / 1000.0).min(max)
}

/// A random number in [0, 1) for jitter.
pub(crate) fn jitter_unit() -> f64 {
    let bits = getrandom::u64().unwrap_or(0x9e37_79b9_7f4a_7c15);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// What the upstream asked for: `retry-after-ms` (milliseconds), else `retry-after` in seconds
/// or as an HTTP date (relative to `now`).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn settings() -> RetrySettings {
        RetrySettings {
            attempts: 5,
            base_delay_ms: 100,
            max_delay_ms: 1000,
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_max() {
        let s = settings();
        assert_eq!(delay(&s, 1, None, 0.0), Duration::from_millis(50));
        assert_eq!(delay(&s, 1, None, 0.999_999).as_millis(), 99);
        assert_eq!(delay(&s, 2, None, 0.0), Duration::from_millis(100));
        assert_eq!(delay(&s, 3, None, 0.5), Duration::from_millis(300));
        assert_eq!(delay(&s, 30, None, 1.0), Duration::from_millis(1000));
        assert_eq!(delay(&s, u32::MAX, None, 1.0), Duration::from_millis(1000));
        for _ in 0..100 {
            let u = jitter_unit();
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let s = settings();
        assert_eq!(
            delay(&s, 1, Some(Duration::from_millis(700)), 0.0),
            Duration::from_millis(700)
        );
        assert_eq!(
            delay(&s, 1, Some(Duration::from_secs(60)), 0.0),
            Duration::from_millis(1000)
        );
    }

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:10 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(10)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:27:00 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(250)));
    }
}
