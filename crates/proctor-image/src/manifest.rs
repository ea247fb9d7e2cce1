//! Manifests, indexes and descriptors (OCI and Docker v2 schema 2), their media types, and the
//! choice of this host's platform in an index.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{ImageError, Result};

/// OCI image manifest.
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker image manifest, v2 schema 2.
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list.
pub(crate) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// The `Accept` header of a manifest request: every manifest and index type that is read.
pub(crate) const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// The largest manifest or index read (the distribution spec's suggested limit).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// Image config media types that are read.
const CONFIG_TYPES: [&str; 2] = [
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

/// A reference to content: its media type, digest and size (and, in an index, its platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    /// The media type of the content.
    #[serde(default)]
    pub(crate) media_type: String,
    /// `sha256:…`.
    pub(crate) digest: String,
    /// Its size in bytes.
    #[serde(default)]
    pub(crate) size: u64,
    /// In an index: the platform of the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<Platform>,
    /// Annotations (an index's attestation entries are recognised by one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// The typed digest; an invalid one is a malformed `what`.
    pub(crate) fn digest(&self, what: &str) -> Result<Digest> {
        Digest::parse(&self.digest).map_err(|problem| ImageError::bad_manifest(what, problem))
    }
}

/// An OS and architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Platform {
    /// `amd64`, `arm64`, ...
    #[serde(default)]
    pub(crate) architecture: String,
    /// `linux`, `windows`, ...
    #[serde(default)]
    pub(crate) os: String,
    /// `v8`, ... (ignored when choosing)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) variant: Option<String>,
}

impl Platform {
    /// This host's platform, in the OCI's names: `linux` and `amd64`, `arm64`, ...
    pub(crate) fn host() -> Platform {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "loongarch64" => "loong64",
            "mips64" if cfg!(target_endian = "little") => "mips64le",
            other => other,
        };
        Platform {
            architecture: architecture.to_string(),
            os: "linux".to_string(),
            variant: None,
        }
    }

    /// Same OS and architecture (the variant is ignored).
    pub(crate) fn matches(&self, other: &Platform) -> bool {
        self.os == other.os && self.architecture == other.architecture
    }

    /// `os/arch[/variant]`.
    pub(crate) fn label(&self) -> String {
        match &self.variant {
            Some(variant) => format!("{}/{}/{variant}", self.os, self.architecture),
            None => format!("{}/{}", self.os, self.architecture),
        }
    }
}

/// An image manifest: the config and the layers, in order, bottom first.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Manifest {
    /// The image config's descriptor.
    pub(crate) config: Descriptor,
    /// The layers, bottom first.
    #[serde(default)]
    pub(crate) layers: Vec<Descriptor>,
}

/// An image index (or Docker manifest list).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Index {
    /// The images it lists.
    #[serde(default)]
    pub(crate) manifests: Vec<Descriptor>,
}

/// What a fetched manifest document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocKind {
    /// An image manifest.
    Manifest,
    /// An index of manifests.
    Index,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Peek {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    schema_version: Option<u32>,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
    #[serde(default)]
    layers: Option<serde_json::Value>,
}

/// Classifies a manifest document by its `mediaType` (else the `Content-Type` it came with, else
/// its shape). Docker schema 1 and non-manifest types are [`ImageError::UnsupportedMediaType`].
pub(crate) fn classify(bytes: &[u8], content_type: Option<&str>, what: &str) -> Result<DocKind> {
    let peek: Peek = serde_json::from_slice(bytes)
        .map_err(|e| ImageError::bad_manifest(what, format!("not JSON: {e}")))?;
    let header = content_type
        .map(|t| t.split(';').next().unwrap_or(t).trim().to_string())
        .filter(|t| !t.is_empty() && t != "application/json" && t != "text/plain");
    let media_type = peek.media_type.clone().or(header);
    match media_type.as_deref() {
        Some(OCI_MANIFEST | DOCKER_MANIFEST) => Ok(DocKind::Manifest),
        Some(OCI_INDEX | DOCKER_LIST) => Ok(DocKind::Index),
        Some(other) => Err(ImageError::UnsupportedMediaType {
            media_type: other.to_string(),
            what: what.to_string(),
            supported: format!(
                "{OCI_MANIFEST}, {OCI_INDEX}, {DOCKER_MANIFEST} and {DOCKER_LIST} \
                 (Docker schema 1 images must be re-pushed with a current Docker)"
            ),
        }),
        None if peek.schema_version == Some(1) => Err(ImageError::UnsupportedMediaType {
            media_type: "application/vnd.docker.distribution.manifest.v1+json".into(),
            what: what.to_string(),
            supported: format!("{OCI_MANIFEST} and {DOCKER_MANIFEST}"),
        }),
        None if peek.manifests.is_some() => Ok(DocKind::Index),
        None if peek.layers.is_some() => Ok(DocKind::Manifest),
        None => Err(ImageError::bad_manifest(
            what,
            "neither a manifest (no `layers`) nor an index (no `manifests`)",
        )),
    }
}

/// Parses an image manifest and checks its config's media type.
pub(crate) fn parse_manifest(bytes: &[u8], what: &str) -> Result<Manifest> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| ImageError::bad_manifest(what, e.to_string()))?;
    let config_type = manifest.config.media_type.as_str();
    if !config_type.is_empty() && !CONFIG_TYPES.contains(&config_type) {
        return Err(ImageError::UnsupportedMediaType {
            media_type: config_type.to_string(),
            what: format!("the config of {what} (it is not a container image)"),
            supported: CONFIG_TYPES.join(" and "),
        });
    }
    manifest.config.digest(what)?;
    for layer in &manifest.layers {
        layer.digest(what)?;
    }
    Ok(manifest)
}

/// Parses an image index.
pub(crate) fn parse_index(bytes: &[u8], what: &str) -> Result<Index> {
    serde_json::from_slice(bytes).map_err(|e| ImageError::bad_manifest(what, e.to_string()))
}

/// The entry of `index` for `wanted` (variant ignored). An index with one entry and no platform
/// information gives that entry (OCI layouts are often written so). Attestations are ignored.
pub(crate) fn select(
    index: &Index,
    wanted: &Platform,
    reference: &str,
    what: &str,
) -> Result<Descriptor> {
    let candidates: Vec<&Descriptor> = index
        .manifests
        .iter()
        .filter(|d| {
            matches!(
                d.media_type.as_str(),
                "" | OCI_MANIFEST | OCI_INDEX | DOCKER_MANIFEST | DOCKER_LIST
            )
        })
        .filter(|d| {
            d.annotations
                .get("vnd.docker.reference.type")
                .map(String::as_str)
                != Some("attestation-manifest")
        })
        .filter(|d| {
            d.platform
                .as_ref()
                .is_none_or(|p| !(p.os == "unknown" && p.architecture == "unknown"))
        })
        .collect();
    if let Some(found) = candidates
        .iter()
        .find(|d| d.platform.as_ref().is_some_and(|p| p.matches(wanted)))
    {
        return Ok((*found).clone());
    }
    if let [only] = candidates.as_slice() {
        if only.platform.is_none() {
            return Ok((*only).clone());
        }
    }
    if candidates.is_empty() {
        return Err(ImageError::bad_manifest(what, "it lists no image"));
    }
    Err(ImageError::WrongPlatform {
        reference: reference.to_string(),
        os: wanted.os.clone(),
        arch: wanted.architecture.clone(),
        available: candidates
            .iter()
            .map(|d| match &d.platform {
                Some(p) => p.label(),
                None => format!("an image with no platform ({})", d.digest),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(os: &str, arch: &str, digest_byte: char) -> serde_json::Value {
        serde_json::json!({
            "mediaType": OCI_MANIFEST,
            "digest": format!("sha256:{}", digest_byte.to_string().repeat(64)),
            "size": 10,
            "platform": {"os": os, "architecture": arch, "variant": "v8"}
        })
    }

    fn index(entries: Vec<serde_json::Value>) -> Index {
        serde_json::from_value(serde_json::json!({ "manifests": entries })).unwrap()
    }

    #[test]
    fn selects_the_host_platform_ignoring_variant_and_attestations() {
        let wanted = Platform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: None,
        };
        let mut attestation = entry("unknown", "unknown", 'c');
        attestation["annotations"] =
            serde_json::json!({"vnd.docker.reference.type": "attestation-manifest"});
        let idx = index(vec![
            entry("linux", "amd64", 'a'),
            attestation,
            entry("linux", "arm64", 'b'),
        ]);
        let chosen = select(&idx, &wanted, "r", "index").unwrap();
        assert_eq!(chosen.digest, format!("sha256:{}", "b".repeat(64)));
    }

    #[test]
    fn wrong_platform_names_both() {
        let wanted = Platform {
            os: "linux".into(),
            architecture: "riscv64".into(),
            variant: None,
        };
        let idx = index(vec![
            entry("linux", "amd64", 'a'),
            entry("windows", "amd64", 'b'),
        ]);
        let e = select(&idx, &wanted, "img:1", "index").unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, ImageError::WrongPlatform { .. }));
        assert!(text.contains("linux/riscv64"), "{text}");
        assert!(
            text.contains("linux/amd64/v8") && text.contains("windows/amd64"),
            "{text}"
        );
    }

    #[test]
    fn a_single_entry_without_platform_is_taken() {
        let idx: Index = serde_json::from_value(serde_json::json!({"manifests": [
            {"mediaType": OCI_MANIFEST, "digest": format!("sha256:{}", "d".repeat(64)), "size": 1}
        ]}))
        .unwrap();
        assert!(select(&idx, &Platform::host(), "r", "index").is_ok());
    }

    #[test]
    fn classify_by_media_type_header_and_shape() {
        let manifest = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}"#;
        assert_eq!(classify(manifest, None, "m").unwrap(), DocKind::Manifest);
        let bare_index = br#"{"schemaVersion":2,"manifests":[]}"#;
        assert_eq!(classify(bare_index, None, "m").unwrap(), DocKind::Index);
        assert_eq!(
            classify(
                bare_index,
                Some(&format!("{DOCKER_LIST}; charset=utf-8")),
                "m"
            )
            .unwrap(),
            DocKind::Index
        );
        let v1 = br#"{"schemaVersion":1,"fsLayers":[]}"#;
        assert!(matches!(
            classify(v1, None, "m"),
            Err(ImageError::UnsupportedMediaType { .. })
        ));
        assert!(matches!(
            classify(b"nope", None, "m"),
            Err(ImageError::BadManifest { .. })
        ));
    }

    #[test]
    fn host_platform_uses_oci_names() {
        let host = Platform::host();
        assert_eq!(host.os, "linux");
        assert!(!host.architecture.is_empty());
        if cfg!(target_arch = "x86_64") {
            assert_eq!(host.architecture, "amd64");
        }
        if cfg!(target_arch = "aarch64") {
            assert_eq!(host.architecture, "arm64");
        }
    }
}
