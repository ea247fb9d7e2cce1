//! `schemas/suite.schema.json` is what `proctor schema suite` prints, so editors pointed at the
//! checked-in file complete and check suites exactly as this proctor reads them.

use std::path::Path;

#[test]
fn the_checked_in_suite_schema_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("schemas/suite.schema.json");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(["schema", "suite"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let generated = String::from_utf8(out.stdout).unwrap();
    if std::env::var_os("PROCTOR_UPDATE_SCHEMAS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "schemas/suite.schema.json is stale: regenerate it with `PROCTOR_UPDATE_SCHEMAS=1 cargo test -p proctor --test schemas`"
    );
}
