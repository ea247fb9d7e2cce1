//! Pulls from OCI layouts and archives built by the test itself: what is unpacked, verification,
//! unsafe layers, platforms, concurrency, listing and pruning.

mod support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use proctor_image::{ImageCache, ImageError, ImageRef};
use support::*;

fn layout_ref(dir: &Path) -> ImageRef {
    ImageRef::parse(&format!("oci:{}", dir.display())).unwrap()
}

fn archive_ref(path: &Path) -> ImageRef {
    ImageRef::parse(&format!("oci-archive:{}", path.display())).unwrap()
}

/// A fresh cache and a folder for inputs.
fn setup() -> (tempfile::TempDir, ImageCache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = ImageCache::open(dir.path().join("cache")).unwrap();
    (dir, cache)
}

#[test]
fn layout_pull_unpacks_exactly_the_expected_tree() {
    let (dir, cache) = setup();
    let image = standard_image();
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let reference = layout_ref(&layout);

    let pulled = cache.pull(&reference, &no_credentials(dir.path())).unwrap();

    assert_eq!(pulled.digest, image.manifest.digest);
    assert_eq!(pulled.reference, format!("oci:{}", layout.display()));
    assert_eq!(
        pulled.rootfs,
        cache
            .dir()
            .join("images")
            .join(image.manifest.hex())
            .join("rootfs")
    );
    assert_eq!(tree(&pulled.rootfs), standard_tree());

    // Hard links share the inode; a later layer's replacement of a linked file breaks the link.
    let root = &pulled.rootfs;
    assert!(same_inode(
        &root.join("usr/bin/tool"),
        &root.join("usr/bin/tool-link")
    ));
    assert!(!same_inode(
        &root.join("etc/hostname"),
        &root.join("etc/hostname.hard")
    ));
    // Times are kept; the unpacking user owns everything.
    let meta = fs::metadata(root.join("data/keep.txt")).unwrap();
    assert_eq!(meta.mtime() as u64, MTIME);
    assert_eq!(
        fs::metadata(root.join("data")).unwrap().mtime() as u64,
        MTIME
    );
    let me = fs::metadata(cache.dir()).unwrap().uid();
    assert_eq!(meta.uid(), me);

    // The config.
    let config = &pulled.config;
    assert_eq!(
        config.env,
        vec![
            (
                "PATH".to_string(),
                "/usr/sbin:/usr/bin:/sbin:/bin".to_string()
            ),
            ("GREETING".to_string(), "hello=world".to_string()),
        ]
    );
    assert_eq!(config.working_dir.as_deref(), Some("/data"));
    assert_eq!(config.entrypoint, vec!["/bin/busybox"]);
    assert_eq!(config.cmd, vec!["sh"]);
    assert_eq!(config.user.as_deref(), Some("1000:1000"));
    assert_eq!(
        (config.os.as_str(), config.architecture.as_str()),
        ("linux", host_arch())
    );

    // What was skipped and applied.
    assert_eq!(pulled.unpack.skipped_devices, 1);
    assert_eq!(pulled.unpack.skipped_fifos, 1);
    assert_eq!(pulled.unpack.whiteouts, 4);
    assert_eq!(pulled.unpack.hard_links, 2);

    // The cache's layout.
    let image_dir = cache.dir().join("images").join(image.manifest.hex());
    assert_eq!(
        names(&image_dir),
        vec!["config.json", "image.json", "rootfs"]
    );
    assert_eq!(
        fs::read(image_dir.join("config.json")).unwrap(),
        image.config.bytes
    );
    let mut blob_names: Vec<String> = image.blobs().iter().map(|b| b.hex().to_string()).collect();
    blob_names.sort();
    assert_eq!(names(&cache.dir().join("blobs/sha256")), blob_names);
    assert!(names(&cache.dir().join("tmp")).is_empty());
    assert_eq!(names(&cache.dir().join("refs")).len(), 1);

    // The busybox of the first layer runs (when Debian's busybox-static is installed).
    if busybox().1 {
        let out = Command::new(root.join("bin/busybox"))
            .args(["echo", "hello from the image"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello from the image\n"
        );
    }

    // A second pull finds the image unpacked and gives the same.
    let again = cache.pull(&reference, &no_credentials(dir.path())).unwrap();
    assert_eq!(again, pulled);
}

#[test]
fn archive_pull_gives_the_same_image_and_both_references_are_listed() {
    let (dir, cache) = setup();
    let image = standard_image();
    let archive = dir.path().join("image.tar");
    image.write_archive(&archive);
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let config = no_credentials(dir.path());

    let from_archive = cache.pull(&archive_ref(&archive), &config).unwrap();
    assert_eq!(from_archive.digest, image.manifest.digest);
    assert_eq!(tree(&from_archive.rootfs), standard_tree());
    let from_layout = cache.pull(&layout_ref(&layout), &config).unwrap();
    assert_eq!(from_layout.rootfs, from_archive.rootfs);

    let listed = cache.list().unwrap();
    assert_eq!(listed.len(), 1);
    let entry = &listed[0];
    assert_eq!(entry.digest, image.manifest.digest);
    let mut expected_refs = vec![
        format!("oci-archive:{}", archive.display()),
        format!("oci:{}", layout.display()),
    ];
    expected_refs.sort();
    assert_eq!(entry.references, expected_refs);
    assert!(entry.size_bytes > 0);
    assert_eq!(entry.unpacked_at.len(), 20, "{}", entry.unpacked_at);
    assert!(entry.unpacked_at.ends_with('Z'));

    let got = cache.get(&image.manifest.digest).unwrap().unwrap();
    assert_eq!(got.rootfs, from_archive.rootfs);
    assert_eq!(got.config, from_archive.config);
    assert!(cache
        .get(&format!("sha256:{}", "0".repeat(64)))
        .unwrap()
        .is_none());
}

#[test]
fn gzip_compressed_archive_is_read() {
    let (dir, cache) = setup();
    let image = standard_image();
    let plain = dir.path().join("image.tar");
    image.write_archive(&plain);
    let gz = dir.path().join("image.tar.gz");
    let mut encoder =
        flate2::write::GzEncoder::new(fs::File::create(&gz).unwrap(), flate2::Compression::fast());
    std::io::copy(&mut fs::File::open(&plain).unwrap(), &mut encoder).unwrap();
    encoder.finish().unwrap();
    let pulled = cache
        .pull(&archive_ref(&gz), &no_credentials(dir.path()))
        .unwrap();
    assert_eq!(tree(&pulled.rootfs), standard_tree());
}

#[test]
fn resolve_digest_does_not_unpack() {
    let (dir, cache) = setup();
    let image = standard_image();
    let archive = dir.path().join("image.tar");
    image.write_archive(&archive);
    let digest = cache
        .resolve_digest(&archive_ref(&archive), &no_credentials(dir.path()))
        .unwrap();
    assert_eq!(digest, image.manifest.digest);
    assert!(names(&cache.dir().join("images")).is_empty());
    assert!(cache.list().unwrap().is_empty());
}

#[test]
fn corrupted_layer_is_a_digest_mismatch_and_leaves_no_image() {
    let (dir, cache) = setup();
    let image = standard_image();
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let layer = &image.layers[0];
    let path = layout.join("blobs/sha256").join(layer.hex());
    let mut bytes = fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&path, &bytes).unwrap();

    let err = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap_err();
    match &err {
        ImageError::DigestMismatch {
            expected, actual, ..
        } => {
            assert_eq!(expected, &layer.digest);
            assert_eq!(actual, &sha256(&bytes));
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    assert!(names(&cache.dir().join("images")).is_empty());
    assert!(names(&cache.dir().join("tmp")).is_empty());
    assert!(!cache.dir().join("blobs/sha256").join(layer.hex()).exists());
    assert!(cache.list().unwrap().is_empty());
}

#[test]
fn corrupted_manifest_is_a_digest_mismatch() {
    let (dir, cache) = setup();
    let image = standard_image();
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let path = layout.join("blobs/sha256").join(image.manifest.hex());
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"schemaVersion\": 2", "\"schemaVersion\":2");
    fs::write(&path, text).unwrap();
    let err = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap_err();
    assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err:?}");
    assert!(names(&cache.dir().join("images")).is_empty());
}

#[test]
fn a_missing_blob_is_not_found() {
    let (dir, cache) = setup();
    let image = standard_image();
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    fs::remove_file(layout.join("blobs/sha256").join(image.layers[2].hex())).unwrap();
    let err = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains(&image.layers[2].digest), "{err}");
    assert!(names(&cache.dir().join("images")).is_empty());
}

/// Pulls a one-layer image whose layer is `layer`; gives the error and the cache.
fn pull_layers(
    layers: Vec<support::Blob>,
) -> (
    tempfile::TempDir,
    ImageCache,
    Result<proctor_image::Image, ImageError>,
) {
    let (dir, cache) = setup();
    let image = TestImage::new(config(host_arch()), layers);
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let result = cache.pull(&layout_ref(&layout), &no_credentials(dir.path()));
    (dir, cache, result)
}

fn expect_bad_layer(result: Result<proctor_image::Image, ImageError>, layer: &str, entry: &str) {
    match result {
        Err(ImageError::BadLayer {
            layer: l,
            entry: e,
            problem,
        }) => {
            assert_eq!(l, layer);
            assert_eq!(e, entry, "problem: {problem}");
        }
        other => panic!("expected BadLayer, got {other:?}"),
    }
}

#[test]
fn dot_dot_entry_is_a_bad_layer() {
    let layer = Layer::new()
        .file("ok.txt", 0o644, b"ok")
        .raw_file(b"../evil", b"evil")
        .gzip();
    let digest = layer.digest.clone();
    let (dir, cache, result) = pull_layers(vec![layer]);
    let text = format!("{:?}", result.as_ref().err());
    expect_bad_layer(result, &digest, "../evil");
    assert!(text.contains(".."), "{text}");
    assert!(!cache.dir().join("tmp/evil").exists());
    assert!(!dir.path().join("evil").exists());
    assert!(names(&cache.dir().join("images")).is_empty());
    assert!(names(&cache.dir().join("tmp")).is_empty());
}

#[test]
fn entry_through_an_escaping_symlink_of_a_lower_layer_is_a_bad_layer() {
    let lower = Layer::new().symlink("escape", "../../../../../..").gzip();
    let upper = Layer::new().file("escape/pwned", 0o644, b"pwned").plain();
    let digest = upper.digest.clone();
    let (dir, cache, result) = pull_layers(vec![lower, upper]);
    expect_bad_layer(result, &digest, "escape/pwned");
    assert!(!dir.path().join("pwned").exists());
    assert!(!Path::new("/pwned").exists());
    assert!(names(&cache.dir().join("images")).is_empty());
}

#[test]
fn entry_through_an_escaping_symlink_of_the_same_layer_is_a_bad_layer() {
    let layer = Layer::new()
        .dir("a", 0o755)
        .symlink("a/up", "../..")
        .file("a/up/x", 0o644, b"x")
        .gzip();
    let digest = layer.digest.clone();
    let (_dir, _cache, result) = pull_layers(vec![layer]);
    expect_bad_layer(result, &digest, "a/up/x");
}

#[test]
fn hard_link_out_of_the_root_is_a_bad_layer() {
    let layer = Layer::new()
        .hardlink("passwd", "../../../../etc/passwd")
        .gzip();
    let digest = layer.digest.clone();
    let (_dir, _cache, result) = pull_layers(vec![layer]);
    expect_bad_layer(result, &digest, "passwd");

    let layer = Layer::new().hardlink("nothing", "not/there").gzip();
    let digest = layer.digest.clone();
    let (_dir, _cache, result) = pull_layers(vec![layer]);
    expect_bad_layer(result, &digest, "nothing");
}

#[test]
fn absolute_symlinks_are_followed_inside_the_root() {
    let lower = Layer::new()
        .dir("real", 0o755)
        .symlink("abs", "/real")
        .symlink("rel", "real/../real")
        .gzip();
    let upper = Layer::new()
        .file("abs/one", 0o644, b"1")
        .file("rel/two", 0o644, b"2")
        .file("abs/.wh.one", 0o644, b"")
        .plain();
    let (_dir, _cache, result) = pull_layers(vec![lower, upper]);
    let image = result.unwrap();
    let t = tree(&image.rootfs);
    assert_eq!(
        t.get("real/two").map(String::as_str),
        Some("file 644 \"2\"")
    );
    // The whiteout in the same layer as `one` does not delete it.
    assert_eq!(
        t.get("real/one").map(String::as_str),
        Some("file 644 \"1\"")
    );
    assert_eq!(t.get("abs").map(String::as_str), Some("link /real"));
}

#[test]
fn replacing_kinds_across_layers() {
    let lower = Layer::new()
        .dir("d", 0o755)
        .file("d/f", 0o644, b"f")
        .file("f", 0o644, b"file")
        .symlink("l", "d")
        .gzip();
    let upper = Layer::new()
        .file("d", 0o600, b"now a file")
        .dir("f", 0o700)
        .dir("l", 0o755)
        .file("l/in", 0o644, b"in")
        .plain();
    let (_dir, _cache, result) = pull_layers(vec![lower, upper]);
    let t = tree(&result.unwrap().rootfs);
    let expected: Vec<(&str, &str)> = vec![
        ("d", "file 600 \"now a file\""),
        ("f", "dir 700"),
        ("l", "dir 755"),
        ("l/in", "file 644 \"in\""),
    ];
    let expected: std::collections::BTreeMap<String, String> = expected
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(t, expected);
}

#[test]
fn unsupported_layer_media_type_is_refused_before_fetching() {
    let mut layer = Layer::new().file("a", 0o644, b"a").plain();
    layer.media_type = "application/vnd.oci.image.layer.v1.tar+bzip2".into();
    let (_dir, cache, result) = pull_layers(vec![layer]);
    match result {
        Err(ImageError::UnsupportedMediaType { media_type, .. }) => {
            assert_eq!(media_type, "application/vnd.oci.image.layer.v1.tar+bzip2")
        }
        other => panic!("expected UnsupportedMediaType, got {other:?}"),
    }
    assert!(names(&cache.dir().join("images")).is_empty());
}

#[test]
fn an_image_for_another_architecture_is_wrong_platform() {
    let (dir, cache) = setup();
    let image = TestImage::new(
        config(other_arch()),
        vec![Layer::new().file("a", 0o644, b"a").gzip()],
    );
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let err = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap_err();
    let text = err.to_string();
    match &err {
        ImageError::WrongPlatform {
            os,
            arch,
            available,
            ..
        } => {
            assert_eq!((os.as_str(), arch.as_str()), ("linux", host_arch()));
            assert_eq!(available, &vec![format!("linux/{}", other_arch())]);
        }
        other => panic!("expected WrongPlatform, got {other:?}"),
    }
    assert!(
        text.contains(host_arch()) && text.contains(other_arch()),
        "{text}"
    );
    assert!(names(&cache.dir().join("images")).is_empty());
}

#[test]
fn an_index_picks_this_hosts_image() {
    let (dir, cache) = setup();
    let ours = standard_image();
    let theirs = TestImage::new(
        config(other_arch()),
        vec![Layer::new().file("theirs", 0o644, b"t").gzip()],
    );
    let nested = index(vec![
        theirs.manifest.descriptor(Some(("linux", other_arch()))),
        ours.manifest.descriptor(Some(("linux", host_arch()))),
    ]);
    let mut blobs = ours.blobs();
    blobs.extend(theirs.blobs());
    blobs.push(nested.clone());
    let layout = dir.path().join("layout");
    write_layout(&layout, &blobs, vec![nested.descriptor(None)]);

    let pulled = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap();
    assert_eq!(pulled.digest, ours.manifest.digest);
    assert_eq!(tree(&pulled.rootfs), standard_tree());
    // Only this host's blobs were fetched.
    assert!(!cache
        .dir()
        .join("blobs/sha256")
        .join(theirs.layers[0].hex())
        .exists());
}

#[test]
fn an_index_without_this_hosts_platform_is_wrong_platform() {
    let (dir, cache) = setup();
    let theirs = TestImage::new(
        config(other_arch()),
        vec![Layer::new().file("theirs", 0o644, b"t").gzip()],
    );
    let layout = dir.path().join("layout");
    write_layout(
        &layout,
        &theirs.blobs(),
        vec![
            theirs.manifest.descriptor(Some(("linux", other_arch()))),
            theirs.manifest.descriptor(Some(("windows", host_arch()))),
        ],
    );
    let err = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap_err();
    match err {
        ImageError::WrongPlatform { available, .. } => assert_eq!(
            available,
            vec![
                format!("linux/{}", other_arch()),
                format!("windows/{}", host_arch())
            ]
        ),
        other => panic!("expected WrongPlatform, got {other:?}"),
    }
}

#[test]
fn not_a_layout_says_what_it_needs() {
    let (dir, cache) = setup();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let err = cache
        .pull(&layout_ref(&empty), &no_credentials(dir.path()))
        .unwrap_err();
    assert!(err.to_string().contains("oci-layout"), "{err}");
    let err = cache
        .pull(
            &layout_ref(&dir.path().join("missing")),
            &no_credentials(dir.path()),
        )
        .unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err:?}");
    let err = cache
        .pull(
            &archive_ref(&dir.path().join("missing.tar")),
            &no_credentials(dir.path()),
        )
        .unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err:?}");
}

#[test]
fn concurrent_pulls_from_threads_unpack_once() {
    let (dir, cache) = setup();
    let image = standard_image();
    let archive = dir.path().join("image.tar");
    image.write_archive(&archive);
    let reference = archive_ref(&archive);
    let config = no_credentials(dir.path());
    let cache_dir = cache.dir().to_path_buf();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (reference, config, cache_dir) = (&reference, &config, &cache_dir);
                s.spawn(move || {
                    // Each thread opens its own handle, as separate processes would.
                    ImageCache::open(cache_dir).unwrap().pull(reference, config)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in &results {
        let pulled = result.as_ref().unwrap();
        assert_eq!(pulled.digest, image.manifest.digest);
    }
    assert_eq!(
        names(&cache.dir().join("images")),
        vec![image.manifest.hex().to_string()]
    );
    assert!(names(&cache.dir().join("tmp")).is_empty());
    assert_eq!(tree(&results[0].as_ref().unwrap().rootfs), standard_tree());
}

/// Run by `concurrent_pulls_from_processes` in child processes; does nothing otherwise.
#[test]
fn child_process_pull() {
    let (Some(cache_dir), Some(reference)) = (
        std::env::var_os("PROCTOR_IMAGE_TEST_CACHE"),
        std::env::var("PROCTOR_IMAGE_TEST_REF").ok(),
    ) else {
        return;
    };
    let cache = ImageCache::open(PathBuf::from(cache_dir)).unwrap();
    let reference = ImageRef::parse(&reference).unwrap();
    let config = proctor_image::RegistryConfig {
        docker_config: Some("/nonexistent/proctor-test/config.json".into()),
        ..Default::default()
    };
    let image = cache.pull(&reference, &config).unwrap();
    println!("PULLED {}", image.digest);
}

#[test]
fn concurrent_pulls_from_processes_unpack_once() {
    let (dir, cache) = setup();
    let image = standard_image();
    let archive = dir.path().join("image.tar");
    image.write_archive(&archive);
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_process_pull",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("PROCTOR_IMAGE_TEST_CACHE", cache.dir())
                .env(
                    "PROCTOR_IMAGE_TEST_REF",
                    format!("oci-archive:{}", archive.display()),
                )
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("PULLED {}", image.manifest.digest)),
            "{stdout}"
        );
    }
    assert_eq!(
        names(&cache.dir().join("images")),
        vec![image.manifest.hex().to_string()]
    );
    assert!(names(&cache.dir().join("tmp")).is_empty());
}

#[test]
fn prune_removes_images_blobs_refs_and_leftovers() {
    let (dir, cache) = setup();
    let image = standard_image();
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    let pulled = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap();
    // The image has a read-only folder, and a crashed pull left a read-only folder in tmp/.
    assert_eq!(
        fs::metadata(pulled.rootfs.join("ro"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o555
    );
    let leftover = cache.dir().join("tmp/image-crashed/rootfs/locked");
    fs::create_dir_all(&leftover).unwrap();
    fs::set_permissions(&leftover, fs::Permissions::from_mode(0o500)).unwrap();

    let kept = cache.prune(|_| true).unwrap();
    assert!(kept.removed_images.is_empty());
    assert_eq!(kept.removed_blobs, 0);
    assert!(pulled.rootfs.is_dir());
    assert!(names(&cache.dir().join("tmp")).is_empty());

    let report = cache
        .prune(|img| img.digest != image.manifest.digest)
        .unwrap();
    assert_eq!(report.removed_images, vec![image.manifest.digest.clone()]);
    assert_eq!(report.removed_blobs, image.blobs().len() as u64);
    assert!(report.freed_bytes > 0);
    assert!(!pulled.rootfs.exists());
    assert!(names(&cache.dir().join("images")).is_empty());
    assert!(names(&cache.dir().join("blobs/sha256")).is_empty());
    assert!(names(&cache.dir().join("refs")).is_empty());
    assert!(names(&cache.dir().join("tmp")).is_empty());
    assert!(cache.list().unwrap().is_empty());

    // It can be pulled again.
    let again = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap();
    assert_eq!(tree(&again.rootfs), standard_tree());
}

#[test]
fn prune_keeps_blobs_shared_with_a_kept_image() {
    let (dir, cache) = setup();
    let shared = Layer::new().file("shared", 0o644, b"s").gzip();
    let a = TestImage::new(
        config(host_arch()),
        vec![shared.clone(), Layer::new().file("a", 0o644, b"a").plain()],
    );
    let b = TestImage::new(
        config(host_arch()),
        vec![shared.clone(), Layer::new().file("b", 0o644, b"b").plain()],
    );
    let (la, lb) = (dir.path().join("a"), dir.path().join("b"));
    a.write_layout(&la);
    b.write_layout(&lb);
    let config = no_credentials(dir.path());
    cache.pull(&layout_ref(&la), &config).unwrap();
    cache.pull(&layout_ref(&lb), &config).unwrap();
    let report = cache.prune(|img| img.digest == b.manifest.digest).unwrap();
    assert_eq!(report.removed_images, vec![a.manifest.digest.clone()]);
    // a's manifest and its own layer go; the config and the shared layer stay.
    assert_eq!(report.removed_blobs, 2);
    let blobs = names(&cache.dir().join("blobs/sha256"));
    assert!(blobs.contains(&shared.hex().to_string()));
    assert!(blobs.contains(&b.layers[1].hex().to_string()));
    assert!(!blobs.contains(&a.layers[1].hex().to_string()));
    let listed = cache.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].references, vec![format!("oci:{}", lb.display())]);
}

#[test]
fn relative_paths_resolve_against_a_base_folder() {
    let (dir, cache) = setup();
    let image = standard_image();
    image.write_archive(&dir.path().join("image.tar"));
    let reference = ImageRef::parse("oci-archive:image.tar")
        .unwrap()
        .resolve_against(dir.path());
    let pulled = cache.pull(&reference, &no_credentials(dir.path())).unwrap();
    assert_eq!(pulled.digest, image.manifest.digest);
    assert_eq!(
        pulled.reference,
        format!("oci-archive:{}", dir.path().join("image.tar").display())
    );
}

#[test]
fn what_a_crashed_pull_left_is_never_used_and_is_cleaned_up() {
    let (dir, cache) = setup();
    let image = standard_image();
    let layout = dir.path().join("layout");
    image.write_layout(&layout);
    // A pull that died while unpacking this very image, leaving a read-only folder.
    let crashed = cache
        .dir()
        .join("tmp")
        .join(format!("image-{}-1-2-3", image.manifest.hex()));
    fs::create_dir_all(crashed.join("rootfs/half")).unwrap();
    fs::set_permissions(crashed.join("rootfs"), fs::Permissions::from_mode(0o555)).unwrap();
    assert!(cache.list().unwrap().is_empty());
    assert!(cache.get(&image.manifest.digest).unwrap().is_none());

    let pulled = cache
        .pull(&layout_ref(&layout), &no_credentials(dir.path()))
        .unwrap();
    assert_eq!(tree(&pulled.rootfs), standard_tree());
    assert!(names(&cache.dir().join("tmp")).is_empty());
}
