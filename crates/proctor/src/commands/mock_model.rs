//! `proctor mock-model --script FILE`: the scripted model server real agent CLIs are pointed at,
//! so they run end to end with no network and no key. Prints its base URL, then serves until
//! killed. Inside a trial proctor runs it as a service, and its exchange log (the wire usage)
//! lands in the service's folder.

use std::path::{Path, PathBuf};

use proctor_mock_model::{FaultKind, MockModel, MockOptions, RouteFault, Script, ROUTES};

use crate::exit::{Error, Status};

/// Serves `script` on `listen` until killed.
pub fn run(
    script: &Path,
    listen: &str,
    log: Option<PathBuf>,
    faults: &[String],
) -> Result<Status, Error> {
    let parsed = Script::load(script).map_err(|e| {
        Error::usage(
            e.to_string(),
            "a model script is a TOML list of [[turns]]; see `proctor mock-model --help`",
        )
    })?;
    let mut route_faults = Vec::new();
    for f in faults {
        let parsed = f
            .split_once('=')
            .and_then(|(r, k)| FaultKind::parse(k).map(|k| (r, k)));
        match parsed {
            Some((route, kind)) if ROUTES.contains(&route) => route_faults.push(RouteFault {
                route: route.to_string(),
                kind,
            }),
            _ => {
                return Err(Error::usage(
                    format!("--fault {f}: expected ROUTE=KIND"),
                    format!(
                        "ROUTE is one of {}; KIND is credential_loss, rate_limit or timeout",
                        ROUTES.join(", ")
                    ),
                ))
            }
        }
    }
    let log = log.or_else(|| {
        std::env::var_os("PROCTOR_SERVICE_DIR").map(|d| PathBuf::from(d).join("wire.jsonl"))
    });
    let options = MockOptions {
        log,
        faults: route_faults,
    };
    let handle = MockModel::start_with(parsed, listen, options).map_err(|e| {
        Error::usage(
            e.to_string(),
            "pick a free address with --listen 127.0.0.1:PORT",
        )
    })?;
    println!("{}", handle.base_url());
    eprintln!(
        "proctor mock-model: serving {} on {}",
        script.display(),
        handle.base_url()
    );
    handle.wait();
    Ok(Status::Success)
}
