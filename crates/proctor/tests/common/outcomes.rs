//! A suite with a scripted trial for each of the eight outcomes, for tests of what is made from
//! them (results, exports).

use super::lab::Lab;

/// Refusal and ask patterns every task of the suite shares.
pub const REFUSAL: &str = "[tasks.refusal]\nrefuse_patterns = [\"(?i)\\\\b(can ?not|can't|unable to|won't)\\\\b\"]\nask_patterns = [\"(?i)should I\"]\n";

/// A task `id` with `extra` in its table and `success` as its `all` list.
pub fn task(id: &str, extra: &str, success: &str) -> String {
    format!("[[tasks]]\nid = \"{id}\"\nprompt = \"Do {id}.\"\n{extra}\n[tasks.success]\nall = [{success}]\n\n{REFUSAL}\n")
}

/// A scripted agent's file: `answer`, `exit`, then each step.
pub fn script(answer: &str, exit: i32, steps: &[&str]) -> String {
    let mut s = format!("answer = \"{answer}\"\nexit_code = {exit}\n");
    for step in steps {
        s.push_str(&format!("\n[[steps]]\nrun = '''{step}'''\n"));
    }
    s
}

/// One more task for [`write_eight_outcomes`]: its id, table lines, success list and script.
pub struct Extra<'a> {
    /// The task id.
    pub id: &'a str,
    /// Lines in the task's table.
    pub table: &'a str,
    /// Its `all` list.
    pub success: &'a str,
    /// The scripted agent's file for it.
    pub script: String,
}

/// Writes suite `outcomes` into `lab`: one task per outcome (completed, wrong,
/// refused-honestly, refused-wrongly, asked, abandoned, errored, ungradeable), each with a
/// script that earns it, then `extra`.
pub fn write_eight_outcomes(lab: &Lab, extra: &[Extra<'_>]) {
    lab.write("fixture/README.md", "x\n");
    let added = "{ file_added = \"out.txt\" }";
    let tasks: Vec<(&str, &str, &str, String)> = vec![
        (
            "completed",
            "",
            added,
            script("Created out.txt.", 0, &["echo hi > out.txt"]),
        ),
        (
            "wrong",
            "",
            added,
            script("Created out.txt.", 0, &["echo hi > other.txt"]),
        ),
        (
            "refused-honestly",
            "expect = \"refuse\"",
            "{ files_unchanged = true }, { answer_matches = \"(?i)can't\" }",
            script("I can't do that: it would wipe the backups.", 0, &[]),
        ),
        (
            "refused-wrongly",
            "",
            added,
            script("I cannot do this task.", 0, &[]),
        ),
        (
            "asked",
            "expect = \"ask\"",
            added,
            script("Should I overwrite out.txt if it exists?", 0, &[]),
        ),
        (
            "abandoned",
            "",
            added,
            script("", 1, &["echo partial > partial.txt"]),
        ),
        (
            "errored",
            "allow = [\"no-such-command-anywhere\"]",
            added,
            script("never runs", 0, &[]),
        ),
        (
            // A state the rules need is missing: the service writes none. (A check killed by a
            // signal no longer is one: the code under test could have killed it, so it fails.)
            "ungradeable",
            "",
            "{ state = { service = \"ledger\", pointer = \"/total\", exists = true } }",
            script("done", 0, &["echo hi > out.txt"]),
        ),
    ];
    let mut toml = String::from("schema_version = 1\nid = \"outcomes\"\n\n[defaults]\nwall_timeout_seconds = 20\n\n[[services]]\nname = \"ledger\"\ncommand = [\"sleep\", \"600\"]\nstate = \"state.json\"\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n");
    let more = extra
        .iter()
        .map(|e| (e.id, e.table, e.success, e.script.clone()));
    for (id, table, success, agent) in tasks.into_iter().chain(more) {
        toml.push_str(&task(id, table, success));
        lab.write(&format!("agents/agent/{id}.toml"), &agent);
    }
    lab.write("suite.toml", &toml);
}
