//! proctor's file-system helpers, written once for every crate that needs them: atomic writes
//! ([`AtomicFile`], [`atomic_write`]), advisory locks ([`FileLock`]), writes into a tree an
//! agent made that never leave it, with walks of such trees by open folders ([`beneath`]), and
//! bounded reads of files an agent made ([`read_bounded`]), and modification times given back
//! to copies of an agent's end state ([`times`]).
//!
//! It sits below the store, the image cache and the runner, and depends on nothing of proctor's.

pub mod at;
mod atomic;
pub mod beneath;
mod bounded;
pub mod deep;
mod error;
mod lock;
pub mod rel;
pub mod times;

pub use atomic::{atomic_write, atomic_write_unsynced, is_temp_name, sync_dir, AtomicFile};
pub use beneath::Beneath;
pub use bounded::{read_bounded, BoundedRead};
pub use deep::{Deep, Reached};
pub use error::FsError;
pub use lock::FileLock;
