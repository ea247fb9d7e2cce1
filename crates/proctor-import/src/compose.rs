//! Compose files, read before they are judged: how many services a `docker-compose` file
//! really defines.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// The names of the services the compose file at `path` defines (its `services` mapping), in
/// order; empty when it defines none (a YAML file that is not a compose file). An error when it
/// cannot be read or does not parse as YAML.
pub(crate) fn services(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let docs = YamlLoader::load_from_str(&text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Ok(Vec::new());
    };
    let services = doc
        .as_hash()
        .and_then(|h| h.get(&Yaml::String("services".into())))
        .and_then(Yaml::as_hash);
    Ok(services
        .map(|h| {
            h.keys()
                .map(|k| match k {
                    Yaml::String(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Result<Vec<String>, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("docker-compose.yml");
        std::fs::write(&p, text).expect("write");
        services(&p)
    }

    #[test]
    fn services_are_counted_from_the_file_itself() {
        assert_eq!(
            of("services:\n  main:\n    build: .\n  db:\n    image: postgres\n"),
            Ok(vec!["main".to_string(), "db".to_string()])
        );
        assert_eq!(
            of("services:\n  main:\n    build: .\n"),
            Ok(vec!["main".into()])
        );
        // Task data that happens to be called docker-compose.yml.
        assert_eq!(of("- a\n- b\n"), Ok(Vec::new()));
        assert_eq!(of("name: x\n"), Ok(Vec::new()));
        assert_eq!(of(""), Ok(Vec::new()));
        assert!(of("services: [\n").is_err());
    }
}
