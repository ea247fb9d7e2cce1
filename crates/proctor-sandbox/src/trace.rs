//! Phase timings of a sandbox's set-up on stderr, when `PROCTOR_SANDBOX_DEBUG` is set: what the
//! init and the zygote say as they go, for diagnosing what set-up costs.

use std::time::Instant;

use crate::sys;

/// Phase timings on stderr, when `PROCTOR_SANDBOX_DEBUG` is set (for diagnosing setup cost).
pub(crate) fn trace(what: &str) {
    use std::sync::OnceLock;
    static START: OnceLock<Option<Instant>> = OnceLock::new();
    let start =
        START.get_or_init(|| std::env::var_os(crate::SANDBOX_DEBUG_ENV).map(|_| Instant::now()));
    if let Some(s) = start {
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() };
        // SAFETY: getrusage fills a plain struct.
        let usage = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut u);
            u
        };
        eprintln!(
            "[sandbox {pid:>3} {:>8.3} ms, cpu {:>6.3} ms, at {:.3}] {what}",
            s.elapsed().as_secs_f64() * 1e3,
            sys::cpu_time(&usage).as_secs_f64() * 1e3,
            sys::monotonic_ms()
        );
    }
}
