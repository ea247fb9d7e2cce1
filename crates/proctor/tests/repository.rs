//! The repository is self-contained: a user with only the clone finds every reference in it.
//! Nothing points outside it (no team-internal design notes), and every documentation page the
//! README links exists.

mod common;

use std::path::Path;

/// Words that name documents outside the repository. Assembled here so this file does not match
/// itself.
fn outside_pointers() -> Vec<String> {
    vec![
        ["..", "/shared"].concat(),
        ["DESIGN", ".md"].concat(),
        ["doc", "trine"].concat(),
        ["seed", " 0"].concat(),
        ["seed", "s/"].concat(),
    ]
}

fn is_text_source(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    matches!(
        ext,
        "rs" | "md" | "toml" | "sh" | "py" | "json" | "snap" | "txt" | "patch"
    ) || matches!(name, "run" | "ab" | "install.sh" | "setup")
}

#[test]
fn nothing_in_the_repository_points_outside_it() {
    let root = common::repo_root();
    let pointers = outside_pointers();
    let mut found = Vec::new();
    let walker = walkdir::WalkDir::new(&root).into_iter().filter_entry(|e| {
        let name = e.file_name().to_string_lossy();
        !(e.depth() == 1 && (name == "target" || name == ".git" || name == ".proctor"))
            && name != "node_modules"
    });
    for entry in walker {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() || !is_text_source(entry.path()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            for p in &pointers {
                // Upper-case pointers match case-sensitively: `docs/design.md` is ours.
                let hit = if p.chars().any(|c| c.is_ascii_uppercase()) {
                    line.contains(p.as_str())
                } else {
                    lower.contains(p.as_str())
                };
                if hit {
                    found.push(format!(
                        "{}:{}: {}",
                        entry.path().strip_prefix(&root).unwrap().display(),
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "these lines point outside the repository; cite a page under docs/ instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_docs_page_the_readme_links_exists_and_every_page_is_linked() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for page in [
        "suite-format.md",
        "agents.md",
        "outcomes.md",
        "metrics.md",
        "design.md",
        "performance.md",
    ] {
        let rel = format!("docs/{page}");
        assert!(
            readme.contains(&format!("({rel})")),
            "README does not link {rel}"
        );
        let text =
            std::fs::read_to_string(root.join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(
            text.lines().count() > 20,
            "{rel} is too short to be the reference"
        );
    }
    // Relative links inside docs/ resolve.
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue; // docs/images/ holds the screenshots the pages show
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let target = &rest[..rest.find(')').unwrap_or(0)];
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            assert!(
                path.parent().unwrap().join(file).exists(),
                "{}: link to {target} does not resolve",
                path.display()
            );
        }
    }
}

/// The README's test command, the one fenced `sh` block that runs `cargo test`.
fn readme_test_command(readme: &str) -> String {
    let mut commands = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .map(str::trim)
        .filter(|c| c.contains("cargo test"));
    let command = commands.next().expect("README.md gives a test command");
    assert!(
        commands.next().is_none(),
        "README.md gives two test commands"
    );
    command.to_string()
}

#[test]
fn ci_runs_the_readmes_test_command_after_the_setup_it_names_then_its_demo() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let command = readme_test_command(&readme);
    assert!(
        command.starts_with("ci/setup && "),
        "the test command sets up what the tests drive first: {command}"
    );
    let demo = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .map(str::trim)
        .find(|c| c.contains("proctor demo"))
        .expect("README.md gives the demo command");
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let lines: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("echo "))
        .collect();
    let tests_at = lines.iter().position(|l| *l == command);
    assert!(
        tests_at.is_some(),
        ".ci/run runs the README's test command verbatim ({command}):\n{ci}"
    );
    assert_eq!(
        lines.last().copied(),
        Some(demo),
        ".ci/run ends with the README's demo command, after the tests"
    );
}

/// Where the setup ran (CI runs it first), it finds everything the tests drive: no test of
/// this run can be missing its real part.
#[test]
fn the_setup_finds_everything_the_tests_drive() {
    let root = common::repo_root();
    let out = std::process::Command::new(root.join("ci/setup"))
        .arg("--check")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return common::skip(&format!("ci/setup has not run here; it says:\n{said}"));
    }
    assert!(
        said.contains("everything the tests drive is here"),
        "{said}"
    );
}
