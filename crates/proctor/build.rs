//! Links the `proctor` executable as a fixed-address (non-PIE) program on x86-64 Linux.
//!
//! proctor executes itself inside every trial (the scripted agent, each shim call, the mock
//! model), and a position-independent executable of this size has about 20,000 relocations that
//! the dynamic loader applies at every start, touching ~2 MB of pages. Linked at a fixed
//! address, the loader has nothing to relocate: each start is ~0.2 ms shorter (bench/run).
//! The code stays position-independent; only the executable's load address is fixed.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os == "linux" && arch == "x86_64" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
