//! Stage 5b, visual checks: every distinct look of the task's `visual` assertions runs in one
//! fresh sandbox over the end state with the holdout laid in (like the checks), with no network
//! but the sandbox's own loopback, where the suite's services are started again over a copy of
//! their end state when some look opens a `url`. Inside, `proctor __visual JOB` drives headless
//! Chromium over a pipe and prints what it saw; the screenshots are kept in the trial's folder
//! (`visual/N.png`, with `visual/N.json`) and compared here with their reference images.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_browser::{find_browser, Job, Look, Report, Seen, Viewport};
use proctor_sandbox::{Bind, SandboxSpec, ServiceSpec};
use proctor_score::endstate::{ScreenshotDiff, VisualElement, VisualRun};
use proctor_suite::assertion::Visual;
use proctor_suite::model::Task;

use crate::layers::copy_tree;
use crate::trial::checks::{check_workspace, CheckEnv, EndTree};
use crate::trial::context::{RunContext, Trial};
use crate::trial::env::{check_env, host_path};
use crate::trial::paths::{HOME_INSIDE, RUN_INSIDE};
use crate::trial::prepare::Prepared;

/// The hidden subcommand that looks at pages inside the sandbox.
pub const VISUAL_SUBCOMMAND: &str = "__visual";

/// Seconds the browser gets to start, on top of the looks' own timeouts.
const BROWSER_START: Duration = Duration::from_secs(30);

/// Bytes of the looks' report (screenshots included, as base64) read back.
const REPORT_BYTES: u64 = 64 << 20;

/// `proctor __visual JOB`, run inside a trial's validation sandbox: looks at the job's pages
/// and prints the [`Report`] as JSON on stdout. Exits 0, or 2 when the job cannot be read.
pub fn visual_main(args: &[String]) -> i32 {
    let Some(text) = args.first() else {
        eprintln!("usage: proctor {VISUAL_SUBCOMMAND} JOB_JSON");
        return 2;
    };
    let job: Job = match serde_json::from_str(text) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("proctor {VISUAL_SUBCOMMAND}: the job is not valid: {e}");
            return 2;
        }
    };
    let report = proctor_browser::run_job(&job);
    match serde_json::to_writer(std::io::stdout().lock(), &report) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("proctor {VISUAL_SUBCOMMAND}: cannot print the report: {e}");
            1
        }
    }
}

/// Every distinct visual assertion of a task (success, rubric and caps) by its look, in first-use
/// order.
pub fn task_visuals(task: &Task) -> Vec<&Visual> {
    let mut out: Vec<&Visual> = Vec::new();
    for v in task.visuals() {
        if !out.iter().any(|k| k.look_key() == v.look_key()) {
            out.push(v);
        }
    }
    out
}

/// The visual stage of a trial: what each look saw, by look, with its evidence kept in the
/// trial's folder.
pub fn visual_trial(
    ctx: &RunContext,
    trial: &Trial,
    prepared: &Prepared,
    holdout: Option<&Path>,
) -> BTreeMap<String, VisualRun> {
    let visuals = task_visuals(trial.task);
    if visuals.is_empty() {
        return BTreeMap::new();
    }
    let dir = prepared.paths.work.join("visual");
    let runs = match find_browser(&ctx.browser) {
        Err(why) => failed_all(&visuals, &format!("no browser: {why}")),
        Ok(browser) => {
            let setup = Setup {
                ctx,
                trial,
                env: CheckEnv::of(ctx),
                browser,
            };
            setup.run(
                &visuals,
                &crate::trial::checks::EndTree::of(prepared),
                holdout,
                prepared,
                &dir,
            )
        }
    };
    let trial_dir = &prepared.paths.trial_dir;
    let mut out = BTreeMap::new();
    for (n, (v, mut run)) in visuals.iter().zip(runs).enumerate() {
        keep_evidence(ctx, trial_dir, n, &mut run);
        out.insert(v.look_key(), run.0);
    }
    out
}

/// What each visual look needs from its trial.
struct Setup<'a, 'c> {
    ctx: &'a RunContext<'c>,
    trial: &'a Trial<'a>,
    /// The sandbox's isolation; visual checks run on the host's root, never in an image.
    env: CheckEnv,
    browser: PathBuf,
}

/// A look's result before its evidence is kept: the run, and the screenshot's bytes.
type Pending = (VisualRun, Option<Vec<u8>>);

impl Setup<'_, '_> {
    /// Runs every look in one sandbox, and compares each screenshot with its reference.
    fn run(
        &self,
        visuals: &[&Visual],
        tree: &EndTree,
        holdout: Option<&Path>,
        prepared: &Prepared,
        dir: &Path,
    ) -> Vec<Pending> {
        let needs_services = visuals.iter().any(|v| v.url.is_some());
        if needs_services && self.ctx.image(&self.trial.planned.task).is_some() {
            return failed_all(
                visuals,
                "a `visual` url cannot be checked for a task in an image: its services would have to be started again in the image",
            );
        }
        let ws = match check_workspace(&self.env, tree, holdout, dir) {
            Ok(ws) => ws,
            Err(e) => return failed_all(visuals, &format!("cannot lay out the end state: {e}")),
        };
        let inside = ws.1.clone();
        let looks: Vec<Look> = visuals.iter().map(|v| look_of(v, &inside)).collect();
        let services = if needs_services {
            match self.services_again(prepared, dir) {
                Ok(s) => s,
                Err(e) => return failed_all(visuals, &e),
            }
        } else {
            Vec::new()
        };
        let timeout = visuals
            .iter()
            .map(|v| {
                v.timeout_seconds
                    .map(Duration::from_secs)
                    .unwrap_or(self.trial.settings.validation_timeout)
            })
            .max()
            .unwrap_or(self.trial.settings.validation_timeout);
        let job = Job {
            browser: self.browser.clone(),
            viewport: Viewport::default(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            looks: looks.clone(),
        };
        let report = self.look(&job, ws, services, dir, timeout);
        let report = match report {
            Ok(r) if r.seen.len() == looks.len() => r,
            Ok(r) => {
                let why = format!(
                    "the browser reported {} looks for {}",
                    r.seen.len(),
                    looks.len()
                );
                return failed_all(visuals, &why);
            }
            Err(why) => return failed_all(visuals, &why),
        };
        visuals
            .iter()
            .zip(looks)
            .zip(report.seen)
            .map(|((v, look), seen)| self.judge(v, look, seen))
            .collect()
    }

    /// The suite's services, started again over a copy of their end state, their output in
    /// `dir/services`.
    fn services_again(&self, prepared: &Prepared, dir: &Path) -> Result<Vec<ServiceSpec>, String> {
        let paths = &prepared.paths;
        let env = check_env(
            Path::new(HOME_INSIDE),
            &host_path(),
            &paths.workspace_inside(),
        );
        let (specs, _) = crate::trial::services::services(self.ctx, self.trial, paths, None, &env)
            .map_err(|e| format!("cannot start the services again: {}", e.reason()))?;
        let again = dir.join("services");
        specs
            .into_iter()
            .map(|mut s| {
                let copy = again.join(&s.name);
                copy_tree(&paths.services().join(&s.name), &copy).map_err(|e| {
                    format!("cannot copy the end state of service `{}`: {e}", s.name)
                })?;
                s.dir_host = copy;
                s.log = again.join(format!("{}.log", s.name));
                Ok(s)
            })
            .collect()
    }

    /// Runs `proctor __visual JOB` in a sandbox and reads what it printed.
    fn look(
        &self,
        job: &Job,
        ws: (proctor_sandbox::Workspace, PathBuf),
        services: Vec<ServiceSpec>,
        dir: &Path,
        per_look: Duration,
    ) -> Result<Report, String> {
        let json = serde_json::to_string(job).map_err(|e| e.to_string())?;
        let (proctor, mut binds) = self.proctor_inside();
        binds.extend(browser_bind(&self.browser));
        binds.extend(crate::trial::services::program_binds(&services, &binds));
        let namespaces = self.env.namespaces;
        let home = if namespaces {
            PathBuf::from(HOME_INSIDE)
        } else {
            dir.to_path_buf()
        };
        let looks = u32::try_from(job.looks.len()).unwrap_or(u32::MAX);
        let env = check_env(&home, &host_path(), &ws.1);
        let spec = SandboxSpec {
            max_turns: 1,
            init_exe: self.env.proctor_exe.clone(),
            namespaces,
            workspace: ws.0,
            workspace_inside: ws.1,
            hide: self.env.hide.clone(),
            binds,
            network: proctor_sandbox::Network::None,
            allowed_hosts: Vec::new(),
            env,
            home_inside: home,
            services,
            command: vec![proctor, VISUAL_SUBCOMMAND.into(), json],
            stdout: dir.join("stdout"),
            stderr: dir.join("stderr"),
            wall_timeout: BROWSER_START + per_look.saturating_mul(looks),
            grace: self.env.grace,
            root_image: None,
            skeleton: None,
            view: None,
            limits: proctor_sandbox::SandboxLimits {
                output_bytes: Some(REPORT_BYTES),
                ..Default::default()
            },
            calls: None,
        };
        let report = proctor_sandbox::run(&spec)
            .map_err(|e| format!("the visual check's sandbox failed: {e}"))?;
        let stderr = std::fs::read(&spec.stderr).unwrap_or_default();
        let tail = String::from_utf8_lossy(&stderr[stderr.len().saturating_sub(1000)..])
            .trim()
            .to_string();
        if let Some(why) = report.not_started {
            return Err(format!("the visual check could not start: {why}"));
        }
        if report.timed_out {
            return Err(format!(
                "the browser did not finish within {} s",
                spec.wall_timeout.as_secs()
            ));
        }
        let stdout = std::fs::read(&spec.stdout).unwrap_or_default();
        serde_json::from_slice(&stdout).map_err(|e| {
            format!("the visual check printed no report ({e}); its stderr ends: {tail}")
        })
    }

    /// How the sandbox runs proctor: bound at a fixed path inside with namespaces, else itself.
    fn proctor_inside(&self) -> (String, Vec<Bind>) {
        if !self.env.namespaces {
            return (self.env.proctor_exe.display().to_string(), Vec::new());
        }
        let inside = Path::new(RUN_INSIDE).join("bin/proctor");
        let bind = Bind {
            host: self.env.proctor_exe.clone(),
            inside: inside.clone(),
            read_only: true,
        };
        (inside.display().to_string(), vec![bind])
    }

    /// A look's run from what was seen; the screenshot compared with its reference.
    fn judge(&self, v: &Visual, look: Look, seen: Seen) -> Pending {
        let mut run = VisualRun {
            look: v.look_key(),
            url: look.url,
            count: seen.count,
            elements: seen
                .elements
                .into_iter()
                .map(|e| VisualElement {
                    text: e.text,
                    visible: e.visible,
                })
                .collect(),
            screenshot: None,
            diff: None,
            load_error: seen.load_error,
            error: seen.error,
        };
        // Every look keeps a screenshot; only one of what the look is about is compared: the
        // window's, taken when no element matches the selector, is evidence, not the element.
        let of_the_element = v.selector.is_none() || seen.count.is_some_and(|n| n > 0);
        if let (Some(reference), Some(shot), true) =
            (&v.screenshot, &seen.screenshot, of_the_element)
        {
            let rel = reference.get_ref();
            match std::fs::read(self.ctx.suite.root.join(rel)) {
                Err(e) => run.error = Some(format!("cannot read the reference image {rel}: {e}")),
                Ok(want) => match proctor_browser::compare(shot, &want) {
                    Ok(d) => {
                        run.diff = Some(ScreenshotDiff {
                            reference: rel.clone(),
                            differing: d.differing,
                            share: d.share,
                            size: d.size,
                            reference_size: d.reference_size,
                        })
                    }
                    Err(e) => run.error = Some(e.to_string()),
                },
            }
        }
        (run, seen.screenshot)
    }
}

/// The page a look opens: a workspace file as seen inside the sandbox, or the URL as written.
fn look_of(v: &Visual, workspace_inside: &Path) -> Look {
    let url = match (&v.page, &v.url) {
        (Some(page), _) => format!("file://{}", workspace_inside.join(page.get_ref()).display()),
        (None, Some(url)) => url.get_ref().clone(),
        (None, None) => "about:blank".into(),
    };
    Look {
        url,
        selector: v.selector.as_ref().map(|s| s.get_ref().clone()),
        // Every look keeps its screenshot as evidence, not only one with a `screenshot` test.
        screenshot: true,
    }
}

/// A browser under a folder the sandbox makes private (`/tmp`, `/run`, `/home`) would be
/// invisible inside: its folder is bound read-only at its own path.
fn browser_bind(browser: &Path) -> Option<Bind> {
    let private = ["/tmp", "/run", "/home"]
        .iter()
        .any(|d| browser.starts_with(d));
    let folder = browser.parent()?;
    private.then(|| Bind {
        host: folder.to_path_buf(),
        inside: folder.to_path_buf(),
        read_only: true,
    })
}

/// Every look failed for the same reason.
fn failed_all(visuals: &[&Visual], why: &str) -> Vec<Pending> {
    visuals
        .iter()
        .map(|v| {
            let run = VisualRun {
                look: v.look_key(),
                error: Some(why.to_string()),
                ..VisualRun::default()
            };
            (run, None)
        })
        .collect()
}

/// Keeps a look's screenshot (`visual/N.png`) and result (`visual/N.json`) in the trial's
/// folder, and names the screenshot in the run.
fn keep_evidence(ctx: &RunContext, trial_dir: &Path, n: usize, pending: &mut Pending) {
    let (run, shot) = pending;
    let dir = trial_dir.join("visual");
    let _ = std::fs::create_dir_all(&dir);
    let mut kept = Ok(());
    if let Some(png) = shot.take() {
        let rel = format!("visual/{n}.png");
        kept = proctor_store::atomic_write_unsynced(trial_dir.join(&rel), &png);
        if kept.is_ok() {
            run.screenshot = Some(rel);
        }
    }
    let json = proctor_store::atomic_write_json_unsynced(dir.join(format!("{n}.json")), &*run);
    for e in [kept.err(), json.err()].into_iter().flatten() {
        if e.is_out_of_space() {
            ctx.store_is_full(format!("cannot keep visual check {n}'s evidence: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_opened_from_the_workspace_as_the_sandbox_sees_it() {
        let v: Visual = toml::from_str(
            "page = \"site/index.html\"\nselector = \"#status\"\ntext = \"Ready\"\n",
        )
        .unwrap();
        let look = look_of(&v, Path::new("/workspace"));
        assert_eq!(look.url, "file:///workspace/site/index.html");
        assert_eq!(look.selector.as_deref(), Some("#status"));
        assert!(look.screenshot, "every look keeps a screenshot");
        let v: Visual = toml::from_str(
            "url = \"http://127.0.0.1:8080/\"\nscreenshot = \"holdout/t/ref.png\"\n",
        )
        .unwrap();
        let look = look_of(&v, Path::new("/workspace"));
        assert_eq!(look.url, "http://127.0.0.1:8080/");
        assert!(look.screenshot && look.selector.is_none());
    }

    #[test]
    fn only_a_browser_under_a_private_folder_is_bound() {
        assert_eq!(browser_bind(Path::new("/usr/bin/chromium")), None);
        let b = browser_bind(Path::new("/home/me/chrome-linux/chrome")).unwrap();
        assert_eq!(b.host, Path::new("/home/me/chrome-linux"));
        assert!(b.read_only && b.host == b.inside);
    }

    #[test]
    fn a_missing_browser_fails_every_look_with_the_reason() {
        let v: Visual = toml::from_str("page = \"a.html\"\nselector = \"p\"\ncount = 1\n").unwrap();
        let runs = failed_all(&[&v], "no browser: none");
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].0.error.as_deref(), Some("no browser: none"));
        assert_eq!(runs[0].0.look, v.look_key());
    }
}
