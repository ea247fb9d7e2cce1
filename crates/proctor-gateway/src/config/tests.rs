use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/etc/proctor/config.toml"))
}

fn invalid(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Err(ConfigError::Invalid {
            line,
            column,
            message,
            ..
        }) => (line, column, message),
        other => panic!("expected an invalid config, got {other:?}"),
    }
}

#[test]
fn builtins_need_no_configuration() {
    let config = Config::builtin();
    let names: Vec<&str> = config.providers.keys().map(String::as_str).collect();
    assert_eq!(names, ["anthropic", "google", "openai", "openrouter"]);
    let a = config.provider("anthropic").unwrap();
    assert_eq!(a.api, Api::AnthropicMessages);
    assert_eq!(a.base_url, "https://api.anthropic.com");
    assert_eq!(a.key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    let o = config.provider("openai").unwrap();
    assert_eq!(
        (o.api, o.base_url.as_str()),
        (Api::OpenaiResponses, "https://api.openai.com/v1")
    );
    let g = config.provider("google").unwrap();
    assert_eq!(
        (g.api, g.key_env.as_deref()),
        (Api::Gemini, Some("GEMINI_API_KEY"))
    );
    let r = config.provider("openrouter").unwrap();
    assert_eq!(
        (r.api, r.base_url.as_str()),
        (Api::OpenaiChat, "https://openrouter.ai/api/v1")
    );
    assert_eq!(config.retries, RetrySettings::default());
    assert_eq!(parse("").unwrap().providers, config.providers);
}

#[test]
fn a_user_provider_is_added() {
    let config = parse(
        r#"
[providers.local-vllm]
api = "openai-chat"
base_url = "http://10.0.0.5:8000/v1/"
key_env = "VLLM_KEY"
max_concurrency = 4
ca_file = "certs/ca.pem"
"#,
    )
    .unwrap();
    let p = config.provider("local-vllm").unwrap();
    assert_eq!(p.api, Api::OpenaiChat);
    assert_eq!(p.base_url, "http://10.0.0.5:8000/v1");
    assert_eq!(p.key_env.as_deref(), Some("VLLM_KEY"));
    assert_eq!(p.max_concurrency, 4);
    assert_eq!(
        p.ca_file.as_deref(),
        Some(Path::new("/etc/proctor/certs/ca.pem"))
    );
    assert!(!p.builtin);
    assert_eq!(config.providers.len(), 5);
    assert_eq!(
        config.source.as_deref(),
        Some(Path::new("/etc/proctor/config.toml"))
    );
}

#[test]
fn a_key_env_is_optional_for_local_servers() {
    let config = parse(
        "[providers.ollama]\napi = \"openai-chat\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n",
    )
    .unwrap();
    let p = config.provider("ollama").unwrap();
    assert_eq!(p.key_env, None);
    assert_eq!(p.max_concurrency, DEFAULT_MAX_CONCURRENCY);
}

#[test]
fn a_user_table_overrides_fields_of_a_builtin() {
    let config =
        parse("[providers.anthropic]\nbase_url = \"http://127.0.0.1:9000\"\nmax_concurrency = 2\n")
            .unwrap();
    let a = config.provider("anthropic").unwrap();
    assert_eq!(a.base_url, "http://127.0.0.1:9000");
    assert_eq!(a.max_concurrency, 2);
    assert_eq!(a.api, Api::AnthropicMessages);
    assert_eq!(a.key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    assert!(a.builtin);
    let cleared = parse("[providers.openai]\nkey_env = \"\"\n").unwrap();
    assert_eq!(cleared.provider("openai").unwrap().key_env, None);
}

#[test]
fn a_new_provider_needs_api_and_base_url() {
    let (line, column, message) = invalid("\n[providers.x]\nbase_url = \"http://h\"\n");
    assert_eq!((line, column), (2, 1), "{message}");
    assert!(message.contains("needs `api`"), "{message}");
    let (_, _, message) = invalid("[providers.x]\napi = \"gemini\"\n");
    assert!(message.contains("needs `base_url`"), "{message}");
}

#[test]
fn unknown_keys_are_refused_with_their_place() {
    let (line, column, message) =
        invalid("[providers.anthropic]\nbase_url = \"http://h\"\nkey = \"x\"\n");
    assert_eq!((line, column), (3, 1), "{message}");
    assert!(message.contains("unknown field `key`"), "{message}");
    let (line, _, message) = invalid("[retries]\nattempts = 2\ntries = 3\n");
    assert_eq!(line, 3, "{message}");
    let (line, _, message) = invalid("[gateway]\n");
    assert_eq!(line, 1, "{message}");
    let err = parse("[providers.x]\napi = \"grpc\"\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/etc/proctor/config.toml:2:7: "),
        "{err}"
    );
}

#[test]
fn values_out_of_range_are_refused() {
    let (line, column, message) = invalid("[providers.openai]\nmax_concurrency = 0\n");
    assert_eq!((line, column), (2, 19), "{message}");
    let (_, _, message) = invalid("[providers.openai]\nbase_url = \"ftp://h\"\n");
    assert!(message.contains("http:// or https://"), "{message}");
    let (_, _, message) = invalid("[retries]\nattempts = 0\n");
    assert!(message.contains("at least 1"), "{message}");
    let (_, _, message) = invalid("[timeouts]\nidle_ms = 0\n");
    assert!(message.contains("at least 1 ms"), "{message}");
    let (_, _, message) =
        invalid("[providers.\"a/b\"]\napi = \"gemini\"\nbase_url = \"http://h\"\n");
    assert!(message.contains("without `/`"), "{message}");
}

#[test]
fn retries_and_timeouts_default_per_key() {
    let config = parse("[retries]\nattempts = 2\n[timeouts]\nidle_ms = 5\n").unwrap();
    assert_eq!(
        config.retries,
        RetrySettings {
            attempts: 2,
            ..RetrySettings::default()
        }
    );
    assert_eq!(config.timeouts.idle_ms, 5);
    assert_eq!(config.timeouts.connect_ms, Timeouts::default().connect_ms);
}

#[test]
fn prices_are_keyed_by_model_reference() {
    let config = parse(
        r#"
[prices."anthropic/claude-sonnet-4-5"]
input = 3.0
output = 15.0
cache_read = 0.3

[prices."openrouter/anthropic/claude-sonnet-4.5"]
input = 3
output = 15
"#,
    )
    .unwrap();
    let sonnet: ModelRef = "anthropic/claude-sonnet-4-5".parse().unwrap();
    assert_eq!(config.price(&sonnet).unwrap().cache_read, Some(0.3));
    let or = config.prices_for("openrouter");
    assert_eq!(
        or.keys().collect::<Vec<_>>(),
        ["anthropic/claude-sonnet-4.5"]
    );
    let (line, _, message) = invalid("[prices.\"sonnet\"]\ninput = 1\noutput = 2\n");
    assert_eq!(line, 1);
    assert!(message.contains("names no provider"), "{message}");
    let (_, _, message) = invalid("[prices.\"a/b\"]\ninput = -1\noutput = 2\n");
    assert!(message.contains("zero or more"), "{message}");
    let (_, _, message) = invalid("[prices.\"a/b\"]\ninput = 1\n");
    assert!(message.contains("missing field `output`"), "{message}");
}

#[test]
fn model_references_are_checked_against_providers() {
    let config = Config::builtin();
    let m = config
        .model("openrouter/anthropic/claude-sonnet-4.5")
        .unwrap();
    assert_eq!(m.model, "anthropic/claude-sonnet-4.5");
    let err = config.model("acme/m").unwrap_err();
    assert!(err.to_string().contains("unknown provider `acme`"), "{err}");
}

fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn the_location_follows_precedence() {
    let home = &[("HOME", "/home/u"), ("PROCTOR_CONFIG", "/srv/p.toml")];
    assert_eq!(
        ConfigLocation::resolve(Some(Path::new("a.toml")), env(home)),
        ConfigLocation::Explicit(PathBuf::from("a.toml"))
    );
    assert_eq!(
        ConfigLocation::resolve(None, env(home)),
        ConfigLocation::Env(PathBuf::from("/srv/p.toml"))
    );
    assert_eq!(
        ConfigLocation::resolve(None, env(&[("HOME", "/home/u"), ("PROCTOR_CONFIG", "")])),
        ConfigLocation::Default(PathBuf::from("/home/u/.config/proctor/config.toml"))
    );
    assert_eq!(
        ConfigLocation::resolve(None, env(&[])),
        ConfigLocation::None
    );
}

#[test]
fn a_missing_default_file_means_builtins_only() {
    let dir = tempfile::tempdir().unwrap();
    let default = ConfigLocation::Default(dir.path().join("config.toml"));
    assert_eq!(Config::load(&default).unwrap(), Config::builtin());
    assert_eq!(
        Config::load(&ConfigLocation::None).unwrap(),
        Config::builtin()
    );
    let explicit = ConfigLocation::Explicit(dir.path().join("config.toml"));
    let err = Config::load(&explicit).unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Read {
                origin: "--config",
                ..
            }
        ),
        "{err}"
    );
    let env = ConfigLocation::Env(dir.path().join("config.toml"));
    assert!(Config::load(&env)
        .unwrap_err()
        .to_string()
        .contains("$PROCTOR_CONFIG"));
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[retries]\nattempts = 1\n").unwrap();
    let config = Config::load(&ConfigLocation::Explicit(path.clone())).unwrap();
    assert_eq!(config.retries.attempts, 1);
    assert_eq!(config.source, Some(path));
}
