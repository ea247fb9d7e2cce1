//! An agent cannot take anything from the processes that run it.
//!
//! The agent init A is PID 1 of the agent's PID namespace, with the agent's uid, and it holds
//! descriptors the agent must never have: the control socket to the run (a forged `AgentExit`
//! or `Done` would decide the trial), the host files its output goes to (past the output bound)
//! and folders of the host's own mount tree, kept by the trial init (the trial's disk, the
//! host's upper folder: from one of them `..` walks the host's file systems, where the trial's
//! root is the host's root). The scripted agent below tries every way a process of the same uid
//! has to reach them: `pidfd_getfd` of each descriptor of PID 1, `ptrace` attach, the links and
//! files of `/proc/1/fd` (the numbers may be listed), `/proc/1/mem`, `/proc/1/environ` and
//! `/proc/1/root`. Its control arm does the same
//! to a child of its own, so the probe is shown to work where it is allowed. As root and as uid
//! 65534; a machine without namespaces skips, except under `CI`, where that fails.

mod common;

use common::lab::{users, Lab};

const PROBE: &str = r#"
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE, PTRACE_DETACH, SYS_PIDFD_GETFD = 0x4206, 17, 438

def take(pid):
    got = []
    try:
        pfd = os.pidfd_open(pid)
    except OSError as e:
        return [f"pidfd_open:{e.errno}"]
    for fd in range(0, 64):
        r = libc.syscall(SYS_PIDFD_GETFD, pfd, fd, 0)
        if r >= 0:
            got.append(f"fd{fd}")
            os.close(r)
    if libc.ptrace(PTRACE_SEIZE, pid, 0, 0) == 0:
        got.append("ptrace")
        libc.ptrace(PTRACE_DETACH, pid, 0, 0)
    for f in ["fd", "mem", "environ", "root"]:
        path = f"/proc/{pid}/{f}"
        try:
            if f == "fd":
                # The numbers may be listed; what they are, or the files, must not be reached.
                for n in os.listdir(path):
                    for reach in (os.readlink, lambda p: os.close(os.open(p, os.O_RDONLY))):
                        try:
                            reach(f"{path}/{n}")
                            got.append(f"{path}/{n}")
                            break
                        except OSError:
                            pass
            elif f == "root":
                os.listdir(path + "/")
                got.append(path)
            else:
                with open(path, "rb") as fh:
                    fh.read(1)
                got.append(path)
        except OSError:
            pass
    return got

child = subprocess.Popen(["sleep", "30"])
own = take(child.pid)
child.kill()
print("own child:", "took" if own else "nothing", len(own))
init = take(1)
print("pid 1:", " ".join(init) if init else "took nothing")
"#;

#[test]
fn the_agent_takes_nothing_from_its_init_and_the_probe_works_on_its_own_child() {
    for who in users() {
        let lab = Lab::new(&format!("escape-{who:?}"));
        lab.write("fixture/probe.py", PROBE);
        lab.one_task(
            "",
            "{ files_unchanged = true }",
            &["python3 probe.py"],
            true,
        );
        let Some(record) = lab.run_graded(who, false, &[]) else {
            return;
        };
        let answer = record["end_state"]["answer"].as_str().unwrap_or_default();
        assert!(
            answer.contains("own child: took"),
            "{who:?}: the probe took nothing even from its own child, so it shows nothing: {answer}\n{record:#}"
        );
        assert!(
            answer.contains("pid 1: took nothing"),
            "{who:?}: the agent reached into its init: {answer}"
        );
    }
}
