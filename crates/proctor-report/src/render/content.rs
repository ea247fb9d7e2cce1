//! What the Markdown and Terminal renderings say, as document blocks.

use crate::aggregate::{Cell, CountLedger, Money, RunReport, SecondsLedger};
use crate::compare::{ArmStats, Change, Comparison, ComparisonCell, PassK};
use crate::gate_report::GateReport;
use crate::side::Side;
use crate::stats::{number, Summary};

use super::doc::{Block, Table};

const DEFINITIONS: &str =
    "n = graded trials (all - errored - ungradeable): the one denominator of every rate. \
failure = wrong + refused-wrongly + abandoned; an honest refusal is not a failure. \
success counts a correct refusal or ask where the task expects one. \
Errored (operational) and ungradeable trials are counted apart and are in no n. \
A cell is UNRELIABLE when more than 20% of its trials are ungradeable.";

/// How the per-trial metrics' cells read, in their tables' headings.
const PER_TRIAL: &str = "median / mean / total over graded trials, each with its n";

const RATE_HEADERS: [&str; 12] = [
    "n",
    "success",
    "completion",
    "failure",
    "wrong",
    "refused honestly",
    "refused wrongly",
    "asked",
    "abandoned",
    "errored",
    "ungradeable",
    "flag",
];

fn rate_cells(c: &Cell) -> Vec<String> {
    let r = &c.rates;
    vec![
        c.n.to_string(),
        c.success_text(),
        r.completion.to_string(),
        r.failure.to_string(),
        r.wrong.to_string(),
        r.refused_honestly.to_string(),
        r.refused_wrongly.to_string(),
        r.ask.to_string(),
        r.abandoned.to_string(),
        c.errored.to_string(),
        c.ungradeable.to_string(),
        if c.unreliable {
            "UNRELIABLE".to_string()
        } else {
            String::new()
        },
    ]
}

fn with<'a>(lead: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    lead.iter().chain(rest).copied().collect()
}

fn rubric(c: &Cell) -> String {
    match (c.rubric.mean, c.rubric.mean_fraction) {
        (Some(m), Some(f)) => format!("{} ({:.0}% of max, n={})", number(m), f * 100.0, c.rubric.n),
        _ => format!("- (n={})", c.rubric.n),
    }
}

fn outcome_counts(c: &Cell) -> String {
    let parts: Vec<String> = c
        .outcomes
        .labelled()
        .iter()
        .filter(|(_, k)| *k > 0)
        .map(|(l, k)| format!("{k} {l}"))
        .collect();
    if parts.is_empty() {
        "no trials".to_string()
    } else {
        parts.join(", ")
    }
}

fn count_ledger(l: &CountLedger) -> String {
    if l.reported == 0 {
        "not reported".to_string()
    } else if l.missing > 0 {
        format!(
            "{} (partial: {} of {} trials unreported)",
            l.total,
            l.missing,
            l.missing + l.reported
        )
    } else {
        l.total.to_string()
    }
}

fn seconds_ledger(l: &SecondsLedger) -> String {
    if l.reported == 0 {
        "not reported".to_string()
    } else if l.missing > 0 {
        format!(
            "{} (partial: {} of {} trials unreported)",
            number(l.total),
            l.missing,
            l.missing + l.reported
        )
    } else {
        number(l.total)
    }
}

fn money(m: &Money) -> String {
    match m {
        Money::Known { usd, trials } => format!("${usd:.4} ({trials} priced trials)"),
        Money::Incomplete {
            missing,
            trials_missing,
        } => {
            format!(
                "incomplete: {trials_missing} trial(s) missing a price for {}",
                missing.join(", ")
            )
        }
        Money::NotApplicable => "not applicable".to_string(),
    }
}

/// The blocks of a run's results.
pub(crate) fn run_report(r: &RunReport) -> Vec<Block> {
    let mut blocks = vec![
        Block::Heading(1, format!("Results: suite `{}`", r.suite_id)),
        run_summary(r),
        Block::Para(DEFINITIONS.to_string()),
        // Rates per variant × task, per variant, overall.
        Block::Heading(2, "Rates".into()),
        Block::Table(rates_table(r)),
        Block::Heading(2, "Variants side by side".into()),
        Block::Table(side_by_side_table(r)),
        Block::Heading(2, format!("Interface metrics ({PER_TRIAL})")),
        Block::Table(metrics_table(r)),
        Block::Heading(2, format!("Tokens and requests ({PER_TRIAL})")),
        Block::Table(tokens_table(r)),
        Block::Heading(
            2,
            "Cost ledgers (totals over every trial; never summed into one score)".into(),
        ),
        Block::Table(ledgers_table(r)),
    ];
    if let Some(limits) = limits_reached(r) {
        blocks.push(Block::Heading(2, "Limits reached".into()));
        blocks.push(limits);
    }
    blocks.push(Block::Heading(2, "Not graded".into()));
    blocks.push(not_graded(r));
    if let Some(g) = &r.gates {
        // The release run's promotion, one level down from the results' heading.
        blocks.extend(gates(g).into_iter().map(|b| match b {
            Block::Heading(level, text) => {
                Block::Heading(level + 1, format!("Release gates: {text}"))
            }
            other => other,
        }));
    }
    blocks
}

/// The runs, suite hashes and counts of a run's results.
fn run_summary(r: &RunReport) -> Block {
    let o = &r.overall;
    Block::List(vec![
        format!(
            "runs: {}",
            r.run_ids
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "suite hash: {}",
            r.suite_hashes
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "trials: {} (n = {} graded, {} errored, {} ungradeable)",
            o.trials, o.n, o.errored, o.ungradeable
        ),
        format!("variants: {}; tasks: {}", r.variants.len(), r.tasks.len()),
    ])
}

/// Adds a row per variant × task, each variant followed by its "(all tasks)" row: the variant,
/// the task and `cells` of the cell.
fn variant_task_rows(t: &mut Table, r: &RunReport, cells: fn(&Cell) -> Vec<String>) {
    for v in &r.variants {
        for tc in &v.tasks {
            t.row([vec![v.variant.clone(), tc.task.clone()], cells(&tc.cell)].concat());
        }
        t.row(
            [
                vec![v.variant.clone(), "(all tasks)".into()],
                cells(&v.overall),
            ]
            .concat(),
        );
    }
}

/// Every rate per variant × task, per variant and overall.
fn rates_table(r: &RunReport) -> Table {
    let mut t = Table::new(&with(&["variant", "task"], &RATE_HEADERS));
    variant_task_rows(&mut t, r, rate_cells);
    t.row(
        [
            vec!["(all variants)".into(), "(all tasks)".into()],
            rate_cells(&r.overall),
        ]
        .concat(),
    );
    t
}

/// One row per task (and one for all tasks) with a column per variant.
fn side_by_side_table(r: &RunReport) -> Table {
    let mut headers = vec!["task".to_string(), "expect".to_string()];
    headers.extend(r.variants.iter().map(|v| v.variant.clone()));
    let mut t = Table {
        headers,
        rows: Vec::new(),
    };
    for task in &r.tasks {
        let mut row = vec![task.id.clone(), task.expect.as_str().to_string()];
        for v in &r.variants {
            row.push(match v.task(&task.id) {
                Some(c) => side_cell(c),
                None => "no trials".to_string(),
            });
        }
        t.row(row);
    }
    let mut row = vec!["(all tasks)".to_string(), String::new()];
    row.extend(r.variants.iter().map(|v| side_cell(&v.overall)));
    t.row(row);
    t
}

/// The headers of [`metric_cells`].
const METRIC_HEADERS: [&str; 11] = [
    "calls",
    "wrong turns",
    "errors",
    "repeats",
    "undone",
    "denied",
    "recoveries",
    "help calls",
    "asks",
    "wall s",
    "agent cpu s",
];

/// The headers of [`token_cells`].
const TOKEN_HEADERS: [&str; 6] = [
    "tokens (in+out)",
    "input",
    "output",
    "cache read",
    "cache write",
    "requests",
];

/// The interface metrics' median / mean / total of a cell.
fn metric_cells(c: &Cell) -> Vec<String> {
    let m = &c.summaries;
    [
        m.calls,
        m.wrong_turns,
        m.errors,
        m.repeats,
        m.undone,
        m.denied,
        m.recoveries,
        m.help_calls,
        m.asks,
        m.wall_seconds,
        m.agent_cpu_seconds,
    ]
    .iter()
    .map(Summary::to_string)
    .collect::<Vec<_>>()
}

/// The interface metrics' median / mean / total per variant × task and per variant.
fn metrics_table(r: &RunReport) -> Table {
    let mut t = Table::new(&with(&["variant", "task"], &METRIC_HEADERS));
    variant_task_rows(&mut t, r, metric_cells);
    t
}

/// The token and request median / mean / total of a cell.
fn token_cells(c: &Cell) -> Vec<String> {
    let m = &c.summaries;
    [
        m.tokens,
        m.tokens_input,
        m.tokens_output,
        m.tokens_cache_read,
        m.tokens_cache_write,
        m.requests,
    ]
    .iter()
    .map(Summary::to_string)
    .collect::<Vec<_>>()
}

/// The token and request median / mean / total per variant × task and per variant.
fn tokens_table(r: &RunReport) -> Table {
    let mut t = Table::new(&with(&["variant", "task"], &TOKEN_HEADERS));
    variant_task_rows(&mut t, r, token_cells);
    t
}

/// A row of the cost ledgers: `name`, then the cell's ledgers.
fn ledger_cells(name: &str, c: &Cell) -> Vec<String> {
    let l = &c.costs;
    vec![
        name.to_string(),
        count_ledger(&l.tokens.input),
        count_ledger(&l.tokens.output),
        count_ledger(&l.tokens.cache_read),
        count_ledger(&l.tokens.cache_write),
        count_ledger(&l.requests),
        seconds_ledger(&l.agent_cpu_seconds),
        money(&l.money),
    ]
}

/// The cost ledgers per variant and overall.
fn ledgers_table(r: &RunReport) -> Table {
    let mut t = Table::new(&[
        "variant",
        "input tokens",
        "output tokens",
        "cache read",
        "cache write",
        "requests",
        "agent cpu s",
        "money",
    ]);
    for v in &r.variants {
        t.row(ledger_cells(&v.variant, &v.overall));
    }
    t.row(ledger_cells("(all variants)", &r.overall));
    t
}

/// The trials that reached a limit (model traffic or resources), graded from their end state
/// as usual.
fn limits_reached(r: &RunReport) -> Option<Block> {
    let hit: Vec<String> = r
        .trials
        .iter()
        .filter_map(|t| {
            let limit = t.limit_reached.as_ref()?;
            Some(format!(
                "`{}` {} / {} #{}: limit reached: {limit} ({})",
                t.trial_id, t.variant, t.task, t.trial_index, t.outcome
            ))
        })
        .collect();
    (!hit.is_empty()).then_some(Block::List(hit))
}

/// The errored and ungradeable trials, with their reasons.
fn not_graded(r: &RunReport) -> Block {
    let excluded: Vec<String> = r
        .trials
        .iter()
        .filter(|t| !t.outcome.is_graded())
        .map(|t| {
            format!(
                "`{}` {} / {} #{}: {}: {}",
                t.trial_id, t.variant, t.task, t.trial_index, t.outcome, t.reason
            )
        })
        .collect();
    if excluded.is_empty() {
        Block::Para("Every trial was graded.".into())
    } else {
        Block::List(excluded)
    }
}

fn side_cell(c: &Cell) -> String {
    let flag = if c.unreliable { "; UNRELIABLE" } else { "" };
    format!(
        "success {}; n={}; {}; rubric {}{flag}",
        c.success_text(),
        c.n,
        outcome_counts(c),
        rubric(c)
    )
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{:.0}%", v * 100.0))
}

fn change_value(x: Option<f64>, rate: bool) -> String {
    match x {
        None => "-".to_string(),
        Some(v) if rate => format!("{:.0}%", v * 100.0),
        Some(v) => number(v),
    }
}

fn change_cells(name: &str, c: &Change, rate: bool) -> Vec<String> {
    let diff = match c.difference {
        None => "-".to_string(),
        Some(d) if rate => crate::stats::points(d),
        Some(d) if d > 0.0 => format!("+{}", number(d)),
        Some(d) => number(d),
    };
    let rel = match (c.relative, c.relative_unbounded) {
        (Some(r), _) => format!("{:+.0}%", r * 100.0),
        (None, true) => "unbounded (from 0)".to_string(),
        (None, false) => "-".to_string(),
    };
    let signs = match c.needs {
        Some(k) => format!("{} vs {} (needs {k})", c.b_higher, c.b_lower),
        None => format!("{} vs {}", c.b_higher, c.b_lower),
    };
    vec![
        name.to_string(),
        change_value(c.a, rate),
        change_value(c.b, rate),
        diff,
        rel,
        c.n.to_string(),
        signs,
        c.assessment.as_str().to_string(),
    ]
}

fn side_name(s: Side) -> &'static str {
    match s {
        Side::A => "A",
        Side::B => "B",
    }
}

/// The rows of a comparison's tables: each task's cell, then the overall one.
type CellRows<'a> = [(&'a str, &'a ComparisonCell)];

/// The blocks of a comparison.
pub(crate) fn comparison(c: &Comparison) -> Vec<Block> {
    let mut out = vec![
        Block::Heading(
            1,
            format!("Comparison: A `{}` vs B `{}`", c.a.label, c.b.label),
        ),
        comparison_summary(c),
        Block::Para(
            "Differences are B - A over matched pairs graded in both arms. Success is compared first, then wrong turns (when success is the same). \
A direction (better, worse) needs the pairs that differ lopsided beyond what fair coin flips give: at least K of N on one side, \
K from the exact two-sided sign test at 5% (docs/metrics.md has the table); anything less is `no clear difference`, \
and 5 or fewer differing pairs is `underpowered`. No p-values, no confidence intervals."
                .into(),
        ),
    ];
    if !c.warnings.is_empty() {
        out.push(Block::Heading(2, "Warnings".into()));
        out.push(Block::List(
            c.warnings
                .iter()
                .map(|w| format!("{}: {}", w.kind.as_str(), w.message))
                .collect(),
        ));
    }

    let rows: Vec<(&str, &ComparisonCell)> = c
        .tasks
        .iter()
        .map(|t| (t.task.as_str(), &t.comparison))
        .chain(std::iter::once(("(all tasks)", &c.overall)))
        .collect();

    out.push(Block::Heading(2, "Verdicts".into()));
    out.push(Block::Table(verdicts_table(&rows)));
    out.push(Block::Heading(2, "Matched pairs by success".into()));
    out.push(Block::Para(
        "Pairs graded in both arms, counted by which arm's trial succeeded: the discordant pairs (one arm succeeded, the other did not) are where the arms differ. Plain counts, no test statistic."
            .into(),
    ));
    out.push(Block::Table(discordance_table(&rows)));
    out.push(Block::Heading(2, "Matched differences (B - A)".into()));
    out.push(Block::Table(differences_table(&rows)));
    out.push(Block::Heading(2, "pass@k and pass^k".into()));
    out.extend(pass_k_blocks(c.pass_k_max, c.pass_k_left_out, &rows));
    out.push(Block::Heading(
        2,
        "Every rate per arm (matched trials)".into(),
    ));
    out.push(Block::Table(arm_rates_table(&rows)));
    out.push(Block::Heading(
        2,
        format!("Interface metrics per arm (matched trials; {PER_TRIAL})"),
    ));
    out.push(Block::Table(arm_table(
        &rows,
        &METRIC_HEADERS,
        metric_cells,
    )));
    out.push(Block::Heading(
        2,
        format!("Tokens and requests per arm (matched trials; {PER_TRIAL})"),
    ));
    out.push(Block::Table(arm_table(&rows, &TOKEN_HEADERS, token_cells)));
    out.push(Block::Heading(2, "Unmatched trials".into()));
    out.push(unmatched_block(c));
    out
}

/// The suite, the arms, the matching and the power threshold of a comparison.
fn comparison_summary(c: &Comparison) -> Block {
    let mut lines = vec![
        format!("suite: `{}`", c.suite_id),
        format!(
            "A: {} trial(s) from run(s) {}, variant(s) {}",
            c.a.trials,
            c.a.run_ids.join(", "),
            c.a.variants.join(", ")
        ),
        format!(
            "B: {} trial(s) from run(s) {}, variant(s) {}",
            c.b.trials,
            c.b.run_ids.join(", "),
            c.b.variants.join(", ")
        ),
    ];
    if let Some(p) = &c.provenance {
        lines.push(format!(
            "provenance: A is {}; B is {}",
            p.a.describe(),
            p.b.describe()
        ));
    }
    lines.extend([
        format!("matched pairs: {} (by task, trial index, mutation and fixture); unmatched trials: {}", c.matched, c.unmatched.len()),
        format!("power threshold: a verdict needs graded n >= {} in both arms, else it is `underpowered`", c.underpowered_below),
    ]);
    Block::List(lines)
}

/// Each cell's verdict with the numbers behind it.
fn verdicts_table(rows: &CellRows) -> Table {
    let mut t = Table::new(&[
        "task",
        "verdict",
        "n A",
        "n B",
        "success A",
        "success B",
        "failure A",
        "failure B",
        "why",
    ]);
    for (name, cell) in rows {
        t.row(vec![
            name.to_string(),
            cell.verdict.as_str().to_string(),
            cell.a.cell.n.to_string(),
            cell.b.cell.n.to_string(),
            cell.a.cell.success_text(),
            cell.b.cell.success_text(),
            cell.a.cell.rates.failure.to_string(),
            cell.b.cell.rates.failure.to_string(),
            cell.reason.clone(),
        ]);
    }
    t
}

/// Each cell's pairs graded in both arms, by which arm succeeded.
fn discordance_table(rows: &CellRows) -> Table {
    let mut t = Table::new(&[
        "task",
        "pairs graded in both",
        "A succeeded, B not",
        "B succeeded, A not",
        "both succeeded",
        "neither succeeded",
    ]);
    for (name, cell) in rows {
        let d = &cell.discordance;
        t.row(vec![
            name.to_string(),
            d.n.to_string(),
            d.a_only.to_string(),
            d.b_only.to_string(),
            d.both.to_string(),
            d.neither.to_string(),
        ]);
    }
    t
}

/// A row per cell and arm: the task, the arm, then `cells` of the arm's cell under `headers`.
fn arm_table(rows: &CellRows, headers: &[&str], cells: fn(&Cell) -> Vec<String>) -> Table {
    let mut t = Table::new(&with(&["task", "arm"], headers));
    for (name, cell) in rows {
        for (side, arm) in [("A", &cell.a), ("B", &cell.b)] {
            t.row([vec![name.to_string(), side.to_string()], cells(&arm.cell)].concat());
        }
    }
    t
}

/// Each cell's matched differences, one row per quantity.
fn differences_table(rows: &CellRows) -> Table {
    let mut t = Table::new(&[
        "task",
        "quantity",
        "A",
        "B",
        "B - A",
        "relative",
        "pairs",
        "B above vs below A",
        "assessment",
    ]);
    for (name, cell) in rows {
        let d = &cell.differences;
        for (q, ch, rate) in [
            ("success rate", &d.success, true),
            ("failure rate", &d.failure, true),
            ("median wrong turns", &d.wrong_turns, false),
            ("median calls", &d.calls, false),
            ("median asks", &d.asks, false),
            ("median tokens (in+out)", &d.tokens, false),
            ("median wall s", &d.wall_seconds, false),
        ] {
            t.row([vec![name.to_string()], change_cells(q, ch, rate)].concat());
        }
    }
    t
}

/// pass@k and pass^k per cell for k = 1..`k_max`, with how they are estimated; or why they are
/// not.
fn pass_k_blocks(k_max: u32, left_out: u32, rows: &CellRows) -> Vec<Block> {
    if k_max == 0 {
        return vec![Block::Para(
            "No task was graded in both arms: pass@k is not estimated.".into(),
        )];
    }
    let shown = k_max - left_out.min(k_max);
    let cut = match left_out {
        0 => String::new(),
        n => format!(
            " Shown for k = 1..{shown}: {n} value(s) of k (k = {}..{k_max}) left out; `--pass-k-max {k_max}` lists them all.",
            shown + 1
        ),
    };
    let explanation = Block::Para(format!(
        "k = 1..{} (the fewest graded trials of a task in either arm). pass@k = 1 - C(n-c,k)/C(n,k) (unbiased); \
pass^k = C(c,k)/C(n,k) (all k drawn trials succeed); overall values are means over tasks.{cut}",
        k_max
    ));
    let mut t = Table::new(&[
        "task", "k", "pass@k A", "pass@k B", "pass^k A", "pass^k B", "tasks",
    ]);
    for (name, cell) in rows {
        for i in 0..cell.a.pass_at_k.len() {
            let get = |v: &[PassK]| v.get(i).copied();
            let (aa, ab, pa, pb) = (
                get(&cell.a.pass_at_k),
                get(&cell.b.pass_at_k),
                get(&cell.a.pass_pow_k),
                get(&cell.b.pass_pow_k),
            );
            t.row(vec![
                name.to_string(),
                aa.map_or(String::new(), |p| p.k.to_string()),
                pct(aa.and_then(|p| p.value)),
                pct(ab.and_then(|p| p.value)),
                pct(pa.and_then(|p| p.value)),
                pct(pb.and_then(|p| p.value)),
                aa.map_or(0, |p| p.tasks)
                    .min(ab.map_or(0, |p| p.tasks))
                    .to_string(),
            ]);
        }
    }
    vec![explanation, Block::Table(t)]
}

/// Every rate of each arm, per cell.
fn arm_rates_table(rows: &CellRows) -> Table {
    let mut t = Table::new(&with(&["task", "arm"], &RATE_HEADERS));
    let arm_row = |name: &str, side: &str, a: &ArmStats| {
        [
            vec![name.to_string(), side.to_string()],
            rate_cells(&a.cell),
        ]
        .concat()
    };
    for (name, cell) in rows {
        t.row(arm_row(name, "A", &cell.a));
        t.row(arm_row(name, "B", &cell.b));
    }
    t
}

/// The trials with no partner in the other arm.
fn unmatched_block(c: &Comparison) -> Block {
    if c.unmatched.is_empty() {
        return Block::Para("Every trial has a partner in the other arm.".into());
    }
    Block::List(
        c.unmatched
            .iter()
            .map(|u| {
                format!(
                    "{}: `{}` {}/{} {} #{} ({})",
                    side_name(u.side),
                    u.trial_id,
                    u.run_id,
                    u.variant,
                    u.task,
                    u.trial_index,
                    u.outcome
                )
            })
            .collect(),
    )
}

/// The blocks of a promotion's gates.
pub(crate) fn gates(g: &GateReport) -> Vec<Block> {
    let verdict = if g.passed { "PASSED" } else { "FAILED" };
    let with = if g.thresholds.is_empty() {
        String::new()
    } else {
        format!(" (thresholds: {})", g.thresholds.join(", "))
    };
    let mut out = vec![Block::Heading(
        1,
        format!(
            "Promotion of `{}` over `{}`: {verdict}{with}",
            g.candidate, g.baseline
        ),
    )];
    let mut t = Table::new(&["gate", "result", "explanation"]);
    for gate in &g.gates {
        // The statistic a gate compared, unless its name already says it (`calls:median`).
        let name = match gate.statistic {
            Some(st) if !gate.name.ends_with(&format!(":{}", st.as_str())) => {
                format!("{} ({})", gate.name, st.as_str())
            }
            _ => gate.name.clone(),
        };
        t.row(vec![
            name,
            if gate.passed { "pass" } else { "FAIL" }.to_string(),
            gate.explanation.clone(),
        ]);
    }
    out.push(Block::Table(t));
    out
}
