//! `holdout/TASK_ID/proctor-verify.sh`: the check that runs a task's own verifier over the end
//! state and turns its result into an exit status (and, with `--metrics`, into lines a rubric
//! can match).
//!
//! Harbor and Terminal-Bench put the tests at `/tests` and Harbor collects the reward from
//! `/logs/verifier`. The imported task's holdout (the tests and this script) is laid at `/tests`
//! (`holdout_at`), after the agent's full stop and never in its workspace, and in the task's
//! image the checks' root is writable, so the script makes `/logs/verifier` and runs the tests
//! where they expect to be. Laid anywhere else (a holdout over the workspace, a test of the
//! script), it copies the tests into a temporary folder and rewrites those absolute paths in
//! the copy instead.

use std::collections::BTreeMap;

use crate::model::{Format, Verdict};
use crate::text::shell_quote;

/// Where the checks see an imported task's holdout: where Harbor and Terminal-Bench lay tests.
pub(crate) const TESTS_AT: &str = "/tests";
/// The command that runs the verifier and exits 0 iff it passed.
pub(crate) const CHECK: &str = "bash /tests/proctor-verify.sh";
/// The command that runs the verifier and prints metric and verdict lines.
pub(crate) const CHECK_METRICS: &str = "bash /tests/proctor-verify.sh --metrics";

/// The script's text.
pub(crate) fn script(
    format: Format,
    task_id: &str,
    verdict: Verdict,
    entry: &str,
    env: &BTreeMap<String, String>,
) -> String {
    let mut s = String::new();
    s.push_str("#!/usr/bin/env bash\n");
    s.push_str(&format!(
        "# Written by `proctor import {}` for the task `{task_id}`; see docs/import.md.\n#\n",
        format.command()
    ));
    match verdict {
        Verdict::Reward => s.push_str(HARBOR_USAGE),
        Verdict::Parser(parser) => {
            s.push_str(TERMINAL_BENCH_USAGE);
            s.push_str(parser.rule());
        }
    }
    s.push_str(PREAMBLE);
    s.push_str("export TEST_DIR=\"$tests\"\n");
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    let entry = shell_quote(entry);
    match verdict {
        Verdict::Reward => {
            s.push_str(&format!(
                "bash \"$tests\"/{entry} >&2 </dev/null\nstatus=$?\necho \"proctor-verify: tests/{entry} exited with $status\" >&2\n"
            ));
            s.push_str(HARBOR_VERDICT);
        }
        Verdict::Parser(parser) => {
            s.push_str(&format!(
                "out=\"$work/run-tests.out\"\nbash \"$tests\"/{entry} >\"$out\" 2>&1 </dev/null\nstatus=$?\ncat \"$out\" >&2\necho \"proctor-verify: tests/{entry} exited with $status; Terminal-Bench's {} parser reads its output\" >&2\n",
                parser.name()
            ));
            s.push_str(&parser.shell());
        }
    }
    s
}

const HARBOR_USAGE: &str = r#"# Runs the task's own verifier, tests/test.sh, over the end state and reads the reward it
# writes, as Harbor's verifier (src/harbor/verifier/verifier.py) does:
#   bash proctor-verify.sh            exits 0 if and only if the reward is 1: the `reward` of
#                                     /logs/verifier/reward.json, else the number in
#                                     /logs/verifier/reward.txt (Harbor's order), else (a
#                                     reward.json without `reward`) every number in
#                                     reward.json; 1 when it is not, 3 when the verifier wrote
#                                     no reward
#   bash proctor-verify.sh --metrics  prints `proctor-metric NAME TENTHS` for every number in
#                                     reward.json (the value times 10, rounded down, within
#                                     0..10) and `proctor-verdict: pass` or `fail`; exits 0
#                                     when a reward was written, else 3
# The verifier's own output goes to stderr: stdout holds only the lines above.
"#;

const TERMINAL_BENCH_USAGE: &str = r#"# Runs the task's own run-tests.sh over the end state, as Terminal-Bench does, and exits 0
# if and only if the task's result parser says the task is resolved, else 1. Its exit status
# decides nothing, as in Terminal-Bench. The test output goes to stderr.
"#;

const PREAMBLE: &str = r#"#
# The tests expect to be at /tests, and Harbor's verifier writes /logs/verifier. Laid at /tests
# (the suite's holdout_at) where /logs/verifier can be made, they run as they are; laid anywhere
# else, the script copies them into a temporary folder and rewrites those absolute paths in the
# copy.
set -u
mode="${1:-}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d 2>/dev/null)" || { work="$here/.proctor-verify.$$"; mkdir -p "$work" || exit 3; }
trap 'rm -rf "$work"' EXIT
if [ "$here" = /tests ] && mkdir -p /logs/verifier /logs/agent 2>/dev/null; then
  tests=/tests
  logs=/logs/verifier
  rm -f "$logs/reward.txt" "$logs/reward.json"
else
  tests="$work/tests"
  logs="$work/logs/verifier"
  mkdir -p "$logs" "$work/logs/agent" || exit 3
  if ! cp -R "$here" "$tests"; then
    echo "proctor-verify: cannot copy $here" >&2
    exit 3
  fi
  grep -rIlE '/tests|/logs/' "$tests" 2>/dev/null | while IFS= read -r f; do
    sed -i -E \
      -e "s#(^|[^[:alnum:]_.~/\$-])/logs/verifier\b#\1$logs#g" \
      -e "s#(^|[^[:alnum:]_.~/\$-])/logs/agent\b#\1$work/logs/agent#g" \
      -e "s#(^|[^[:alnum:]_.~/\$-])/tests\b#\1$tests#g" "$f"
  done
fi
"#;

// The reward is read as Harbor's verifier reads it: in `src/harbor/verifier/verifier.py`
// (`Verifier.verify()`, its last lines, and `_parse_reward_json`, lines 82-130 of the copy at
// github.com/15735640198/harbor commit 4e55c492efaac6ff8251d91fd30f341668ce3fb3), reward.json
// wins when it exists; its numeric top-level values are the rewards, and reward.txt supplies
// `reward` only when reward.json has none. Without reward.json, reward.txt is the reward.
// (Older Harbor releases read reward.txt first; the newer order is the one kept here.)
const HARBOR_VERDICT: &str = r#"json="$logs/reward.json"
txt="$logs/reward.txt"
metrics=""
if [ -s "$json" ]; then
  metrics="$(tr -d '\r\n' <"$json" | grep -oE '"[^"]+"[[:space:]]*:[[:space:]]*-?[0-9][0-9.eE+-]*' |
    sed -E 's/^"([^"]+)"[[:space:]]*:[[:space:]]*/\1 /')"
fi
reward="$(printf '%s\n' "$metrics" | awk '$1 == "reward" { print $2; exit }')"
if [ -z "$reward" ] && [ -s "$txt" ]; then
  reward="$(tr -d '[:space:]' <"$txt")"
fi
if [ -z "$reward" ] && [ -z "$metrics" ]; then
  echo "proctor-verify: the verifier wrote no reward (reward.txt or reward.json)" >&2
  exit 3
fi
is_one() {
  awk -v v="$1" 'BEGIN { exit !(v ~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ && v + 0 == 1) }'
}
verdict=pass
if [ -n "$reward" ]; then
  is_one "$reward" || verdict=fail
else
  while read -r name value; do
    [ -n "$name" ] || continue
    is_one "$value" || verdict=fail
  done <<EOF
$metrics
EOF
fi
if [ -n "$metrics" ]; then
  echo "proctor-verify: reward.json: $(printf '%s' "$metrics" | tr '\n' ',')" >&2
fi
echo "proctor-verify: reward ${reward:-none} -> $verdict" >&2
if [ "$mode" = "--metrics" ]; then
  printf '%s\n' "$metrics" | awk 'NF == 2 { t = int($2 * 10 + 1e-9); if (t < 0) t = 0; if (t > 10) t = 10; print "proctor-metric " $1 " " t }'
  echo "proctor-verdict: $verdict"
  exit 0
fi
[ "$verdict" = pass ]
"#;
