//! `proctor mock-model --script FILE`: the scripted model server real agent CLIs are pointed at,
//! so they run end to end with no network and no key. Prints its base URL, then serves until
//! killed. Inside a trial proctor runs it as a service, and its exchange log (the wire usage)
//! lands in the service's folder.
//!
//! It can also stand in for a real provider upstream of proctor's model gateway:
//! `--require-key-env VAR` makes every API request carry the key held by `$VAR` (a request
//! without it is answered 401 and logged as `auth_rejected`), `--fault ROUTE=server_error` makes
//! a route fail with HTTP 500, and `--tls-cert PEM --tls-key PEM` serves HTTPS (the printed
//! base URL then starts with `https://`).
//!
//! A script with weighted `[[alternatives]]` needs `--seed N`, which chooses one; inside a trial
//! proctor passes the trial's seed.

use std::path::{Path, PathBuf};

use proctor_mock_model::{
    auth, FaultKind, MockError, MockModel, MockOptions, RouteFault, Script, TlsFiles, FAULT_KINDS,
    ROUTES,
};

use crate::exit::{Error, Status};

/// Serves `script` (the alternative `seed` chooses, when it has alternatives) on `listen` until
/// killed; requires the key held by `require_key_env` when given, and serves HTTPS when both of
/// `tls` (certificate, key) are given.
pub fn run(
    script: &Path,
    seed: Option<u64>,
    listen: &str,
    log: Option<PathBuf>,
    faults: &[String],
    require_key_env: Option<&str>,
    tls: (Option<PathBuf>, Option<PathBuf>),
) -> Result<Status, Error> {
    let (parsed, alternative) = Script::load(script)
        .and_then(|s| s.choose(seed, &script.display().to_string()))
        .map_err(|e| {
            Error::usage(
                e.to_string(),
                "a model script is a TOML list of [[turns]], or of weighted [[alternatives]] chosen by --seed; see `proctor mock-model --help`",
            )
        })?;
    if let (Some(k), Some(seed)) = (alternative, seed) {
        eprintln!("proctor mock-model: seed {seed} chose alternative {k}");
    }
    let (tls_cert, tls_key) = tls;
    let route_faults = parse_faults(faults)?;
    let require_key = match require_key_env {
        Some(var) => Some(auth::key_from_env(var).map_err(|e| {
            Error::usage(
                format!("--require-key-env {var}: {e}"),
                format!("export {var} with the API key every request must carry"),
            )
        })?),
        None => None,
    };
    let tls = match (tls_cert, tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        _ => {
            return Err(Error::usage(
                "--tls-cert and --tls-key go together",
                "give both PEM files, or neither for plain HTTP",
            ))
        }
    };
    let log = log.or_else(|| {
        std::env::var_os("PROCTOR_SERVICE_DIR").map(|d| PathBuf::from(d).join("wire.jsonl"))
    });
    let options = MockOptions {
        log,
        faults: route_faults,
        require_key,
        tls,
    };
    let handle = MockModel::start_with(parsed, listen, options).map_err(|e| {
        let hint = match e {
            MockError::TlsFile { .. } | MockError::Tls { .. } => {
                "--tls-cert takes a PEM certificate chain, leaf first, and --tls-key its PEM private key"
            }
            MockError::Log { .. } => "give --log a writable file",
            _ => "pick a free address with --listen 127.0.0.1:PORT",
        };
        Error::usage(e.to_string(), hint)
    })?;
    end_by_signal_with_whole_lines(&handle)?;
    println!("{}", handle.base_url());
    eprintln!(
        "proctor mock-model: serving {} on {}",
        script.display(),
        handle.base_url()
    );
    handle.wait();
    Ok(Status::Success)
}

/// On SIGTERM (a trial's end stops its services so) or SIGINT, the process ends by the signal
/// once the wire log's line being written, if any, is whole: a fatal signal would cut that
/// write short and leave a torn last line.
fn end_by_signal_with_whole_lines(handle: &proctor_mock_model::MockHandle) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot handle SIGTERM: {e}")))?;
    let closer = handle.log_closer();
    std::thread::Builder::new()
        .name("mock-model-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                closer.close();
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        })
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot start the signal thread: {e}")))?;
    Ok(())
}

/// The `--fault ROUTE=KIND` options, as the faults the server injects.
fn parse_faults(faults: &[String]) -> Result<Vec<RouteFault>, Error> {
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
                        "ROUTE is one of {}; KIND is one of {}",
                        ROUTES.join(", "),
                        FAULT_KINDS.join(", ")
                    ),
                ))
            }
        }
    }
    Ok(route_faults)
}
