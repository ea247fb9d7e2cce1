//! The times a suite may set for its trials, each default and range written once: `suite.toml`'s
//! schema, its checks (`proctor validate`) and the resolved [`crate::Settings`] all read them
//! from here, and the runner gives the sandbox the resolved value.

/// `wall_timeout_seconds` when neither the task nor `[defaults]` sets one: ten minutes.
pub const DEFAULT_WALL_SECONDS: u64 = 600;
/// `validation_timeout_seconds` when neither the task nor `[defaults]` sets one: two minutes.
pub const DEFAULT_VALIDATION_SECONDS: u64 = 120;
/// `undo_window_seconds` when neither the task nor `[defaults]` sets one: five minutes.
pub const DEFAULT_UNDO_WINDOW_SECONDS: u64 = 300;
/// The shortest wall or check timeout a suite may ask for: a second.
pub const MIN_SECONDS: u64 = 1;
/// The longest wall or check timeout a suite may ask for: a day.
pub const MAX_SECONDS: u64 = 86_400;

/// Whether `seconds` is a wall or check timeout a suite may ask for
/// ([`MIN_SECONDS`] to [`MAX_SECONDS`]).
pub fn in_range(seconds: u64) -> bool {
    (MIN_SECONDS..=MAX_SECONDS).contains(&seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_a_second_to_a_day_and_holds_the_defaults() {
        assert!(!in_range(0));
        assert!(in_range(1));
        assert!(in_range(86_400));
        assert!(!in_range(86_401));
        assert!(in_range(DEFAULT_WALL_SECONDS));
        assert!(in_range(DEFAULT_VALIDATION_SECONDS));
    }
}
