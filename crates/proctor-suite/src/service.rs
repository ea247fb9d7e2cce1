//! `[[services]]`: the mock backends and sidecar containers a trial starts before its agent,
//! and how proctor knows each is up and is the mock.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

/// A mock backend started fresh inside each trial's namespaces, before the agent.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// The service's name, unique within the suite; `state` assertions name it. Required.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// The argv that starts it; the program is a name on PATH or a path inside the suite.
    /// Required without an `image`; with one, it replaces the image's `Cmd` (its `Entrypoint`
    /// stays, as Docker Compose's `command` does), and a bare program is found on the image's
    /// `PATH`. Default (with an `image`): the image's `Entrypoint` and `Cmd`.
    #[serde(default = "no_command")]
    #[schemars(with = "Vec<String>", extend("default" = []))]
    pub command: Spanned<Vec<String>>,
    /// The image the service runs in, as a sidecar container of the trial: a root of its own
    /// (the image under a writable layer of its own), the trial's network, reachable from the
    /// agent and the checks by its `name` (which `/etc/hosts` gives as `127.0.0.1`), never
    /// seeing the agent's workspace. A reference as for `[environment] image`, e.g. `"redis:7"`
    /// or `"oci-archive:images/db.tar"`. Needs the task to run in an image. Default: none (the
    /// service runs in the trial's root).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub image: Option<Spanned<String>>,
    /// With an `image`: the working folder inside it, absolute. Default: the image's
    /// `WorkingDir`, else `/`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub workdir: Option<Spanned<String>>,
    /// A command that says the service is up: run (inside the service's image, with its
    /// environment) until it exits 0, before the next service or the agent starts, e.g.
    /// `{ command = ["wget", "-q", "-O-", "http://127.0.0.1:8080/"], timeout_seconds = 30 }`.
    /// One that never passes makes the trial `errored`, never counted against the agent.
    #[serde(default)]
    pub healthcheck: Option<Healthcheck>,
    /// Services (by name) started, and ready or healthy, before this one. Default: none.
    #[serde(default)]
    #[schemars(with = "Vec<String>", extend("default" = []))]
    pub depends_on: Vec<Spanned<String>>,
    /// How to know the service is up before the agent starts.
    #[serde(default)]
    pub ready: Option<Ready>,
    /// How to know the service is the mock and not a real server; a failed guard makes the
    /// trial `errored`.
    #[serde(default)]
    pub guard: Option<Guard>,
    /// The file the service writes in `$PROCTOR_SERVICE_DIR`, read by `state` assertions, e.g.
    /// `"state.json"`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub state: Option<Spanned<String>>,
    /// Environment variables given to the agent (and the service); for a service with an
    /// `image`, to the service alone, over the image's own.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl Service {
    /// Whether the service is a sidecar container: it names an `image`.
    pub fn is_sidecar(&self) -> bool {
        self.image.is_some()
    }
}

fn no_command() -> Spanned<Vec<String>> {
    Spanned::new(0..0, Vec::new())
}

/// A service's healthcheck by command: `{ command = ["ARGV", ...], timeout_seconds = 60 }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Healthcheck {
    /// The argv run inside the service's root until it exits 0; `["sh", "-c", "..."]` for a
    /// shell line. Required.
    #[schemars(with = "Vec<String>")]
    pub command: Spanned<Vec<String>>,
    /// Seconds to keep trying, from the service's start. Default: 60.
    #[serde(default = "default_health_timeout")]
    pub timeout_seconds: u64,
    /// The longest pause between two tries, in seconds (the first pauses are shorter).
    /// Default: 1.
    #[serde(default = "default_health_interval")]
    pub interval_seconds: u64,
}

fn default_health_timeout() -> u64 {
    60
}

fn default_health_interval() -> u64 {
    1
}

/// A readiness probe: `{ http = "URL", timeout_seconds = 10 }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// URL that must answer 2xx. Required.
    #[schemars(with = "String")]
    pub http: Spanned<String>,
    /// Seconds to keep trying. Default: 10.
    #[serde(default = "default_ready_timeout")]
    pub timeout_seconds: u64,
}

fn default_ready_timeout() -> u64 {
    10
}

/// A check that the service is the mock: `{ http = "URL", expect = "TEXT" }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Guard {
    /// URL to fetch. Required.
    #[schemars(with = "String")]
    pub http: Spanned<String>,
    /// Text the response body must contain. Required.
    pub expect: String,
}
