//! The environments of a trial's processes, built in one place: the agent's (shims first on
//! `PATH`, a private `HOME`, without namespaces the calls log's socket, then what the suite, the
//! variant and the adapter add), each suite service's, and each check's. Nothing else is
//! inherited from proctor.

use std::collections::BTreeMap;
use std::path::Path;

use crate::trial::paths::TrialPaths;

/// `PATH` when proctor's own environment has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// An environment: `(name, value)` pairs in order; a later pair overrides an earlier one.
pub type Env = Vec<(String, String)>;

/// proctor's own `PATH`, or [`DEFAULT_PATH`].
pub fn host_path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into())
}

/// What the agent's environment is made of, beyond the trial's paths.
#[derive(Debug, Clone, Copy)]
pub struct AgentEnvParts<'a> {
    /// proctor's `PATH` ([`host_path`]), or an image's, searched after the shims.
    pub host_path: &'a str,
    /// An image's environment (but its `PATH`) with the suite's `[environment] env`.
    pub image: &'a [(String, String)],
    /// Each suite service's `env`, in suite order (given to the agent too).
    pub services: &'a [&'a BTreeMap<String, String>],
    /// The variant's `env`.
    pub variant: &'a BTreeMap<String, String>,
    /// What the adapter's launch adds.
    pub launch: &'a [(String, String)],
    /// Real agent CLIs: where they are installed.
    pub agents_dir: Option<&'a Path>,
    /// The trial's index within its (task, variant) and its seed, given last as
    /// [`TRIAL_INDEX_ENV`] and [`TRIAL_SEED_ENV`] so nothing else can set them.
    pub trial: (u32, Option<u64>),
}

/// The variable holding the trial's 0-based index within its (task, variant).
pub const TRIAL_INDEX_ENV: &str = "PROCTOR_TRIAL_INDEX";
/// The variable holding the trial's seed (`proctor_suite::plan::trial_seed`), a decimal
/// number below 2^53.
pub const TRIAL_SEED_ENV: &str = "PROCTOR_TRIAL_SEED";

/// The agent's complete environment.
pub fn agent_env(paths: &TrialPaths, parts: AgentEnvParts) -> Env {
    let mut env: Env = vec![
        (
            "PATH".into(),
            format!("{}:{}", paths.shims.inside.display(), parts.host_path),
        ),
        ("HOME".into(), paths.home().display().to_string()),
        ("TMPDIR".into(), "/tmp".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("USER".into(), "agent".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ];
    if let Some(tmp) = paths.tmp() {
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), tmp.display().to_string()));
    }
    // With namespaces the shims reach the trial's own call runner at its fixed place, and the
    // calls log's socket is nowhere in the agent's reach; without, the shim logs the call
    // itself through that socket.
    if !paths.namespaces {
        env.push((
            crate::shim::SOCKET_ENV.into(),
            paths.socket.inside.display().to_string(),
        ));
    }
    env.extend(parts.image.iter().filter(|(k, _)| k != "PATH").cloned());
    for service in parts.services {
        env.extend(service.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(parts.variant.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(parts.launch.iter().cloned());
    if let Some(agents) = parts.agents_dir {
        env.push((
            proctor_agents::cli::AGENTS_DIR_ENV.into(),
            agents.display().to_string(),
        ));
    }
    let (index, seed) = parts.trial;
    env.retain(|(k, _)| k != TRIAL_INDEX_ENV && k != TRIAL_SEED_ENV);
    env.push((TRIAL_INDEX_ENV.into(), index.to_string()));
    if let Some(seed) = seed {
        env.push((TRIAL_SEED_ENV.into(), seed.to_string()));
    }
    env
}

/// A suite service's environment: the agent's `PATH` and `LANG`, then its own `env`.
pub fn service_env(agent_env: &[(String, String)], own: &BTreeMap<String, String>) -> Env {
    let mut env: Env = agent_env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "LANG")
        .cloned()
        .collect();
    env.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A check's environment: proctor's `PATH` (no shims: checks are not interface calls) without
/// any entry the agent could have written to (relative or empty entries, which search the
/// working folder, and entries inside the `workspace`), its private `HOME`, and nothing of the
/// agent's: no variable, no preload. It also keeps the tools a check runs from executing
/// configuration the agent could have planted ([`CHECK_TOOL_ENV`]).
pub fn check_env(home: &Path, host_path: &str, workspace: &Path) -> Env {
    let mut env: Env = vec![
        ("PATH".into(), check_path(host_path, workspace)),
        ("HOME".into(), home.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ];
    env.extend(
        CHECK_TOOL_ENV
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

/// What a check's environment sets so that git, npm and Python never run configuration the
/// agent could have written (with the git guard over the workspace's git folders, see
/// `docs/suite-format.md`): git reads no system or global configuration, never takes a folder
/// for a bare repository unless told (`safe.bareRepository = explicit`: a workspace made to look
/// like one is not), runs no fsmonitor and no hook, and pages and edits with nothing; npm
/// reads no user or global `.npmrc`, and a project `.npmrc` cannot choose the shell scripts run
/// in or the options node starts with (the environment outranks it); Python reads no user
/// site folder.
pub const CHECK_TOOL_ENV: [(&str, &str); 17] = [
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_COUNT", "3"),
    ("GIT_CONFIG_KEY_0", "safe.bareRepository"),
    ("GIT_CONFIG_VALUE_0", "explicit"),
    ("GIT_CONFIG_KEY_1", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_1", "false"),
    ("GIT_CONFIG_KEY_2", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_2", "/dev/null"),
    ("GIT_PAGER", "cat"),
    ("GIT_EDITOR", "true"),
    ("PAGER", "cat"),
    ("npm_config_userconfig", "/dev/null"),
    ("npm_config_globalconfig", "/dev/null"),
    ("npm_config_script_shell", "/bin/sh"),
    ("npm_config_node_options", ""),
    ("PYTHONNOUSERSITE", "1"),
];

/// `path` without the entries a check must not search: empty or relative ones (the working
/// folder, which is the agent's workspace) and those inside `workspace`.
pub fn check_path(path: &str, workspace: &Path) -> String {
    path.split(':')
        .filter(|e| e.starts_with('/') && !Path::new(e).starts_with(workspace))
        .collect::<Vec<_>>()
        .join(":")
}

/// Wraps a real agent's command so that login shells keep the shims first on PATH.
///
/// Some CLIs run their shell tool as a login shell (Codex: `bash -lc`), and a login shell's
/// /etc/profile resets PATH, which would bypass the shims and make interface calls invisible.
/// The agent's HOME is private, so its `.profile` and `.bash_profile` put the shims back first.
pub fn login_path_wrapper(shims: &Path, argv: &[String]) -> Vec<String> {
    let script = format!(
        "line='export PATH=\"{shims}:$PATH\"'; printf '%s\\n' \"$line\" >> \"$HOME/.profile\"; printf '%s\\n' \"$line\" >> \"$HOME/.bash_profile\"; exec \"$@\"",
        shims = shims.display()
    );
    let mut v = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        script,
        "proctor-agent".to_string(),
    ];
    v.extend(argv.iter().cloned());
    v
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_login_path_wrapper_runs_the_agent_with_its_own_argv() {
        let argv = vec![
            "claude".to_string(),
            "-p".to_string(),
            "hi there".to_string(),
        ];
        let v = login_path_wrapper(Path::new("/run/proctor/shims"), &argv);
        assert_eq!(&v[..2], ["/bin/sh", "-c"]);
        assert!(
            v[2].contains("export PATH=\"/run/proctor/shims:$PATH\""),
            "{}",
            v[2]
        );
        assert!(v[2].ends_with("exec \"$@\""), "{}", v[2]);
        assert_eq!(v[3], "proctor-agent");
        assert_eq!(&v[4..], argv.as_slice());
    }

    #[test]
    fn the_login_path_wrapper_really_puts_the_shims_first_in_a_login_shell() {
        let home = tempfile::tempdir().unwrap();
        let v = login_path_wrapper(Path::new("/shims"), &["true".to_string()]);
        let status = std::process::Command::new(&v[0])
            .args(&v[1..])
            .env("HOME", home.path())
            .status()
            .unwrap();
        assert!(status.success());
        let profile = std::fs::read_to_string(home.path().join(".profile")).unwrap();
        assert_eq!(profile, "export PATH=\"/shims:$PATH\"\n");
        assert!(home.path().join(".bash_profile").is_file());
    }

    fn paths(namespaces: bool) -> TrialPaths {
        TrialPaths::new(
            namespaces,
            Path::new("/opt/proctor"),
            PathBuf::from("/store/t"),
            PathBuf::from("/scratch/t"),
            PathBuf::from("/sockets/1.sock"),
        )
    }

    fn get<'a>(env: &'a Env, key: &str) -> Vec<&'a str> {
        env.iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    #[test]
    fn the_agent_env_puts_the_shims_first_and_layers_suite_variant_and_launch_in_order() {
        let service: BTreeMap<String, String> = [("CHAT_API".to_string(), "svc".to_string())]
            .into_iter()
            .collect();
        let variant: BTreeMap<String, String> = [("CHAT_API".to_string(), "variant".to_string())]
            .into_iter()
            .collect();
        let launch = vec![("CHAT_API".to_string(), "launch".to_string())];
        let env = agent_env(
            &paths(true),
            AgentEnvParts {
                host_path: "/usr/bin:/bin",
                image: &[],
                services: &[&service],
                variant: &variant,
                launch: &launch,
                agents_dir: None,
                trial: (0, Some(7)),
            },
        );
        assert_eq!(get(&env, "PATH"), ["/run/proctor/shims:/usr/bin:/bin"]);
        assert_eq!(get(&env, "HOME"), ["/home/agent"]);
        assert_eq!(get(&env, "TMPDIR"), ["/tmp"]);
        // No socket of the calls log in the agent's environment.
        assert!(get(&env, "PROCTOR_CALLS_SOCKET").is_empty());
        assert!(env.iter().all(|(_, v)| !v.contains("/sockets/")), "{env:?}");
        // Every layer is kept, in order: the sandbox lets the last one win.
        assert_eq!(get(&env, "CHAT_API"), ["svc", "variant", "launch"]);
        assert!(get(&env, "PROCTOR_AGENTS_DIR").is_empty());
        assert_eq!(env[0].0, "PATH");
        assert_eq!(get(&env, TRIAL_INDEX_ENV), ["0"]);
        assert_eq!(get(&env, TRIAL_SEED_ENV), ["7"]);
    }

    #[test]
    fn the_trial_index_and_seed_cannot_be_set_by_the_variant_or_the_launch() {
        let variant: BTreeMap<String, String> = [(TRIAL_SEED_ENV.to_string(), "1".to_string())]
            .into_iter()
            .collect();
        let launch = vec![(TRIAL_INDEX_ENV.to_string(), "9".to_string())];
        let env = agent_env(
            &paths(true),
            AgentEnvParts {
                host_path: "/bin",
                image: &[(TRIAL_SEED_ENV.to_string(), "2".to_string())],
                services: &[],
                variant: &variant,
                launch: &launch,
                agents_dir: None,
                trial: (4, Some(12345)),
            },
        );
        assert_eq!(get(&env, TRIAL_INDEX_ENV), ["4"]);
        assert_eq!(get(&env, TRIAL_SEED_ENV), ["12345"]);
    }

    #[test]
    fn without_namespaces_the_agent_gets_host_folders_for_home_and_tmp() {
        let empty = BTreeMap::new();
        let env = agent_env(
            &paths(false),
            AgentEnvParts {
                host_path: "/bin",
                image: &[],
                services: &[],
                variant: &empty,
                launch: &[],
                agents_dir: Some(Path::new("/agents")),
                trial: (3, None),
            },
        );
        assert_eq!(get(&env, "PATH"), ["/scratch/t/shims:/bin"]);
        assert_eq!(get(&env, "HOME"), ["/scratch/t/home"]);
        assert_eq!(get(&env, "TMPDIR"), ["/scratch/t/tmp"]);
        assert_eq!(get(&env, "PROCTOR_CALLS_SOCKET"), ["/sockets/1.sock"]);
        assert_eq!(get(&env, "PROCTOR_AGENTS_DIR"), ["/agents"]);
        assert_eq!(get(&env, TRIAL_INDEX_ENV), ["3"]);
        assert!(get(&env, TRIAL_SEED_ENV).is_empty());
    }

    #[test]
    fn a_service_gets_the_agents_path_and_lang_and_its_own_env_only() {
        let agent: Env = vec![
            ("PATH".into(), "/shims:/bin".into()),
            ("HOME".into(), "/home/agent".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("SECRET".into(), "x".into()),
        ];
        let own: BTreeMap<String, String> = [("PORT".to_string(), "7070".to_string())]
            .into_iter()
            .collect();
        let env = service_env(&agent, &own);
        assert_eq!(
            env,
            vec![
                ("PATH".to_string(), "/shims:/bin".to_string()),
                ("LANG".to_string(), "C.UTF-8".to_string()),
                ("PORT".to_string(), "7070".to_string()),
            ]
        );
    }

    #[test]
    fn a_check_gets_the_host_path_without_shims() {
        let env = check_env(
            Path::new("/home/agent"),
            "/usr/bin",
            Path::new("/workspace"),
        );
        assert_eq!(get(&env, "PATH"), ["/usr/bin"]);
        assert_eq!(get(&env, "HOME"), ["/home/agent"]);
        assert!(get(&env, "PROCTOR_CALLS_SOCKET").is_empty());
        assert_eq!(get(&env, "GIT_CONFIG_NOSYSTEM"), ["1"]);
        assert_eq!(get(&env, "GIT_CONFIG_GLOBAL"), ["/dev/null"]);
        let count: usize = get(&env, "GIT_CONFIG_COUNT")[0].parse().unwrap();
        for n in 0..count {
            assert_eq!(get(&env, &format!("GIT_CONFIG_KEY_{n}")).len(), 1);
            assert_eq!(get(&env, &format!("GIT_CONFIG_VALUE_{n}")).len(), 1);
        }
        assert_eq!(get(&env, "GIT_CONFIG_KEY_3"), Vec::<&str>::new());
    }

    #[test]
    fn a_checks_path_searches_nothing_the_agent_wrote() {
        let ws = Path::new("/workspace");
        assert_eq!(
            check_path(".:/usr/bin::bin:/workspace/bin:/workspacex/bin:/bin", ws),
            "/usr/bin:/workspacex/bin:/bin"
        );
    }
}
