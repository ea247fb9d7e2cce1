//! How registries are reached: plain-HTTP registries, mirrors, and credentials from the docker
//! config.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::PathBuf;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::error::{ImageError, Result};
use crate::reference::DOCKER_HUB;

/// How registries are reached. The default reaches every registry over HTTPS, directly, with
/// the credentials of `~/.docker/config.json` where it has some.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// Registries (`HOST:PORT`, as written in references) reached over plain HTTP instead of
    /// HTTPS. Nothing else is ever fetched over plain HTTP.
    pub insecure: BTreeSet<String>,
    /// Mirrors per registry: `registry → [mirror HOST[:PORT], ...]`, tried in order before the
    /// registry itself (a mirror that fails or lacks the image is skipped). Docker Hub's key is
    /// `docker.io` (or `registry-1.docker.io`). A mirror is reached over HTTPS unless it is in
    /// `insecure`; an `https://` prefix and a trailing `/` are ignored.
    pub mirrors: BTreeMap<String, Vec<String>>,
    /// The docker config whose `auths` give credentials (`auth`: base64 of `user:password`).
    /// `None` reads `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`; a missing file
    /// means no credentials. Credential helpers (`credsStore`, `credHelpers`) are not run.
    pub docker_config: Option<PathBuf>,
}

/// A user name and password for a registry.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// The user name.
    pub(crate) user: String,
    /// The password (or access token).
    pub(crate) password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <redacted>)", self.user)
    }
}

impl Credentials {
    /// The `Authorization: Basic …` value.
    pub(crate) fn basic_header(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

impl RegistryConfig {
    /// Whether `host` (`HOST[:PORT]`) is reached over plain HTTP.
    pub fn is_insecure(&self, host: &str) -> bool {
        self.insecure.contains(host)
    }

    /// The mirrors of `registry`, in order, as `HOST[:PORT]`.
    pub(crate) fn mirrors_for(&self, registry: &str) -> Vec<String> {
        let keys: &[&str] = if registry == DOCKER_HUB {
            &[DOCKER_HUB, "docker.io", "index.docker.io"]
        } else {
            &[registry]
        };
        keys.iter()
            .filter_map(|key| self.mirrors.get(*key))
            .flatten()
            .map(|mirror| host_of(mirror).to_string())
            .filter(|mirror| !mirror.is_empty() && mirror != registry)
            .collect()
    }

    /// The docker config file that is read for credentials.
    pub(crate) fn docker_config_path(&self) -> Option<PathBuf> {
        if let Some(path) = &self.docker_config {
            return Some(path.clone());
        }
        if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir).join("config.json"));
        }
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".docker/config.json"))
    }

    /// The credentials the docker config has for `registry`, if any.
    pub(crate) fn credentials(&self, registry: &str) -> Result<Option<Credentials>> {
        let Some(path) = self.docker_config_path() else {
            return Ok(None);
        };
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ImageError::io("reading", path, e)),
        };
        credentials_in(&text, registry).map_err(|problem| ImageError::BadCredentials {
            path: path.clone(),
            problem,
        })
    }
}

/// `HOST[:PORT]` of a mirror or docker-config key: without a scheme and a path.
fn host_of(text: &str) -> &str {
    let text = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .unwrap_or(text);
    text.split('/').next().unwrap_or(text)
}

/// The same registry, with Docker Hub's many names made one.
fn same_registry(key: &str, registry: &str) -> bool {
    let key = host_of(key);
    let hub = |h: &str| matches!(h, "docker.io" | "index.docker.io" | DOCKER_HUB);
    key == registry || (hub(key) && hub(registry))
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The credentials for `registry` in the text of a docker config.
fn credentials_in(text: &str, registry: &str) -> Result<Option<Credentials>, String> {
    let config: DockerConfig =
        serde_json::from_str(text).map_err(|e| format!("not a docker config: {e}"))?;
    // An exact key wins over an alias (`docker.io` vs `https://index.docker.io/v1/`).
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| host_of(key) == registry)
        .or_else(|| {
            config
                .auths
                .iter()
                .find(|(key, _)| same_registry(key, registry))
        });
    let Some((key, auth)) = entry else {
        return Ok(None);
    };
    if let Some(encoded) = auth.auth.as_deref().filter(|a| !a.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("auths.{key}.auth is not base64: {e}"))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| format!("auths.{key}.auth is not UTF-8 once decoded"))?;
        let Some((user, password)) = decoded.split_once(':') else {
            return Err(format!("auths.{key}.auth does not decode to user:password"));
        };
        return Ok(Some(Credentials {
            user: user.to_string(),
            password: password.to_string(),
        }));
    }
    match (&auth.username, &auth.password) {
        (Some(user), Some(password)) => Ok(Some(Credentials {
            user: user.clone(),
            password: password.clone(),
        })),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(raw: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(raw)
    }

    #[test]
    fn reads_base64_auth_for_a_registry() {
        let text = format!(
            r#"{{"auths": {{"ghcr.io": {{"auth": "{}"}}, "https://index.docker.io/v1/": {{"auth": "{}"}}}}}}"#,
            encoded("me:secret:with:colons"),
            encoded("hubuser:hubpass")
        );
        let ghcr = credentials_in(&text, "ghcr.io").unwrap().unwrap();
        assert_eq!(
            (ghcr.user.as_str(), ghcr.password.as_str()),
            ("me", "secret:with:colons")
        );
        let hub = credentials_in(&text, DOCKER_HUB).unwrap().unwrap();
        assert_eq!(hub.user, "hubuser");
        assert_eq!(credentials_in(&text, "quay.io").unwrap(), None);
        assert_eq!(
            hub.basic_header(),
            format!("Basic {}", encoded("hubuser:hubpass"))
        );
    }

    #[test]
    fn username_and_password_fields_and_errors() {
        let text = r#"{"auths": {"localhost:5000": {"username": "u", "password": "p"}}}"#;
        let c = credentials_in(text, "localhost:5000").unwrap().unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("u", "p"));
        assert!(credentials_in("{", "x")
            .unwrap_err()
            .contains("not a docker config"));
        let bad = r#"{"auths": {"x": {"auth": "%%%"}}}"#;
        assert!(credentials_in(bad, "x").unwrap_err().contains("base64"));
        let no_colon = format!(
            r#"{{"auths": {{"x": {{"auth": "{}"}}}}}}"#,
            encoded("nocolon")
        );
        assert!(credentials_in(&no_colon, "x")
            .unwrap_err()
            .contains("user:password"));
        assert_eq!(
            credentials_in(r#"{"credsStore": "desktop"}"#, "x").unwrap(),
            None
        );
    }

    #[test]
    fn mirrors_are_normalised_and_hub_has_aliases() {
        let mut config = RegistryConfig::default();
        config.mirrors.insert(
            "docker.io".into(),
            vec!["https://mirror.example/".into(), "m2:5000".into()],
        );
        config
            .mirrors
            .insert("ghcr.io".into(), vec!["ghcr-mirror.local".into()]);
        assert_eq!(
            config.mirrors_for(DOCKER_HUB),
            vec!["mirror.example", "m2:5000"]
        );
        assert_eq!(config.mirrors_for("ghcr.io"), vec!["ghcr-mirror.local"]);
        assert!(config.mirrors_for("quay.io").is_empty());
    }

    #[test]
    fn missing_docker_config_means_no_credentials() {
        let config = RegistryConfig {
            docker_config: Some("/nonexistent/proctor/config.json".into()),
            ..RegistryConfig::default()
        };
        assert_eq!(config.credentials("ghcr.io").unwrap(), None);
    }
}
