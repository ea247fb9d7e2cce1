//! The image config: how the image means its processes to run (environment, working folder,
//! entrypoint, command, user) and which platform it is for.

use serde::{Deserialize, Serialize};

use crate::error::{ImageError, Result};
use crate::manifest::Platform;

/// What an image's config says about running it and about its platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `Env`, split at the first `=` (an entry without `=` gets an empty value), in order.
    pub env: Vec<(String, String)>,
    /// `WorkingDir`; `None` when absent or empty.
    pub working_dir: Option<String>,
    /// `Entrypoint` (empty when absent).
    pub entrypoint: Vec<String>,
    /// `Cmd` (empty when absent).
    pub cmd: Vec<String>,
    /// `User` (`name`, `uid`, `uid:gid`, ...); `None` when absent or empty.
    pub user: Option<String>,
    /// The OS the image is built for (`linux`).
    pub os: String,
    /// The architecture the image is built for (`amd64`, `arm64`, ...).
    pub architecture: String,
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    config: Option<RawExec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct RawExec {
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    user: Option<String>,
}

impl ImageConfig {
    /// Parses an image config (OCI or Docker; both have the same fields).
    pub(crate) fn parse(bytes: &[u8]) -> Result<ImageConfig> {
        Ok(Self::parse_with_platform(bytes)?.0)
    }

    /// Parses an image config, also giving its platform (with the variant).
    pub(crate) fn parse_with_platform(bytes: &[u8]) -> Result<(ImageConfig, Platform)> {
        let raw: RawConfig = serde_json::from_slice(bytes)
            .map_err(|e| ImageError::bad_manifest("image config", e.to_string()))?;
        let exec = raw.config.unwrap_or_default();
        let env = exec
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|entry| match entry.split_once('=') {
                Some((key, value)) => (key.to_string(), value.to_string()),
                None => (entry, String::new()),
            })
            .collect();
        let platform = Platform {
            architecture: raw.architecture.clone(),
            os: raw.os.clone(),
            variant: raw.variant,
        };
        let config = ImageConfig {
            env,
            working_dir: exec.working_dir.filter(|w| !w.is_empty()),
            entrypoint: exec.entrypoint.unwrap_or_default(),
            cmd: exec.cmd.unwrap_or_default(),
            user: exec.user.filter(|u| !u.is_empty()),
            os: raw.os,
            architecture: raw.architecture,
        };
        Ok((config, platform))
    }

    /// The value of the environment variable `key` in `env`, if set.
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_run_fields() {
        let text = br#"{
            "architecture": "amd64", "os": "linux",
            "config": {
                "Env": ["PATH=/usr/bin:/bin", "EMPTY=", "NOVALUE", "EQ=a=b"],
                "WorkingDir": "/app", "Entrypoint": ["/bin/sh", "-c"], "Cmd": null, "User": "1000:1000"
            },
            "rootfs": {"type": "layers", "diff_ids": []}
        }"#;
        let config = ImageConfig::parse(text).unwrap();
        assert_eq!(
            config.env,
            vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("EMPTY".into(), String::new()),
                ("NOVALUE".into(), String::new()),
                ("EQ".into(), "a=b".into()),
            ]
        );
        assert_eq!(config.env_var("EQ"), Some("a=b"));
        assert_eq!(config.working_dir.as_deref(), Some("/app"));
        assert_eq!(config.entrypoint, vec!["/bin/sh", "-c"]);
        assert!(config.cmd.is_empty());
        assert_eq!(config.user.as_deref(), Some("1000:1000"));
        assert_eq!(
            (config.os.as_str(), config.architecture.as_str()),
            ("linux", "amd64")
        );
    }

    #[test]
    fn empty_fields_are_none() {
        let config = ImageConfig::parse(
            br#"{"os":"linux","architecture":"arm64","config":{"WorkingDir":"","User":""}}"#,
        )
        .unwrap();
        assert_eq!(config.working_dir, None);
        assert_eq!(config.user, None);
        let bare = ImageConfig::parse(br#"{"os":"linux","architecture":"arm64"}"#).unwrap();
        assert!(bare.env.is_empty());
        assert!(ImageConfig::parse(b"\"text\"").is_err());
    }
}
