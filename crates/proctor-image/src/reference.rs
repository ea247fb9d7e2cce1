//! Image references: what the user writes to name an image, parsed with Docker's defaults.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::digest::Digest;
use crate::error::ImageError;

/// The registry host that Docker Hub's API is served from (`docker.io` names the same place).
pub const DOCKER_HUB: &str = "registry-1.docker.io";

/// How Docker Hub is written in canonical references.
const DOCKER_HUB_DISPLAY: &str = "docker.io";

/// The forms a reference can take, for error hints.
const FORMS: &str = "NAME[:TAG] (e.g. python:3.12-slim), REGISTRY/NAME[:TAG] (e.g. \
                     ghcr.io/org/img:tag), NAME@sha256:<64 hex digits>, oci:PATH (an OCI image \
                     layout folder) or oci-archive:PATH (a tar of one)";

/// A reference to an image: in a registry, in an OCI image layout folder, or in a tar of one.
///
/// Parse one with [`ImageRef::parse`] (or `str::parse`); [`Display`](fmt::Display) gives the
/// canonical form, which parses back to the same reference:
///
/// | written | canonical |
/// |---|---|
/// | `python:3.12-slim` | `docker.io/library/python:3.12-slim` |
/// | `ghcr.io/org/img` | `ghcr.io/org/img:latest` |
/// | `localhost:5000/x/y@sha256:…` | `localhost:5000/x/y@sha256:…` |
/// | `oci-archive:img.tar` | `oci-archive:img.tar` |
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageRef {
    /// An image in a registry, fetched over the OCI distribution API.
    Registry(RegistryRef),
    /// An OCI image layout folder (`oci-layout`, `index.json`, `blobs/`): `oci:PATH`.
    OciLayout(PathBuf),
    /// A tar archive of an OCI image layout (as `skopeo copy … oci-archive:` writes):
    /// `oci-archive:PATH`.
    OciArchive(PathBuf),
}

/// An image in a registry: registry host, repository, and a tag and/or a digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl RegistryRef {
    /// The registry host (and port), e.g. `registry-1.docker.io`, `ghcr.io`, `localhost:5000`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository within the registry, e.g. `library/python`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag; `latest` when neither a tag nor a digest was written, `None` when only a digest
    /// was.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest the reference is pinned to (`sha256:…`), if any.
    pub fn digest(&self) -> Option<String> {
        self.digest.as_ref().map(Digest::to_string)
    }

    /// The pinned digest, typed.
    pub(crate) fn pinned(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// What to ask the registry's manifests endpoint for: the digest when pinned, else the tag.
    pub(crate) fn manifest_reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => digest.to_string(),
            (None, Some(tag)) => tag.clone(),
            (None, None) => "latest".to_string(),
        }
    }
}

impl ImageRef {
    /// Parses a reference: `oci-archive:PATH`, `oci:PATH`, or a registry reference with Docker's
    /// defaults (registry `docker.io`, namespace `library/` for one-part names, tag `latest`).
    ///
    /// A syntax error says what is wrong and what to write instead.
    pub fn parse(input: &str) -> Result<ImageRef, ImageError> {
        let bad = |problem: String, hint: &str| ImageError::BadReference {
            input: input.to_string(),
            problem,
            hint: hint.to_string(),
        };
        if input.is_empty() {
            return Err(bad("it is empty".into(), FORMS));
        }
        if let Some(path) = input.strip_prefix("oci-archive:") {
            if path.is_empty() {
                return Err(bad(
                    "`oci-archive:` needs a path".into(),
                    "oci-archive:PATH/TO/IMAGE.tar",
                ));
            }
            return Ok(ImageRef::OciArchive(PathBuf::from(path)));
        }
        if let Some(path) = input.strip_prefix("oci:") {
            if path.is_empty() {
                return Err(bad("`oci:` needs a path".into(), "oci:PATH/TO/LAYOUT"));
            }
            return Ok(ImageRef::OciLayout(PathBuf::from(path)));
        }
        let text = input.strip_prefix("docker://").unwrap_or(input);
        parse_registry(text)
            .map(ImageRef::Registry)
            .map_err(|(problem, hint)| bad(problem, hint))
    }

    /// This reference with a relative layout or archive path taken relative to `base` (e.g. the
    /// folder of the file that wrote it); registry references and absolute paths are unchanged.
    pub fn resolve_against(&self, base: &Path) -> ImageRef {
        match self {
            ImageRef::OciLayout(path) if path.is_relative() => ImageRef::OciLayout(base.join(path)),
            ImageRef::OciArchive(path) if path.is_relative() => {
                ImageRef::OciArchive(base.join(path))
            }
            other => other.clone(),
        }
    }

    /// Whether the reference names one immutable image: a registry reference with a digest.
    /// (A layout or archive can change on disk, so it is never pinned.)
    pub fn is_pinned(&self) -> bool {
        matches!(self, ImageRef::Registry(r) if r.digest.is_some())
    }
}

impl FromStr for ImageRef {
    type Err = ImageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ImageRef::parse(s)
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRef::Registry(r) => r.fmt(f),
            ImageRef::OciLayout(path) => write!(f, "oci:{}", path.display()),
            ImageRef::OciArchive(path) => write!(f, "oci-archive:{}", path.display()),
        }
    }
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registry = if self.registry == DOCKER_HUB {
            DOCKER_HUB_DISPLAY
        } else {
            &self.registry
        };
        write!(f, "{registry}/{}", self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Parses `[REGISTRY/]NAME[:TAG][@DIGEST]`; errors are (problem, hint).
fn parse_registry(text: &str) -> Result<RegistryRef, (String, &'static str)> {
    if let Some(c) = text.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err((format!("it contains {c:?}"), FORMS));
    }
    let (name_tag, digest) = match text.split_once('@') {
        Some((name_tag, digest)) => {
            let digest = Digest::parse(digest).map_err(|problem| {
                (
                    problem,
                    "NAME@sha256:<64 lowercase hex digits>, e.g. python@sha256:…",
                )
            })?;
            (name_tag, Some(digest))
        }
        None => (text, None),
    };
    let slash = name_tag.rfind('/');
    let (name, tag) = match name_tag.rfind(':') {
        Some(colon) if slash.is_none_or(|slash| colon > slash) => {
            (&name_tag[..colon], Some(&name_tag[colon + 1..]))
        }
        _ => (name_tag, None),
    };
    if let Some(tag) = tag {
        check_tag(tag)?;
    }
    let (registry, repository) = split_registry(name)?;
    check_repository(&repository)?;
    let tag = match (tag, &digest) {
        (Some(tag), _) => Some(tag.to_string()),
        (None, Some(_)) => None,
        (None, None) => Some("latest".to_string()),
    };
    Ok(RegistryRef {
        registry,
        repository,
        tag,
        digest,
    })
}

/// Splits `NAME` into (registry, repository) with Docker's rule: the first part is a registry
/// when there is more than one part and it has a `.` or `:`, is `localhost`, or has capitals.
fn split_registry(name: &str) -> Result<(String, String), (String, &'static str)> {
    if name.is_empty() {
        return Err(("the image name is empty".into(), FORMS));
    }
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            check_registry(first)?;
            (first.to_string(), rest.to_string())
        }
        _ => (DOCKER_HUB.to_string(), name.to_string()),
    };
    let registry = match registry.as_str() {
        "docker.io" | "index.docker.io" => DOCKER_HUB.to_string(),
        _ => registry,
    };
    let repository = if registry == DOCKER_HUB && !repository.contains('/') {
        format!("library/{repository}")
    } else {
        repository
    };
    Ok((registry, repository))
}

/// Checks `HOST[:PORT]` (HOST a DNS name, an IPv4 address or a bracketed IPv6 address).
fn check_registry(registry: &str) -> Result<(), (String, &'static str)> {
    let hint = "REGISTRY/NAME[:TAG] with REGISTRY a host name and optional port, e.g. \
                ghcr.io/org/img:tag or localhost:5000/x/y:t";
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        match rest.split_once(']') {
            Some((host, port)) => (host, port.strip_prefix(':').map(Some).unwrap_or(None)),
            None => return Err((format!("registry `{registry}` has no closing `]`"), hint)),
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
        && !host.starts_with(['-', '.'])
        && !host.ends_with('-')
        && !host.contains("..");
    if !host_ok {
        return Err((format!("`{registry}` is not a valid registry host"), hint));
    }
    if let Some(port) = port {
        if port.is_empty() || port.parse::<u16>().is_err() {
            return Err((
                format!("registry port `{port}` is not a number up to 65535"),
                hint,
            ));
        }
    }
    Ok(())
}

/// Checks a repository path: `/`-separated lowercase components.
fn check_repository(repository: &str) -> Result<(), (String, &'static str)> {
    let hint = "a repository of lowercase letters, digits and separators (`.`, `_`, `__`, `-`) \
                between `/`, e.g. library/python or org/my-image";
    if repository.len() > 255 {
        return Err((
            "the repository name is longer than 255 characters".into(),
            hint,
        ));
    }
    if repository.chars().any(|c| c.is_ascii_uppercase()) {
        return Err((
            format!("repository `{repository}` has capital letters (names must be lowercase)"),
            hint,
        ));
    }
    for component in repository.split('/') {
        if !valid_component(component) {
            return Err((
                format!("`{component}` is not a valid repository path component"),
                hint,
            ));
        }
    }
    Ok(())
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn valid_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut run = String::new();
    for &b in bytes {
        if alnum(b) {
            if !(run.is_empty()
                || run == "."
                || run == "_"
                || run == "__"
                || run.bytes().all(|s| s == b'-'))
            {
                return false;
            }
            run.clear();
        } else if matches!(b, b'.' | b'_' | b'-') {
            run.push(b as char);
        } else {
            return false;
        }
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn check_tag(tag: &str) -> Result<(), (String, &'static str)> {
    let hint = "NAME:TAG with TAG of letters, digits, `_`, `.` and `-` (not starting with `.` \
                or `-`, at most 128 characters), e.g. python:3.12-slim";
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else if tag.is_empty() {
        Err(("the tag after `:` is empty".into(), hint))
    } else {
        Err((format!("`{tag}` is not a valid tag"), hint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn registry(input: &str) -> RegistryRef {
        match ImageRef::parse(input).unwrap() {
            ImageRef::Registry(r) => r,
            other => panic!("{input} parsed as {other:?}"),
        }
    }

    fn error(input: &str) -> String {
        ImageRef::parse(input).unwrap_err().to_string()
    }

    #[test]
    fn docker_hub_defaults() {
        let r = registry("python:3.12-slim");
        assert_eq!(r.registry(), "registry-1.docker.io");
        assert_eq!(r.repository(), "library/python");
        assert_eq!(r.tag(), Some("3.12-slim"));
        assert_eq!(r.digest(), None);
        assert_eq!(r.to_string(), "docker.io/library/python:3.12-slim");

        let r = registry("busybox");
        assert_eq!(r.tag(), Some("latest"));
        assert_eq!(r.to_string(), "docker.io/library/busybox:latest");

        let r = registry("someone/tool:1");
        assert_eq!(r.repository(), "someone/tool");
        assert_eq!(r.registry(), DOCKER_HUB);

        for alias in [
            "docker.io/library/python",
            "index.docker.io/python",
            "docker.io/python",
        ] {
            let r = registry(alias);
            assert_eq!(r.registry(), DOCKER_HUB, "{alias}");
            assert_eq!(r.repository(), "library/python", "{alias}");
        }
        assert_eq!(
            registry("docker://alpine:3").to_string(),
            "docker.io/library/alpine:3"
        );
    }

    #[test]
    fn other_registries() {
        let r = registry("ghcr.io/org/img:tag");
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("ghcr.io", "org/img", Some("tag"))
        );
        assert_eq!(r.to_string(), "ghcr.io/org/img:tag");

        let r = registry("localhost:5000/x/y:t");
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("localhost:5000", "x/y", Some("t"))
        );

        let r = registry("localhost/x");
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("localhost", "x", Some("latest"))
        );

        let r = registry("127.0.0.1:5000/a/b/c");
        assert_eq!((r.registry(), r.repository()), ("127.0.0.1:5000", "a/b/c"));

        let r = registry("[::1]:5000/img:v1");
        assert_eq!((r.registry(), r.repository()), ("[::1]:5000", "img"));
    }

    #[test]
    fn digests() {
        let r = registry(&format!("python@sha256:{HEX}"));
        assert_eq!(r.tag(), None);
        assert_eq!(
            r.digest().as_deref(),
            Some(format!("sha256:{HEX}").as_str())
        );
        assert_eq!(
            r.to_string(),
            format!("docker.io/library/python@sha256:{HEX}")
        );
        assert_eq!(r.manifest_reference(), format!("sha256:{HEX}"));
        assert!(ImageRef::Registry(r).is_pinned());

        let r = registry(&format!("localhost:5000/x:1.0@sha256:{HEX}"));
        assert_eq!(r.tag(), Some("1.0"));
        assert_eq!(r.to_string(), format!("localhost:5000/x:1.0@sha256:{HEX}"));

        assert!(error("python@sha256:abc").contains("64 lowercase hex"));
        assert!(error("python@md5:abc").contains("not supported"));
    }

    #[test]
    fn canonical_form_round_trips() {
        for input in [
            "python:3.12-slim",
            "ghcr.io/org/img:tag",
            "localhost:5000/x/y:t",
            &format!("localhost:5000/x/y@sha256:{HEX}"),
            "oci:images/layout",
            "oci-archive:/tmp/img.tar",
        ] {
            let parsed = ImageRef::parse(input).unwrap();
            let again = ImageRef::parse(&parsed.to_string()).unwrap();
            assert_eq!(parsed, again, "{input}");
        }
    }

    #[test]
    fn layouts_and_archives() {
        assert_eq!(
            ImageRef::parse("oci-archive:img.tar").unwrap(),
            ImageRef::OciArchive("img.tar".into())
        );
        assert_eq!(
            ImageRef::parse("oci:./layout").unwrap(),
            ImageRef::OciLayout("./layout".into())
        );
        let base = Path::new("/suite");
        assert_eq!(
            ImageRef::parse("oci-archive:img.tar")
                .unwrap()
                .resolve_against(base),
            ImageRef::OciArchive("/suite/img.tar".into())
        );
        assert_eq!(
            ImageRef::parse("oci:/abs").unwrap().resolve_against(base),
            ImageRef::OciLayout("/abs".into())
        );
        assert!(!ImageRef::parse("oci:/abs").unwrap().is_pinned());
        assert!(error("oci:").contains("oci:PATH/TO/LAYOUT"));
        assert!(error("oci-archive:").contains("oci-archive:PATH"));
    }

    #[test]
    fn syntax_errors_say_what_to_write() {
        let e = error("");
        assert!(e.contains("empty") && e.contains("python:3.12-slim"), "{e}");
        let e = error("Python:3");
        assert!(e.contains("capital") && e.contains("lowercase"), "{e}");
        let e = error("python:");
        assert!(e.contains("tag") && e.contains("empty"), "{e}");
        let e = error("python:-bad");
        assert!(e.contains("not a valid tag"), "{e}");
        let e = error("my image");
        assert!(e.contains("' '"), "{e}");
        let e = error("localhost:99999/x");
        assert!(e.contains("port"), "{e}");
        let e = error("org//img");
        assert!(e.contains("component"), "{e}");
        let e = error("org/-img");
        assert!(e.contains("component"), "{e}");
        let e = error("a..b/img");
        assert!(
            e.contains("registry host") || e.contains("component"),
            "{e}"
        );
    }

    #[test]
    fn component_grammar() {
        for ok in ["a", "a.b", "a_b", "a__b", "a---b", "abc123", "0"] {
            assert!(valid_component(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a___b", "a._b", "a..b", "A", "a/b", "a b"] {
            assert!(!valid_component(bad), "{bad}");
        }
    }
}
