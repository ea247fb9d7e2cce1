//! The eight outcomes a trial resolves to: defined in `proctor-records` (the bottom layer every
//! stage shares) and re-exported here, where the verdict that assigns them is decided.

pub use proctor_records::outcome::{ErrorKind, Outcome, OutcomeKind, ParseOutcomeError, LABELS};
