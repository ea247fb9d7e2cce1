//! The fields each format defines, so that every other field is reported instead of dropped.

/// What a known key holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// A value whose inside is not checked (scalars, lists, free-form tables such as `env`).
    Any,
    /// A table whose keys are checked against this list.
    Table(&'static [(&'static str, Shape)]),
}

/// Harbor's `task.toml` (schema versions 1.0 and 1.1), as Harbor's own `TaskConfig` model
/// defines it.
pub(crate) const HARBOR_TASK_TOML: Shape = Shape::Table(&[
    ("version", Shape::Any),
    ("schema_version", Shape::Any),
    ("source", Shape::Any),
    ("artifacts", Shape::Any),
    (
        "task",
        Shape::Table(&[
            ("name", Shape::Any),
            ("description", Shape::Any),
            ("authors", Shape::Any),
            ("keywords", Shape::Any),
            ("version", Shape::Any),
        ]),
    ),
    (
        "metadata",
        Shape::Table(&[
            ("author_name", Shape::Any),
            ("author_email", Shape::Any),
            ("difficulty", Shape::Any),
            ("category", Shape::Any),
            ("tags", Shape::Any),
            ("expert_time_estimate_min", Shape::Any),
            ("junior_time_estimate_min", Shape::Any),
        ]),
    ),
    (
        "verifier",
        Shape::Table(&[
            ("timeout_sec", Shape::Any),
            ("env", Shape::Any),
            ("user", Shape::Any),
            ("network_mode", Shape::Any),
            ("allowed_hosts", Shape::Any),
        ]),
    ),
    (
        "agent",
        Shape::Table(&[
            ("timeout_sec", Shape::Any),
            ("user", Shape::Any),
            ("network_mode", Shape::Any),
            ("allowed_hosts", Shape::Any),
        ]),
    ),
    (
        "environment",
        Shape::Table(&[
            ("build_timeout_sec", Shape::Any),
            ("docker_image", Shape::Any),
            ("os", Shape::Any),
            ("cpus", Shape::Any),
            ("memory_mb", Shape::Any),
            ("storage_mb", Shape::Any),
            ("memory", Shape::Any),
            ("storage", Shape::Any),
            ("gpus", Shape::Any),
            ("gpu_types", Shape::Any),
            ("tpu", Shape::Any),
            ("allow_internet", Shape::Any),
            ("network_mode", Shape::Any),
            ("allowed_hosts", Shape::Any),
            ("mcp_servers", Shape::Any),
            ("env", Shape::Any),
            ("skills_dir", Shape::Any),
            ("healthcheck", Shape::Any),
            ("workdir", Shape::Any),
        ]),
    ),
    ("solution", Shape::Table(&[("env", Shape::Any)])),
    ("steps", Shape::Any),
]);

/// Terminal-Bench's `task.yaml`, as its `Task` model defines it (and the older `descriptions`
/// list that preceded `instruction`).
pub(crate) const TERMINAL_BENCH_TASK_YAML: &[&str] = &[
    "instruction",
    "descriptions",
    "author",
    "author_name",
    "author_email",
    "difficulty",
    "category",
    "tags",
    "parser_name",
    "max_agent_timeout_sec",
    "max_test_timeout_sec",
    "run_tests_in_same_shell",
    "disable_asciinema",
    "estimated_duration_sec",
    "expert_time_estimate_min",
    "junior_time_estimate_min",
];

/// The warning for a field `key` of the task file `file` that its format does not define.
pub(crate) fn unknown_field(file: &str, key: &str) -> String {
    format!("{file}: unknown field `{key}`, not imported")
}

/// The dotted paths of every key of `table` that `shape` does not define.
pub(crate) fn unknown_toml_keys(table: &toml::Table, shape: Shape) -> Vec<String> {
    let mut out = Vec::new();
    walk(table, shape, "", &mut out);
    out
}

fn walk(table: &toml::Table, shape: Shape, prefix: &str, out: &mut Vec<String>) {
    let Shape::Table(known) = shape else {
        return;
    };
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match known.iter().find(|(k, _)| k == key) {
            None => out.push(path),
            Some((_, inner @ Shape::Table(_))) => {
                if let Some(t) = value.as_table() {
                    walk(t, *inner, &path, out);
                }
            }
            Some((_, Shape::Any)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named_by_their_dotted_path() {
        let table: toml::Table = toml::from_str(
            "version = \"1.0\"\nextra = 1\n[metadata]\ndifficulty = \"easy\"\nreviewer = \"x\"\n[environment]\ndocker_image = \"i\"\n[environment.env]\nANY = \"ok\"\n[verifier]\ntimeout = 3\n",
        )
        .expect("toml");
        assert_eq!(
            unknown_toml_keys(&table, HARBOR_TASK_TOML),
            vec!["extra", "metadata.reviewer", "verifier.timeout"]
        );
    }
}
