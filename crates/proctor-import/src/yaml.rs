//! Reading values out of a parsed YAML document (Terminal-Bench's `task.yaml` and compose files).

use yaml_rust2::Yaml;

/// The value at `key` of a mapping.
pub(crate) fn get<'a>(y: &'a Yaml, key: &str) -> Option<&'a Yaml> {
    y.as_hash()?.get(&Yaml::String(key.to_string()))
}

/// A scalar as text.
pub(crate) fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}
