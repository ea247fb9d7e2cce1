//! What the sandbox reports of one trial's isolation and services, as the trial record keeps
//! it: the namespaces, workspace, network and full stop really in effect ([`Isolation`]), how
//! the user namespace mapped ids ([`IdMapping`]), and what each service did
//! ([`ServiceReport`]). Plain data: the sandbox produces it, the runner records it, the viewer
//! and `inspect` read it, and none of them needs the sandbox to do so.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The trial's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// A new network namespace with only its own loopback interface, brought up.
    None,
    /// Reserved for "own loopback plus proctor's model proxy"; today the same as `None`.
    Loopback,
    /// The host's network (no network namespace), recorded as such.
    Host,
    /// A network namespace of the trial's own whose only way out is a user-mode network stack
    /// on the host whose every connection proctor decides: the internet (or the allowed hosts
    /// of it), never the host's loopback, the host's own addresses or other trials.
    Internet,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

/// The result of a readiness probe or a guard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ProbeOutcome {
    /// It passed, this long after the service was started.
    Passed {
        /// Time since the service was started.
        elapsed: Duration,
    },
    /// It failed, and why.
    Failed {
        /// A sentence for the trial record.
        reason: String,
    },
}

impl ProbeOutcome {
    /// Whether the probe passed.
    pub fn passed(&self) -> bool {
        matches!(self, ProbeOutcome::Passed { .. })
    }
}

/// What one service did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceReport {
    /// The service's name.
    pub name: String,
    /// Its process was started (its command could be executed).
    pub started: bool,
    /// The readiness probe, when one is configured and was reached.
    pub ready: Option<ProbeOutcome>,
    /// The guard, when one is configured and was reached.
    pub guard: Option<ProbeOutcome>,
    /// How its main process ended (after SIGTERM at the end of the trial, usually).
    pub exit: Option<Exit>,
}

/// A Linux namespace the trial ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Namespace {
    /// User namespace (the caller's uid mapped to 0, and a range of subordinate ids or none:
    /// [`Isolation::ids`]).
    User,
    /// Mount namespace with a private root.
    Mount,
    /// PID namespace (the agent has a nested one of its own).
    Pid,
    /// IPC namespace.
    Ipc,
    /// UTS namespace (hostname `proctor`).
    Uts,
    /// Network namespace (own loopback only).
    Net,
}

/// How the workspace was provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceKind {
    /// overlayfs over read-only lowers.
    Overlay,
    /// A bind of a copy (or, without namespaces, the copy used in place).
    Bind,
}

/// How the full stop was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FullStop {
    /// The agent's PID namespace was torn down: no process of it can survive.
    PidNamespace,
    /// The agent's process group was killed: a process that left the group can escape.
    ProcessGroup,
}

/// What isolation was really in effect for a run, for the trial record. It never claims more than
/// was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    /// The namespaces the trial ran in (empty without namespaces).
    pub namespaces: Vec<Namespace>,
    /// How the workspace was provided.
    pub workspace: WorkspaceKind,
    /// The network actually given.
    pub network: Network,
    /// The host file system was mounted read-only (only the workspace, HOME, /tmp and /dev/shm are
    /// writable), and the agent held no capability to change that (none to mount or unmount).
    pub read_only_host: bool,
    /// HOME and /tmp were fresh private tmpfs mounts.
    pub private_home_and_tmp: bool,
    /// The host paths that were hidden from the agent.
    pub hidden: Vec<PathBuf>,
    /// How the agent's processes were stopped.
    pub full_stop: FullStop,
    /// Anything else a reader of the record should know (e.g. what could not be isolated).
    pub notes: Vec<String>,
    /// How the user namespace mapped ids (absent without one, and in records made before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<IdMapping>,
    /// What of the host's file system the trial's root showed (absent for an image's root,
    /// without namespaces, and in records made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_view: Option<HostView>,
    /// What the trial's way out to the internet did (with [`Network::Internet`] only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Egress>,
}

/// What a trial's way out to the internet was and did: written by proctor on the host, from what
/// it decided, never by anything inside the trial.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Egress {
    /// The user-mode network stack that carried the trial's traffic (`slirp4netns`).
    pub stack: String,
    /// The names the trial could reach (`HOST` or `*.HOST`); empty: any public address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Names the trial's resolver answered.
    pub lookups: u64,
    /// Connections and datagrams let out.
    pub allowed: u64,
    /// What was refused, first [`EGRESS_REFUSED_MAX`] of it, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<EgressRefusal>,
    /// How many more refusals there were than `refused` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_more: u64,
}

/// The most refusals an [`Egress`] lists.
pub const EGRESS_REFUSED_MAX: usize = 64;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One thing the trial's way out refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressRefusal {
    /// `lookup` (a name the resolver would not answer) or `connect` (a connection or datagram
    /// to an address the trial may not reach).
    pub kind: EgressKind,
    /// The name looked up, or the name the address was given for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The address and port, for a connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Why, in a few words.
    pub reason: String,
}

/// What an [`EgressRefusal`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressKind {
    /// A name looked up through the trial's resolver.
    Lookup,
    /// A connection (TCP) or datagram (UDP, ICMP) to an address.
    Connect,
}

/// What of the host's file system a trial's root shows, read-only: nothing but these.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostView {
    /// The host's top-level system folders shown (`/usr`, `/etc`, `/lib`...), or links to them.
    pub system: Vec<PathBuf>,
    /// Host folders shown at their own path beyond those: the installation prefixes of the
    /// folders on the trial's `PATH`.
    pub reach: Vec<PathBuf>,
    /// Entries of those that the host's other users may not read, shown empty.
    pub covered: Vec<PathBuf>,
}

/// How the trial's user namespace mapped ids, as recorded in every trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdMapping {
    /// `range` (0 and a subordinate range), or `single` (only the caller's id, as 0).
    pub kind: IdMapKind,
    /// Who wrote the map: `direct` (as root), `newuidmap` (the setuid helpers), `single`.
    pub written_by: String,
    /// The uid map: `[inside, outside, count]` extents.
    pub uid_map: Vec<[u32; 3]>,
    /// The gid map, likewise.
    pub gid_map: Vec<[u32; 3]>,
    /// Why the map is a single id (absent for a range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_single: Option<String>,
}

/// The kind of an [`IdMapping`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdMapKind {
    /// uid/gid 0 and a subordinate range of the sandbox's `ID_RANGE` − 1 ids: chown and setuid
    /// work.
    Range,
    /// Only uid/gid 0 (the caller's own ids): chown to another id fails.
    Single,
}

impl IdMapping {
    /// The id inside the trial of the host uid `uid`, if the map has it.
    pub fn uid_inside(&self, uid: u32) -> Option<u32> {
        inside(&self.uid_map, uid)
    }

    /// The id inside the trial of the host gid `gid`, if the map has it.
    pub fn gid_inside(&self, gid: u32) -> Option<u32> {
        inside(&self.gid_map, gid)
    }
}

fn inside(map: &[[u32; 3]], outside: u32) -> Option<u32> {
    map.iter()
        .find_map(|&[i, o, n]| (outside >= o && outside - o < n).then(|| i + (outside - o)))
}
