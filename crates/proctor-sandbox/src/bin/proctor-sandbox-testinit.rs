//! A minimal sandbox init for proctor-sandbox's own tests and benchmark: `init_exe` must call
//! `enter_if_requested()` first; this binary does nothing else.

fn main() {
    proctor_sandbox::enter_if_requested();
    eprintln!("proctor-sandbox-testinit: only for use as SandboxSpec::init_exe");
    std::process::exit(2);
}
