//! Pages of a kept evidence file too large to show whole: a service's state or event log, which a
//! trial record leaves out past its bounds but its folder keeps. `show --service` and the viewer
//! read them a page at a time, never the whole file.
//!
//! The file is named by a path relative to a folder of a finished trial. Every component must be
//! a plain name (no `..`, no absolute path), none may be a symbolic link (each is opened with
//! `O_NOFOLLOW` from the one before), and the file must be a regular file (opened non-blocking, so
//! a FIFO cannot hang the reader): what an agent left in a service's folder can point a reader
//! nowhere else.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Component, Path};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

/// The page size when none is asked for.
pub const DEFAULT_PAGE_BYTES: u64 = 64 * 1024;

/// The largest page one read returns.
pub const MAX_PAGE_BYTES: u64 = 1024 * 1024;

/// One page of a kept file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FilePage {
    /// Where the page starts, in bytes from the start of the file.
    pub offset: u64,
    /// How many bytes of the file the page holds.
    pub bytes: u64,
    /// The file's whole size.
    pub total_bytes: u64,
    /// Where the next page starts; `None` at the end of the file.
    pub next_offset: Option<u64>,
    /// The page's bytes as text (bytes that are not UTF-8 replaced by U+FFFD). A page that is
    /// not the last ends after its last newline when it has one, else on a character boundary,
    /// so pages of a JSON Lines file hold whole lines and no character is split between pages.
    pub text: String,
}

/// Why a page cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The path is not a plain relative path.
    #[error("`{0}` is not a file of the trial: name it by a relative path without `..`")]
    BadPath(String),
    /// A component is a symbolic link, or the file is not a regular file.
    #[error("`{0}` is not a regular file of the trial (a link or a special file is never read)")]
    NotRegular(String),
    /// The file (or a folder on its way) does not exist.
    #[error("the trial kept no `{0}`")]
    Missing(String),
    /// Reading failed.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
}

/// The page of `base/relative` that starts at `offset` and holds at most `max_bytes` (capped at
/// [`MAX_PAGE_BYTES`]; 0 means [`DEFAULT_PAGE_BYTES`]). An offset past the end is an empty last
/// page.
pub fn read_page(
    base: &Path,
    relative: &str,
    offset: u64,
    max_bytes: u64,
) -> Result<FilePage, PageError> {
    let file = open_beneath(base, relative)?;
    let io_err = |source| PageError::Io {
        path: relative.to_string(),
        source,
    };
    let total_bytes = file.metadata().map_err(io_err)?.len();
    let max = match max_bytes {
        0 => DEFAULT_PAGE_BYTES,
        n => n.min(MAX_PAGE_BYTES),
    };
    let start = offset.min(total_bytes);
    let want = max.min(total_bytes - start);
    let mut buf = vec![0u8; usize::try_from(want).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut buf, start).map_err(io_err)?;
    let at_end = start + want >= total_bytes;
    if !at_end {
        let keep = page_end(&buf);
        buf.truncate(keep);
    }
    let bytes = buf.len() as u64;
    Ok(FilePage {
        offset: start,
        bytes,
        total_bytes,
        next_offset: (!at_end).then_some(start + bytes),
        text: String::from_utf8_lossy(&buf).into_owned(),
    })
}

/// Where a page that is not the file's last should end: after its last newline, else before a
/// UTF-8 character the page would split (a page of one partial character keeps it whole).
fn page_end(buf: &[u8]) -> usize {
    if let Some(nl) = buf.iter().rposition(|&b| b == b'\n') {
        return nl + 1;
    }
    // The last character's lead byte is at most 3 bytes back: cut before it when the page
    // holds only part of it (unless it is the page's only character).
    let len = buf.len();
    for back in 1..=len.min(3) {
        let lead = buf[len - back];
        if lead & 0xC0 == 0x80 {
            continue;
        }
        let width = match lead.leading_ones() {
            2..=4 => lead.leading_ones() as usize,
            _ => 1,
        };
        return if width > back && back < len {
            len - back
        } else {
            len
        };
    }
    len
}

/// `base/relative` opened for reading: every component a plain name that is not a link, the file
/// a regular file.
fn open_beneath(base: &Path, relative: &str) -> Result<File, PageError> {
    let bad = || PageError::BadPath(relative.to_string());
    let parts: Vec<&std::ffi::OsStr> = Path::new(relative)
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(bad()),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(bad());
    };
    let fail = |e: nix::Error| match e {
        nix::Error::ENOENT => PageError::Missing(relative.to_string()),
        nix::Error::ELOOP | nix::Error::ENOTDIR => PageError::NotRegular(relative.to_string()),
        e => PageError::Io {
            path: relative.to_string(),
            source: e.into(),
        },
    };
    let mut dir: OwnedFd = File::open(base)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => PageError::Missing(relative.to_string()),
            _ => PageError::Io {
                path: relative.to_string(),
                source: e,
            },
        })?
        .into();
    for name in dirs {
        dir = open_at(
            &dir,
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        )
        .map_err(fail)?;
    }
    let file = File::from(
        open_at(
            &dir,
            last,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        )
        .map_err(fail)?,
    );
    let kind = file.metadata().map_err(|source| PageError::Io {
        path: relative.to_string(),
        source,
    })?;
    if !kind.is_file() {
        return Err(PageError::NotRegular(relative.to_string()));
    }
    Ok(file)
}

/// `name` opened in the folder `dir` with `flags`.
fn open_at(dir: &OwnedFd, name: &std::ffi::OsStr, flags: OFlag) -> nix::Result<OwnedFd> {
    let fd = openat(Some(dir.as_raw_fd()), name, flags, Mode::empty())?;
    // SAFETY: `openat` just returned `fd`, open and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_the_file_exactly_and_end_on_lines() {
        let dir = tempfile::tempdir().unwrap();
        let lines: String = (0..1000).map(|i| format!("{{\"seq\":{i}}}\n")).collect();
        std::fs::write(dir.path().join("events.jsonl"), &lines).unwrap();
        let mut offset = 0;
        let mut text = String::new();
        let mut pages = 0;
        loop {
            let page = read_page(dir.path(), "events.jsonl", offset, 1000).unwrap();
            assert_eq!(page.total_bytes, lines.len() as u64);
            assert!(page.bytes <= 1000);
            assert!(page.text.ends_with('\n'), "{:?}", page.text);
            text.push_str(&page.text);
            pages += 1;
            match page.next_offset {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(text, lines);
        assert!(pages > 10);
    }

    #[test]
    fn a_page_never_splits_a_character() {
        let dir = tempfile::tempdir().unwrap();
        let text = "é".repeat(100); // two bytes each, no newline
        std::fs::write(dir.path().join("state.json"), &text).unwrap();
        let first = read_page(dir.path(), "state.json", 0, 7).unwrap();
        assert_eq!(first.text, "ééé");
        let second = read_page(dir.path(), "state.json", first.next_offset.unwrap(), 7).unwrap();
        assert_eq!(second.offset, 6);
        assert!(!second.text.contains('\u{FFFD}'));
    }

    #[test]
    fn only_plain_regular_files_beneath_the_folder_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("services");
        std::fs::create_dir_all(base.join("chat")).unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), base.join("chat/state.json"))
            .unwrap();
        std::os::unix::fs::symlink(dir.path(), base.join("up")).unwrap();
        nix::unistd::mkfifo(&base.join("chat/fifo"), Mode::S_IRWXU).unwrap();
        assert!(matches!(
            read_page(&base, "chat/state.json", 0, 0),
            Err(PageError::NotRegular(_))
        ));
        assert!(matches!(
            read_page(&base, "up/secret", 0, 0),
            Err(PageError::NotRegular(_))
        ));
        assert!(matches!(
            read_page(&base, "chat/fifo", 0, 0),
            Err(PageError::NotRegular(_))
        ));
        for bad in ["../secret", "/etc/passwd", "", "chat/../../secret"] {
            assert!(
                matches!(read_page(&base, bad, 0, 0), Err(PageError::BadPath(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            read_page(&base, "chat/none", 0, 0),
            Err(PageError::Missing(_))
        ));
    }

    #[test]
    fn an_offset_past_the_end_is_an_empty_last_page() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "abc").unwrap();
        let page = read_page(dir.path(), "f", 10, 0).unwrap();
        assert_eq!((page.offset, page.bytes, page.next_offset), (3, 0, None));
    }
}
