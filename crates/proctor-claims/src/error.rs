//! Why a claim could not be cited or checked.

/// An error of `cite` or `verify`: something the user asked for that cannot be done (with what
/// to do instead), or a file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsError {
    /// The request cannot be met.
    #[error("{message}")]
    Usage {
        /// What was wrong.
        message: String,
        /// What to do instead.
        hint: String,
    },
    /// A file or folder could not be read.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl ClaimsError {
    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> ClaimsError {
        ClaimsError::Usage {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// `source`, met while doing `context`.
    pub fn io(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> ClaimsError {
        ClaimsError::Io {
            context: context.into(),
            source: Box::new(source),
        }
    }
}
