//! How a trial init begins: cloned by the zygote for its request, or ahead of it with its first
//! steps taken (see [`crate::zygote`]). Shared by the zygote, which clones it, and the trial
//! init's own code ([`crate::init`]), which goes on from there.

use std::os::fd::OwnedFd;

use crate::sys;
use crate::trace::trace;

/// How a trial init cloned by the zygote begins: as soon as its request came (cold), or
/// cloned ahead of it, with its first steps taken while the trial before it ran (warm).
pub(crate) enum Start {
    /// Cloned for its request: waits on this pipe for the id map, then makes its network.
    Cold { go: OwnedFd },
    /// Cloned ahead: its ids mapped and its network namespace made, loopback up (or why not).
    Warm(Warmed),
}

/// What a trial init cloned ahead of its request made while it waited: its ids, then its own
/// network namespace with the loopback up. The errors are kept for the request, to which they
/// are reported as those of a trial init cloned for it would be.
pub(crate) struct Warmed {
    pub(crate) ids: Result<crate::ids::IdMapping, String>,
    pub(crate) network: Result<(), String>,
    /// The socket on which the zygote is told when this trial's root is built (see
    /// [`crate::zygote::tell_root_built`]); set when the request is taken.
    pub(crate) zygote: Option<OwnedFd>,
}

/// The first steps of a trial init cloned ahead of its request (see [`crate::zygote`]): every
/// request on a network of the trial's own (all but the host's) takes one, so these never
/// depend on the spec. Only what any such trial does first is done here.
pub(crate) fn warm_up(go: OwnedFd) -> Warmed {
    let ids = crate::ids::receive(go);
    let network = match &ids {
        Ok(_) => sys::unshare(libc::CLONE_NEWNET)
            .map_err(|e| format!("unshare the network namespace: {e}"))
            .and_then(|()| sys::loopback_up().map_err(|e| format!("bring up lo: {e}"))),
        Err(_) => Ok(()),
    };
    trace("trial init warmed up");
    Warmed {
        ids,
        network,
        zygote: None,
    }
}
