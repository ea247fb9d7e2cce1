//! Run ids: [`proctor_records::RunId`], re-exported; a malformed one is the store's
//! [`StoreError::InvalidRunId`].

use crate::error::StoreError;
pub use proctor_records::run_id::{ParseRunIdError, RunId};

impl From<ParseRunIdError> for StoreError {
    fn from(e: ParseRunIdError) -> StoreError {
        StoreError::InvalidRunId(e.0)
    }
}
