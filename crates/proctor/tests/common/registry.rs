//! Images for tests: a busybox image written as an OCI layout, and Debian's `docker-registry`
//! on loopback to push it to.

use std::path::Path;
use std::process::Command;

/// Writes an OCI image layout at `dir` (and, with `archive`, a tar of it): one layer with
/// `/bin/busybox` and applet links, a static `/bin/bash`, `/etc/passwd`, a
/// `tool` script in `/usr/local/bin`, `/etc/os-release`,
/// `/app/from-image.txt`; a config with `WorkingDir = /app` and `PATH=/usr/local/bin:/bin`.
pub const MAKE_IMAGE: &str = r##"
import hashlib, io, json, os, sys, tarfile
out, archive = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
def blob(data):
    d = hashlib.sha256(data).hexdigest()
    os.makedirs(f"{out}/blobs/sha256", exist_ok=True)
    open(f"{out}/blobs/sha256/{d}", "wb").write(data)
    return {"digest": "sha256:" + d, "size": len(data)}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    def add(name, data=None, link=None, mode=0o644, kind=None):
        ti = tarfile.TarInfo(name)
        if kind == "dir":
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            t.addfile(ti); return
        if link:
            ti.type, ti.linkname = tarfile.SYMTYPE, link
            t.addfile(ti); return
        ti.size, ti.mode = len(data), mode
        t.addfile(ti, io.BytesIO(data))
    for d in ["bin", "etc", "app", "usr", "usr/local", "usr/local/bin"]:
        add(d, kind="dir")
    add("usr/local/bin/tool", b"#!/bin/sh\necho \"tool $*\"\n", mode=0o755)
    add("bin/busybox", open("/bin/busybox", "rb").read(), mode=0o755)
    for a in ["sh", "ls", "cat", "echo", "test", "grep", "pwd", "env", "mkdir", "rm", "head",
              "tail", "sed", "tr", "uname", "which", "id", "sleep", "cp", "mv", "touch", "printf",
              "wc", "dirname", "basename", "readlink", "ps", "kill", "date", "sort", "true",
              "httpd", "wget", "chown", "chmod", "stat", "tar", "setpriv", "su", "ln", "awk", "mktemp", "find"]:
        add("bin/" + a, link="busybox")
    # Debian's static bash (CLIs whose shell tool insists on bash), and the users a real image has.
    if os.path.exists("/bin/bash-static") and not os.environ.get("PROCTOR_TEST_IMAGE_NO_BASH"):
        add("bin/bash", open("/bin/bash-static", "rb").read(), mode=0o755)
    add("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n_apt:x:42:65534::/nonexistent:/bin/sh\n"
        b"dev:x:1000:1000:dev:/app:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")
    add("etc/group", b"root:x:0:\nadm:x:42:dev\ndev:x:1000:\nnogroup:x:65534:\n")
    add("etc/os-release", b"ID=proctor-busybox\n")
    add("app/from-image.txt", b"baked into the image\n")
    # What a debootstrap or umoci root carries in /dev (the device nodes themselves are never
    # unpacked), and the empty resolv.conf Docker leaves in an image.
    add("dev", kind="dir")
    for name, target in [("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                         ("ptmx", "pts/ptmx"), ("core", "/proc/kcore")]:
        add("dev/" + name, link=target)
    add("dev/pts", kind="dir")
    add("dev/shm", kind="dir")
    add("etc/resolv.conf", b"")
    add("srv", kind="dir")
    add("srv/index.html", b"served from the image\n")
layer = blob(buf.getvalue())
diff_id = "sha256:" + hashlib.sha256(__import__("gzip").decompress(buf.getvalue())).hexdigest()
config = blob(json.dumps({"architecture": "amd64", "os": "linux",
    "config": {"Env": ["PATH=/usr/local/bin:/bin", "FROM_IMAGE=yes"],
               "WorkingDir": os.environ.get("PROCTOR_TEST_IMAGE_WORKDIR", "/app")},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode())
manifest = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
    "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar+gzip")]}).encode())
json.dump({"schemaVersion": 2, "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json")]},
          open(f"{out}/index.json", "w"))
open(f"{out}/oci-layout", "w").write('{"imageLayoutVersion": "1.0.0"}')
if archive:
    with tarfile.open(archive, "w") as t:
        for name in ["oci-layout", "index.json", "blobs"]:
            t.add(f"{out}/{name}", arcname=name)
"##;

/// Pushes the OCI layout at `layout` to `registry` (plain HTTP) as `repo:tag`.
pub const PUSH: &str = r##"
import json, sys, urllib.request
layout, registry, repo, tag = sys.argv[1:5]
base = f"http://{registry}/v2/{repo}"
def put_blob(digest):
    data = open(f"{layout}/blobs/sha256/{digest.split(':')[1]}", "rb").read()
    r = urllib.request.urlopen(urllib.request.Request(f"{base}/blobs/uploads/", method="POST", data=b""))
    loc = r.headers["Location"]
    loc = loc if loc.startswith("http") else f"http://{registry}{loc}"
    sep = "&" if "?" in loc else "?"
    urllib.request.urlopen(urllib.request.Request(f"{loc}{sep}digest={digest}", method="PUT", data=data,
        headers={"Content-Type": "application/octet-stream"}))
index = json.load(open(f"{layout}/index.json"))
mdesc = index["manifests"][0]
manifest_bytes = open(f"{layout}/blobs/sha256/{mdesc['digest'].split(':')[1]}", "rb").read()
manifest = json.loads(manifest_bytes)
for d in [manifest["config"]] + manifest["layers"]:
    put_blob(d["digest"])
urllib.request.urlopen(urllib.request.Request(f"{base}/manifests/{tag}", method="PUT", data=manifest_bytes,
    headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}))
"##;

/// Debian's `docker-registry` on a free loopback port, storage in a temporary folder.
pub struct Registry {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts one (the test fails when Debian's registry is not installed).
    pub fn start() -> Registry {
        let bin = Path::new("/usr/bin/docker-registry");
        assert!(
            bin.exists(),
            "these tests need Debian's registry: apt-get install docker-registry"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n  secret: proctor-test\n",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the registry did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Registry {
            child,
            addr,
            _dir: dir,
        }
    }

    /// Pushes the OCI layout at `layout` as `REPO:TAG`.
    pub fn push(&self, layout: &Path, repo_tag: (&str, &str)) {
        let status = Command::new("python3")
            .arg("-c")
            .arg(PUSH)
            .arg(layout)
            .arg(&self.addr)
            .arg(repo_tag.0)
            .arg(repo_tag.1)
            .status()
            .unwrap();
        assert!(status.success(), "push failed");
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
