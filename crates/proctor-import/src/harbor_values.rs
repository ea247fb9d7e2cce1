//! Values of a Harbor `task.toml` that both a task and its steps read alike: timeouts in
//! seconds and literal environment tables.

use std::collections::BTreeMap;

use toml::Value;

use crate::settings::{is_var_name, whole_seconds};

/// Seconds as a whole number, rounded up; `None` for a value that is not a positive number.
pub(crate) fn seconds(v: &Value) -> Option<u64> {
    match v {
        Value::Integer(i) => whole_seconds(*i as f64),
        Value::Float(f) => whole_seconds(*f),
        _ => None,
    }
}

/// The literal string values of an `env` table; values Harbor would resolve from the host
/// (`${VAR}`) and values that are not strings are reported instead.
pub(crate) fn literal_env(
    table: Option<&Value>,
    section: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(table) = table.and_then(Value::as_table) else {
        return out;
    };
    for (k, v) in table {
        let value = match v {
            Value::String(s) => s.clone(),
            Value::Integer(_) | Value::Float(_) | Value::Boolean(_) => v.to_string(),
            _ => {
                warnings.push(format!(
                    "task.toml: [{section}.env] {k} is not a string, not imported"
                ));
                continue;
            }
        };
        if !is_var_name(k) {
            warnings.push(format!(
                "task.toml: [{section}.env] `{k}` is not a valid variable name, not imported"
            ));
        } else if value.contains("${") {
            warnings.push(format!(
                "task.toml: [{section}.env] {k} = {value:?} is resolved from the host by Harbor; a suite holds no secrets, so it was not imported (set it in a variant's `env`)"
            ));
        } else {
            out.insert(k.clone(), value);
        }
    }
    out
}
