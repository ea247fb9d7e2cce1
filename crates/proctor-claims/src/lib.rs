//! Claims tied to evidence. A claim in Markdown ("with `--text` the sends pass 2/2") carries a
//! `verify:fileLine(PATH, /REGEX/)` [`citation`] of the line of evidence that says it;
//! [`verify`] checks every citation of a set of Markdown files (so a claim fails CI on the day
//! the evidence no longer says it), and [`cite`] writes ready-made citations of the rows of a
//! run's `results.md`. The command line (`proctor verify`, `proctor cite`) only parses and
//! prints.

pub mod citation;
pub mod cite;
pub mod error;
pub mod verify;

pub use error::ClaimsError;
