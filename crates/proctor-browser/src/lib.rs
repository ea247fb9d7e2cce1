//! proctor's visual checks: a headless Chromium driven over the DevTools protocol on a pipe
//! ([`cdp`]), looking at pages the way a `visual` assertion asks ([`look`]), found on the
//! search path or where the configuration says ([`find`]), and screenshots compared with their
//! reference images ([`diff`]).

pub mod cdp;
pub mod diff;
pub mod error;
pub mod find;
pub mod look;

pub use cdp::{Browser, Viewport};
pub use diff::{compare, is_png, Diff};
pub use error::{BrowserError, DiffError};
pub use find::{find_browser, BrowserSource, BROWSER_NAMES};
pub use look::{run_job, Element, Job, Look, Report, Seen};
