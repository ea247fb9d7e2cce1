//! An agent on a terminal when the sandbox init is executed for the run itself
//! (`PROCTOR_SANDBOX_NO_ZYGOTE=1`: the terminal travels as the init's stderr) rather than forked
//! by the zygote. A test binary of its own: the variable is read by every run of the process.

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use proctor_sandbox::{probe, SandboxSpec, Workspace};

#[test]
fn without_the_zygote_an_agent_on_a_terminal_has_it_as_its_controlling_terminal() {
    // Set before any other thread of this test binary reads the environment.
    std::env::set_var("PROCTOR_SANDBOX_NO_ZYGOTE", "1");
    assert!(
        probe().overlay_sandbox(),
        "these tests need user namespaces and overlayfs"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_owned();
    for d in ["lower", "upper", "work", "out"] {
        fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    let spec = SandboxSpec::new(
        PathBuf::from(env!("CARGO_BIN_EXE_proctor-sandbox-testinit")),
        Workspace::Overlay {
            lowers: vec![root.join("lower")],
            upper: root.join("upper"),
            work: root.join("work"),
        },
        vec![
            "sh".into(),
            "-c".into(),
            "test -t 0 && echo on-a-tty; trap 'echo trapped' INT; (echo ready; exec sleep 30); \
             echo after-$?"
                .into(),
        ],
        root.join("out/stdout"),
        root.join("out/stderr"),
        Duration::from_secs(30),
    );
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors; the other arguments may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0);
    for fd in [master, slave] {
        // SAFETY: fcntl on descriptors we own.
        assert_eq!(
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) },
            0
        );
    }
    // SAFETY: both were just opened and are ours alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut reader = fs::File::from(master.try_clone().expect("dup"));
    let mut writer = fs::File::from(master);
    let (saw_last, seen_last) = std::sync::mpsc::channel();
    let typist = std::thread::spawn(move || {
        let (mut seen, mut typed, mut buf) = (Vec::new(), false, [0u8; 4096]);
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if !typed && text.contains("ready") {
                writer.write_all(b"\x03").expect("type");
                typed = true;
            }
            if text.contains("after-130") {
                let _ = saw_last.send(());
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let report = proctor_sandbox::run_on_terminal(&spec, slave.as_fd()).expect("run");
    // Linux may drop what is still on its way to the master once the last copy of the slave
    // closes: keep this copy open until the last words have been read (at most 10 s).
    let _ = seen_last.recv_timeout(Duration::from_secs(10));
    drop(slave);
    let out = typist.join().expect("the typist");
    assert_eq!(report.exit_code, Some(0), "{out}\n{report:?}");
    assert!(out.contains("on-a-tty") && out.contains("trapped"), "{out}");
    assert!(out.contains("after-130"), "{out}");
    let _ = proctor_sandbox::remove_tree(&root);
}
