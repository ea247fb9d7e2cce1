//! The ids of the trial's user namespace: a full range, so that root inside can `chown`, drop
//! privileges (`setgroups`, `setuid`) and add users, or one id where no range can be had.
//!
//! The layout is the one rootless containers use: uid 0 inside is the caller's own uid (so what
//! root makes in the trial is the caller's, and the caller can always read and remove it), and
//! uids `1..RANGE` inside are a *subordinate* range outside, owned by no host user, so a file
//! the agent gives to uid 1000 is never owned by the host's uid 1000. Likewise for gids.
//!
//! - As root, the map is written directly into the new namespace's `uid_map` and `gid_map` (a
//!   write, no process): the range is root's entry in `/etc/subuid` and `/etc/subgid` when it
//!   has one, else [`DEFAULT_BASE`] (systemd's "foreign" range, for files of images that belong
//!   to no host user).
//! - Unprivileged, `newuidmap`/`newgidmap` (Debian's `uidmap`) write the caller's range from
//!   `/etc/subuid` and `/etc/subgid` (the caller's name or uid).
//! - Otherwise (no entry, no helper, or the write refused): today's single mapping, the
//!   caller's uid and gid to 0 and no other id, with the reason recorded.
//!
//! The map is written by the process that made the namespace (the zygote, or the directly
//! started init S), from outside it, before the trial init T goes on: a process inside a new
//! user namespace can map only its own id.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use proctor_records::isolation::{IdMapKind, IdMapping};
use serde::{Deserialize, Serialize};

use crate::sys;

/// How many uids (and gids) inside a full range maps: 0 (the caller) and `1..RANGE`.
pub const RANGE: u32 = 65536;

/// The subordinate range root uses without an entry of its own in `/etc/subuid`: systemd's
/// "foreign UID range" (0x7FFE0000, 65536 ids), owned by no host user.
pub const DEFAULT_BASE: u32 = 0x7FFE_0000;

/// Set to `1`, the single mapping even where a range could be had (to compare, or to test the
/// fallback as root). Read by the zygote (or S), which the caller passes it on to.
pub const SINGLE_ID_ENV: &str = "PROCTOR_SANDBOX_SINGLE_ID";

/// What the zygote (or S) will do for each trial: decided once per process.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    uid: u32,
    gid: u32,
    how: How,
}

#[derive(Debug, Clone)]
enum How {
    /// Root: write the range directly.
    Direct {
        uid_base: u32,
        gid_base: u32,
        count: u32,
    },
    /// Unprivileged with helpers and subordinate ranges.
    Helper {
        newuidmap: PathBuf,
        newgidmap: PathBuf,
        uid_base: u32,
        gid_base: u32,
        count: u32,
    },
    /// One id, and why.
    Single(String),
}

impl Plan {
    /// The plan for this process (its real uid and gid): see the module's documentation.
    /// [`SINGLE_ID_ENV`]`=1` asks for the single mapping.
    pub(crate) fn for_this_process() -> Plan {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let how = if std::env::var_os(SINGLE_ID_ENV).is_some_and(|v| v == "1") {
            How::Single(format!("{SINGLE_ID_ENV}=1 asked for one id"))
        } else if uid == 0 {
            let names = ["root", "0"];
            let u = subordinate(Path::new("/etc/subuid"), &names);
            let g = subordinate(Path::new("/etc/subgid"), &names);
            let (uid_base, ucount) = u.unwrap_or((DEFAULT_BASE, RANGE));
            let (gid_base, gcount) = g.unwrap_or((DEFAULT_BASE, RANGE));
            How::Direct {
                uid_base,
                gid_base,
                count: ucount.min(gcount).min(RANGE - 1),
            }
        } else {
            helper_plan(uid)
        };
        Plan { uid, gid, how }
    }

    /// Writes the id maps of `pid` (a process just cloned into a new user namespace, waiting
    /// for them): the range when the plan has one and the write succeeds, else the single id;
    /// an error when not even that could be written.
    pub(crate) fn apply(&self, pid: libc::pid_t) -> Result<IdMapping, String> {
        let why = match &self.how {
            How::Direct {
                uid_base,
                gid_base,
                count,
            } => {
                let m = self.range("direct", *uid_base, *gid_base, *count);
                match write_maps(pid, &m, false) {
                    Ok(()) => return Ok(m),
                    Err(e) => format!("writing a range of ids as root was refused: {e}"),
                }
            }
            How::Helper {
                newuidmap,
                newgidmap,
                uid_base,
                gid_base,
                count,
            } => {
                let m = self.range("newuidmap", *uid_base, *gid_base, *count);
                match run_helpers(pid, newuidmap, newgidmap, &m) {
                    Ok(()) => return Ok(m),
                    Err(e) => format!("newuidmap/newgidmap failed: {e}"),
                }
            }
            How::Single(why) => why.clone(),
        };
        let m = IdMapping {
            kind: IdMapKind::Single,
            written_by: "single".to_owned(),
            uid_map: vec![[0, self.uid, 1]],
            gid_map: vec![[0, self.gid, 1]],
            why_single: Some(why),
        };
        match write_maps(pid, &m, true) {
            Ok(()) => Ok(m),
            Err(e) => Err(format!(
                "no id map could be written for the trial ({}; one id: {e})",
                m.why_single.as_deref().unwrap_or_default()
            )),
        }
    }

    /// The range mapping: 0 to the caller, `1..=count` to the subordinate range.
    fn range(&self, by: &str, uid_base: u32, gid_base: u32, count: u32) -> IdMapping {
        IdMapping {
            kind: IdMapKind::Range,
            written_by: by.to_owned(),
            uid_map: vec![[0, self.uid, 1], [1, uid_base, count]],
            gid_map: vec![[0, self.gid, 1], [1, gid_base, count]],
            why_single: None,
        }
    }
}

/// The plan of an unprivileged caller: the helpers, when installed and the caller has ranges.
fn helper_plan(uid: u32) -> How {
    let name = user_name(uid);
    let uid_s = uid.to_string();
    let mut names: Vec<&str> = vec![&uid_s];
    if let Some(n) = &name {
        names.insert(0, n);
    }
    let find = |prog: &str| {
        ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
            .iter()
            .map(|d| Path::new(d).join(prog))
            .find(|p| p.is_file())
    };
    let (Some(newuidmap), Some(newgidmap)) = (find("newuidmap"), find("newgidmap")) else {
        return How::Single(
            "newuidmap/newgidmap are not installed (Debian's package uidmap); one id is mapped"
                .to_owned(),
        );
    };
    let u = subordinate(Path::new("/etc/subuid"), &names);
    let g = subordinate(Path::new("/etc/subgid"), &names);
    match (u, g) {
        (Some((uid_base, ucount)), Some((gid_base, gcount))) => How::Helper {
            newuidmap,
            newgidmap,
            uid_base,
            gid_base,
            count: ucount.min(gcount).min(RANGE - 1),
        },
        _ => How::Single(format!(
            "uid {uid} has no range in /etc/subuid and /etc/subgid; one id is mapped"
        )),
    }
}

/// The first entry of `names` (a user name or a numeric id) in a subordinate id file, as
/// (start, count) with a count of at least 1.
fn subordinate(file: &Path, names: &[&str]) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(file).ok()?;
    parse_subordinate(&text, names)
}

fn parse_subordinate(text: &str, names: &[&str]) -> Option<(u32, u32)> {
    text.lines().find_map(|line| {
        let mut f = line.trim().split(':');
        let (who, start, count) = (f.next()?, f.next()?, f.next()?);
        if !names.contains(&who) {
            return None;
        }
        let start: u32 = start.parse().ok()?;
        let count: u32 = count.parse().ok()?;
        // The range must not reach the invalid id (u32::MAX) and must hold at least one id.
        (count > 0 && start.checked_add(count).is_some()).then_some((start, count))
    })
}

/// The name of `uid` in `/etc/passwd`, if it has one there.
fn user_name(uid: u32) -> Option<String> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|line| {
        let mut f = line.split(':');
        let name = f.next()?;
        let _pw = f.next()?;
        (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}

fn map_text(map: &[[u32; 3]]) -> String {
    map.iter()
        .map(|[i, o, n]| format!("{i} {o} {n}\n"))
        .collect()
}

/// Writes `m` into `/proc/PID/{uid,gid}_map`; with `deny_setgroups`, `setgroups` is denied
/// first (needed for an unprivileged single gid).
fn write_maps(pid: libc::pid_t, m: &IdMapping, deny_setgroups: bool) -> std::io::Result<()> {
    let proc_ = PathBuf::from(format!("/proc/{pid}"));
    if deny_setgroups {
        sys::write_file(&proc_.join("setgroups"), b"deny")?;
    }
    sys::write_file(&proc_.join("uid_map"), map_text(&m.uid_map).as_bytes())?;
    sys::write_file(&proc_.join("gid_map"), map_text(&m.gid_map).as_bytes())
}

/// Runs `newuidmap PID ...` and `newgidmap PID ...`. The caller (the zygote) ignores SIGCHLD,
/// so its children are reaped by the kernel: each helper's end is read from its pidfd, and its
/// success from the map it should have written.
fn run_helpers(
    pid: libc::pid_t,
    newuidmap: &Path,
    newgidmap: &Path,
    m: &IdMapping,
) -> Result<(), String> {
    for (prog, map, file) in [
        (newuidmap, &m.uid_map, "uid_map"),
        (newgidmap, &m.gid_map, "gid_map"),
    ] {
        let mut cmd = std::process::Command::new(prog);
        cmd.arg(pid.to_string());
        for [i, o, n] in map {
            cmd.arg(i.to_string()).arg(o.to_string()).arg(n.to_string());
        }
        let (mut err_r, err_w) = std::io::pipe().map_err(|e| e.to_string())?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(err_w)
            .env_clear();
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", prog.display()))?;
        drop(cmd);
        if let Ok(pidfd) = sys::pidfd_open(child.id() as libc::pid_t) {
            let _ = sys::wait_readable(pidfd.as_fd(), Some(Duration::from_secs(10)));
        }
        drop(child);
        let written = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default();
        if written.split_whitespace().count() != map.len() * 3 {
            let mut said = String::new();
            let _ = (&mut err_r).take(2000).read_to_string(&mut said);
            return Err(format!("{}: {}", prog.display(), said.trim()));
        }
    }
    Ok(())
}

/// What the zygote (or S) tells T once it has tried to map T's ids.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Told {
    /// The map written.
    Map(IdMapping),
    /// Why none could be.
    Error(String),
}

/// Sends the outcome of [`Plan::apply`] to T through the pipe it waits on (then closed).
pub(crate) fn send(go: OwnedFd, applied: Result<IdMapping, String>) {
    let told = match applied {
        Ok(m) => Told::Map(m),
        Err(e) => Told::Error(e),
    };
    if let Ok(bytes) = serde_json::to_vec(&told) {
        let _ = sys::write_all(go.as_fd(), &bytes);
    }
}

/// In T: waits until its ids are mapped and gives the map.
pub(crate) fn receive(go: OwnedFd) -> Result<IdMapping, String> {
    let mut f = std::fs::File::from(go);
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| format!("wait for the id map: {e}"))?;
    match serde_json::from_slice::<Told>(&bytes) {
        Ok(Told::Map(m)) => Ok(m),
        Ok(Told::Error(e)) => Err(e),
        Err(e) => Err(format!(
            "the trial's ids were never mapped (its parent ended?): {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subordinate_file_is_read_by_name_or_uid() {
        let text = "alice:100000:65536\n# x\n1001:200000:1000\nbad:1:x\nwrap:4294967295:2\n";
        assert_eq!(parse_subordinate(text, &["alice"]), Some((100000, 65536)));
        assert_eq!(
            parse_subordinate(text, &["bob", "1001"]),
            Some((200000, 1000))
        );
        assert_eq!(parse_subordinate(text, &["bad"]), None);
        assert_eq!(parse_subordinate(text, &["wrap"]), None);
        assert_eq!(parse_subordinate(text, &["carol"]), None);
    }

    #[test]
    fn host_ids_are_read_back_through_the_map() {
        let m = IdMapping {
            kind: IdMapKind::Range,
            written_by: "direct".into(),
            uid_map: vec![[0, 0, 1], [1, DEFAULT_BASE, 65535]],
            gid_map: vec![[0, 0, 1], [1, DEFAULT_BASE, 65535]],
            why_single: None,
        };
        assert_eq!(m.uid_inside(0), Some(0));
        assert_eq!(m.uid_inside(DEFAULT_BASE + 999), Some(1000));
        assert_eq!(m.uid_inside(1000), None);
        assert_eq!(m.gid_inside(DEFAULT_BASE + 65535), None);
    }
}
