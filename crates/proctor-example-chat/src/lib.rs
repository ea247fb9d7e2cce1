//! `chat` and `chat-mock`: a small team-chat CLI and its deterministic mock backend.
//!
//! This crate is the interface under test in `examples/chat-ax`. Its HTTP (the mock's server and
//! the CLI's client) is hyper on a current-thread tokio runtime, the stack proctor's gateway uses;
//! the rest is std and serde/serde_json. The pure parts (argument parsing, id and conversation parsing, the mock's
//! state machine, request routing) live here so they can be unit-tested; the binaries are thin.
//!
//! The interface has one deliberate design trap (see `ids`): `chat read` prints per-conversation
//! positions (`#7`), but `chat edit` and `chat unsend` need the global message id (`m-00014`),
//! which `chat read --ids` shows. The error for the obvious first try says exactly that.

pub mod cli;
pub mod conv;
pub mod http;
pub mod ids;
pub mod server;
pub mod store;
pub mod time;
