//! Per-trial tokens: what an agent presents in place of an API key.

use std::fmt;

/// A trial's token: 32 random bytes as 64 lowercase hex digits. It opens the gateway for one
/// trial only, and only until the trial is finished.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TrialToken(String);

impl TrialToken {
    /// A fresh random token.
    pub(crate) fn generate() -> Result<TrialToken, String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
        Ok(TrialToken(
            bytes.iter().map(|b| format!("{b:02x}")).collect(),
        ))
    }

    /// The token, to hand to the agent (as its API key).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TrialToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrialToken({}…)", &self.0[..8.min(self.0.len())])
    }
}

impl fmt::Display for TrialToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_64_hex_digits_and_differ() {
        let a = TrialToken::generate().unwrap();
        let b = TrialToken::generate().unwrap();
        assert_eq!(a.as_str().len(), 64);
        assert!(a
            .as_str()
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(&a.as_str()[8..]));
    }
}
