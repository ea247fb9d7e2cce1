//! `import.toml`: what each imported task says about itself that `suite.toml` has no key for
//! (authors, keywords, category, tags, time estimates, its description, which `descriptions`
//! entry is its prompt, its result parser), kept whole and machine-readable beside the suite,
//! one table per task under `[tasks.TASK_ID]`.

use toml::{Table, Value};
use yaml_rust2::Yaml;

use crate::files::shown_path;
use crate::model::{Format, TaskPlan};

/// The text of `import.toml` for the imported `plans`, read from tasks of `format`.
pub(crate) fn render(format: Format, plans: &[TaskPlan]) -> String {
    let mut tasks = Table::new();
    for plan in plans {
        let mut t = Table::new();
        t.insert(
            "source".into(),
            Value::String(shown_path(&plan.source).to_string_lossy().into_owned()),
        );
        for (k, v) in &plan.metadata {
            t.insert(k.clone(), v.clone());
        }
        tasks.insert(plan.id.clone(), Value::Table(t));
    }
    let mut doc = Table::new();
    doc.insert("format".into(), Value::String(format.command().into()));
    doc.insert("tasks".into(), Value::Table(tasks));
    let body = toml::to_string(&doc).unwrap_or_default();
    format!(
        "# Written by `proctor import {}`: what each task says about itself that suite.toml has no\n# key for, as the task wrote it; see docs/import.md.\n{body}",
        format.command()
    )
}

/// The fields of a Terminal-Bench `task.yaml` kept in `import.toml`, where set.
const TERMINAL_BENCH_KEPT: [&str; 11] = [
    "author",
    "author_name",
    "author_email",
    "difficulty",
    "category",
    "tags",
    "parser_name",
    "estimated_duration_sec",
    "expert_time_estimate_min",
    "junior_time_estimate_min",
    "run_tests_in_same_shell",
];

/// The metadata of a Terminal-Bench task: its [`TERMINAL_BENCH_KEPT`] fields, the keys of its
/// `descriptions` and the one its prompt is (`prompt_from`, `None`: `instruction`).
pub(crate) fn terminal_bench(
    task: &Yaml,
    descriptions: &[(String, String)],
    prompt_from: Option<&str>,
) -> Table {
    let mut t = Table::new();
    let prompt = prompt_from.map_or("instruction".to_string(), |k| format!("descriptions.{k}"));
    t.insert("prompt".into(), Value::String(prompt));
    if !descriptions.is_empty() {
        let keys = descriptions.iter().map(|(k, _)| Value::String(k.clone()));
        t.insert("descriptions".into(), Value::Array(keys.collect()));
    }
    for key in TERMINAL_BENCH_KEPT {
        if let Some(v) = task
            .as_hash()
            .and_then(|h| h.get(&Yaml::String(key.into())))
            .and_then(yaml_value)
        {
            t.insert(key.into(), v);
        }
    }
    t
}

/// A YAML scalar, or list of scalars, as a TOML value; `None` for null and other shapes.
fn yaml_value(y: &Yaml) -> Option<Value> {
    match y {
        Yaml::String(s) => Some(Value::String(s.clone())),
        Yaml::Integer(i) => Some(Value::Integer(*i)),
        Yaml::Real(_) => y.as_f64().map(Value::Float),
        Yaml::Boolean(b) => Some(Value::Boolean(*b)),
        Yaml::Array(items) => Some(Value::Array(items.iter().filter_map(yaml_value).collect())),
        _ => None,
    }
}

/// The metadata of a Harbor task: its `[task]` table but `name` kept under `name`, and its
/// whole `[metadata]` table, under `metadata`.
pub(crate) fn harbor(task: &Table, metadata: &Table) -> Table {
    let mut t = Table::new();
    t.insert("prompt".into(), Value::String("instruction.md".into()));
    for (k, v) in task {
        t.insert(k.clone(), v.clone());
    }
    if !metadata.is_empty() {
        t.insert("metadata".into(), Value::Table(metadata.clone()));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use yaml_rust2::YamlLoader;

    #[test]
    fn terminal_bench_fields_are_kept_as_written() {
        let doc = YamlLoader::load_from_str(
            "author: LCB Team\ntags: [a, b]\nexpert_time_estimate_min: 5\nestimated_duration_sec: 12.5\ndifficulty: easy\nreviewer: x\n",
        )
        .expect("yaml")
        .remove(0);
        let entries = vec![
            ("base".to_string(), "B".to_string()),
            ("problem".to_string(), "P".to_string()),
        ];
        let t = terminal_bench(&doc, &entries, Some("base"));
        assert_eq!(t["prompt"].as_str(), Some("descriptions.base"));
        assert_eq!(t["author"].as_str(), Some("LCB Team"));
        assert_eq!(t["tags"].as_array().map(Vec::len), Some(2));
        assert_eq!(t["expert_time_estimate_min"].as_integer(), Some(5));
        assert_eq!(t["estimated_duration_sec"].as_float(), Some(12.5));
        assert_eq!(t["descriptions"].as_array().map(Vec::len), Some(2));
        assert!(
            t.get("reviewer").is_none(),
            "an unknown field is reported, not kept"
        );
    }
}
