//! Task settings both formats read alike: timeouts in seconds and environment variable names.

/// A number of seconds as a whole number, rounded up; `None` unless it is a positive number.
pub(crate) fn whole_seconds(f: f64) -> Option<u64> {
    (f.is_finite() && f > 0.0).then(|| f.ceil() as u64)
}

/// A timeout the task's format gives a default: `set` is `None` when the task does not set it,
/// `Some(None)` when what it sets is not a positive number of seconds. Either way the format's
/// `default` is used; for a bad value a warning names the `field` and the `format`.
pub(crate) fn timeout_or_default(
    set: Option<Option<u64>>,
    field: &str,
    format: &str,
    default: u64,
    w: &mut Vec<String>,
) -> Option<u64> {
    match set {
        None => Some(default),
        Some(Some(seconds)) => Some(seconds),
        Some(None) => {
            w.push(format!(
                "{field} is not a positive number; {format}'s default ({default}) was used"
            ));
            Some(default)
        }
    }
}

/// Whether `name` can be an environment variable set from a shell.
pub(crate) fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_round_up_and_refuse_what_is_not_positive() {
        assert_eq!(whole_seconds(120.0), Some(120));
        assert_eq!(whole_seconds(0.5), Some(1));
        assert_eq!(whole_seconds(0.0), None);
        assert_eq!(whole_seconds(-3.0), None);
        assert_eq!(whole_seconds(f64::NAN), None);
    }

    #[test]
    fn timeouts_fall_back_to_the_default() {
        let mut w = Vec::new();
        assert_eq!(timeout_or_default(None, "t", "F", 60, &mut w), Some(60));
        assert_eq!(
            timeout_or_default(Some(Some(5)), "t", "F", 60, &mut w),
            Some(5)
        );
        assert!(w.is_empty());
        assert_eq!(
            timeout_or_default(Some(None), "t", "F", 60, &mut w),
            Some(60)
        );
        assert_eq!(
            w,
            vec!["t is not a positive number; F's default (60) was used"]
        );
    }

    #[test]
    fn variable_names() {
        assert!(is_var_name("API_KEY"));
        assert!(is_var_name("_x1"));
        assert!(!is_var_name("1x"));
        assert!(!is_var_name("A-B"));
        assert!(!is_var_name(""));
    }
}
