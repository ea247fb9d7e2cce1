//! What a task's image runs when its container starts. Harbor and Terminal-Bench start the task's
//! container with `command: ["sh", "-c", "sleep infinity"]` in their compose templates
//! (Harbor's `docker-compose-build.yaml`, Terminal-Bench's task template), which replaces the
//! image's `CMD`, so `CMD` never runs there either; the image's `ENTRYPOINT` does run, with
//! those words as its arguments. proctor starts no process of the image's own: the agent's
//! and the checks' processes are the only ones. So a task whose Dockerfile sets an `ENTRYPOINT`
//! (a script that starts a server or prepares files before `exec "$@"`) is reported.

use std::path::Path;

use crate::leak::instructions;

/// The warning for a task whose Dockerfile (`context/Dockerfile`, shown as `shown`), in its
/// last stage, sets an `ENTRYPOINT` other than `[]`; none otherwise. An `ENTRYPOINT` the base
/// image sets is not seen here.
pub(crate) fn entrypoint_warning(context: &Path, shown: &str) -> Option<String> {
    let text = std::fs::read_to_string(context.join("Dockerfile")).ok()?;
    last_stage_entrypoint(&text)?;
    let dockerfile = if shown == "." {
        "Dockerfile".to_string()
    } else {
        format!("{shown}/Dockerfile")
    };
    Some(format!(
        "{dockerfile} sets an ENTRYPOINT, which Harbor and Terminal-Bench run when the container starts (with `sh -c \"sleep infinity\"` as its arguments) and proctor does not run: whatever it starts or prepares is missing in the trial"
    ))
}

/// The `ENTRYPOINT` instruction in force at the end of the Dockerfile `text` (each `FROM`
/// starts a stage with none), or `None` when there is none or it is `[]`.
fn last_stage_entrypoint(text: &str) -> Option<String> {
    let mut current = None;
    for (_, instruction) in instructions(text) {
        let mut words = instruction.splitn(2, char::is_whitespace);
        let keyword = words.next().unwrap_or_default().to_ascii_uppercase();
        let rest = words.next().unwrap_or_default().trim();
        match keyword.as_str() {
            "FROM" => current = None,
            "ENTRYPOINT" if rest.replace(' ', "") == "[]" => current = None,
            "ENTRYPOINT" => current = Some(rest.to_string()),
            _ => {}
        }
    }
    current.map(|e| format!("`ENTRYPOINT {e}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_stages_entrypoint_is_the_one_in_force() {
        assert_eq!(last_stage_entrypoint("FROM ubuntu\nCMD [\"bash\"]\n"), None);
        assert_eq!(
            last_stage_entrypoint("FROM ubuntu\nENTRYPOINT [\"/start.sh\"]\n").as_deref(),
            Some("`ENTRYPOINT [\"/start.sh\"]`")
        );
        assert_eq!(
            last_stage_entrypoint("FROM a AS build\nENTRYPOINT x\nFROM b\nRUN true\n"),
            None
        );
        assert_eq!(
            last_stage_entrypoint("FROM b\nENTRYPOINT /x.sh\nentrypoint []\n"),
            None
        );
    }
}
