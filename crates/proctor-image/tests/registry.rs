//! Pulls from a real registry: Debian's `docker-registry` on a free loopback port, started by
//! each test, with images the test pushes itself. No internet is used. Without the registry
//! binary these tests fail and say `apt-get install docker-registry`.

mod support;

use proctor_image::{ImageCache, ImageError, ImageRef, RegistryConfig};
use support::registry::{
    docker_config_for, free_port, AuthMode, AuthProxy, Registry, PASSWORD, USER,
};
use support::*;

const REPO: &str = "test/img";

/// A cache, a registry with the standard image pushed as `test/img:v1`, and the image.
fn setup() -> (tempfile::TempDir, ImageCache, Registry, TestImage) {
    let dir = tempfile::tempdir().unwrap();
    let cache = ImageCache::open(dir.path().join("cache")).unwrap();
    let registry = Registry::start();
    let image = standard_image();
    registry.push_image(REPO, "v1", &image);
    (dir, cache, registry, image)
}

/// A config reaching `hosts` over plain HTTP, with no credentials of the machine's.
fn insecure(dir: &std::path::Path, hosts: &[&str]) -> RegistryConfig {
    let mut config = no_credentials(dir);
    config.insecure = hosts.iter().map(|h| h.to_string()).collect();
    config
}

fn reference(text: &str) -> ImageRef {
    ImageRef::parse(text).unwrap()
}

#[test]
fn pull_by_tag_and_by_digest_over_plain_http() {
    let (dir, cache, registry, image) = setup();
    let config = insecure(dir.path(), &[&registry.addr]);

    let by_tag = reference(&format!("{}/{REPO}:v1", registry.addr));
    assert_eq!(
        cache.resolve_digest(&by_tag, &config).unwrap(),
        image.manifest.digest
    );
    let pulled = cache.pull(&by_tag, &config).unwrap();
    assert_eq!(pulled.digest, image.manifest.digest);
    assert_eq!(pulled.reference, format!("{}/{REPO}:v1", registry.addr));
    assert_eq!(tree(&pulled.rootfs), standard_tree());
    assert_eq!(pulled.config.working_dir.as_deref(), Some("/data"));

    let by_digest = reference(&format!(
        "{}/{REPO}@{}",
        registry.addr, image.manifest.digest
    ));
    let pinned = cache.pull(&by_digest, &config).unwrap();
    assert_eq!(pinned.digest, image.manifest.digest);
    assert_eq!(pinned.rootfs, pulled.rootfs);
    assert_eq!(names(&cache.dir().join("images")).len(), 1);
    let listed = cache.list().unwrap();
    assert_eq!(listed[0].references.len(), 2);

    // A digest-pinned reference already pulled needs no registry.
    drop(registry);
    let offline = cache.pull(&by_digest, &config).unwrap();
    assert_eq!(offline.rootfs, pulled.rootfs);
    // A tag does: it is resolved again each time.
    let err = cache.pull(&by_tag, &config).unwrap_err();
    assert!(matches!(err, ImageError::Unreachable { .. }), "{err:?}");
}

#[test]
fn manifests_are_verified_against_their_digest() {
    let (dir, cache, registry, image) = setup();
    let proxy = AuthProxy::start(&registry.addr, AuthMode::TamperManifests);
    let config = insecure(dir.path(), &[&registry.addr, &proxy.addr]);

    // Pinned by digest: the altered manifest does not have it.
    let pinned = reference(&format!("{}/{REPO}@{}", proxy.addr, image.manifest.digest));
    match cache.pull(&pinned, &config).unwrap_err() {
        ImageError::DigestMismatch {
            expected, actual, ..
        } => {
            assert_eq!(expected, image.manifest.digest);
            assert_ne!(actual, image.manifest.digest);
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    // By tag: it does not have the digest the registry announced.
    let err = cache
        .pull(&reference(&format!("{}/{REPO}:v1", proxy.addr)), &config)
        .unwrap_err();
    assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err:?}");
    assert!(names(&cache.dir().join("images")).is_empty());

    // A digest the registry does not have.
    let wrong = format!("sha256:{}", "1".repeat(64));
    let err = cache
        .pull(
            &reference(&format!("{}/{REPO}@{wrong}", registry.addr)),
            &config,
        )
        .unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err:?}");
}

#[test]
fn missing_tag_and_missing_repository_are_not_found() {
    let (dir, cache, registry, _image) = setup();
    let config = insecure(dir.path(), &[&registry.addr]);
    let err = cache
        .pull(
            &reference(&format!("{}/{REPO}:nope", registry.addr)),
            &config,
        )
        .unwrap_err();
    match &err {
        ImageError::NotFound { what, location } => {
            assert!(what.contains("nope"), "{what}");
            assert!(location.contains(&registry.addr), "{location}");
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let err = cache
        .pull(
            &reference(&format!("{}/no/such:v1", registry.addr)),
            &config,
        )
        .unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err:?}");
    assert!(names(&cache.dir().join("images")).is_empty());
}

#[test]
fn an_unreachable_registry_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ImageCache::open(dir.path().join("cache")).unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let config = insecure(dir.path(), &[&addr]);
    let err = cache
        .pull(&reference(&format!("{addr}/{REPO}:v1")), &config)
        .unwrap_err();
    match &err {
        ImageError::Unreachable { registry, cause } => {
            assert_eq!(registry, &addr);
            assert!(!cause.is_empty());
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(err.to_string().contains(&addr), "{err}");
}

#[test]
fn https_is_used_unless_the_registry_is_insecure() {
    let (dir, cache, registry, _image) = setup();
    // Not in `insecure`: HTTPS to a plain-HTTP server fails the TLS handshake.
    let err = cache
        .pull(
            &reference(&format!("{}/{REPO}:v1", registry.addr)),
            &no_credentials(dir.path()),
        )
        .unwrap_err();
    assert!(matches!(err, ImageError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("add `127.0.0.1:"), "{err}");
}

#[test]
fn an_index_by_tag_gives_this_hosts_image() {
    let (dir, cache, registry, ours) = setup();
    let theirs = TestImage::new(
        config(other_arch()),
        vec![Layer::new().file("theirs", 0o644, b"t").gzip()],
    );
    registry.push_image(REPO, "theirs", &theirs);
    let index = index(vec![
        theirs.manifest.descriptor(Some(("linux", other_arch()))),
        ours.manifest.descriptor(Some(("linux", host_arch()))),
    ]);
    registry.push_manifest(REPO, "multi", &index);
    let config = insecure(dir.path(), &[&registry.addr]);

    let multi = reference(&format!("{}/{REPO}:multi", registry.addr));
    assert_eq!(
        cache.resolve_digest(&multi, &config).unwrap(),
        ours.manifest.digest
    );
    let pulled = cache.pull(&multi, &config).unwrap();
    assert_eq!(pulled.digest, ours.manifest.digest);
    assert_eq!(tree(&pulled.rootfs), standard_tree());

    // Pinned to the index's digest: still this host's manifest.
    let pinned = reference(&format!("{}/{REPO}@{}", registry.addr, index.digest));
    assert_eq!(
        cache.pull(&pinned, &config).unwrap().digest,
        ours.manifest.digest
    );

    // An index with no image for this host.
    let only_theirs = support::index(vec![theirs
        .manifest
        .descriptor(Some(("linux", other_arch())))]);
    registry.push_manifest(REPO, "only-theirs", &only_theirs);
    let err = cache
        .pull(
            &reference(&format!("{}/{REPO}:only-theirs", registry.addr)),
            &config,
        )
        .unwrap_err();
    assert!(matches!(err, ImageError::WrongPlatform { .. }), "{err:?}");
}

#[test]
fn mirrors_are_tried_first_and_skipped_when_they_fail() {
    let (dir, cache, registry, image) = setup();
    let dead = format!("127.0.0.1:{}", free_port());

    // The registry named is down; its mirror has the image.
    let mut config = insecure(dir.path(), &[&registry.addr, &dead]);
    config
        .mirrors
        .insert(dead.clone(), vec![registry.addr.clone()]);
    let pulled = cache
        .pull(&reference(&format!("{dead}/{REPO}:v1")), &config)
        .unwrap();
    assert_eq!(pulled.digest, image.manifest.digest);

    // The mirror is down; the registry itself is used.
    let mut config = insecure(dir.path(), &[&registry.addr, &dead]);
    config
        .mirrors
        .insert(registry.addr.clone(), vec![dead.clone()]);
    let cache2 = ImageCache::open(dir.path().join("cache2")).unwrap();
    let pulled = cache2
        .pull(&reference(&format!("{}/{REPO}:v1", registry.addr)), &config)
        .unwrap();
    assert_eq!(tree(&pulled.rootfs), standard_tree());
}

#[test]
fn bearer_token_auth_with_docker_config_credentials() {
    let (dir, cache, registry, image) = setup();
    let proxy = AuthProxy::start(&registry.addr, AuthMode::Bearer);
    let mut config = insecure(dir.path(), &[&proxy.addr, &registry.addr]);
    let target = reference(&format!("{}/{REPO}:v1", proxy.addr));

    // Without credentials the token service refuses.
    let err = cache.pull(&target, &config).unwrap_err();
    match &err {
        ImageError::Unauthorized { registry, .. } => assert_eq!(registry, &proxy.addr),
        other => panic!("expected Unauthorized, got {other:?}"),
    }

    // With them (from the docker config) a token is fetched and used.
    config.docker_config = Some(docker_config_for(dir.path(), &proxy.addr));
    let pulled = cache.pull(&target, &config).unwrap();
    assert_eq!(pulled.digest, image.manifest.digest);
    assert_eq!(tree(&pulled.rootfs), standard_tree());

    let requests = proxy.requests();
    let basic = format!(
        "Basic {}",
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("{USER}:{PASSWORD}")
        )
    );
    assert!(
        requests.iter().any(|r| r
            .starts_with("GET /token?service=proxy-test&scope=repository%3Atest%2Fimg%3Apull ")
            && r.ends_with(&format!("auth={basic}"))),
        "{requests:#?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.contains("/manifests/v1") && r.ends_with("auth=Bearer token-for-tester")),
        "{requests:#?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.contains("/blobs/") && r.ends_with("auth=Bearer token-for-tester")),
        "{requests:#?}"
    );
}

#[test]
fn basic_auth_when_the_registry_asks_for_it() {
    let (dir, cache, registry, image) = setup();
    let proxy = AuthProxy::start(&registry.addr, AuthMode::Basic);
    let mut config = insecure(dir.path(), &[&proxy.addr, &registry.addr]);
    let target = reference(&format!("{}/{REPO}:v1", proxy.addr));

    let err = cache.pull(&target, &config).unwrap_err();
    assert!(matches!(err, ImageError::Unauthorized { .. }), "{err:?}");
    assert!(err.to_string().contains("docker login"), "{err}");

    config.docker_config = Some(docker_config_for(dir.path(), &proxy.addr));
    let pulled = cache.pull(&target, &config).unwrap();
    assert_eq!(pulled.digest, image.manifest.digest);
}

#[test]
fn an_insecure_registry_may_redirect_blobs_to_plain_http() {
    let (dir, cache, registry, _image) = setup();
    let proxy = AuthProxy::start(&registry.addr, AuthMode::Bearer);
    // The proxy is declared insecure, the registry it redirects blobs to is not: a redirect
    // from a plain-HTTP registry may stay on plain HTTP.
    let mut config = insecure(dir.path(), &[&proxy.addr]);
    config.docker_config = Some(docker_config_for(dir.path(), &proxy.addr));
    let pulled = cache
        .pull(&reference(&format!("{}/{REPO}:v1", proxy.addr)), &config)
        .unwrap();
    assert_eq!(tree(&pulled.rootfs), standard_tree());
}
