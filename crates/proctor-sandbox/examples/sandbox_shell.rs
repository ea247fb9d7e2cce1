//! Runs one shell command in a sandbox over a directory (as an overlay lower layer) and prints the
//! report, the agent's output and the workspace changes. For trying the sandbox by hand:
//!
//! ```text
//! cargo run -p proctor-sandbox --example sandbox_shell -- FIXTURE_DIR 'ls -la; echo hi > x'
//! ```

use std::path::PathBuf;
use std::time::Duration;

use proctor_sandbox::{diff, enter_if_requested, run, SandboxSpec, Workspace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    enter_if_requested();
    let mut args = std::env::args().skip(1);
    let (Some(fixture), Some(script)) = (args.next(), args.next()) else {
        eprintln!("usage: sandbox_shell FIXTURE_DIR SHELL_COMMAND");
        std::process::exit(2);
    };
    let fixture = std::fs::canonicalize(PathBuf::from(fixture))?;
    let scratch = tempfile::tempdir()?;
    let upper = scratch.path().join("upper");
    let work = scratch.path().join("work");
    std::fs::create_dir_all(&upper)?;
    std::fs::create_dir_all(&work)?;
    let out = scratch.path().join("out.txt");
    let spec = SandboxSpec::new(
        std::env::current_exe()?,
        Workspace::Overlay {
            lowers: vec![fixture.clone()],
            upper: upper.clone(),
            work,
        },
        vec!["sh".into(), "-c".into(), script],
        &out,
        &out,
        Duration::from_secs(60),
    );
    let report = run(&spec)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    println!("--- output");
    print!("{}", std::fs::read_to_string(&out)?);
    println!("--- changes");
    for c in diff::overlay_changes(&upper, &[fixture], &[])? {
        println!("{:?} {}", c.kind, c.path.display());
    }
    proctor_sandbox::remove_tree(scratch.path())?;
    Ok(())
}
