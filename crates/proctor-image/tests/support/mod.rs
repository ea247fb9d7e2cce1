//! Builds small OCI images for the tests, with the `tar`, `flate2` and `ruzstd` crates: layers,
//! configs, manifests, indexes, layout folders and archives. Nothing is downloaded.

#![allow(dead_code)]

pub mod registry;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use serde_json::{json, Value};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";

/// The time every test entry has.
pub const MTIME: u64 = 1_700_000_000;

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// This host's architecture in the OCI's names.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// An architecture that is not this host's.
pub fn other_arch() -> &'static str {
    if host_arch() == "s390x" {
        "amd64"
    } else {
        "s390x"
    }
}

/// A content-addressed blob.
#[derive(Debug, Clone)]
pub struct Blob {
    pub media_type: String,
    pub bytes: Vec<u8>,
    pub digest: String,
}

impl Blob {
    pub fn new(media_type: &str, bytes: Vec<u8>) -> Blob {
        Blob {
            media_type: media_type.to_string(),
            digest: sha256(&bytes),
            bytes,
        }
    }

    pub fn hex(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }

    /// Its descriptor, with a platform when given.
    pub fn descriptor(&self, platform: Option<(&str, &str)>) -> Value {
        let mut d = json!({
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.bytes.len(),
        });
        if let Some((os, arch)) = platform {
            d["platform"] = json!({"os": os, "architecture": arch});
        }
        d
    }
}

/// A tar layer under construction.
pub struct Layer {
    builder: tar::Builder<Vec<u8>>,
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_mtime(MTIME);
    h.set_uid(1000);
    h.set_gid(1000);
    h
}

impl Default for Layer {
    fn default() -> Self {
        Layer::new()
    }
}

impl Layer {
    pub fn new() -> Layer {
        Layer {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    pub fn dir(mut self, path: &str, mode: u32) -> Layer {
        let mut h = header(tar::EntryType::Directory, mode, 0);
        self.builder.append_data(&mut h, path, &[][..]).unwrap();
        self
    }

    pub fn file(mut self, path: &str, mode: u32, content: &[u8]) -> Layer {
        let mut h = header(tar::EntryType::Regular, mode, content.len() as u64);
        self.builder.append_data(&mut h, path, content).unwrap();
        self
    }

    pub fn symlink(mut self, path: &str, target: &str) -> Layer {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        self.builder.append_link(&mut h, path, target).unwrap();
        self
    }

    pub fn hardlink(mut self, path: &str, target: &str) -> Layer {
        let mut h = header(tar::EntryType::Link, 0o644, 0);
        self.builder.append_link(&mut h, path, target).unwrap();
        self
    }

    pub fn char_device(mut self, path: &str, major: u32, minor: u32) -> Layer {
        let mut h = header(tar::EntryType::Char, 0o666, 0);
        h.set_device_major(major).unwrap();
        h.set_device_minor(minor).unwrap();
        self.builder.append_data(&mut h, path, &[][..]).unwrap();
        self
    }

    pub fn fifo(mut self, path: &str) -> Layer {
        let mut h = header(tar::EntryType::Fifo, 0o644, 0);
        self.builder.append_data(&mut h, path, &[][..]).unwrap();
        self
    }

    /// A regular file whose name is written as is (the tar crate refuses `..` otherwise).
    pub fn raw_file(mut self, name: &[u8], content: &[u8]) -> Layer {
        let mut h = header(tar::EntryType::Regular, 0o644, content.len() as u64);
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_cksum();
        self.builder.append(&h, content).unwrap();
        self
    }

    /// The tar's bytes.
    pub fn tar(self) -> Vec<u8> {
        self.builder.into_inner().unwrap()
    }

    pub fn gzip(self) -> Blob {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&self.tar()).unwrap();
        Blob::new(LAYER_GZIP, encoder.finish().unwrap())
    }

    pub fn zstd(self) -> Blob {
        let bytes = ruzstd::encoding::compress_to_vec(
            &self.tar()[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        Blob::new(LAYER_ZSTD, bytes)
    }

    pub fn plain(self) -> Blob {
        Blob::new(LAYER_TAR, self.tar())
    }
}

/// The test image config for `arch`.
pub fn config(arch: &str) -> Blob {
    let value = json!({
        "architecture": arch,
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GREETING=hello=world"],
            "WorkingDir": "/data",
            "Entrypoint": ["/bin/busybox"],
            "Cmd": ["sh"],
            "User": "1000:1000"
        },
        "rootfs": {"type": "layers", "diff_ids": []}
    });
    Blob::new(OCI_CONFIG, serde_json::to_vec(&value).unwrap())
}

/// An image: config, layers, manifest.
#[derive(Debug, Clone)]
pub struct TestImage {
    pub config: Blob,
    pub layers: Vec<Blob>,
    pub manifest: Blob,
}

impl TestImage {
    pub fn new(config: Blob, layers: Vec<Blob>) -> TestImage {
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": config.descriptor(None),
            "layers": layers.iter().map(|l| l.descriptor(None)).collect::<Vec<_>>(),
        });
        let manifest = Blob::new(OCI_MANIFEST, serde_json::to_vec_pretty(&manifest).unwrap());
        TestImage {
            config,
            layers,
            manifest,
        }
    }

    pub fn blobs(&self) -> Vec<Blob> {
        let mut blobs = vec![self.manifest.clone(), self.config.clone()];
        blobs.extend(self.layers.iter().cloned());
        blobs
    }

    /// Writes an OCI layout whose index.json names this image (no platform).
    pub fn write_layout(&self, dir: &Path) {
        write_layout(dir, &self.blobs(), vec![self.manifest.descriptor(None)]);
    }

    /// Writes a tar of the layout to `path`.
    pub fn write_archive(&self, path: &Path) {
        let dir = tempfile::tempdir().unwrap();
        self.write_layout(dir.path());
        archive_folder(dir.path(), path);
    }
}

/// An index blob over `entries` (descriptors).
pub fn index(entries: Vec<Value>) -> Blob {
    let value = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
    Blob::new(OCI_INDEX, serde_json::to_vec(&value).unwrap())
}

/// Writes an OCI layout: `oci-layout`, `index.json` over `entries`, and `blobs`.
pub fn write_layout(dir: &Path, blobs: &[Blob], entries: Vec<Value>) {
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    fs::write(
        dir.join("oci-layout"),
        br#"{"imageLayoutVersion": "1.0.0"}"#,
    )
    .unwrap();
    let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    for blob in blobs {
        fs::write(dir.join("blobs/sha256").join(blob.hex()), &blob.bytes).unwrap();
    }
}

/// Tars the content of `dir` (names `./…`, as skopeo does) into `out`.
pub fn archive_folder(dir: &Path, out: &Path) {
    let file = fs::File::create(out).unwrap();
    let mut builder = tar::Builder::new(file);
    builder.append_dir_all(".", dir).unwrap();
    builder.into_inner().unwrap().sync_all().unwrap();
}

/// The bytes of `/bin/busybox` if it is installed (Debian's busybox-static), else a stand-in.
pub fn busybox() -> (Vec<u8>, bool) {
    match fs::read("/bin/busybox") {
        Ok(bytes) => (bytes, true),
        Err(_) => (b"#!/bin/sh\necho stand-in\n".to_vec(), false),
    }
}

/// The three-layer image most tests use, with what its root must look like.
///
/// 1. (gzip) folders, files of several modes, a setuid file, symbolic links (relative and
///    absolute), hard links, a device and a FIFO (skipped), a read-only folder, a sticky folder,
///    a file whose folders have no entries, and `/bin/busybox`.
/// 2. (plain tar) a whiteout of a file and of a folder, an opaque folder, a replaced file, a
///    file written through an absolute symbolic link.
/// 3. (zstd) a file then an opaque marker in the same folder (the file survives), a new file.
pub fn standard_image() -> TestImage {
    let (busybox, _) = busybox();
    let layer1 = Layer::new()
        .dir("bin", 0o755)
        .file("bin/busybox", 0o755, &busybox)
        .dir("etc", 0o755)
        .file("etc/hostname", 0o644, b"base\n")
        .hardlink("etc/hostname.hard", "etc/hostname")
        .symlink("etc/alias", "hostname")
        .file("etc/secret", 0o600, b"s")
        .dir("usr", 0o755)
        .dir("usr/bin", 0o755)
        .file("usr/bin/tool", 0o4755, b"#!/bin/sh\n")
        .hardlink("usr/bin/tool-link", "usr/bin/tool")
        .dir("usr/sbin", 0o755)
        .symlink("sbin", "/usr/sbin")
        .file("remove-me.txt", 0o644, b"x")
        .dir("gone", 0o755)
        .file("gone/f", 0o644, b"f")
        .dir("data", 0o755)
        .file("data/keep.txt", 0o644, b"keep")
        .dir("data/old", 0o755)
        .file("data/old/a.txt", 0o644, b"a")
        .file("data/old/b.txt", 0o644, b"b")
        .dir("data/mixed", 0o755)
        .file("data/mixed/x.txt", 0o644, b"x")
        .file("data/implicit/deep/file.txt", 0o644, b"deep")
        .dir("ro", 0o555)
        .file("ro/file", 0o444, b"ro")
        .dir("tmp", 0o1777)
        .dir("dev", 0o755)
        .char_device("dev/null", 1, 3)
        .dir("run", 0o755)
        .fifo("run/fifo")
        .gzip();
    let layer2 = Layer::new()
        .file(".wh.remove-me.txt", 0o644, b"")
        .file(".wh.gone", 0o644, b"")
        .file("data/old/.wh..wh..opq", 0o644, b"")
        .file("data/old/c.txt", 0o644, b"c")
        .file("etc/hostname", 0o644, b"layer2\n")
        .file("sbin/newtool", 0o755, b"new")
        .plain();
    let layer3 = Layer::new()
        .file("data/mixed/y.txt", 0o644, b"y")
        .file("data/mixed/.wh..wh..opq", 0o644, b"")
        .file("data/new.txt", 0o644, b"new")
        .zstd();
    TestImage::new(config(host_arch()), vec![layer1, layer2, layer3])
}

/// What the standard image's root must hold: path → description (see [`tree`]).
pub fn standard_tree() -> BTreeMap<String, String> {
    let (busybox, _) = busybox();
    let busybox = format!("file 755 {} bytes", busybox.len());
    [
        ("bin", "dir 755"),
        ("bin/busybox", busybox.as_str()),
        ("data", "dir 755"),
        ("data/implicit", "dir 755"),
        ("data/implicit/deep", "dir 755"),
        ("data/implicit/deep/file.txt", "file 644 \"deep\""),
        ("data/keep.txt", "file 644 \"keep\""),
        ("data/mixed", "dir 755"),
        ("data/mixed/y.txt", "file 644 \"y\""),
        ("data/new.txt", "file 644 \"new\""),
        ("data/old", "dir 755"),
        ("data/old/c.txt", "file 644 \"c\""),
        ("dev", "dir 755"),
        ("etc", "dir 755"),
        ("etc/alias", "link hostname"),
        ("etc/hostname", "file 644 \"layer2\\n\""),
        ("etc/hostname.hard", "file 644 \"base\\n\""),
        ("etc/secret", "file 600 \"s\""),
        ("ro", "dir 555"),
        ("ro/file", "file 444 \"ro\""),
        ("run", "dir 755"),
        ("sbin", "link /usr/sbin"),
        ("tmp", "dir 1777"),
        ("usr", "dir 755"),
        ("usr/bin", "dir 755"),
        ("usr/bin/tool", "file 755 \"#!/bin/sh\\n\""),
        ("usr/bin/tool-link", "file 755 \"#!/bin/sh\\n\""),
        ("usr/sbin", "dir 755"),
        ("usr/sbin/newtool", "file 755 \"new\""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Every entry under `root`: `dir MODE`, `file MODE "content"` (or `N bytes` past 64 bytes),
/// `link TARGET`, or `other`.
pub fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let description = if meta.file_type().is_symlink() {
            format!("link {}", fs::read_link(&path).unwrap().display())
        } else if meta.is_dir() {
            format!("dir {mode:o}")
        } else if meta.is_file() {
            let bytes = fs::read(&path).unwrap();
            match std::str::from_utf8(&bytes) {
                Ok(text) if bytes.len() <= 64 => format!("file {mode:o} {text:?}"),
                _ => format!("file {mode:o} {} bytes", bytes.len()),
            }
        } else {
            "other".to_string()
        };
        out.insert(rel, description);
        if meta.is_dir() {
            walk(root, &path, out);
        }
    }
}

/// Whether two paths are the same inode.
pub fn same_inode(a: &Path, b: &Path) -> bool {
    let (a, b) = (fs::metadata(a).unwrap(), fs::metadata(b).unwrap());
    a.ino() == b.ino() && a.dev() == b.dev()
}

/// The names in a folder, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A registry config that reads no credentials of the machine's.
pub fn no_credentials(dir: &Path) -> proctor_image::RegistryConfig {
    proctor_image::RegistryConfig {
        docker_config: Some(dir.join("no-docker-config.json")),
        ..Default::default()
    }
}
