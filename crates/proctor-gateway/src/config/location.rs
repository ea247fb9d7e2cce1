//! Where the configuration file is: `--config FILE`, else `$PROCTOR_CONFIG`, else
//! `~/.config/proctor/config.toml`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Config, ConfigError};

/// The environment variable naming the configuration file.
pub const CONFIG_ENV: &str = "PROCTOR_CONFIG";

/// Where the configuration comes from, in order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigLocation {
    /// Given on the command line (`--config FILE`); must exist.
    Explicit(PathBuf),
    /// Named by `$PROCTOR_CONFIG`; must exist.
    Env(PathBuf),
    /// `~/.config/proctor/config.toml`; built-ins only when absent.
    Default(PathBuf),
    /// No file to look at (no `--config`, no `$PROCTOR_CONFIG`, no `$HOME`): built-ins only.
    None,
}

impl ConfigLocation {
    /// Picks the location from an explicit path and the process environment.
    pub fn from_env(explicit: Option<&Path>) -> ConfigLocation {
        ConfigLocation::resolve(explicit, |name| std::env::var_os(name))
    }

    /// Picks the location from an explicit path and an environment lookup (`PROCTOR_CONFIG`,
    /// `HOME`); an empty variable counts as unset.
    pub fn resolve(
        explicit: Option<&Path>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> ConfigLocation {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(path) = explicit {
            ConfigLocation::Explicit(path.to_path_buf())
        } else if let Some(path) = var(CONFIG_ENV) {
            ConfigLocation::Env(PathBuf::from(path))
        } else if let Some(home) = var("HOME") {
            ConfigLocation::Default(PathBuf::from(home).join(".config/proctor/config.toml"))
        } else {
            ConfigLocation::None
        }
    }

    /// The file, if there is one to look at.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ConfigLocation::Explicit(p) | ConfigLocation::Env(p) | ConfigLocation::Default(p) => {
                Some(p)
            }
            ConfigLocation::None => None,
        }
    }

    /// How the location was chosen, for messages.
    pub fn origin(&self) -> &'static str {
        match self {
            ConfigLocation::Explicit(_) => "--config",
            ConfigLocation::Env(_) => "$PROCTOR_CONFIG",
            ConfigLocation::Default(_) => "the default location",
            ConfigLocation::None => "nowhere",
        }
    }

    /// Reads the configuration there (see [`Config::load`]).
    pub(super) fn load(&self) -> Result<Config, ConfigError> {
        let Some(path) = self.path() else {
            return Ok(Config::builtin());
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, path),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && matches!(self, ConfigLocation::Default(_)) =>
            {
                Ok(Config::builtin())
            }
            Err(source) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                origin: self.origin(),
                source,
            }),
        }
    }
}
