//! Compose files, read before they are judged: whether a `docker-compose` file is one at all
//! (a `services` mapping of containers), and the sidecar containers of a task's several
//! services (every service but the main one).

use std::collections::BTreeMap;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use crate::image::{self, DockerBuild, ImageSource};
use crate::model::{HealthPlan, SidecarPlan};
use crate::settings::is_var_name;
use crate::yaml::{get, scalar};

/// A compose file's services, in order: name and definition.
pub(crate) struct Compose {
    /// Each service's name and mapping.
    pub services: Vec<(String, Yaml)>,
}

/// The compose file at `path`: `None` when it is not one (no `services` mapping whose every
/// entry is a mapping: task data that happens to have the name). An error when it cannot be
/// read or does not parse as YAML.
pub(crate) fn read(path: &Path) -> Result<Option<Compose>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let docs = YamlLoader::load_from_str(&text).map_err(|e| e.to_string())?;
    let Some(services) = docs
        .first()
        .and_then(|d| get(d, "services"))
        .and_then(Yaml::as_hash)
    else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (k, v) in services {
        match (k.as_str(), v) {
            (Some(name), Yaml::Hash(_)) => out.push((name.to_string(), v.clone())),
            _ => return Ok(None),
        }
    }
    Ok((!out.is_empty()).then_some(Compose { services: out }))
}

/// Service keys a sidecar carries; the others are reported, one warning each.
const CARRIED: &[&str] = &[
    "image",
    "build",
    "command",
    "working_dir",
    "environment",
    "healthcheck",
    "depends_on",
];

/// Service keys that need nothing in a trial: every sidecar shares the trial's network
/// namespace, so its ports are reached as they are.
const NEEDLESS: &[&str] = &[
    "ports",
    "expose",
    "networks",
    "container_name",
    "hostname",
    "restart",
];

/// Where a compose file is: the task folder, and the compose file's own folder (relative to
/// the task folder), where its `build:` paths start.
pub(crate) struct ComposeAt<'a> {
    /// The task folder.
    pub task: &'a Path,
    /// The compose file's folder, relative to the task folder (`environment`).
    pub folder: &'a str,
}

/// The sidecars of `compose`: every service but `main`, in the order written. Skips the task
/// (an error, the reason) for one proctor cannot run as the task says: with an `entrypoint`
/// of its own, no image, or waited for until it completes.
pub(crate) fn sidecars(
    compose: &Compose,
    main: &str,
    at: &ComposeAt<'_>,
    w: &mut Vec<String>,
) -> Result<Vec<SidecarPlan>, String> {
    let mut out = Vec::new();
    for (name, service) in compose.services.iter().filter(|(n, _)| n != main) {
        out.push(sidecar(name, service, main, at, w)?);
    }
    Ok(out)
}

/// A sidecar's image: built from its `build:` (which wins over an `image:` that only names
/// the result, as Compose builds it), else its `image:`, resolved as a task's image is.
fn sidecar_image(service: &Yaml, at: &str, place: &ComposeAt<'_>) -> Result<ImageSource, String> {
    if let Some(build) = get(service, "build") {
        let (context, dockerfile) = build_paths(Some(build));
        let in_folder = |p: &str| match (place.folder, p) {
            (folder, ".") => folder.to_string(),
            (".", p) => p.trim_start_matches("./").to_string(),
            (folder, p) => format!("{folder}/{}", p.trim_start_matches("./")),
        };
        let (context, dockerfile) = (in_folder(&context), in_folder(&dockerfile));
        if context.contains('$') || dockerfile.contains('$') {
            return Err(format!(
                "{at}: its build context `{context}` is resolved from the host's environment"
            ));
        }
        return Ok(ImageSource::Dockerfile(DockerBuild {
            context: place.task.join(&context),
            dockerfile: place.task.join(&dockerfile),
            what: format!("{dockerfile} (the `build:` of {at})"),
            shown_context: context,
            shown_dockerfile: dockerfile,
        }));
    }
    let image = get(service, "image")
        .and_then(Yaml::as_str)
        .ok_or_else(|| format!("{at} names neither an `image` nor a `build`"))?;
    if image.contains('$') {
        return Err(format!(
            "{at}: its image `{image}` is resolved from the host's environment"
        ));
    }
    match image::resolve(place.task, Some(image)) {
        Some(resolved) => resolved.map_err(|e| format!("{at}: {e}")),
        None => Err(format!("{at} names no `image`")),
    }
}

/// One sidecar.
fn sidecar(
    name: &str,
    service: &Yaml,
    main: &str,
    place: &ComposeAt<'_>,
    w: &mut Vec<String>,
) -> Result<SidecarPlan, String> {
    let at = format!("docker-compose service `{name}`");
    if get(service, "entrypoint").is_some() {
        return Err(format!(
            "{at} sets an `entrypoint`; a proctor service keeps its image's Entrypoint"
        ));
    }
    let image = sidecar_image(service, &at, place)?;
    report_keys(service, &at, w);
    let mut env_warnings = Vec::new();
    let env = compose_env(service, &mut env_warnings);
    w.extend(env_warnings.into_iter().map(|m| format!("{at}: {m}")));
    Ok(SidecarPlan {
        name: name.to_string(),
        image,
        command: get(service, "command").map(|c| words(c, &at)).transpose()?,
        workdir: get(service, "working_dir").and_then(scalar),
        env,
        healthcheck: healthcheck(service, &at)?,
        depends_on: depends_on(service, main, &at, w)?,
    })
}

/// Reports the service keys a sidecar does not carry.
fn report_keys(service: &Yaml, at: &str, w: &mut Vec<String>) {
    let Some(h) = service.as_hash() else { return };
    for key in h.keys().filter_map(Yaml::as_str) {
        if CARRIED.contains(&key) {
            continue;
        }
        if NEEDLESS.contains(&key) {
            w.push(format!(
                "{at}: `{key}` is not needed: every container of the trial shares its network, where the sidecar is reached by its name"
            ));
        } else {
            w.push(format!(
                "{at}: `{key}` has no proctor counterpart, not imported"
            ));
        }
    }
}

/// A compose `command` (or healthcheck `test`) as an argv: a list as it is, a string split as
/// a POSIX shell splits words (as Compose does).
fn words(y: &Yaml, at: &str) -> Result<Vec<String>, String> {
    match y {
        Yaml::Array(items) => items
            .iter()
            .map(|i| scalar(i).ok_or_else(|| format!("{at}: a `command` entry is not text")))
            .collect(),
        _ => {
            let text = scalar(y).ok_or_else(|| format!("{at}: `command` is not text or a list"))?;
            shlex::split(&text)
                .ok_or_else(|| format!("{at}: `command` {text:?} has an unclosed quote"))
        }
    }
}

/// The service's `healthcheck`, unless it has none or `disable`s it / tests `NONE`.
fn healthcheck(service: &Yaml, at: &str) -> Result<Option<HealthPlan>, String> {
    let Some(h) = get(service, "healthcheck") else {
        return Ok(None);
    };
    if get(h, "disable").and_then(Yaml::as_bool) == Some(true) {
        return Ok(None);
    }
    let Some(test) = get(h, "test") else {
        return Ok(None);
    };
    let argv = match test {
        Yaml::Array(items) => {
            let all: Vec<String> = items.iter().filter_map(scalar).collect();
            match all.split_first() {
                Some((kind, rest)) if kind == "CMD" => rest.to_vec(),
                Some((kind, rest)) if kind == "CMD-SHELL" => {
                    vec!["sh".into(), "-c".into(), rest.join(" ")]
                }
                Some((kind, _)) if kind == "NONE" => return Ok(None),
                _ => {
                    return Err(format!(
                        "{at}: healthcheck `test` {all:?} starts with neither CMD nor CMD-SHELL"
                    ))
                }
            }
        }
        other => {
            let line = scalar(other)
                .ok_or_else(|| format!("{at}: healthcheck `test` is not text or a list"))?;
            vec!["sh".into(), "-c".into(), line]
        }
    };
    if argv.is_empty() {
        return Err(format!("{at}: its healthcheck runs nothing"));
    }
    let secs = |key: &str, default: u64| -> Result<u64, String> {
        match get(h, key).and_then(scalar) {
            Some(text) => duration_seconds(&text).ok_or_else(|| {
                format!("{at}: healthcheck `{key}` {text:?} is not a duration such as 30s or 1m30s")
            }),
            None => Ok(default),
        }
    };
    let interval = secs("interval", 30)?;
    let timeout = secs("timeout", 30)?;
    let start = secs("start_period", 0)?;
    let retries = match get(h, "retries") {
        Some(Yaml::Integer(n)) if *n > 0 => *n as u64,
        Some(_) => {
            return Err(format!(
                "{at}: healthcheck `retries` is not a positive number"
            ))
        }
        None => 3,
    };
    Ok(Some(HealthPlan {
        argv,
        timeout_seconds: start + retries * (interval + timeout),
        interval_seconds: 1,
    }))
}

/// A compose duration (`30s`, `1m30s`, `1h`, `500ms`, `2.5s`) in whole seconds, rounded up.
fn duration_seconds(text: &str) -> Option<u64> {
    let mut total_ms = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1000.0,
            "ms" => 1.0,
            "us" => 0.001,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total_ms += value * scale;
    }
    Some((total_ms / 1000.0).ceil() as u64)
}

/// The sidecars the service starts after (`depends_on`, a list or a mapping). The main
/// container is left out (it starts after every sidecar); waiting for a service to complete is
/// refused (a proctor service runs for the whole trial).
fn depends_on(
    service: &Yaml,
    main: &str,
    at: &str,
    w: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    let names: Vec<String> = match get(service, "depends_on") {
        None => Vec::new(),
        Some(Yaml::Array(items)) => items.iter().filter_map(scalar).collect(),
        Some(Yaml::Hash(h)) => {
            let mut out = Vec::new();
            for (k, v) in h {
                let Some(name) = k.as_str() else { continue };
                let condition = get(v, "condition").and_then(scalar);
                if condition.as_deref() == Some("service_completed_successfully") {
                    return Err(format!("{at} waits for `{name}` to complete (service_completed_successfully); proctor's services run for the whole trial"));
                }
                out.push(name.to_string());
            }
            out
        }
        Some(_) => {
            return Err(format!(
                "{at}: `depends_on` is neither a list nor a mapping"
            ))
        }
    };
    Ok(names
        .into_iter()
        .filter(|n| {
            let own = n == main;
            if own {
                w.push(format!("{at} depends on the main container `{main}`, which proctor starts after every sidecar; the dependency is dropped"));
            }
            !own
        })
        .collect())
}

/// The build context and Dockerfile (relative to the task folder) of a compose service's
/// `build:`: a context folder, or a mapping with `context` and `dockerfile` (relative to the
/// context); `.` and `Dockerfile` where it says nothing.
pub(crate) fn build_paths(build: Option<&Yaml>) -> (String, String) {
    let (context, dockerfile) = match build {
        Some(Yaml::String(context)) => (context.clone(), None),
        Some(Yaml::Hash(h)) => (
            h.get(&Yaml::String("context".into()))
                .and_then(Yaml::as_str)
                .unwrap_or(".")
                .to_string(),
            h.get(&Yaml::String("dockerfile".into()))
                .and_then(Yaml::as_str)
                .map(str::to_string),
        ),
        _ => (".".to_string(), None),
    };
    let context = context.trim_end_matches('/').to_string();
    let context = if context.is_empty() {
        ".".to_string()
    } else {
        context
    };
    let dockerfile = dockerfile.unwrap_or_else(|| "Dockerfile".into());
    let dockerfile = if context == "." {
        dockerfile
    } else {
        format!("{context}/{dockerfile}")
    };
    (context, dockerfile)
}

/// The literal environment of a compose service; the harness's own variables
/// (`${T_BENCH_...}`) are left out, other `${...}` values are reported.
pub(crate) fn compose_env(service: &Yaml, w: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let pairs: Vec<(String, String)> = match get(service, "environment") {
        Some(Yaml::Array(items)) => items
            .iter()
            .filter_map(Yaml::as_str)
            .map(|s| match s.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (s.to_string(), String::new()),
            })
            .collect(),
        Some(Yaml::Hash(h)) => h
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), scalar(v).unwrap_or_default())))
            .collect(),
        _ => Vec::new(),
    };
    for (k, v) in pairs {
        if v.contains("${T_BENCH_") || k == "TEST_DIR" {
            continue;
        }
        if !is_var_name(&k) {
            w.push(format!(
                "docker-compose: environment `{k}` is not a valid variable name, not imported"
            ));
        } else if v.contains('$') {
            w.push(format!(
                "docker-compose: environment {k} = {v:?} is resolved from the host; a suite holds no secrets, so it was not imported (set it in a variant's `env`)"
            ));
        } else {
            env.insert(k, v);
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_build_gives_the_context_and_dockerfile() {
        let of = |text: &str| {
            let docs = YamlLoader::load_from_str(text).expect("yaml");
            build_paths(Some(&docs[0]["build"]).filter(|b| !b.is_badvalue()))
        };
        assert_eq!(of("build: .\n"), (".".into(), "Dockerfile".into()));
        assert_eq!(
            of("build: image/\n"),
            ("image".into(), "image/Dockerfile".into())
        );
        assert_eq!(
            of("build:\n  dockerfile: Dockerfile.tb\n"),
            (".".into(), "Dockerfile.tb".into())
        );
        assert_eq!(
            of("build:\n  context: env\n  dockerfile: Containerfile\n"),
            ("env".into(), "env/Containerfile".into())
        );
        assert_eq!(of("image: x\n"), (".".into(), "Dockerfile".into()));
    }

    fn of(text: &str) -> Result<Option<Compose>, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("docker-compose.yml");
        std::fs::write(&p, text).expect("write");
        read(&p)
    }

    fn names(text: &str) -> Option<Vec<String>> {
        of(text)
            .expect("parses")
            .map(|c| c.services.into_iter().map(|(n, _)| n).collect())
    }

    #[test]
    fn a_compose_file_is_a_services_mapping_of_containers_else_data() {
        assert_eq!(
            names("services:\n  main:\n    build: .\n  db:\n    image: postgres\n"),
            Some(vec!["main".to_string(), "db".to_string()])
        );
        assert_eq!(
            names("services:\n  main:\n    build: .\n"),
            Some(vec!["main".into()])
        );
        // Task data that happens to be called docker-compose.yml.
        assert_eq!(names("- a\n- b\n"), None);
        assert_eq!(names("name: x\n"), None);
        assert_eq!(names(""), None);
        assert_eq!(names("services:\n  - web\n  - db\n"), None);
        assert_eq!(names("services:\n  web: nginx\n  db: postgres\n"), None);
        assert!(of("services: [\n").is_err());
    }

    #[test]
    fn sidecars_carry_image_command_env_health_and_order() {
        let c = of("services:\n  main:\n    build: .\n    depends_on:\n      web:\n        condition: service_healthy\n  web:\n    image: busybox\n    command: httpd -f -p 8080 -h '/srv/my site'\n    working_dir: /srv\n    ports: ['8080:8080']\n    environment:\n      - MODE=test\n    healthcheck:\n      test: [\"CMD-SHELL\", \"wget -q -O- http://127.0.0.1:8080/\"]\n      interval: 2s\n      timeout: 1s\n      retries: 5\n      start_period: 1m\n    depends_on: [db, main]\n  db:\n    image: redis:7\n")
            .unwrap()
            .unwrap();
        let mut w = Vec::new();
        let task = Path::new("/tasks/t");
        let s = sidecars(&c, "main", &at(task), &mut w).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "web");
        assert_eq!(s[0].image, ImageSource::Reference("busybox".into()));
        assert_eq!(
            s[0].command,
            Some(vec![
                "httpd".into(),
                "-f".into(),
                "-p".into(),
                "8080".into(),
                "-h".into(),
                "/srv/my site".into()
            ])
        );
        assert_eq!(s[0].workdir.as_deref(), Some("/srv"));
        assert_eq!(s[0].env.get("MODE").map(String::as_str), Some("test"));
        let h = s[0].healthcheck.as_ref().unwrap();
        assert_eq!(h.argv, ["sh", "-c", "wget -q -O- http://127.0.0.1:8080/"]);
        assert_eq!(h.timeout_seconds, 60 + 5 * 3);
        assert_eq!(s[0].depends_on, ["db"]);
        assert_eq!(s[1].name, "db");
        assert_eq!(s[1].command, None);
        assert!(
            w.iter().any(|m| m.contains("`ports` is not needed")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|m| m.contains("depends on the main container")),
            "{w:?}"
        );
    }

    fn at(task: &Path) -> ComposeAt<'_> {
        ComposeAt {
            task,
            folder: "environment",
        }
    }

    #[test]
    fn a_sidecar_built_from_a_dockerfile_is_built_from_the_compose_files_folder() {
        let c = of("services:\n  main: {build: .}\n  api: {build: ./api, image: api:dev}\n  db:\n    build:\n      context: db\n      dockerfile: Dockerfile.db\n")
            .unwrap()
            .unwrap();
        let task = Path::new("/tasks/t");
        let s = sidecars(&c, "main", &at(task), &mut Vec::new()).unwrap();
        let ImageSource::Dockerfile(api) = &s[0].image else {
            panic!("{:?}", s[0].image)
        };
        assert_eq!(api.context, task.join("environment/api"));
        assert_eq!(api.dockerfile, task.join("environment/api/Dockerfile"));
        let ImageSource::Dockerfile(db) = &s[1].image else {
            panic!("{:?}", s[1].image)
        };
        assert_eq!(db.shown_dockerfile, "environment/db/Dockerfile.db");
    }

    #[test]
    fn what_a_sidecar_cannot_be_skips_the_task_with_the_reason() {
        let skip = |text: &str| {
            let c = of(text).unwrap().unwrap();
            sidecars(&c, "main", &at(Path::new("/tasks/t")), &mut Vec::new()).unwrap_err()
        };
        assert!(skip("services:\n  main: {build: .}\n  api: {command: x}\n")
            .contains("names neither an `image` nor a `build`"));
        assert!(
            skip("services:\n  main: {build: .}\n  api: {image: \"Not Valid\"}\n")
                .contains("not a valid image reference")
        );
        assert!(
            skip("services:\n  main: {build: .}\n  api: {image: x, entrypoint: [a]}\n")
                .contains("entrypoint")
        );
        assert!(
            skip("services:\n  main: {build: .}\n  api: {image: \"${IMG}\"}\n")
                .contains("host's environment")
        );
        assert!(skip("services:\n  main: {build: .}\n  init: {image: x}\n  api:\n    image: y\n    depends_on:\n      init: {condition: service_completed_successfully}\n").contains("complete"));
    }

    #[test]
    fn durations_are_read_as_compose_writes_them() {
        assert_eq!(duration_seconds("30s"), Some(30));
        assert_eq!(duration_seconds("1m30s"), Some(90));
        assert_eq!(duration_seconds("500ms"), Some(1));
        assert_eq!(duration_seconds("2.5s"), Some(3));
        assert_eq!(duration_seconds("1h"), Some(3600));
        assert_eq!(duration_seconds("soon"), None);
        assert_eq!(duration_seconds(""), None);
    }
}
