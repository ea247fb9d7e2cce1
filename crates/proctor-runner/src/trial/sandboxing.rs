//! The sandbox pieces a trial's settings become, the same for the agent's launch and for its
//! checks: the network, the host paths shown read-only, and the limits with what holds each.

use std::collections::BTreeMap;
use std::path::Path;

use proctor_suite::model::Network;

/// The sandbox's network for the suite's.
pub fn sandbox_network(n: Network) -> proctor_sandbox::Network {
    match n {
        Network::None => proctor_sandbox::Network::None,
        Network::Loopback => proctor_sandbox::Network::Loopback,
        Network::Host => proctor_sandbox::Network::Host,
        Network::Internet => proctor_sandbox::Network::Internet,
    }
}

/// The allowed hosts of a phase whose network is `n`: the task's on the internet network,
/// none on another (which reaches no host to allow).
pub fn internet_only(n: Network, allowed_hosts: &[String]) -> Vec<String> {
    if n == Network::Internet {
        allowed_hosts.to_vec()
    } else {
        Vec::new()
    }
}

/// The host paths a task asks to be shown (its `binds`), each read-only at its own place.
pub fn shown_read_only(
    paths: &[impl AsRef<Path>],
) -> impl Iterator<Item = proctor_sandbox::Bind> + '_ {
    paths.iter().map(|p| proctor_sandbox::Bind {
        host: p.as_ref().to_path_buf(),
        inside: p.as_ref().to_path_buf(),
        read_only: true,
    })
}

/// The bounds of a sandbox in namespaces that runs the agent's code (a trial, or one of its
/// checks) under the limits `l`: a control group of the run's for memory and processes (or why
/// none could be had), a tmpfs of `disk_mb` (held as `disk_by` says), its output cut at
/// `output_bytes`. What held each limit, or why not, goes in the record's
/// `(enforced_by, not_enforced)`.
pub fn held_limits(
    cgroups: &Result<std::sync::Arc<crate::cgroup::RunCgroups>, String>,
    l: &proctor_suite::model::Limits,
    disk_by: &str,
    output_bytes: u64,
    (enforced_by, not_enforced): (&mut BTreeMap<String, String>, &mut BTreeMap<String, String>),
) -> (
    proctor_sandbox::SandboxLimits,
    Option<crate::cgroup::TrialCgroup>,
) {
    const MIB: u64 = 1 << 20;
    let cgroup = cgroups.as_ref().map_err(String::clone).and_then(|c| {
        c.trial(l.memory_mb() * MIB, l.processes())
            .map(|cg| (cg, c.kind()))
    });
    let cgroup = match cgroup {
        Ok((cg, kind)) => {
            for key in ["memory_mb", "processes"] {
                enforced_by.insert(key.into(), kind.into());
            }
            Some(cg)
        }
        Err(why) => {
            for key in ["memory_mb", "processes"] {
                not_enforced.insert(key.into(), why.clone());
            }
            None
        }
    };
    enforced_by.insert("disk_mb".into(), disk_by.into());
    enforced_by.insert("output_mb".into(), "proctor's bounded capture".into());
    let limits = proctor_sandbox::SandboxLimits {
        disk_bytes: Some(l.disk_mb() * MIB),
        output_bytes: Some(output_bytes),
        cgroups: cgroup.as_ref().map(|c| c.dirs()).unwrap_or_default(),
    };
    (limits, cgroup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_map_one_to_one() {
        assert_eq!(
            sandbox_network(Network::None),
            proctor_sandbox::Network::None
        );
        assert_eq!(
            sandbox_network(Network::Loopback),
            proctor_sandbox::Network::Loopback
        );
        assert_eq!(
            sandbox_network(Network::Host),
            proctor_sandbox::Network::Host
        );
        assert_eq!(
            sandbox_network(Network::Internet),
            proctor_sandbox::Network::Internet
        );
    }

    #[test]
    fn allowed_hosts_are_kept_on_the_internet_network_only() {
        let hosts = vec!["deb.debian.org".to_string()];
        assert_eq!(internet_only(Network::Internet, &hosts), hosts);
        assert!(internet_only(Network::Host, &hosts).is_empty());
        assert!(internet_only(Network::None, &hosts).is_empty());
    }
}
