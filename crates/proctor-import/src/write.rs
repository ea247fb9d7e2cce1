//! The import itself: find the tasks, read each, and write the suite folder in one piece.
//!
//! ```text
//! OUT/
//!   suite.toml
//!   import.toml                       what each task says of itself that suite.toml has no key for
//!   fixture/                          empty: the workspace comes from each task's image
//!   holdout/TASK_ID/...               the task's tests (Terminal-Bench: and run-tests.sh),
//!                                     laid at /tests for the checks (`holdout_at`)
//!   holdout/TASK_ID/proctor-verify.sh runs them and reads the result (the success check)
//!   agents/oracle/TASK_ID.toml        the scripted oracle running the reference solution
//!   agents/oracle/files/TASK_ID/...   the solution's original files, for the reader
//!   images/TASK_ID.tar                a task's local OCI archive (or images/TASK_ID/, a layout)
//!   descriptions/TASK_ID/KEY.md       each entry of a Terminal-Bench task's `descriptions`
//! ```

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::ImportError;
use crate::files::FileEntry;
use crate::ident::{sanitize, Ids};
use crate::image::ImageSource;
use crate::model::{Format, TaskPlan};
use crate::report::{ImportReport, Skipped};
use crate::{discover, harbor, oracle, suite_toml, tbench, verify, ImportOptions};

/// Imports the tasks named by `inputs` (in `format`) into the new suite folder `out`.
pub(crate) fn import(
    format: Format,
    inputs: &[PathBuf],
    out: &Path,
    options: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    check_output(out)?;
    let mut report = ImportReport::default();
    let dirs = discover::task_dirs(format, inputs, &mut report.not_tasks)?;
    let mut ids = Ids::default();
    let mut plans = Vec::new();
    for dir in dirs {
        let folder = folder_name(&dir);
        let id = ids.unique(&sanitize(&folder, "task"));
        if id != folder {
            report.warn(
                &id,
                format!("the folder `{folder}` is not a valid task id; the task is `{id}`"),
            );
        }
        let read = match format {
            Format::Harbor => harbor::read(&dir, &id),
            Format::TerminalBench => tbench::read(&dir, &id, options.description.as_deref()),
        };
        for w in read.warnings {
            report.warn(&id, w);
        }
        let (context, shown) = match format {
            Format::Harbor => (dir.join("environment"), "environment"),
            Format::TerminalBench => (dir.clone(), "."),
        };
        if let Some(w) = crate::start::entrypoint_warning(&context, shown) {
            report.warn(&id, w);
        }
        let outcome = read.outcome.and_then(|mut plan| {
            let build = options.build.as_ref();
            crate::build::resolve_plan(&mut plan, build, &mut report.builds)
                .and_then(|()| crate::build::resolve_sidecars(&mut plan, build, &mut report.builds))
                .map(|()| plan)
        });
        match outcome {
            Ok(plan) => {
                for w in crate::leak::warnings(&plan, &context, shown) {
                    report.warn(&id, w);
                }
                report.imported.push(id);
                plans.push(*plan);
            }
            Err(reason) => report.skipped.push(Skipped {
                id,
                folder: dir.clone(),
                reason,
            }),
        }
    }
    if plans.is_empty() {
        return Err(ImportError::NothingImported {
            report: Box::new(report),
        });
    }
    let suite_id = match &options.suite_id {
        Some(id) => sanitize(id, "imported"),
        None => sanitize(&folder_name(out), "imported"),
    };
    write_suite(format, out, &suite_id, options.name.as_deref(), &plans)?;
    Ok(report)
}

/// The last component of `path`, looked up through `.` and `..` when needed.
fn folder_name(path: &Path) -> String {
    let named = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    named(path)
        .filter(|n| n != "." && n != "..")
        .or_else(|| path.canonicalize().ok().as_deref().and_then(named))
        .unwrap_or_default()
}

/// `out` may be written: it does not exist, or is an empty folder.
fn check_output(out: &Path) -> Result<(), ImportError> {
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(ImportError::OutputNotFolder(out.to_path_buf()));
    }
    let mut entries = std::fs::read_dir(out).map_err(|e| ImportError::io(out, e))?;
    if entries.next().is_some() {
        return Err(ImportError::OutputNotEmpty(out.to_path_buf()));
    }
    Ok(())
}

/// Writes the whole suite into a temporary folder beside `out`, then moves it into place.
fn write_suite(
    format: Format,
    out: &Path,
    suite_id: &str,
    name: Option<&str>,
    plans: &[TaskPlan],
) -> Result<(), ImportError> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| ImportError::io(&parent, e))?;
    let staging = tempfile::Builder::new()
        .prefix(".proctor-import-")
        .tempdir_in(&parent)
        .map_err(|e| ImportError::io(&parent, e))?;
    let root = staging.path();

    mkdir(&root.join("fixture"))?;
    for plan in plans {
        write_task(format, root, plan)?;
    }
    let text = suite_toml::render(format, suite_id, name, plans);
    write(&root.join("suite.toml"), text.as_bytes(), false)?;
    let about = crate::metadata::render(format, plans);
    write(&root.join("import.toml"), about.as_bytes(), false)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| ImportError::io(root, e))?;

    if out.exists() {
        // Checked empty before; remove_dir fails rather than remove anything that appeared since.
        std::fs::remove_dir(out).map_err(|e| ImportError::io(out, e))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, out).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        ImportError::io(out, e)
    })
}

/// A local image (`image`) laid in the suite under the name `key`.
fn write_image(root: &Path, image: &ImageSource, key: &str) -> Result<(), ImportError> {
    match image {
        // A Dockerfile was built (or the task skipped) before any task is written.
        ImageSource::Reference(_) | ImageSource::Dockerfile(_) => {}
        ImageSource::Archive(src) => {
            let dest = root.join(image.suite_path(key));
            if let Some(parent) = dest.parent() {
                mkdir(parent)?;
            }
            link_or_copy(src, &dest)?;
        }
        ImageSource::Layout(src) => {
            let mut warnings = Vec::new();
            let files = crate::files::collect(src, "image", &mut warnings);
            copy_all(&files, &root.join(image.suite_path(key)))?;
        }
    }
    Ok(())
}

/// The task's holdout, oracle and local images (its own and its sidecars'), and the folder its
/// image is built from when it cannot be pulled.
fn write_task(format: Format, root: &Path, plan: &TaskPlan) -> Result<(), ImportError> {
    write_image(root, &plan.image, &plan.id)?;
    for sidecar in &plan.sidecars {
        write_image(root, &sidecar.image, &sidecar.image_key(&plan.id))?;
    }
    if let Some(build) = &plan.fallback_build {
        let mut warnings = Vec::new();
        let files = crate::files::collect(&build.context, &build.shown_context, &mut warnings);
        let dest = root.join(crate::suite_toml::fallback_folder(&plan.id));
        copy_all(&files, &dest)?;
    }
    if let Some(steps) = &plan.steps {
        return write_steps(format, root, plan, steps);
    }
    let holdout = root.join("holdout").join(&plan.id);
    copy_all(&plan.verifier.files, &holdout)?;
    let script = verify::script(
        format,
        &plan.id,
        plan.verifier.verdict,
        &plan.verifier.entry,
        &plan.verifier.env,
    );
    write(&holdout.join("proctor-verify.sh"), script.as_bytes(), true)?;

    let agents = root.join("agents").join("oracle");
    let text = oracle::script(format, &plan.id, &plan.oracle)
        .map_err(|(path, e)| ImportError::io(path, e))?;
    write(
        &agents.join(format!("{}.toml", plan.id)),
        text.as_bytes(),
        false,
    )?;
    if !plan.oracle.files.is_empty() {
        copy_all(&plan.oracle.files, &agents.join("files").join(&plan.id))?;
    }
    for (key, text) in &plan.descriptions {
        let name = format!("{}.md", sanitize(key, "description"));
        let path = root.join("descriptions").join(&plan.id).join(name);
        write(&path, text.as_bytes(), false)?;
    }
    Ok(())
}

/// A task in steps' files (see [`crate::harbor_steps`]) and its oracle, a turn per step.
fn write_steps(
    format: Format,
    root: &Path,
    plan: &TaskPlan,
    steps: &crate::harbor_steps::StepsImport,
) -> Result<(), ImportError> {
    crate::harbor_steps::write_files(root, &plan.id, steps, copy_all)?;
    let plans: Vec<(&str, &crate::model::OraclePlan)> = steps
        .steps
        .iter()
        .map(|s| (s.name.as_str(), &s.oracle))
        .collect();
    let text = oracle::turns_script(format, &plan.id, &plans)
        .map_err(|(path, e)| ImportError::io(path, e))?;
    let agents = root.join("agents").join("oracle");
    write(
        &agents.join(format!("{}.toml", plan.id)),
        text.as_bytes(),
        false,
    )
}

/// A hard link to `src` at `dest` (an image archive can be large), else a copy.
fn link_or_copy(src: &Path, dest: &Path) -> Result<(), ImportError> {
    if std::fs::hard_link(src, dest).is_ok() {
        return Ok(());
    }
    std::fs::copy(src, dest)
        .map(|_| ())
        .map_err(|e| ImportError::io(src, e))
}

fn mkdir(dir: &Path) -> Result<(), ImportError> {
    std::fs::create_dir_all(dir).map_err(|e| ImportError::io(dir, e))
}

/// Writes `bytes` to `path`, creating its folder; executable when asked.
fn write(path: &Path, bytes: &[u8], executable: bool) -> Result<(), ImportError> {
    if let Some(parent) = path.parent() {
        mkdir(parent)?;
    }
    std::fs::write(path, bytes).map_err(|e| ImportError::io(path, e))?;
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| ImportError::io(path, e))
}

/// Copies each file under `dest` at its relative path, keeping whether it is executable.
fn copy_all(files: &[FileEntry], dest: &Path) -> Result<(), ImportError> {
    mkdir(dest)?;
    for file in files {
        let target = dest.join(&file.rel);
        if let Some(parent) = target.parent() {
            mkdir(parent)?;
        }
        std::fs::copy(&file.src, &target).map_err(|e| ImportError::io(&file.src, e))?;
        let mode = if file.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
            .map_err(|e| ImportError::io(&target, e))?;
    }
    Ok(())
}
