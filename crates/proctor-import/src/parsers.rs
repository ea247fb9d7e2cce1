//! Terminal-Bench's result parsers (`parser_name` in task.yaml), as `proctor-verify.sh` runs
//! them: each reads the whole output of `run-tests.sh` and says whether the task is resolved,
//! as Terminal-Bench's own parser of that name does (`terminal_bench/parsers/*_parser.py`, read
//! in the `terminal-bench` package 0.2.18 on PyPI, which has all five; with
//! `Harness._is_resolved`: resolved only when every test the parser found passed; a parser that
//! cannot read the output resolves nothing).
//!
//! Each is an `awk` program (POSIX awk: the images' `mawk`, busybox's or GNU's) that reads the
//! output file named by its last argument and exits 0 if and only if the task is resolved, with
//! what it found on stderr.

/// A Terminal-Bench result parser proctor carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parser {
    /// `pytest` (the default): pytest's `short test summary info` (`pytest -rA`).
    Pytest,
    /// `swebench`: the block between `SWEBench results starts here` and `... ends here`.
    Swebench,
    /// `mlebench`: the block between `MLEBench results starts here` and `... ends here`.
    Mlebench,
    /// `swelancer`: the words `swe lancer success`, `swe lancer failure`, `user_tool` and
    /// `completed` anywhere in the output.
    Swelancer,
    /// `sweperf`: the block between `SWE-Perf results starts here` and `... ends here`.
    Sweperf,
}

impl Parser {
    /// The parser a task.yaml's `parser_name` names, or why the task cannot be imported.
    pub(crate) fn named(name: &str) -> Result<Parser, String> {
        match name {
            "pytest" => Ok(Parser::Pytest),
            "swebench" => Ok(Parser::Swebench),
            "mlebench" => Ok(Parser::Mlebench),
            "swelancer" => Ok(Parser::Swelancer),
            "sweperf" => Ok(Parser::Sweperf),
            other => Err(format!(
                "task.yaml: parser_name = \"{other}\" is not a Terminal-Bench result parser (Terminal-Bench's are pytest, swebench, swelancer, mlebench and sweperf)"
            )),
        }
    }

    /// The name task.yaml gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Parser::Pytest => "pytest",
            Parser::Swebench => "swebench",
            Parser::Mlebench => "mlebench",
            Parser::Swelancer => "swelancer",
            Parser::Sweperf => "sweperf",
        }
    }

    /// What resolves a task, for the script's header.
    pub(crate) fn rule(self) -> &'static str {
        match self {
            Parser::Pytest => PYTEST_RULE,
            Parser::Swebench => SWEBENCH_RULE,
            Parser::Mlebench => MLEBENCH_RULE,
            Parser::Swelancer => SWELANCER_RULE,
            Parser::Sweperf => SWEPERF_RULE,
        }
    }

    /// The shell lines that run the parser over the output file `$out`, exiting 0 iff the task
    /// is resolved.
    pub(crate) fn shell(self) -> String {
        match self {
            Parser::Pytest => format!("awk '{PYTEST_AWK}' \"$out\"\n"),
            Parser::Swebench => markers_shell("swebench", "SWEBench", "PASSED", true),
            Parser::Mlebench => markers_shell("mlebench", "MLEBench", "ALL TESTS PASSED", false),
            Parser::Swelancer => format!("awk '{SWELANCER_AWK}' \"$out\"\n"),
            Parser::Sweperf => markers_shell("sweperf", "SWE-Perf", "PASSED", true),
        }
    }
}

const PYTEST_RULE: &str =
    "# Terminal-Bench's pytest parser decides: the output after the first line matching
# `=+ *short test summary info *=+` (any case) is read line by line; a line whose first word
# (colons stripped) is PASSED, XFAIL or SKIPPED is a passed test, FAILED, XPASS or ERROR a
# failed one (keyed by the text after the first `::`, a later line winning), anything else
# is ignored. Resolved when there is such a summary and no test in it failed (an empty
# summary resolves, as in Terminal-Bench); no summary: not resolved.
";

const SWEBENCH_RULE: &str =
    "# Terminal-Bench's swebench parser decides: the output must hold `SWEBench results starts
# here` and `SWEBench results ends here`; the text after the first and before the last of
# them, stripped of white space, must be exactly PASSED. (The task's run-tests.sh runs the
# SWE-bench grader, which prints PASSED only when the task is fully resolved.) Either marker
# missing: not resolved.
";

const MLEBENCH_RULE: &str =
    "# Terminal-Bench's mlebench parser decides: the text after the first `MLEBench results starts
# here` (or from the start, without one) and before the last `MLEBench results ends here` (or
# to the end), stripped of white space, must be exactly `ALL TESTS PASSED`.
";

const SWELANCER_RULE: &str =
    "# Terminal-Bench's swelancer parser decides, reading the output lower-cased: `swe lancer
# success` anywhere resolves the task; else `swe lancer failure` anywhere does not; else
# `user_tool` and `completed`, each anywhere, resolve it; else it is not resolved.
";

const SWEPERF_RULE: &str =
    "# Terminal-Bench's sweperf parser decides: the output must hold `SWE-Perf results starts
# here` and `SWE-Perf results ends here`; the text after the first and before the last of
# them, stripped of white space, must be exactly PASSED. Either marker missing: not resolved.
";

/// Terminal-Bench's `SWELancerParser.parse`: its indicators are single lines' words, so each
/// line is searched (lower-cased) instead of the whole output at once.
const SWELANCER_AWK: &str = r#"
{ line = tolower($0) }
index(line, "swe lancer success") { success = 1 }
index(line, "swe lancer failure") { failure = 1 }
index(line, "user_tool") { user_tool = 1 }
index(line, "completed") { completed = 1 }
END {
  resolved = 0
  if (success) { why = "`swe lancer success` is in the output"; resolved = 1 }
  else if (failure) why = "`swe lancer failure` is in the output"
  else if (user_tool && completed) { why = "`user_tool` and `completed` are in the output"; resolved = 1 }
  else why = "none of `swe lancer success`, `swe lancer failure` or `user_tool` with `completed` is in the output"
  print "proctor-verify: swelancer parser: " why > "/dev/stderr"
  if (resolved) exit 0
  exit 1
}
"#;

/// Terminal-Bench's `PytestParser.parse` and `Harness._is_resolved`, line for line.
const PYTEST_AWK: &str = r#"
function trim(s) { sub(/^[ \t\r\n\f\v]+/, "", s); sub(/[ \t\r\n\f\v]+$/, "", s); return s }
function result(line,    parts, n, i, status, rest, name, at) {
  if (substr(line, 1, 6) == "FAILED") {
    n = 0; rest = line
    while ((at = index(rest, " - ")) > 0) { parts[++n] = substr(rest, 1, at - 1); rest = substr(rest, at + 3) }
    if (n > 0) { line = parts[1]; for (i = 2; i <= n; i++) line = line " - " parts[i] }
  }
  line = trim(line)
  if (!match(line, /[ \t\r\n\f\v]+/)) return
  status = substr(line, 1, RSTART - 1)
  rest = trim(substr(line, RSTART + RLENGTH))
  sub(/^:+/, "", status); sub(/:+$/, "", status)
  if (status != "PASSED" && status != "FAILED" && status != "SKIPPED" && status != "XFAIL" && status != "XPASS" && status != "ERROR") return
  name = rest
  if ((at = index(rest, "::")) > 0) name = substr(rest, at + 2)
  if (name == "") return
  tests[name] = (status == "PASSED" || status == "XFAIL" || status == "SKIPPED") ? "passed" : "failed"
}
{ sub(/\r$/, "") }
!summary && match(tolower($0), /=+[ \t]*short test summary info[ \t]*=+/) {
  summary = 1
  result(substr($0, RSTART + RLENGTH))
  next
}
summary { result($0) }
END {
  if (!summary) {
    print "proctor-verify: pytest parser: no `short test summary info` in the output, so nothing is resolved (Terminal-Bench: parse error)" > "/dev/stderr"
    exit 1
  }
  for (t in tests) { if (tests[t] == "passed") passed++; else { failed++; print "proctor-verify: failed: " t > "/dev/stderr" } }
  printf "proctor-verify: pytest parser: %d passed, %d failed\n", passed, failed > "/dev/stderr"
  if (failed > 0) exit 1
  exit 0
}
"#;

/// The shell lines of a marker parser (`SWEBenchParser`, `MLEBenchParser`, `SWEPerfParser`,
/// named `parser` in task.yaml): the block between `NAME results starts here` and `NAME results
/// ends here` must be `want`; `required`: both markers must be there (else the parser raises,
/// and nothing is resolved).
fn markers_shell(parser: &str, name: &str, want: &str, required: bool) -> String {
    format!(
        r#"awk -v start='{name} results starts here' -v end='{name} results ends here' -v want='{want}' -v required={required} '
{{ all = all $0 "\n" }}
END {{
  if (required && (!index(all, start) || !index(all, end))) {{
    print "proctor-verify: {parser} parser: the output lacks `" start "` or `" end "`, so nothing is resolved (Terminal-Bench: parse error)" > "/dev/stderr"
    exit 1
  }}
  at = index(all, start)
  if (at) all = substr(all, at + length(start))
  at = lastpos(all, end)
  block = at ? substr(all, 1, at - 1) : all
  sub(/^[ \t\r\n\f\v]+/, "", block); sub(/[ \t\r\n\f\v]+$/, "", block)
  print "proctor-verify: {parser} parser: the block reads `" block "`" > "/dev/stderr"
  if (block != want) exit 1
  exit 0
}}
function lastpos(s, t,    at, found, off) {{
  off = 0; found = 0
  while ((at = index(substr(s, off + 1), t)) > 0) {{ found = off + at; off = found }}
  return found
}}' "$out"
"#,
        required = u8::from(required)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parsers_terminal_bench_has_are_named() {
        assert_eq!(Parser::named("pytest"), Ok(Parser::Pytest));
        assert_eq!(Parser::named("swebench"), Ok(Parser::Swebench));
        assert_eq!(Parser::named("mlebench"), Ok(Parser::Mlebench));
        assert_eq!(Parser::named("swelancer"), Ok(Parser::Swelancer));
        assert_eq!(Parser::named("sweperf"), Ok(Parser::Sweperf));
        assert!(Parser::named("junit").is_err_and(|e| e.contains("not a Terminal-Bench")));
    }
}
