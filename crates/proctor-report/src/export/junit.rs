//! A run as a JUnit XML report, the test-result format CI systems show (docs/export.md).
//!
//! - one `<testsuite>` per task, named by the task id, with the n of every cell (one variant on
//!   that task) in its `<properties>`: `VARIANT.trials`, `VARIANT.n` (graded n = trials −
//!   errored − ungradeable), `VARIANT.successes`, `VARIANT.errored`, `VARIANT.ungradeable`,
//!   the task's `expect`, and the `scoring` the outcomes come from (`original`, or `rescore N
//!   (DATE UTC)`) when the caller names it;
//! - one `<testcase>` per trial, named `TASK.VARIANT.INDEX`, its `classname` `TASK.VARIANT`,
//!   its `time` the agent's wall seconds;
//! - a graded trial that did not meet its task's `expect` has a `<failure>`: `wrong`,
//!   `refused-wrongly` and `abandoned` always, and `asked` or `refused-honestly` where the
//!   task expected another behaviour. Its `type` is the outcome, its `message` and text the
//!   reason;
//! - an `errored` trial has an `<error>` whose `type` is `errored:KIND`;
//! - an `ungradeable` trial is `<skipped>`, with the reason as its `message`;
//! - a release run's promotion gates, when its results keep them, are one more `<testsuite>`
//!   named `promotion BASELINE -> CANDIDATE` (as [`gates`] writes it): one `<testcase>` per
//!   gate, a failed gate a `<failure>`.
//!
//! Text from the trial (reasons quote the agent's answer and file names) is escaped, and the
//! characters XML 1.0 cannot carry are written as visible escapes ([`super::xml_safe`]).

use std::io;

use proctor_score::Outcome;
use proctor_suite::model::Expect;
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

use super::{xml_safe, ExportError};
use crate::gate_report::GateReport;
use crate::input::TrialRow;

/// What a JUnit consumer sees of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseResult {
    /// The trial met its task's `expect`.
    Passed,
    /// A graded trial that did not.
    Failure,
    /// `errored`: not evidence about the agent.
    Error,
    /// `ungradeable`: the rules could not tell.
    Skipped,
}

impl CaseResult {
    /// The result of a trial with this outcome and task success.
    pub fn of(outcome: &Outcome, task_success: bool) -> CaseResult {
        match outcome {
            Outcome::Errored { .. } => CaseResult::Error,
            Outcome::Ungradeable { .. } => CaseResult::Skipped,
            _ if task_success => CaseResult::Passed,
            _ => CaseResult::Failure,
        }
    }
}

/// The counts of a suite, or of the whole document.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Test cases.
    pub tests: u64,
    /// Failures.
    pub failures: u64,
    /// Errors.
    pub errors: u64,
    /// Skipped.
    pub skipped: u64,
    /// Seconds, summed.
    pub time: f64,
}

impl Counts {
    fn add(&mut self, result: CaseResult, time: f64) {
        self.tests += 1;
        match result {
            CaseResult::Passed => {}
            CaseResult::Failure => self.failures += 1,
            CaseResult::Error => self.errors += 1,
            CaseResult::Skipped => self.skipped += 1,
        }
        self.time += finite(time);
    }

    fn merge(&mut self, other: &Counts) {
        self.tests += other.tests;
        self.failures += other.failures;
        self.errors += other.errors;
        self.skipped += other.skipped;
        self.time += other.time;
    }

    fn attributes(&self) -> [(&'static str, String); 5] {
        [
            ("tests", self.tests.to_string()),
            ("failures", self.failures.to_string()),
            ("errors", self.errors.to_string()),
            ("skipped", self.skipped.to_string()),
            ("time", seconds(self.time)),
        ]
    }
}

fn finite(x: f64) -> f64 {
    if x.is_finite() && x >= 0.0 {
        x
    } else {
        0.0
    }
}

fn seconds(x: f64) -> String {
    format!("{:.3}", finite(x))
}

fn expect_label(e: Expect) -> &'static str {
    match e {
        Expect::Complete => "complete",
        Expect::Refuse => "refuse",
        Expect::Ask => "ask",
    }
}

/// One cell's counts for the suite's properties.
#[derive(Default)]
struct CellN {
    trials: u64,
    errored: u64,
    ungradeable: u64,
    successes: u64,
}

/// The JUnit XML document of a run's trials (`rows`, any order; written in plan order: task,
/// variant, index). `run_id` and `suite_id` name the document.
pub fn junit(run_id: &str, suite_id: &str, rows: &[TrialRow]) -> Result<String, ExportError> {
    junit_scored(run_id, suite_id, None, rows, None)
}

/// [`junit`], with each task's `<properties>` also naming the scoring the outcomes come from
/// (`scoring`: `original` or `rescore N (DATE UTC)`), and the release run's promotion gates
/// (`gates`) as a last `<testsuite>`.
pub fn junit_scored(
    run_id: &str,
    suite_id: &str,
    scoring: Option<&str>,
    rows: &[TrialRow],
    gates: Option<&GateReport>,
) -> Result<String, ExportError> {
    if rows.is_empty() {
        return Err(ExportError::Empty);
    }
    let mut sorted: Vec<&TrialRow> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.task, &a.variant, a.trial_index).cmp(&(&b.task, &b.variant, b.trial_index))
    });
    let mut tasks: Vec<(&str, Vec<&TrialRow>)> = Vec::new();
    for row in sorted {
        match tasks.last_mut() {
            Some((task, list)) if *task == row.task => list.push(row),
            _ => tasks.push((&row.task, vec![row])),
        }
    }
    let mut total = Counts::default();
    for (_, list) in &tasks {
        for r in list {
            total.add(
                CaseResult::of(&r.verdict.outcome, r.verdict.task_success),
                r.wall_seconds,
            );
        }
    }
    if let Some(g) = gates {
        total.merge(&gate_counts(g));
    }
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let name = format!("proctor {suite_id} {run_id}");
    w.create_element("testsuites")
        .with_attribute(("name", xml_safe(&name).as_ref()))
        .with_attributes(total.attributes().iter().map(|(k, v)| (*k, v.as_str())))
        .write_inner_content(|w| {
            for (task, list) in &tasks {
                task_suite(w, run_id, suite_id, scoring, task, list)?;
            }
            if let Some(g) = gates {
                gates_suite(w, g)?;
            }
            Ok(())
        })?;
    finish(w)
}

fn finish(w: Writer<Vec<u8>>) -> Result<String, ExportError> {
    let mut bytes = w.into_inner();
    bytes.push(b'\n');
    String::from_utf8(bytes).map_err(|e| ExportError::Write(io::Error::other(e)))
}

/// One task's `<testsuite>`.
fn task_suite(
    w: &mut Writer<Vec<u8>>,
    run_id: &str,
    suite_id: &str,
    scoring: Option<&str>,
    task: &str,
    rows: &[&TrialRow],
) -> io::Result<()> {
    let mut counts = Counts::default();
    let mut cells: Vec<(&str, CellN)> = Vec::new();
    for r in rows {
        let result = CaseResult::of(&r.verdict.outcome, r.verdict.task_success);
        counts.add(result, r.wall_seconds);
        let at = match cells.iter().position(|(v, _)| *v == r.variant) {
            Some(i) => i,
            None => {
                cells.push((&r.variant, CellN::default()));
                cells.len() - 1
            }
        };
        let cell = &mut cells[at].1;
        cell.trials += 1;
        match result {
            CaseResult::Error => cell.errored += 1,
            CaseResult::Skipped => cell.ungradeable += 1,
            CaseResult::Passed => cell.successes += 1,
            CaseResult::Failure => {}
        }
    }
    let expect = rows.first().map_or(Expect::Complete, |r| r.expect);
    let mut properties: Vec<(String, String)> = vec![
        ("run".into(), run_id.into()),
        ("suite".into(), suite_id.into()),
        ("expect".into(), expect_label(expect).into()),
    ];
    if let Some(s) = scoring {
        properties.push(("scoring".into(), s.into()));
    }
    for (variant, c) in &cells {
        let graded = c.trials - c.errored - c.ungradeable;
        properties.push((format!("{variant}.trials"), c.trials.to_string()));
        properties.push((format!("{variant}.n"), graded.to_string()));
        properties.push((format!("{variant}.successes"), c.successes.to_string()));
        properties.push((format!("{variant}.errored"), c.errored.to_string()));
        properties.push((format!("{variant}.ungradeable"), c.ungradeable.to_string()));
    }
    w.create_element("testsuite")
        .with_attribute(("name", xml_safe(task).as_ref()))
        .with_attributes(counts.attributes().iter().map(|(k, v)| (*k, v.as_str())))
        .write_inner_content(|w| {
            w.create_element("properties").write_inner_content(|w| {
                for (k, v) in &properties {
                    w.create_element("property")
                        .with_attribute(("name", xml_safe(k).as_ref()))
                        .with_attribute(("value", xml_safe(v).as_ref()))
                        .write_empty()?;
                }
                Ok(())
            })?;
            for r in rows {
                case(w, r)?;
            }
            Ok(())
        })?;
    Ok(())
}

/// One trial's `<testcase>`.
fn case(w: &mut Writer<Vec<u8>>, r: &TrialRow) -> io::Result<()> {
    let name = format!("{}.{}.{}", r.task, r.variant, r.trial_index);
    let classname = format!("{}.{}", r.task, r.variant);
    let time = seconds(r.wall_seconds);
    let element = w
        .create_element("testcase")
        .with_attribute(("name", xml_safe(&name).as_ref()))
        .with_attribute(("classname", xml_safe(&classname).as_ref()))
        .with_attribute(("time", time.as_str()));
    let reason = xml_safe(&r.verdict.reason);
    let outcome = r.verdict.outcome.label();
    let (tag, kind) = match (
        CaseResult::of(&r.verdict.outcome, r.verdict.task_success),
        &r.verdict.outcome,
    ) {
        (CaseResult::Passed, _) => {
            element.write_empty()?;
            return Ok(());
        }
        (CaseResult::Failure, _) => ("failure", outcome.to_string()),
        (CaseResult::Error, Outcome::Errored { kind }) => {
            ("error", format!("errored:{}", kind.as_str()))
        }
        (CaseResult::Error, _) => ("error", "errored".to_string()),
        (CaseResult::Skipped, _) => {
            element.write_inner_content(|w| {
                w.create_element("skipped")
                    .with_attribute(("message", reason.as_ref()))
                    .write_empty()?;
                Ok(())
            })?;
            return Ok(());
        }
    };
    element.write_inner_content(|w| {
        w.create_element(tag)
            .with_attribute(("message", reason.as_ref()))
            .with_attribute(("type", kind.as_str()))
            .write_text_content(BytesText::new(&reason))?;
        Ok(())
    })?;
    Ok(())
}

/// The counts of the gates' test cases: a failed gate a failure.
fn gate_counts(report: &GateReport) -> Counts {
    let mut counts = Counts::default();
    for g in &report.gates {
        counts.add(
            if g.passed {
                CaseResult::Passed
            } else {
                CaseResult::Failure
            },
            0.0,
        );
    }
    counts
}

/// The name of the gates' `<testsuite>`: `promotion BASELINE -> CANDIDATE`.
fn gates_name(report: &GateReport) -> String {
    format!("promotion {} -> {}", report.baseline, report.candidate)
}

/// The promotion gates of `compare --gate` as a JUnit XML document: one `<testsuite>` named
/// `promotion BASELINE -> CANDIDATE`, one `<testcase>` per gate (named by the gate), a failed
/// gate with a `<failure>` whose message is its explanation; each case's text lists the
/// numbers the gate used, and the suite's `<properties>` the thresholds.
pub fn gates(report: &GateReport) -> Result<String, ExportError> {
    let counts = gate_counts(report);
    let name = gates_name(report);
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("testsuites")
        .with_attribute(("name", xml_safe(&name).as_ref()))
        .with_attributes(counts.attributes().iter().map(|(k, v)| (*k, v.as_str())))
        .write_inner_content(|w| gates_suite(w, report))?;
    finish(w)
}

/// The gates' `<testsuite>`.
fn gates_suite(w: &mut Writer<Vec<u8>>, report: &GateReport) -> io::Result<()> {
    let counts = gate_counts(report);
    let name = gates_name(report);
    w.create_element("testsuite")
        .with_attribute(("name", xml_safe(&name).as_ref()))
        .with_attributes(counts.attributes().iter().map(|(k, v)| (*k, v.as_str())))
        .write_inner_content(|w| {
            if !report.thresholds.is_empty() {
                w.create_element("properties").write_inner_content(|w| {
                    for t in &report.thresholds {
                        w.create_element("property")
                            .with_attribute(("name", "threshold"))
                            .with_attribute(("value", xml_safe(t).as_ref()))
                            .write_empty()?;
                    }
                    Ok(())
                })?;
            }
            for g in &report.gates {
                let numbers: Vec<String> = g
                    .numbers
                    .iter()
                    .map(|n| {
                        let value = n.value.map_or("-".to_string(), crate::stats::number);
                        match n.n {
                            Some(count) => format!("{} = {value} (n={count})", n.name),
                            None => format!("{} = {value}", n.name),
                        }
                    })
                    .collect();
                let text = format!("{}\n{}", g.explanation, numbers.join("\n"));
                let text = xml_safe(&text);
                let explanation = xml_safe(&g.explanation);
                let case = w
                    .create_element("testcase")
                    .with_attribute(("name", xml_safe(&g.name).as_ref()))
                    .with_attribute(("classname", "promotion"))
                    .with_attribute(("time", "0.000"));
                case.write_inner_content(|w| {
                    if !g.passed {
                        w.create_element("failure")
                            .with_attribute(("message", explanation.as_ref()))
                            .with_attribute(("type", "gate"))
                            .write_text_content(BytesText::new(&text))?;
                    } else {
                        w.create_element("system-out")
                            .write_text_content(BytesText::new(&text))?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use proctor_score::{ErrorKind, TrialVerdict};

    use super::*;
    use crate::input::Cost;

    fn row(task: &str, variant: &str, index: u32, outcome: Outcome, success: bool) -> TrialRow {
        TrialRow {
            run_id: "r".into(),
            trial_id: format!("{task}.{variant}.{index}"),
            task: task.into(),
            variant: variant.into(),
            trial_index: index,
            mutation: None,
            fixture_hash: "f".into(),
            suite_id: "s".into(),
            suite_hash: "h".into(),
            expect: Expect::Complete,
            verdict: TrialVerdict {
                reason: format!("because <{}> & ]]> \u{1b}[0m \0", outcome.label()),
                outcome,
                task_success: success,
                success: None,
                rubric: None,
                metrics: None,
                reversed: false,
                answer_reads_as: None,
                integrity: Default::default(),
            },
            wall_seconds: 1.5,
            agent_cpu_seconds: None,
            tokens: None,
            requests: None,
            cost: Cost::NotApplicable,
            limit_reached: None,
        }
    }

    #[test]
    fn outcomes_become_failures_errors_and_skips_with_escaped_reasons() {
        let rows = vec![
            row("b", "v", 0, Outcome::Completed, true),
            row("a", "v", 1, Outcome::Wrong { reversed: false }, false),
            row("a", "v", 0, Outcome::RefusedHonestly, false),
            row(
                "a",
                "w",
                0,
                Outcome::Errored {
                    kind: ErrorKind::RateLimit,
                },
                false,
            ),
            row(
                "a",
                "w",
                1,
                Outcome::Ungradeable { reason: "x".into() },
                false,
            ),
        ];
        let xml = junit("r", "s", &rows).unwrap();
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
        assert!(xml.contains(r#"<testsuites name="proctor s r" tests="5" failures="2" errors="1" skipped="1" time="7.500">"#), "{xml}");
        assert!(
            xml.contains(r#"<testsuite name="a" tests="4" failures="2" errors="1" skipped="1""#),
            "{xml}"
        );
        assert!(xml.contains(r#"<property name="v.n" value="2"/>"#), "{xml}");
        assert!(xml.contains(r#"<property name="w.n" value="0"/>"#), "{xml}");
        assert!(
            xml.contains(r#"<property name="w.trials" value="2"/>"#),
            "{xml}"
        );
        assert!(xml.contains(r#"type="errored:rate-limit""#), "{xml}");
        assert!(xml.contains(r#"type="refused-honestly""#), "{xml}");
        assert!(
            xml.contains("because &lt;wrong&gt; &amp; ]]&gt; \\u{1b}[0m \\u{0}"),
            "{xml}"
        );
        assert!(!xml.contains('\u{1b}') && !xml.contains('\0'));
        // Plan order: task a before b, index 0 before 1.
        let a0 = xml.find("a.v.0").unwrap();
        let a1 = xml.find("a.v.1").unwrap();
        let b0 = xml.find("b.v.0").unwrap();
        assert!(a0 < a1 && a1 < b0);
    }

    #[test]
    fn no_rows_is_an_error() {
        assert!(matches!(junit("r", "s", &[]), Err(ExportError::Empty)));
    }
}
