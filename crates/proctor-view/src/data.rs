//! What the pages show, read from the store: the runs, one run (its metadata, the report of
//! its results when it has them, its finished trials), one trial (its record and its diff).

use std::collections::BTreeMap;

use proctor_records::OutcomeTally;
use proctor_report::gate_report::GateReport;
use proctor_report::{Comparison, RunReport};
use proctor_score::OutcomeKind;
use proctor_store::{
    CellCount, RunId, RunListing, RunMeta, Scoring, ScoringChoice, Store, StoreError, TrialFilter,
    TrialSummary,
};
use proctor_trial_record::TrialRecord;
use serde::{Deserialize, Serialize};

use crate::links::url_encode;
use crate::transcript;

/// Why a page cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// No such run or trial.
    #[error("{0}")]
    NotFound(String),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The request's work failed (it panicked or was cancelled).
    #[error("the request failed: {0}")]
    Failed(String),
}

/// A run as the runs page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// The run's id.
    pub run: String,
    /// The suite's id.
    pub suite: String,
    /// When it started (UTC).
    pub started_at: String,
    /// `running`, `finished` or `interrupted`.
    pub status: String,
    /// The variants it runs.
    pub variants: Vec<String>,
    /// The models of its `--model` matrix, if any.
    pub models: Vec<String>,
    /// The agent kinds of its variants, when recorded.
    pub agents: Vec<String>,
    /// Trials planned.
    pub planned: u64,
    /// Trials finished.
    pub finished: u64,
    /// Finished trials by outcome, as the run scored them (the index's; a rescore's outcomes
    /// are on the run's page).
    pub outcomes: OutcomeTally,
    /// How many times the run was rescored (0: never).
    pub rescores: u32,
}

impl RunRow {
    fn of(store: &Store, r: &RunListing) -> RunRow {
        let plan = r.meta.extra.as_ref().and_then(|e| e.plan.as_ref());
        RunRow {
            run: r.id.as_str().to_string(),
            suite: r.meta.suite_id.clone(),
            started_at: r
                .meta
                .started_at
                .map(proctor_records::time::format_millis)
                .unwrap_or_default(),
            status: r.meta.status.as_str().to_string(),
            variants: r.meta.variants.clone(),
            models: plan.map(|p| p.models.clone()).unwrap_or_default(),
            agents: r.meta.agent_versions.keys().cloned().collect(),
            planned: r.meta.planned_trials,
            finished: r.trials_finished,
            outcomes: r.outcomes,
            rescores: proctor_store::pick_scoring(&store.run_dir(&r.id), ScoringChoice::Latest)
                .ok()
                .and_then(Result::ok)
                .map_or(0, |s| s.rescores),
        }
    }
}

/// Every run of the store, newest first.
pub fn runs(store: &Store) -> Result<Vec<RunRow>, ViewError> {
    let mut runs: Vec<RunRow> = store
        .list_runs()?
        .iter()
        .map(|r| RunRow::of(store, r))
        .collect();
    runs.reverse();
    Ok(runs)
}

/// What the run page shows: the run, its rates, its counts per cell, and one page of its
/// trials; nothing in it grows with the number of trials but the cells (tasks × variants).
#[derive(Debug, Clone, Serialize)]
pub struct RunPage {
    /// The run's id.
    pub run: String,
    /// Its metadata (`run.json`).
    pub meta: RunMeta,
    /// The report of its results in the scoring shown (`results.json`'s `report`, or a
    /// rescore's, without its `trials` list: rates with n per variant and task), once the run
    /// wrote them; `null` while it runs. Served without its `trials` list (read as empty).
    #[serde(serialize_with = "report_without_trials")]
    pub report: Option<RunReport>,
    /// The scoring shown: the latest rescore unless `?scoring=` asks for another.
    pub scoring: Scoring,
    /// How many trials have finished.
    pub finished: u64,
    /// Finished trials per task, variant and outcome, from the index.
    pub cells: Vec<CellCount>,
    /// The trial table's filter and page, as asked.
    pub filter: TrialQuery,
    /// How many finished trials pass the filter.
    pub total: u64,
    /// How many of them come before this page.
    pub offset: u64,
    /// The page size.
    pub limit: u64,
    /// This page of the trials that pass the filter, by task, variant and trial index.
    pub trials: Vec<TrialSummary>,
    /// The trials that were not graded (errored or ungradeable), at most
    /// [`NOT_GRADED_SHOWN`] of each outcome.
    pub not_graded: Vec<TrialSummary>,
}

/// The trials per page when the request does not say.
pub const PAGE_SIZE: u64 = 100;
/// The largest page a request may ask for.
pub const MAX_PAGE_SIZE: u64 = 1000;
/// How many errored (and how many ungradeable) trials the run page lists by name.
pub const NOT_GRADED_SHOWN: u64 = 50;

/// The run page's query: which trials its table shows (`?outcome=&task=&variant=&differs=1
/// &offset=&limit=`); an empty value means any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialQuery {
    /// Only this outcome.
    #[serde(default)]
    pub outcome: String,
    /// Only this task.
    #[serde(default)]
    pub task: String,
    /// Only this variant.
    #[serde(default)]
    pub variant: String,
    /// Only trials whose outcome differs between variants (any non-empty value but `0` and
    /// `false`, as a checkbox sends `on`).
    #[serde(default)]
    pub differs: String,
    /// Trials to skip.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Trials per page ([`PAGE_SIZE`] by default, at most [`MAX_PAGE_SIZE`]).
    #[serde(default)]
    pub limit: Option<u64>,
    /// The scoring: `latest` (also when empty), `original` or a rescore's number.
    #[serde(default)]
    pub scoring: String,
}

/// The query of a trial page: `?scoring=latest|original|N`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoringQuery {
    /// The scoring: `latest` (also when empty), `original` or a rescore's number.
    #[serde(default)]
    pub scoring: String,
}

/// The scoring a query's `scoring` value names (empty: the latest).
pub fn scoring_choice(s: &str) -> Result<ScoringChoice, ViewError> {
    if s.is_empty() {
        return Ok(ScoringChoice::Latest);
    }
    s.parse()
        .map_err(|e: proctor_store::ParseScoringError| ViewError::NotFound(e.to_string()))
}

/// The scoring of run `id` that `choice` picks.
fn pick(store: &Store, id: &RunId, choice: ScoringChoice) -> Result<Scoring, ViewError> {
    proctor_store::pick_scoring(&store.run_dir(id), choice)?
        .map_err(|why| ViewError::NotFound(format!("run {id}: {why}")))
}

impl TrialQuery {
    /// The store's filter of this query; an `outcome` that is none of the eight is refused by
    /// name.
    pub fn filter(&self) -> Result<TrialFilter, ViewError> {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let outcome = match self.outcome.as_str() {
            "" => None,
            label => Some(
                label
                    .parse::<OutcomeKind>()
                    .map_err(|e| ViewError::NotFound(e.to_string()))?,
            ),
        };
        Ok(TrialFilter {
            outcome,
            task: some(&self.task),
            variant: some(&self.variant),
            differs: self.differs_only(),
        })
    }

    /// Whether only trials that differ between variants are asked for.
    pub fn differs_only(&self) -> bool {
        !matches!(self.differs.as_str(), "" | "0" | "false")
    }

    /// The page size asked, within bounds.
    pub fn page_size(&self) -> u64 {
        self.limit.unwrap_or(PAGE_SIZE).clamp(1, MAX_PAGE_SIZE)
    }

    /// This query at another offset, as a URL query string (`outcome=...&offset=N`), with the
    /// values that are set only.
    pub fn at(&self, offset: u64) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("outcome", &self.outcome),
            ("task", &self.task),
            ("variant", &self.variant),
        ] {
            if !v.is_empty() {
                parts.push(format!("{k}={}", url_encode(v)));
            }
        }
        if self.differs_only() {
            parts.push("differs=1".into());
        }
        if self.limit.is_some() {
            parts.push(format!("limit={}", self.page_size()));
        }
        if !self.scoring.is_empty() {
            parts.push(format!("scoring={}", url_encode(&self.scoring)));
        }
        if offset > 0 {
            parts.push(format!("offset={offset}"));
        }
        parts.join("&")
    }
}

/// The run `prefix` names (an id, a unique prefix or `latest`), with the page of its trials
/// that `query` asks for.
pub fn run(
    store: &Store,
    sources: &dyn crate::viewer::Sources,
    prefix: &str,
    query: &TrialQuery,
) -> Result<RunPage, ViewError> {
    let limit = query.page_size();
    run_with(store, sources, prefix, query, limit)
}

/// Every finished trial of the run of page `p`, in the page's scoring (a rescore's outcomes over
/// the index's trials), for its pictures.
pub fn all_trials(
    store: &Store,
    sources: &dyn crate::viewer::Sources,
    p: &RunPage,
) -> Result<Vec<TrialSummary>, ViewError> {
    let id = resolve(store, &p.run)?;
    if p.scoring.is_rescore() {
        let rescored = sources
            .rescored(store, &id, &p.scoring, &|_| false)
            .map_err(ViewError::Failed)?;
        with_rescore(store, &id, rescored)
    } else {
        Ok(store.trials(&id)?)
    }
}

/// The run `prefix` names with every trial, on one page (the export), in the scoring `choice`
/// picks.
pub fn run_all(
    store: &Store,
    sources: &dyn crate::viewer::Sources,
    prefix: &str,
    choice: &str,
) -> Result<RunPage, ViewError> {
    let query = TrialQuery {
        scoring: choice.to_string(),
        ..TrialQuery::default()
    };
    run_with(store, sources, prefix, &query, u64::MAX)
}

fn run_with(
    store: &Store,
    sources: &dyn crate::viewer::Sources,
    prefix: &str,
    query: &TrialQuery,
    limit: u64,
) -> Result<RunPage, ViewError> {
    let id = resolve(store, prefix)?;
    let scoring = pick(store, &id, scoring_choice(&query.scoring)?)?;
    let meta = store.run_meta(&id)?;
    let dir = store.run_dir(&id);
    let report = read_small_report(&dir.join(format!("{}.report.json", scoring.stem())))
        .or_else(|| read_report(&dir.join(&scoring.file)));
    let (cells, page, not_graded) = if scoring.is_rescore() {
        let rescored = sources
            .rescored(store, &id, &scoring, &|_| false)
            .map_err(ViewError::Failed)?;
        rescored_trials(store, &id, rescored, query, limit)?
    } else {
        let cells = store.cell_counts(&id)?;
        let page = store.trials_page(&id, &query.filter()?, query.offset.unwrap_or(0), limit)?;
        let mut not_graded = Vec::new();
        for outcome in OutcomeKind::NOT_GRADED {
            let filter = TrialFilter {
                outcome: Some(outcome),
                ..TrialFilter::default()
            };
            not_graded.extend(store.trials_page(&id, &filter, 0, NOT_GRADED_SHOWN)?.trials);
        }
        (cells, page, not_graded)
    };
    Ok(RunPage {
        run: id.as_str().to_string(),
        meta,
        report,
        scoring,
        finished: cells.iter().map(|c| c.n).sum(),
        cells,
        filter: query.clone(),
        total: page.total,
        offset: page.offset,
        limit,
        trials: page.trials,
        not_graded,
    })
}

/// A trial's summary with what a rescore changed in it: outcome, reason, calls, wrong turns
/// and flags.
fn rescore_summary(t: &mut TrialSummary, by: &TrialSummary) {
    t.outcome.clone_from(&by.outcome);
    t.reason.clone_from(&by.reason);
    t.calls = by.calls;
    t.wrong_turns = by.wrong_turns;
    t.flags.clone_from(&by.flags);
}

/// The counts per cell, the page of trials `query` asks for and the not-graded trials of a run
/// in a rescore: the index's trials with the rescore's outcomes, filtered and paged here (the
/// index holds the run's own outcomes).
/// The index's trials of run `id` with a rescore's outcomes.
fn with_rescore(
    store: &Store,
    id: &RunId,
    rescored: Vec<(TrialSummary, Option<TrialRecord>)>,
) -> Result<Vec<TrialSummary>, ViewError> {
    let by_id: BTreeMap<String, TrialSummary> = rescored
        .into_iter()
        .map(|(s, _)| (s.trial_id.clone(), s))
        .collect();
    let mut all = store
        .trials_page(id, &TrialFilter::default(), 0, u64::MAX)?
        .trials;
    for t in &mut all {
        if let Some(by) = by_id.get(&t.trial_id) {
            rescore_summary(t, by);
        }
    }
    Ok(all)
}

fn rescored_trials(
    store: &Store,
    id: &RunId,
    rescored: Vec<(TrialSummary, Option<TrialRecord>)>,
    query: &TrialQuery,
    limit: u64,
) -> Result<(Vec<CellCount>, proctor_store::TrialsPage, Vec<TrialSummary>), ViewError> {
    let all = with_rescore(store, id, rescored)?;
    // By task, variant and outcome label, the order the index counts them in.
    let mut counts: BTreeMap<(String, String, &'static str), (OutcomeKind, u64)> = BTreeMap::new();
    let mut outcomes_of: BTreeMap<(String, u32), std::collections::BTreeSet<OutcomeKind>> =
        BTreeMap::new();
    for t in &all {
        counts
            .entry((t.task.clone(), t.variant.clone(), t.outcome.label()))
            .or_insert((t.outcome, 0))
            .1 += 1;
        outcomes_of
            .entry((t.task.clone(), t.trial_index))
            .or_default()
            .insert(t.outcome);
    }
    let cells = counts
        .into_iter()
        .map(|((task, variant, _), (outcome, n))| CellCount {
            task,
            variant,
            outcome,
            n,
        })
        .collect();
    let mut not_graded = Vec::new();
    for outcome in OutcomeKind::NOT_GRADED {
        not_graded.extend(
            all.iter()
                .filter(|t| t.outcome == outcome)
                .take(usize::try_from(NOT_GRADED_SHOWN).unwrap_or(usize::MAX))
                .cloned(),
        );
    }
    let f = query.filter()?;
    let passes = |t: &TrialSummary| {
        f.outcome.is_none_or(|o| t.outcome == o)
            && f.task.as_ref().is_none_or(|x| &t.task == x)
            && f.variant.as_ref().is_none_or(|x| &t.variant == x)
            && (!f.differs
                || outcomes_of
                    .get(&(t.task.clone(), t.trial_index))
                    .is_some_and(|o| o.len() > 1))
    };
    let passing: Vec<TrialSummary> = all.into_iter().filter(|t| passes(t)).collect();
    let offset = query.offset.unwrap_or(0);
    let trials = passing
        .iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .cloned()
        .collect();
    let page = proctor_store::TrialsPage {
        total: passing.len() as u64,
        offset,
        trials,
    };
    Ok((cells, page, not_graded))
}

/// `results.report.json`: the report alone, written beside `results.json` at the end of a run;
/// read without its `trials` list (see [`Report`]).
fn read_small_report(path: &std::path::Path) -> Option<RunReport> {
    let file = std::fs::File::open(path).ok()?;
    let report: Report = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    Some(report.0)
}

/// The `report` member of a `results.json` (runs made before `results.report.json` existed),
/// read without keeping its trials in memory.
fn read_report(path: &std::path::Path) -> Option<RunReport> {
    #[derive(serde::Deserialize)]
    struct Head {
        report: Report,
    }
    let file = std::fs::File::open(path).ok()?;
    let head: Head = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    Some(head.report.0)
}

/// A run's report without its `trials` (one summary per trial: it grows with the run, and the
/// run page reads its trials from the index, a page at a time): the members are read as they
/// come, `trials` skipped unread, and the rest (rates and cells per variant and task) read as
/// the typed [`RunReport`] with an empty `trials`.
struct Report(RunReport);

impl<'de> serde::Deserialize<'de> for Report {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Report, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Report;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a run report (a JSON object)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Report, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "trials" {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    } else {
                        out.insert(key, map.next_value()?);
                    }
                }
                out.insert("trials".into(), serde_json::Value::Array(Vec::new()));
                serde_json::from_value(serde_json::Value::Object(out))
                    .map(Report)
                    .map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_map(Members)
    }
}

/// A run page's report as the API serves it: every member but `trials` (which the viewer
/// never read).
fn report_without_trials<S: serde::Serializer>(
    report: &Option<RunReport>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let Some(report) = report else {
        return s.serialize_none();
    };
    let mut v = serde_json::to_value(report).map_err(serde::ser::Error::custom)?;
    if let Some(m) = v.as_object_mut() {
        m.remove("trials");
    }
    v.serialize(s)
}

/// What the trial page shows.
#[derive(Debug, Clone, Serialize)]
pub struct TrialPage {
    /// The run's id.
    pub run: String,
    /// The index's summary of the trial.
    pub summary: TrialSummary,
    /// The runner's whole record (`trial.json`'s `record`; in a rescore, the record the
    /// rescore wrote).
    pub record: TrialRecord,
    /// The scoring shown.
    pub scoring: Scoring,
    /// In a rescore, the run's own outcome and reason for this trial, as the index holds them.
    pub original: Option<OriginalVerdict>,
    /// The workspace diff against the start state, as lines (`+`/`-` prefixed within a file).
    pub diff: Vec<String>,
    /// The trial's transcripts (the agent's, then the model's when recorded), each with its
    /// first lines; the rest is served in slices by the transcript API.
    pub transcripts: Vec<TranscriptHead>,
    /// Each visual look's kept screenshot as a `data:image/png;base64,...` URL, by look (the
    /// page shows them inline; the API's `record` names the files instead).
    #[serde(skip)]
    pub screenshots: BTreeMap<String, String>,
}

/// The largest screenshot shown inline (a bigger one is named, not shown).
const MAX_INLINE_SCREENSHOT: u64 = 8 << 20;

/// Each look's kept screenshot (`visual/N.png` in the trial folder `dir`) as a data URL, by
/// look; a path outside `visual/`, or a file that cannot be read or is too big, is left out.
fn screenshots(record: &TrialRecord, dir: &std::path::Path) -> BTreeMap<String, String> {
    use base64::Engine;
    let mut out = BTreeMap::new();
    for (look, run) in &record.end_state.visuals {
        let Some(rel) = run.screenshot.as_deref() else {
            continue;
        };
        let inside = rel
            .strip_prefix("visual/")
            .is_some_and(|n| !n.contains('/') && !n.starts_with('.'));
        if !inside {
            continue;
        }
        let path = dir.join(rel);
        let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_INLINE_SCREENSHOT);
        if let (true, Ok(png)) = (small, std::fs::read(&path)) {
            out.insert(
                look.clone(),
                format!(
                    "data:image/png;base64,{}",
                    base64::engine::general_purpose::STANDARD.encode(png)
                ),
            );
        }
    }
    out
}

/// A trial's outcome in the run's own scoring, shown beside a rescore's.
#[derive(Debug, Clone, Serialize)]
pub struct OriginalVerdict {
    /// The outcome.
    pub outcome: OutcomeKind,
    /// Why.
    pub reason: Option<String>,
}

/// The lines of a transcript shown before the page's script asks for more.
pub const TRANSCRIPT_HEAD: u64 = 200;

/// A transcript's first lines.
#[derive(Debug, Clone, Serialize)]
pub struct TranscriptHead {
    /// Which transcript.
    pub source: transcript::Source,
    /// Its first [`TRANSCRIPT_HEAD`] lines.
    pub lines: Vec<transcript::Line>,
    /// Whether it has more.
    pub more: bool,
}

/// A finished trial's `trial.json`, or why there is none.
fn trial_file(
    store: &Store,
    id: &RunId,
    trial_id: &str,
) -> Result<proctor_store::TrialFile<TrialRecord>, ViewError> {
    match store.read_trial::<TrialRecord>(id, trial_id) {
        Ok(f) => Ok(f),
        Err(StoreError::TrialNotFound { .. } | StoreError::InvalidTrialId { .. }) => Err(
            ViewError::NotFound(format!("run {id} has no finished trial `{trial_id}`")),
        ),
        Err(e) => Err(e.into()),
    }
}

/// A trial's folder.
fn trial_dir(store: &Store, id: &RunId, trial_id: &str) -> std::path::PathBuf {
    store
        .run_dir(id)
        .join(proctor_store::TRIALS_DIR)
        .join(trial_id)
}

/// One trial of a run in the scoring `choice` names (`latest` when empty), with its diff from
/// `sources` and the head of its transcripts.
pub fn trial(
    store: &Store,
    prefix: &str,
    trial_id: &str,
    sources: &dyn crate::viewer::Sources,
    choice: &str,
) -> Result<TrialPage, ViewError> {
    let id = resolve(store, prefix)?;
    let scoring = pick(store, &id, scoring_choice(choice)?)?;
    let rescored = if scoring.is_rescore() {
        sources
            .rescored(store, &id, &scoring, &|t| t == trial_id)
            .map_err(ViewError::Failed)?
            .into_iter()
            .find_map(|(s, r)| Some((s, r?)))
    } else {
        None
    };
    trial_in(store, &id, trial_id, sources, scoring, rescored)
}

/// One trial of run `id` in `scoring`, whose rescored summary and record are `rescored` (none
/// in the original scoring, or when the rescore did not hold the trial).
pub(crate) fn trial_in(
    store: &Store,
    id: &RunId,
    trial_id: &str,
    sources: &dyn crate::viewer::Sources,
    scoring: Scoring,
    rescored: Option<(TrialSummary, TrialRecord)>,
) -> Result<TrialPage, ViewError> {
    let id = id.clone();
    let mut file = trial_file(store, &id, trial_id)?;
    let mut original = None;
    if let Some((summary, record)) = rescored {
        original = Some(OriginalVerdict {
            outcome: file.summary.outcome,
            reason: file.summary.reason.clone(),
        });
        rescore_summary(&mut file.summary, &summary);
        file.record = record;
    }
    let dir = trial_dir(store, &id, trial_id);
    let transcripts = transcript::sources(&file.record.launch.agent, &dir)
        .into_iter()
        .map(|source| {
            let (lines, more) = transcript::head(&dir, &source, TRANSCRIPT_HEAD)
                .map_err(|e| ViewError::Failed(format!("cannot read {}: {e}", source.file)))?;
            Ok(TranscriptHead {
                source,
                lines,
                more,
            })
        })
        .collect::<Result<Vec<_>, ViewError>>()?;
    let shots = screenshots(&file.record, &dir);
    Ok(TrialPage {
        run: id.as_str().to_string(),
        summary: file.summary,
        record: file.record,
        scoring,
        original,
        diff: sources.diff(store, &id, trial_id),
        screenshots: shots,
        transcripts,
    })
}

/// The transcript API's query: `?source=agent|model&from=N&count=M`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceQuery {
    /// `agent` (the default) or `model`.
    #[serde(default)]
    pub source: Option<String>,
    /// The first line, from 0.
    #[serde(default)]
    pub from: Option<u64>,
    /// How many lines (200 by default, at most [`transcript::MAX_SLICE`]).
    #[serde(default)]
    pub count: Option<u64>,
}

/// Lines of a trial's transcript, read from its file without reading the whole file.
pub fn transcript_slice(
    store: &Store,
    indexes: &transcript::LineIndexes,
    prefix: &str,
    trial_id: &str,
    q: &SliceQuery,
) -> Result<transcript::Slice, ViewError> {
    let id = resolve(store, prefix)?;
    let record = trial_file(store, &id, trial_id)?.record;
    let dir = trial_dir(store, &id, trial_id);
    let name = q.source.as_deref().unwrap_or("agent");
    let source = transcript::sources(&record.launch.agent, &dir)
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            ViewError::NotFound(format!(
                "trial `{trial_id}` has no `{name}` transcript (sources: agent, model)"
            ))
        })?;
    indexes
        .slice(
            &dir,
            source,
            q.from.unwrap_or(0),
            q.count.unwrap_or(TRANSCRIPT_HEAD),
        )
        .map_err(|e| ViewError::Failed(format!("cannot read the transcript: {e}")))
}

/// The service-file API's query: `?offset=N&bytes=M`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// Where the page starts, in bytes (0 by default).
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most how many bytes ([`proctor_store::page::DEFAULT_PAGE_BYTES`] by default, at most
    /// [`proctor_store::page::MAX_PAGE_BYTES`]).
    #[serde(default)]
    pub bytes: Option<u64>,
}

/// A page of a file a trial's service left (its state, its event log), as the viewer shows one.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceFilePage {
    /// The run's id.
    pub run: String,
    /// The trial's id.
    pub trial: String,
    /// The file, `NAME/FILE` under the trial's `services/` folder.
    pub path: String,
    /// The page.
    #[serde(flatten)]
    pub page: proctor_store::page::FilePage,
}

/// A page of `path` (`NAME/FILE`) under a finished trial's `services/` folder, read without
/// reading the whole file; a link, a special file or a path out of the folder is refused.
pub fn service_file_page(
    store: &Store,
    prefix: &str,
    trial_id: &str,
    path: &str,
    q: &PageQuery,
) -> Result<ServiceFilePage, ViewError> {
    use proctor_store::page::{read_page, PageError};
    let id = resolve(store, prefix)?;
    trial_file(store, &id, trial_id)?;
    let base = trial_dir(store, &id, trial_id).join("services");
    let page = read_page(&base, path, q.offset.unwrap_or(0), q.bytes.unwrap_or(0)).map_err(
        |e| match e {
            PageError::Io { .. } => ViewError::Failed(e.to_string()),
            _ => ViewError::NotFound(format!("trial `{trial_id}`: {e}")),
        },
    )?;
    Ok(ServiceFilePage {
        run: id.as_str().to_string(),
        trial: trial_id.to_string(),
        path: path.to_string(),
        page,
    })
}

/// What the comparison page shows.
#[derive(Debug, Clone, Serialize)]
pub struct ComparePage {
    /// Arm A, `RUN/VARIANT`.
    pub a: String,
    /// Arm B, `RUN/VARIANT`.
    pub b: String,
    /// The comparison, as `proctor compare --format json` prints it.
    pub comparison: Comparison,
    /// The promotion gates, as `proctor compare --gate --format json` prints them under
    /// `gates`; `null` when they cannot be applied.
    pub gates: Option<GateReport>,
    /// Why there are no gates, when there are none.
    pub gates_note: Option<String>,
    /// The scoring each run was read in (the latest), as `compare --format json` prints them.
    pub scorings: Vec<ArmScoring>,
}

/// The scoring one run of a comparison was read in: `compare --format json`'s `scorings`
/// entry, a [`Scoring`] with its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmScoring {
    /// When the rescore was made (UTC); absent for the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The results file of this scoring.
    pub file: String,
    /// `original` or `rescore`.
    pub kind: String,
    /// The rescore's number; absent for the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescore: Option<u32>,
    /// How many rescores the run has.
    pub rescores: u32,
    /// The run.
    pub run: String,
}

impl ArmScoring {
    /// Run `run`'s scoring `s`.
    pub fn of(run: &RunId, s: Scoring) -> ArmScoring {
        ArmScoring {
            at: s.at,
            file: s.file,
            kind: s.kind,
            rescore: s.rescore,
            rescores: s.rescores,
            run: run.as_str().to_string(),
        }
    }

    /// The scoring, without its run.
    pub fn scoring(&self) -> Scoring {
        Scoring {
            kind: self.kind.clone(),
            rescore: self.rescore,
            at: self.at.clone(),
            file: self.file.clone(),
            rescores: self.rescores,
        }
    }
}

/// The comparison of arms `a` and `b` (each `RUN/VARIANT`, RUN an id, prefix or `latest`).
pub fn compare(
    store: &Store,
    sources: &dyn crate::viewer::Sources,
    a: &str,
    b: &str,
) -> Result<ComparePage, ViewError> {
    let arm = |s: &str| -> Result<String, ViewError> {
        let (run, variant) = s.split_once('/').ok_or_else(|| {
            ViewError::NotFound(format!("`{s}` is not an arm: write RUN/VARIANT"))
        })?;
        Ok(format!("{}/{variant}", resolve(store, run)?.as_str()))
    };
    let (a, b) = (arm(a)?, arm(b)?);
    let doc = sources
        .compare(store, &a, &b)
        .map_err(ViewError::NotFound)?;
    let (gates, gates_note) = match doc.gates {
        Ok(g) => (Some(g), None),
        Err(why) => (None, Some(why)),
    };
    Ok(ComparePage {
        a,
        b,
        comparison: doc.comparison,
        gates,
        gates_note,
        scorings: doc
            .scorings
            .into_iter()
            .map(|(run, s)| ArmScoring::of(&run, s))
            .collect(),
    })
}

fn resolve(store: &Store, prefix: &str) -> Result<RunId, ViewError> {
    store
        .resolve_run(prefix)
        .map_err(|e| ViewError::NotFound(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_read_without_its_trials() {
        // A real run's results (the bundled traps example's golden file).
        // Its run-varying numbers are normalised to placeholders there: put back as numbers.
        let results = include_str!("../../proctor/tests/golden/traps.results.json")
            .replace("\"<seconds>\"", "1.5")
            .replace("\"<ms>\"", "7");
        let results = results.as_str();
        let doc: serde_json::Value = serde_json::from_str(results).unwrap();
        let whole: RunReport = serde_json::from_value(doc["report"].clone()).unwrap();
        assert!(!whole.trials.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("results.report.json");
        std::fs::write(&small, doc["report"].to_string()).unwrap();
        let full = dir.path().join("results.json");
        std::fs::write(&full, results).unwrap();
        for read in [read_small_report(&small), read_report(&full)] {
            let read = read.unwrap();
            assert!(read.trials.is_empty());
            assert_eq!(read.variants, whole.variants);
            assert_eq!(read.overall, whole.overall);
            assert_eq!(read.tasks, whole.tasks);
        }
        // A report whose members are not a report's is no report (never a blank one).
        std::fs::write(&small, r#"{"variants":[{"variant":"v"}],"trials":[]}"#).unwrap();
        assert_eq!(read_small_report(&small), None);
        // The API serves it without `trials`.
        let mut page = serde_json::to_value(RunReportOnly {
            report: read_report(&full),
        })
        .unwrap();
        assert!(page["report"].get("variants").is_some());
        assert!(page["report"].get("trials").is_none());
        page["report"]["trials"] = serde_json::json!([]);
        assert_eq!(
            serde_json::from_value::<RunReport>(page["report"].take()).unwrap(),
            read_report(&full).unwrap()
        );
    }

    #[derive(Serialize)]
    struct RunReportOnly {
        #[serde(serialize_with = "report_without_trials")]
        report: Option<RunReport>,
    }
}
