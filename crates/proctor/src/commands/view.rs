//! `proctor view`: the viewer ([`crate::viewer`]) served on loopback (docs/viewer.md).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;

use crate::exit::{Error, Status};
use crate::viewer::viewer;

/// `proctor view`: serves until Ctrl-C; the URL goes to stdout, everything else to stderr.
/// Requests for another host than its own address (or `localhost` on loopback) or one of
/// `allow_hosts` are refused.
pub fn view(store_dir: &Path, listen: SocketAddr, allow_hosts: &[String]) -> Result<Status, Error> {
    if !listen.ip().is_loopback() {
        eprintln!(
            "warning: listening on {listen}, beyond this machine's loopback: anyone who can reach it can read the store"
        );
    }
    let v = viewer(store_dir)?;
    proctor_view::run_blocking(v, listen, allow_hosts, |addr| {
        println!("http://{addr}/");
        eprintln!("serving the store {} (Ctrl-C stops)", store_dir.display());
    })
    .with_context(|| format!("cannot serve on {listen}"))?;
    Ok(Status::Success)
}
