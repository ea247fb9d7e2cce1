//! The script format the server plays: defined with the suite format in
//! [`proctor_suite::model_script`] (a suite's `model_script` is read there without a server),
//! and re-exported here under its old path.

pub use proctor_suite::model_script::{Call, MainRequests, Role, Script, ScriptError, Turn, Usage};
