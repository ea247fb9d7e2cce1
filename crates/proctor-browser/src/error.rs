//! What can go wrong while driving the browser or comparing its screenshots.

use std::path::PathBuf;

use thiserror::Error;

/// A failure to drive the browser: it could not start, went away, answered with an error, or
/// did not answer in time.
#[derive(Debug, Error)]
pub enum BrowserError {
    /// The pipes to the browser could not be made.
    #[error("cannot make the pipes to the browser: {0}")]
    Pipe(#[source] std::io::Error),
    /// The browser program could not be started.
    #[error("cannot start the browser {}: {why}", exe.display())]
    Start {
        /// The program.
        exe: PathBuf,
        /// Why.
        why: String,
    },
    /// The browser closed its pipe (it exited or crashed).
    #[error("the browser went away: {why}{}", if stderr_tail.is_empty() { String::new() } else { format!("; it printed: {stderr_tail}") })]
    Closed {
        /// Why, as seen from this side.
        why: String,
        /// The last lines it printed.
        stderr_tail: String,
    },
    /// A command was answered with an error.
    #[error("the browser refused {method}: {message}")]
    Protocol {
        /// The command.
        method: String,
        /// The browser's message.
        message: String,
    },
    /// No answer came in time.
    #[error("the browser did not answer {waiting_for} in time")]
    Timeout {
        /// The command or event awaited.
        waiting_for: String,
    },
}

/// A failure to compare a screenshot with its reference.
#[derive(Debug, Error)]
pub enum DiffError {
    /// One of the two images is not a PNG that can be decoded.
    #[error("the {which} is not a readable PNG: {why}")]
    NotPng {
        /// `screenshot` or `reference image`.
        which: &'static str,
        /// The decoder's message.
        why: String,
    },
}
