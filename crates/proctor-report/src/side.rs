//! Which arm of a comparison a number, a trial or a warning belongs to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which arm of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Side {
    /// The first arm (the reference: differences are b − a).
    A,
    /// The second arm.
    B,
}
