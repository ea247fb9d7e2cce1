//! Images built from Dockerfiles, through the real binary with Debian's real `buildah` and a
//! real Debian `docker-registry` on loopback acting as the mirror of `docker.io`: `proctor
//! images build` (built, then a cache hit that runs no builder; the base image recorded under
//! its own name and digest although it came from the mirror), and Harbor tasks whose
//! Dockerfiles `FROM busybox` with `RUN` and `COPY`, imported (built at import), passing
//! `validate --oracle` with their own solutions while the null agent fails them. A build that
//! fails skips its task with the builder's error; with no builder on `PATH` the error names the
//! three builders.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::lab::{As, Lab};
use common::registry::{Registry, MAKE_IMAGE};

/// Whether Debian's buildah is installed; if not, the test is skipped (a failure under CI).
fn have_buildah() -> bool {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("buildah").is_file());
    if !found {
        common::skip("buildah is not installed (apt-get install buildah)");
    }
    found
}

/// A registry holding the test's busybox image as `library/busybox:latest`, and a config that
/// makes it the mirror of `docker.io` (and reaches it over plain HTTP). Gives the registry, the
/// config file and the pushed manifest's digest.
fn mirror(lab: &Lab) -> (Registry, PathBuf, String) {
    let registry = Registry::start();
    let layout = lab.root.join("busybox-layout");
    let status = Command::new("python3")
        .arg("-c")
        .arg(MAKE_IMAGE)
        .arg(&layout)
        .status()
        .unwrap();
    assert!(status.success());
    registry.push(&layout, ("library/busybox", "latest"));
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(layout.join("index.json")).unwrap()).unwrap();
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let config = lab.root.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[registries.\"{0}\"]\ninsecure = true\n\n[registries.\"docker.io\"]\nmirrors = [\"{0}\"]\n",
            registry.addr
        ),
    )
    .unwrap();
    (registry, config, digest)
}

/// Writes `files` (path, text) under `dir`.
fn write_all(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// An empty folder to be the whole `PATH`: no builder can be found there.
fn empty_path(lab: &Lab) -> String {
    let dir = lab.root.join("empty-path");
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_str().unwrap().to_string()
}

#[test]
fn images_build_builds_through_the_mirror_then_hits_the_cache_without_a_builder() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-cli");
    let (registry, config, busybox_digest) = mirror(&lab);
    let ctx = lab.root.join("ctx");
    write_build_context(&ctx);
    let cache = lab.root.join("image-cache");
    // Relative paths (proctor runs in the lab's folder): the builder is given absolute ones.
    let args = [
        "images",
        "build",
        "ctx",
        "--image-cache",
        "image-cache",
        "--config",
        config.to_str().unwrap(),
    ];
    let line = assert_first_build_through_the_mirror(&lab, &args, &cache, &busybox_digest);
    assert_again_a_cache_hit_without_a_builder(&lab, &args, &line);
    assert_a_changed_byte_is_a_new_build(&lab, &args, &ctx, &line);
    assert_from_the_local_registry_by_name(&lab, &args, &registry.addr, &busybox_digest);
    assert_prune_takes_the_builds(&lab, &args, &cache);
}

/// A build context in `ctx`: a Dockerfile FROM busybox that runs a command and copies a file.
fn write_build_context(ctx: &Path) {
    write_all(
        ctx,
        &[
            (
                "Dockerfile",
                "FROM busybox\nRUN mkdir -p /app && echo built-by-run > /app/run.txt\nCOPY data.txt /app/data.txt\nWORKDIR /app\n",
            ),
            ("data.txt", "copied\n"),
        ],
    );
}

/// The first `images build` (ARGS) builds with buildah, its base from the mirror recorded under
/// its own name and digest; the image holds what the Dockerfile made; the build's log, record
/// and registries.conf are kept (as root, buildah's blob-info cache under the image cache).
/// Gives the line it printed.
fn assert_first_build_through_the_mirror(
    lab: &Lab,
    args: &[&str],
    cache: &Path,
    busybox_digest: &str,
) -> String {
    let first = lab.proctor(As::Me, args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stderr.contains("built with buildah in"),
        "{}",
        first.stderr
    );
    // The base image came from the mirror, and is recorded under its own name and digest.
    assert!(
        first.stderr.contains(&format!(
            "FROM docker.io/library/busybox:latest ({busybox_digest})"
        )),
        "{}",
        first.stderr
    );
    let line = first.stdout.lines().next().unwrap().to_string();
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(fields.len(), 3, "{line}");
    assert!(fields[0].starts_with("oci-archive:"), "{line}");
    let rootfs = lab.root.join(fields[2]);
    assert_eq!(
        std::fs::read_to_string(rootfs.join("app/run.txt")).unwrap(),
        "built-by-run\n"
    );
    assert_eq!(
        std::fs::read_to_string(rootfs.join("app/data.txt")).unwrap(),
        "copied\n"
    );
    let build_dir = Path::new(fields[0].trim_start_matches("oci-archive:"))
        .parent()
        .unwrap()
        .to_path_buf();
    let log = std::fs::read_to_string(build_dir.join("build.log")).unwrap();
    assert!(log.contains("RUN mkdir -p /app"), "{log}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(build_dir.join("build.json")).unwrap())
            .unwrap();
    assert_eq!(record["base"]["digest"], busybox_digest, "{record:#}");
    assert_eq!(record["digest"], fields[1], "{record:#}");
    // As root, buildah's blob-info cache (which it would keep in /var/lib/containers) is under
    // the image cache.
    if common::lab::is_root() {
        assert!(
            cache
                .join("build/var-lib/containers/cache/blob-info-cache-v1.boltdb")
                .is_file(),
            "buildah's blob-info cache is not under the image cache"
        );
    }
    // The registries.conf the builder read sends docker.io to the mirror.
    let conf = std::fs::read_to_string(build_dir.join("registries.conf")).unwrap();
    assert!(conf.contains("prefix = \"docker.io\""), "{conf}");

    line
}

/// Again, with no builder on PATH: a cache hit, the same image (`line`), and no builder needed.
fn assert_again_a_cache_hit_without_a_builder(lab: &Lab, args: &[&str], line: &str) {
    let second = lab.proctor_env(As::Me, args, &[("PATH", &empty_path(lab))]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(second.stderr.contains("cache hit"), "{}", second.stderr);
    assert!(!second.stderr.contains("building"), "{}", second.stderr);
    assert_eq!(second.stdout.lines().next().unwrap(), line);
}

/// One changed byte of the context (`ctx`) is a new build.
fn assert_a_changed_byte_is_a_new_build(lab: &Lab, args: &[&str], ctx: &Path, line: &str) {
    std::fs::write(ctx.join("data.txt"), "copied!\n").unwrap();
    let third = lab.proctor(As::Me, args);
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert!(
        third.stderr.contains("built with buildah"),
        "{}",
        third.stderr
    );
    assert_ne!(third.stdout.lines().next().unwrap(), line);
}

/// FROM the insecure local registry (at `registry`) by its own name (no mirror involved).
fn assert_from_the_local_registry_by_name(
    lab: &Lab,
    args: &[&str],
    registry: &str,
    busybox_digest: &str,
) {
    std::fs::write(
        lab.root.join("Dockerfile.direct"),
        format!(
            "FROM {}/library/busybox:latest\nRUN echo direct > /direct.txt\n",
            registry
        ),
    )
    .unwrap();
    let mut direct = args.to_vec();
    direct.extend(["-f", "Dockerfile.direct"]);
    let out = lab.proctor(As::Me, &direct);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "FROM {}/library/busybox:latest ({busybox_digest})",
            registry
        )),
        "{}",
        out.stderr
    );
    let rootfs = lab.root.join(
        out.stdout
            .lines()
            .next()
            .unwrap()
            .split('\t')
            .nth(2)
            .unwrap(),
    );
    assert_eq!(
        std::fs::read_to_string(rootfs.join("direct.txt")).unwrap(),
        "direct\n"
    );
}

/// Prune takes the builds with their images, and the builder's store; the next build runs the
/// builder again.
fn assert_prune_takes_the_builds(lab: &Lab, args: &[&str], cache: &Path) {
    let prune = lab.proctor(
        As::Me,
        &["images", "prune", "--image-cache", cache.to_str().unwrap()],
    );
    assert_eq!(prune.code, 0, "{}", prune.stderr);
    assert!(
        prune
            .stderr
            // 10 blobs: 3 manifests, 3 configs, busybox's layer and each build's own.
            .contains("removed 3 image(s), 10 blob(s) and 3 build(s); kept 0"),
        "{}",
        prune.stderr
    );
    assert_eq!(std::fs::read_dir(cache.join("builds")).unwrap().count(), 0);
    assert!(!cache.join("build").exists());
    let after = lab.proctor(As::Me, args);
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert!(
        after.stderr.contains("built with buildah"),
        "{}",
        after.stderr
    );
}

#[test]
fn no_builder_on_path_is_a_clear_error() {
    let lab = Lab::new("build-none");
    let ctx = lab.root.join("ctx");
    write_all(&ctx, &[("Dockerfile", "FROM busybox\nRUN true\n")]);
    let cache = lab.root.join("image-cache");
    let out = lab.proctor_env(
        As::Me,
        &[
            "images",
            "build",
            ctx.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
        ],
        &[("PATH", &empty_path(&lab))],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("no image builder found: proctor builds images with buildah, podman or docker, and none of them is on PATH"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("apt-get install buildah"),
        "{}",
        out.stderr
    );
    // A missing Dockerfile is said as such.
    let out = lab.proctor(
        As::Me,
        &[
            "images",
            "build",
            lab.root.to_str().unwrap(),
            "-f",
            "nope/Dockerfile",
            "--image-cache",
            cache.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot read the Dockerfile"),
        "{}",
        out.stderr
    );
}

/// A Harbor task folder: `task.toml` (no docker_image), `instruction.md`, `environment/`,
/// `tests/test.sh` (writes the reward from `check`, a shell condition) and `solution/solve.sh`.
fn harbor_task(dir: &Path, prompt: &str, env: &[(&str, &str)], check: &str, solve: &str) {
    write_all(
        dir,
        &[
            (
                "task.toml",
                "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n",
            ),
            ("instruction.md", prompt),
            (
                "tests/test.sh",
                &format!(
                    "#!/bin/sh\nmkdir -p /logs/verifier\nif {check}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
                ),
            ),
            ("solution/solve.sh", &format!("#!/bin/sh\n{solve}\n")),
        ],
    );
    for (rel, text) in env {
        write_all(&dir.join("environment"), &[(rel, text)]);
    }
}

const APP_DOCKERFILE: &str = "FROM busybox\nRUN mkdir -p /app && echo 21 > /app/seed.txt\nCOPY data.txt /app/data.txt\nWORKDIR /app\n";

#[test]
fn imported_harbor_tasks_are_built_and_pass_their_oracle_while_the_null_agent_fails() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-import");
    let (_registry, config, _) = mirror(&lab);
    let tasks = lab.root.join("tasks");
    write_tasks_to_build(&tasks);
    let cache = lab.root.join("image-cache");
    let suite = lab.root.join("imported");
    let import = |out: &Path, env: &[(&str, &str)]| {
        lab.proctor_env(
            As::Me,
            &[
                "import",
                "harbor",
                tasks.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--image-cache",
                cache.to_str().unwrap(),
                "--config",
                config.to_str().unwrap(),
            ],
            env,
        )
    };
    let out = import(&suite, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_each_build_reported(&out.stderr);
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    assert!(
        toml.contains("image = \"oci-archive:images/add-up.tar\""),
        "{toml}"
    );
    assert!(toml.contains("image = \"busybox\""), "{toml}");
    assert!(toml.contains("workdir = \"/srv\""), "{toml}");
    assert!(toml.contains("GREETING = \"hello there\""), "{toml}");
    assert_every_built_task_passes_its_oracle(&lab, &suite, &config, &toml);
    // Imported again with no builder on PATH: every built image is a cache hit (no builder
    // call), and the failed one, which is never cached, now says no builder was found.
    let again = lab.root.join("imported-again");
    let out = import(&again, &[("PATH", &empty_path(&lab))]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("images from Dockerfiles: 0 built (0.0 s, 0.0 s per build), 3 cache hit(s)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("no image builder found"),
        "{}",
        out.stderr
    );
}

/// Harbor tasks whose images are built: `add-up` (RUN and COPY), `add-up-again` (the same
/// Dockerfile and context), `hand-over` (a solution that gives its files to uid 1000), `greet`
/// (only FROM, WORKDIR and ENV) and `broken` (a build that fails).
fn write_tasks_to_build(tasks: &Path) {
    // RUN and COPY: the answer needs both the file RUN made and the file COPY laid.
    harbor_task(
        &tasks.join("add-up"),
        "Write the sum of the numbers in seed.txt and data.txt to answer.txt.\n",
        &[("Dockerfile", APP_DOCKERFILE), ("data.txt", "21\n")],
        "[ \"$(cat answer.txt)\" = 42 ]",
        "echo $(( $(cat seed.txt) + $(cat data.txt) )) > answer.txt",
    );
    // The same Dockerfile and context: built once, a cache hit for the second task.
    harbor_task(
        &tasks.join("add-up-again"),
        "Write the sum of the numbers in seed.txt and data.txt to total.txt.\n",
        &[("Dockerfile", APP_DOCKERFILE), ("data.txt", "21\n")],
        "[ \"$(cat total.txt)\" = 42 ]",
        "echo $(( $(cat seed.txt) + $(cat data.txt) )) > total.txt",
    );
    // A solution that gives its files to uid 1000 (the image's `dev`), as datasets' do.
    harbor_task(
        &tasks.join("hand-over"),
        "Make out/result.txt containing done, owned by uid and gid 1000.\n",
        &[(
            "Dockerfile",
            "FROM busybox\nRUN mkdir -p /work && chown 1000:1000 /work\nWORKDIR /work\n",
        )],
        "[ \"$(stat -c %u:%g out/result.txt)\" = 1000:1000 ] && grep -q done out/result.txt",
        "mkdir -p out && echo done > out/result.txt && chown -R 1000:1000 out",
    );
    // Only FROM, WORKDIR and ENV: nothing to build, the task runs busybox itself, pulled
    // through the mirror at validate, in /srv with GREETING set.
    harbor_task(
        &tasks.join("greet"),
        "Write the value of $GREETING to greeting.txt.\n",
        &[(
            "Dockerfile",
            "FROM busybox\nWORKDIR /srv\nENV GREETING=\"hello there\"\n",
        )],
        "[ \"$(pwd)\" = /srv ] && grep -qx 'hello there' greeting.txt",
        "echo \"$GREETING\" > greeting.txt",
    );
    // A build that fails: the task is skipped with the builder's own error.
    harbor_task(
        &tasks.join("broken"),
        "Anything.\n",
        &[(
            "Dockerfile",
            "FROM busybox\nRUN echo about to fail && exit 3\n",
        )],
        "true",
        "true",
    );
}

/// The import's report (`e`): each build said as it happens, the cache hit, the image taken as
/// it is, the failed build with the builder's own error, and the counts.
fn assert_each_build_reported(e: &str) {
    assert!(
        e.contains("imported 4 task(s): add-up, add-up-again, greet, hand-over"),
        "{e}"
    );
    // Each build is said as it happens, before the report.
    assert!(
        e.contains("add-up: building environment/Dockerfile with buildah (log: "),
        "{e}"
    );
    assert!(e.contains("add-up: built in "), "{e}");
    assert!(
        e.contains("add-up-again: built before (cache hit, key sha256:"),
        "{e}"
    );
    assert!(
        e.contains("broken: the build failed: buildah could not build the image"),
        "{e}"
    );
    assert!(e.contains("images from Dockerfiles: 2 built ("), "{e}");
    assert!(e.contains("1 cache hit(s)"), "{e}");
    assert!(e.contains("1 only FROM with WORKDIR/ENV"), "{e}");
    assert!(e.contains("1 failed (those tasks are skipped)"), "{e}");
    assert!(
        e.contains("its image could not be built from environment/Dockerfile by buildah: Error: building at STEP \"RUN echo about to fail && exit 3\": exit status 3"),
        "{e}"
    );
    assert!(e.contains("about to fail"), "the builder's output: {e}");
    assert!(e.contains("build.log"), "{e}");
}

/// Every task passes with its own solution and fails with the null agent (the image cache
/// given relative to proctor's folder: the sandbox is given it absolute).
fn assert_every_built_task_passes_its_oracle(lab: &Lab, suite: &Path, config: &Path, toml: &str) {
    let v = lab.proctor(
        As::Me,
        &[
            "validate",
            suite.to_str().unwrap(),
            "--oracle",
            "--image-cache",
            "image-cache",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(v.code, 0, "{}\n{}\n{toml}", v.stdout, v.stderr);
    let said = format!("{}{}", v.stdout, v.stderr);
    for task in ["add-up", "add-up-again", "greet", "hand-over"] {
        let row: Vec<&str> = said
            .lines()
            .find(|l| l.split_whitespace().next() == Some(task))
            .unwrap_or_else(|| panic!("no row for {task}: {said}"))
            .split_whitespace()
            .collect();
        // TASK, MUTATION, ORACLE, NULL AGENT, VERDICT.
        assert_eq!(row, [task, "-", "completed", "abandoned", "ok"], "{said}");
    }
    assert!(
        said.contains("every task's rules pass its oracle and fail the null agent"),
        "{said}"
    );
}

/// A Terminal-Bench task whose compose file builds its image (`build:` with a `dockerfile:`
/// in a context folder), as the harness does: built at import, and its own solution passes its
/// own tests in the built image while the null agent fails them.
#[test]
fn an_imported_terminal_bench_task_is_built_from_its_compose_build() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-tbench");
    let (_registry, config, _) = mirror(&lab);
    let task = lab.root.join("tasks/count-words");
    write_all(
        &task,
        &[
            ("task.yaml", "instruction: Count the words in /app/text.txt and write the number to /app/count.txt.\ndifficulty: easy\n"),
            (
                "docker-compose.yaml",
                "services:\n  client:\n    build:\n      context: image\n      dockerfile: Containerfile\n    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n    command: [ \"sh\", \"-c\", \"sleep infinity\" ]\n",
            ),
            (
                "image/Containerfile",
                "FROM busybox\nRUN mkdir -p /app\nCOPY text.txt /app/text.txt\nWORKDIR /app\n",
            ),
            ("image/text.txt", "one two three four five\n"),
            (
                "run-tests.sh",
                "#!/bin/sh\necho '=== short test summary info ==='\nif [ \"$(cat /app/count.txt)\" = 5 ]; then echo 'PASSED tests/test_outputs.py::test_count'; else echo 'FAILED tests/test_outputs.py::test_count'; fi\n",
            ),
            ("solution.sh", "#!/bin/sh\nwc -w < /app/text.txt | tr -d ' ' > /app/count.txt\n"),
        ],
    );
    let cache = lab.root.join("image-cache");
    let suite = lab.root.join("tb");
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "terminal-bench",
            lab.root.join("tasks").to_str().unwrap(),
            "--out",
            suite.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("imported 1 task(s): count-words"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("images from Dockerfiles: 1 built ("),
        "{}",
        out.stderr
    );
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    assert!(
        toml.contains("image = \"oci-archive:images/count-words.tar\""),
        "{toml}"
    );
    let v = lab.proctor(
        As::Me,
        &[
            "validate",
            suite.to_str().unwrap(),
            "--oracle",
            "--image-cache",
            cache.to_str().unwrap(),
        ],
    );
    assert_eq!(v.code, 0, "{}\n{}\n{toml}", v.stdout, v.stderr);
    assert!(
        v.stdout
            .lines()
            .chain(v.stderr.lines())
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["count-words", "-", "completed", "abandoned", "ok"]),
        "{}\n{}",
        v.stdout,
        v.stderr
    );
}

/// A short name in `FROM` resolves on Docker Hub (through its mirror), as `docker build` and a
/// pull resolve it, not through the system's short-name aliases (Debian's send `centos` to
/// quay.io, which this test's machine may not reach and which holds another image).
#[test]
fn a_short_name_in_from_resolves_on_docker_hub_as_docker_does() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-short-name");
    let (registry, config, digest) = mirror(&lab);
    registry.push(&lab.root.join("busybox-layout"), ("library/centos", "7"));
    let ctx = lab.root.join("ctx");
    write_all(
        &ctx,
        &[("Dockerfile", "FROM centos:7\nRUN echo ok > /ok.txt\n")],
    );
    let out = lab.proctor(
        As::Me,
        &[
            "images",
            "build",
            "ctx",
            "--image-cache",
            "image-cache",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("FROM docker.io/library/centos:7 ({digest})")),
        "{}",
        out.stderr
    );
    // Only FROM, WORKDIR and ENV: nothing is built (no builder on PATH is needed), the base
    // image is pulled through the mirror and named with the working folder and variables.
    write_all(
        &ctx,
        &[(
            "Dockerfile.base",
            "FROM centos:7\nWORKDIR /srv\nENV A=\"one two\"\n",
        )],
    );
    let out = lab.proctor_env(
        As::Me,
        &[
            "images",
            "build",
            "ctx",
            "-f",
            "ctx/Dockerfile.base",
            "--image-cache",
            "image-cache",
            "--config",
            config.to_str().unwrap(),
        ],
        &[("PATH", &empty_path(&lab))],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "ctx/Dockerfile.base is only FROM with WORKDIR/ENV: nothing to build, its image is centos:7\n  workdir = \"/srv\"\n  env A = \"one two\"\n"
    );
    assert!(
        out.stdout.starts_with(&format!("centos:7\t{digest}\t")),
        "{}",
        out.stdout
    );
}

/// A minimal Debian root made by `debootstrap --variant=minbase` from Debian's mirror, as a tar
/// for a Dockerfile's `ADD`; `None` (a failure under CI) without debootstrap or the mirror.
fn debian_rootfs_tar(lab: &Lab) -> Option<PathBuf> {
    let root = lab.root.join("debian-root");
    let out = Command::new("debootstrap")
        .args(["--variant=minbase", "bookworm"])
        .arg(&root)
        .arg("http://deb.debian.org/debian")
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            let log = String::from_utf8_lossy(&o.stdout);
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            common::skip(&format!(
                "debootstrap could not make a Debian root (is deb.debian.org reachable?): {tail:?}"
            ));
            return None;
        }
        Err(_) => {
            common::skip("debootstrap is not installed (apt-get install debootstrap)");
            return None;
        }
    }
    let tar = lab.root.join("rootfs.tar");
    let status = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&root);
    Some(tar)
}

/// A local stand-in for a Debian mirror: a flat apt repository holding one package,
/// `proctor-standin` (which installs `/usr/share/proctor-standin/hello.txt`), served over HTTP on
/// the host's loopback by a Python process (killed when the guard drops). Gives its URL.
fn apt_standin(lab: &Lab) -> (KillOnDrop, String) {
    let pkg = lab.root.join("standin-pkg");
    write_all(
        &pkg,
        &[
            (
                "DEBIAN/control",
                "Package: proctor-standin\nVersion: 1.0\nArchitecture: all\nMaintainer: proctor tests <tests@example.com>\nDescription: the package of the tests' local apt mirror\n",
            ),
            ("usr/share/proctor-standin/hello.txt", "hello from the stand-in\n"),
        ],
    );
    let repo = lab.root.join("apt-repo");
    std::fs::create_dir_all(&repo).unwrap();
    let status = Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&pkg)
        .arg(repo.join("proctor-standin_1.0_all.deb"))
        .output()
        .expect("dpkg-deb (Debian's dpkg) builds the stand-in's package");
    assert!(status.status.success(), "{status:?}");
    let scan = Command::new("dpkg-scanpackages")
        .args([".", "/dev/null"])
        .current_dir(&repo)
        .output()
        .expect("dpkg-scanpackages (Debian's dpkg-dev) indexes the stand-in");
    assert!(scan.status.success(), "{scan:?}");
    std::fs::write(repo.join("Packages"), &scan.stdout).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&repo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (KillOnDrop(child), url)
}

/// A child process killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Harbor tasks as datasets write them run `apt-get` as root: apt drops to its sandbox user
/// `_apt` (setgroups, seteuid 42) to download, and dpkg writes `/usr` and `/var/lib/dpkg`, which
/// needs the trial's full range of ids and its writable image root. A task built (`FROM scratch`,
/// `ADD` a debootstrap root) whose solution installs a package from a local stand-in mirror
/// passes its own test, which reads the installed package outside the workspace (the checks
/// see the agent's root, as Harbor's verifier does); the null agent, which installs nothing,
/// fails it.
#[test]
fn a_solution_that_runs_apt_get_against_a_local_mirror_passes_its_test() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-apt");
    let Some(rootfs) = debian_rootfs_tar(&lab) else {
        return;
    };
    let (_server, url) = apt_standin(&lab);
    let tasks = lab.root.join("tasks");
    let task = tasks.join("install-standin");
    harbor_task(
        &task,
        "Install the package proctor-standin with apt-get.\n",
        &[("Dockerfile", "FROM scratch\nADD rootfs.tar /\nWORKDIR /app\n")],
        // As Harbor's verifier, which runs in the agent's container, the test reads what the
        // agent installed outside the workspace: an imported task's checks see the agent's root.
        "grep -qx 'hello from the stand-in' /usr/share/proctor-standin/hello.txt && dpkg -s proctor-standin | grep -qx 'Status: install ok installed'",
        &format!(
            "set -e\nrm -f /etc/apt/sources.list /etc/apt/sources.list.d/*\necho 'deb [trusted=yes] {url} ./' > /etc/apt/sources.list.d/standin.list\napt-get update\napt-get install -y proctor-standin"
        ),
    );
    std::fs::rename(&rootfs, task.join("environment/rootfs.tar")).unwrap();
    let cache = lab.root.join("image-cache");
    let suite = lab.root.join("imported");
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            tasks.to_str().unwrap(),
            "--out",
            suite.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("imported 1 task(s): install-standin"),
        "{}",
        out.stderr
    );
    // Harbor's default network is imported as the trial's own internet, which never reaches the
    // host's loopback, where the stand-in mirror listens: the test's suite chooses the host's
    // network, explicitly, as a suite that needs a host service must.
    let toml = suite.join("suite.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(text.contains("network = \"internet\"\n"), "{text}");
    std::fs::write(
        &toml,
        text.replace("network = \"internet\"\n", "network = \"host\"\n"),
    )
    .unwrap();
    let v = lab.proctor(
        As::Me,
        &[
            "validate",
            suite.to_str().unwrap(),
            "--oracle",
            "--image-cache",
            cache.to_str().unwrap(),
        ],
    );
    let said = format!("{}{}", v.stdout, v.stderr);
    assert_eq!(v.code, 0, "{said}");
    let row: Vec<&str> = said
        .lines()
        .find(|l| l.starts_with("install-standin"))
        .unwrap_or_else(|| panic!("no row: {said}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        row,
        ["install-standin", "-", "completed", "abandoned", "ok"],
        "{said}"
    );
}

/// A Harbor task whose `task.toml` names the prebuilt image `docker_image`, beside its
/// `environment/Dockerfile` (as every Terminal-Bench 2 task does).
fn prebuilt_task(dir: &Path, docker_image: &str, dockerfile: &str, check: &str, solve: &str) {
    harbor_task(
        dir,
        "Write the number in /srv/seed.txt, doubled, to answer.txt.\n",
        &[("Dockerfile", dockerfile)],
        check,
        solve,
    );
    write_all(
        dir,
        &[(
            "task.toml",
            &format!(
                "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n[environment]\ndocker_image = \"{docker_image}\"\nbuild_timeout_sec = 300\n"
            ),
        )],
    );
}

/// The oracle table's row of `task`, as words.
fn oracle_row<'a>(stdout: &'a str, task: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(task))
        .unwrap_or_else(|| panic!("no row for {task}: {stdout}"))
        .split_whitespace()
        .collect()
}

#[test]
fn a_prebuilt_image_that_cannot_be_pulled_is_built_from_its_dockerfile_and_build_always_builds() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-fallback");
    let (registry, config, _) = mirror(&lab);
    // The Dockerfile's RUN makes the seed: only an image built from it has /srv/seed.txt.
    let dockerfile = "FROM busybox\nRUN mkdir -p /srv && echo 21 > /srv/seed.txt\nWORKDIR /app\n";
    let check = "[ \"$(cat answer.txt)\" = 42 ]";
    let solve = "echo $(( $(cat /srv/seed.txt) * 2 )) > answer.txt";
    let tasks = lab.root.join("tasks");
    // Its prebuilt image was never pushed: it is built from environment/Dockerfile.
    let missing = format!("{}/proctor/never-pushed:v1", registry.addr);
    prebuilt_task(&tasks.join("fallback"), &missing, dockerfile, check, solve);
    // Its prebuilt image is plain busybox (no seed): pulled, the oracle fails; built with
    // --build, it passes.
    let stale = format!("{}/library/busybox:latest", registry.addr);
    prebuilt_task(&tasks.join("forced"), &stale, dockerfile, check, solve);
    let cache = lab.root.join("image-cache");
    let suite = lab.root.join("imported");
    import_keeping_the_dockerfiles(&lab, &tasks, &suite, &cache, &config, &missing, dockerfile);
    let validate = |extra: &[&str]| {
        let mut args = vec![
            "validate",
            suite.to_str().unwrap(),
            "--oracle",
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--store",
            "oracle-store",
        ];
        args.extend_from_slice(extra);
        lab.proctor(As::Me, &args)
    };
    let v = validate(&[]);
    let e = &v.stderr;
    assert_eq!(v.code, 2, "{}\n{e}", v.stdout);
    assert!(
        e.contains(&format!("image {missing}: building environments/fallback/Dockerfile with buildah (the image could not be pulled: ")),
        "{e}"
    );
    assert!(
        e.contains(&format!("task `fallback`: image `{missing}` built from environments/fallback/Dockerfile (the image could not be pulled: ")),
        "{e}"
    );
    assert_eq!(
        oracle_row(&v.stdout, "fallback"),
        ["fallback", "-", "completed", "abandoned", "ok"]
    );
    // Pulled, the prebuilt image has no seed: the oracle does not pass.
    let forced_row = oracle_row(&v.stdout, "forced");
    assert_ne!(forced_row[2], "completed", "{}", v.stdout);
    assert_eq!(forced_row[4], "FAIL:", "{}", v.stdout);
    assert!(
        e.contains("  images                 1 pulled, 1 built, 0 failed\n"),
        "{e}"
    );
    assert_trials_record_how_their_image_was_had(&lab);
    // --build builds both (the same Dockerfile and context: one build, one image).
    let v = validate(&["--build"]);
    assert_eq!(v.code, 0, "{}\n{}", v.stdout, v.stderr);
    assert_eq!(
        oracle_row(&v.stdout, "forced"),
        ["forced", "-", "completed", "abandoned", "ok"]
    );
    assert!(
        v.stderr.contains(&format!("task `forced`: image `{stale}` built from environments/forced/Dockerfile (--build asked for it)")),
        "{}",
        v.stderr
    );
    assert!(
        v.stderr
            .contains("  images                 0 pulled, 2 built, 0 failed\n"),
        "{}",
        v.stderr
    );

    assert_run_build_records_the_built_image(&lab, &suite, &cache, &config);
}

/// `run --build` too: the task's oracle variant passes in the built image, recorded so.
fn assert_run_build_records_the_built_image(lab: &Lab, suite: &Path, cache: &Path, config: &Path) {
    let r = lab.proctor(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--task",
            "forced",
            "--trials",
            "1",
            "--build",
            "--store",
            "run-store",
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let record: serde_json::Value = walkdir::WalkDir::new(lab.root.join("run-store"))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_name() == "trial.json")
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .unwrap();
    assert_eq!(record["record"]["outcome"], "completed", "{record:#}");
    assert_eq!(
        record["record"]["launch"]["image"]["note"],
        "built from environments/forced/Dockerfile (--build asked for it)"
    );
}

/// `import harbor` of `tasks` into `suite`: the prebuilt images kept with their Dockerfile,
/// built from it when the image (`missing`'s) cannot be pulled.
fn import_keeping_the_dockerfiles(
    lab: &Lab,
    tasks: &Path,
    suite: &Path,
    cache: &Path,
    config: &Path,
    missing: &str,
    dockerfile: &str,
) {
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            tasks.to_str().unwrap(),
            "--out",
            suite.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("2 prebuilt image(s) with their Dockerfile kept (built from it when the image cannot be pulled)"),
        "{}",
        out.stderr
    );
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    assert!(
        toml.contains(&format!("# image {missing} is prebuilt; environment/Dockerfile is kept as environments/fallback/, and the image is built from it when {missing} cannot be pulled (or with --build)")),
        "{toml}"
    );
    assert!(toml.contains("build = \"environments/fallback\""), "{toml}");
    assert!(toml.contains("build_timeout_sec = 300"), "{toml}");
    assert_eq!(
        std::fs::read_to_string(suite.join("environments/fallback/Dockerfile")).unwrap(),
        dockerfile
    );
}

/// The trial records how its image was had: `fallback` built from its Dockerfile because it
/// could not be pulled, `forced` pulled.
fn assert_trials_record_how_their_image_was_had(lab: &Lab) {
    let records: Vec<serde_json::Value> = walkdir::WalkDir::new(lab.root.join("oracle-store"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_name() == "trial.json")
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect();
    let fallback = records
        .iter()
        .find(|r| r["record"]["plan"]["task"] == "fallback")
        .unwrap();
    let note = fallback["record"]["launch"]["image"]["note"]
        .as_str()
        .unwrap();
    assert!(
        note.starts_with(
            "built from environments/fallback/Dockerfile (the image could not be pulled: "
        ),
        "{note}"
    );
    let forced = records
        .iter()
        .find(|r| r["record"]["plan"]["task"] == "forced")
        .unwrap();
    assert!(forced["record"]["launch"]["image"].get("note").is_none());
}

#[test]
fn a_base_tag_moved_to_another_image_builds_again() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-moved-base");
    let (registry, config, first_digest) = mirror(&lab);
    let ctx = lab.root.join("ctx");
    write_all(
        &ctx,
        &[(
            "Dockerfile",
            "FROM busybox\nRUN cat /etc/os-release > /base.txt\n",
        )],
    );
    let args = [
        "images",
        "build",
        "ctx",
        "--image-cache",
        "image-cache",
        "--config",
        config.to_str().unwrap(),
    ];
    let built = |lab: &Lab| {
        let out = lab.proctor(As::Me, &args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let fields: Vec<String> = out
            .stdout
            .lines()
            .next()
            .unwrap()
            .split('\t')
            .map(str::to_string)
            .collect();
        let base = std::fs::read_to_string(lab.root.join(&fields[2]).join("base.txt")).unwrap();
        (out.stderr, fields[1].clone(), base)
    };
    let (said, digest, base) = built(&lab);
    assert!(said.contains("built with buildah in"), "{said}");
    assert_eq!(base, "ID=proctor-busybox\n");
    let (said, again, _) = built(&lab);
    assert!(said.contains("cache hit"), "{said}");
    assert_eq!(again, digest);

    // busybox:latest now names another image: the same Dockerfile and context build again,
    // on the new base.
    let other = lab.root.join("busybox-2");
    let status = Command::new("python3")
        .arg("-c")
        .arg(MAKE_IMAGE.replace("ID=proctor-busybox", "ID=proctor-busybox-2"))
        .arg(&other)
        .status()
        .unwrap();
    assert!(status.success());
    registry.push(&other, ("library/busybox", "latest"));
    let (said, moved, base) = built(&lab);
    assert!(
        said.contains("built with buildah in"),
        "a stale build was reused: {said}"
    );
    assert!(!said.contains(&first_digest), "{said}");
    assert_ne!(moved, digest);
    assert_eq!(base, "ID=proctor-busybox-2\n");
}

#[test]
fn a_build_past_its_build_timeout_is_stopped_and_skips_its_task_with_the_reason() {
    if !have_buildah() {
        return;
    }
    let lab = Lab::new("build-timeout");
    let (_registry, config, _) = mirror(&lab);
    let tasks = lab.root.join("tasks");
    harbor_task(
        &tasks.join("slow-build"),
        "Anything.\n",
        &[("Dockerfile", "FROM busybox\nRUN sleep 120\n")],
        "true",
        "true",
    );
    write_all(
        &tasks.join("slow-build"),
        &[(
            "task.toml",
            "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60.0\n\n[environment]\nbuild_timeout_sec = 4\n",
        )],
    );
    harbor_task(
        &tasks.join("quick"),
        "Write done to done.txt.\n",
        &[("Dockerfile", "FROM busybox\nRUN echo quick > /quick.txt\n")],
        "grep -q done done.txt",
        "echo done > done.txt",
    );
    let started = std::time::Instant::now();
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            tasks.to_str().unwrap(),
            "--out",
            lab.root.join("suite-out").to_str().unwrap(),
            "--image-cache",
            lab.root.join("image-cache").to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let e = &out.stderr;
    assert!(e.contains("imported 1 task(s): quick"), "{e}");
    assert!(
        e.contains("its image could not be built from environment/Dockerfile: buildah did not finish the build within its time limit of 4 s (build_timeout_sec), so it was stopped (its log: "),
        "{e}"
    );
    // Stopped at its limit, not after the RUN's two minutes.
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}
