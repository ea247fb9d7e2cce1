//! Reading a file an agent made without letting its size decide proctor's memory or time: its
//! data only (a sparse file's holes are never materialised), and at most a given number of
//! bytes of it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// What [`read_bounded`] read of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedRead {
    /// The file's data, in order, each hole read as its first [`HOLE_READ`] zeros, at most the
    /// bound.
    pub bytes: Vec<u8>,
    /// The file's size, holes included.
    pub size: u64,
    /// Whether holes were left out (the file is sparse).
    pub holes_skipped: bool,
    /// Whether data was left out past the bound.
    pub cut: bool,
}

impl BoundedRead {
    /// Whether `bytes` is the whole file, byte for byte.
    pub fn is_whole(&self) -> bool {
        !self.holes_skipped && !self.cut
    }

    /// A sentence for a reader of evidence saying what was read, when it is not the whole file.
    pub fn note(&self) -> Option<String> {
        if self.is_whole() {
            return None;
        }
        let mut parts = Vec::new();
        if self.holes_skipped {
            parts.push(format!(
                "its holes (unwritten zeros) skipped, each read as at most {HOLE_READ} zeros"
            ));
        }
        if self.cut {
            parts.push(format!("only its first {} bytes of data", self.bytes.len()));
        }
        Some(format!(
            "read {} of a {}-byte file: {}",
            self.bytes.len(),
            self.size,
            parts.join(", ")
        ))
    }
}

/// The most of a hole's zeros [`read_bounded`] reads in its place: a hole is at least a page
/// of them, so data on its two sides never reads as adjacent.
pub const HOLE_READ: u64 = 4096;

/// Reads at most `max` bytes of `path`'s data, from its start, skipping holes (found with
/// `SEEK_DATA`/`SEEK_HOLE`; a file system without them is read as all data). Each hole is read
/// as its first [`HOLE_READ`] zeros, so what lies on either side of it is never joined (`SEC`,
/// a hole, then `RET` never reads as `SECRET`). Costs memory and time in the data read, never
/// in the file's size.
pub fn read_bounded(path: &Path, max: usize) -> io::Result<BoundedRead> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::new();
    let mut holes_skipped = false;
    let mut pos = 0u64;
    // A hole from `pos` to `end`, read as its first zeros within the bound.
    let hole = |bytes: &mut Vec<u8>, pos: u64, end: u64| {
        let zeros = usize::try_from((end - pos).min(HOLE_READ)).unwrap_or(0);
        bytes.resize(bytes.len() + zeros.min(max - bytes.len()), 0);
    };
    while pos < size && bytes.len() < max {
        let (start, end) = match data_extent(&file, pos, size) {
            Some(extent) => extent,
            None => {
                // No data past `pos`: the rest is a hole.
                holes_skipped = true;
                hole(&mut bytes, pos, size);
                break;
            }
        };
        if start > pos {
            holes_skipped = true;
            hole(&mut bytes, pos, start);
            if bytes.len() >= max {
                pos = start;
                break;
            }
        }
        let want = usize::try_from(end - start)
            .unwrap_or(usize::MAX)
            .min(max - bytes.len());
        let from = bytes.len();
        bytes.resize(from + want, 0);
        let got = read_fully_at(&file, &mut bytes[from..], start)?;
        bytes.truncate(from + got);
        pos = start + got as u64;
        if got < want {
            // The file shrank while being read.
            break;
        }
    }
    let cut = bytes.len() >= max && pos < size && data_extent(&file, pos, size).is_some();
    Ok(BoundedRead {
        bytes,
        size,
        holes_skipped,
        cut,
    })
}

/// The next extent of data at or after `pos`: `[start, end)`, or `None` when only a hole is
/// left. Where the file system cannot tell, all of `[pos, size)` is data.
fn data_extent(file: &File, pos: u64, size: u64) -> Option<(u64, u64)> {
    use rustix::fs::{seek, SeekFrom};
    let start = match seek(file, SeekFrom::Data(pos)) {
        Ok(start) => start,
        Err(rustix::io::Errno::NXIO) => return None,
        Err(_) => return Some((pos, size)),
    };
    let end = seek(file, SeekFrom::Hole(start)).unwrap_or(size).min(size);
    (start < end).then_some((start, end))
}

/// Reads into all of `buf` from `offset`, short only at the end of the file.
fn read_fully_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    #[test]
    fn a_small_file_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, "hello\n").unwrap();
        let r = read_bounded(&p, 1024).unwrap();
        assert_eq!(r.bytes, b"hello\n");
        assert!(r.is_whole() && r.note().is_none());
    }

    #[test]
    fn a_sparse_file_is_read_by_its_data_whatever_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notes.txt");
        let mut f = File::create(&p).unwrap();
        f.write_all(b"head data\n").unwrap();
        f.seek(SeekFrom::Start(3 << 30)).unwrap();
        f.write_all(b"tail data\n").unwrap();
        drop(f);
        let r = read_bounded(&p, 1 << 20).unwrap();
        assert_eq!(r.size, (3 << 30) + 10);
        if r.holes_skipped {
            // A file system that keeps holes: only the data was read (by whole blocks).
            assert!(r.bytes.starts_with(b"head data\n"), "{:?}", &r.bytes[..16]);
            assert!(r.bytes.ends_with(b"tail data\n"));
            assert!(
                r.bytes.len() <= 2 * 65536 + HOLE_READ as usize,
                "{} bytes",
                r.bytes.len()
            );
            assert!(!r.cut);
            assert!(r.note().unwrap().contains("holes"), "{:?}", r.note());
        } else {
            // One that does not: the bound held.
            assert_eq!(r.bytes.len(), 1 << 20);
            assert!(r.cut);
        }
    }

    /// Data on the two sides of a hole is never read as adjacent: `SEC` ending a page, a hole,
    /// then `RET` does not read as `SECRET`, which the file does not hold.
    #[test]
    fn a_hole_is_read_as_zeros_never_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notes.txt");
        let mut f = File::create(&p).unwrap();
        f.write_all(&[b"x".repeat(4093), b"SEC".to_vec()].concat())
            .unwrap();
        f.seek(SeekFrom::Start(1 << 20)).unwrap();
        f.write_all(b"RET").unwrap();
        f.set_len((2 << 20) + 3).unwrap();
        drop(f);
        let r = read_bounded(&p, 1 << 20).unwrap();
        let joined = r.bytes.windows(6).any(|w| w == b"SECRET");
        assert!(!joined, "the hole was read as nothing");
        if r.holes_skipped {
            let hole = HOLE_READ as usize;
            assert_eq!(
                &r.bytes[..4096],
                [b"x".repeat(4093), b"SEC".to_vec()].concat()
            );
            assert!(r.bytes[4096..4096 + hole].iter().all(|b| *b == 0));
            assert!(r.bytes[4096 + hole..].starts_with(b"RET"));
            // The hole at the end is read as zeros too, and the whole read stays small.
            assert!(
                r.bytes.ends_with(&[0u8; 16]),
                "{:?}",
                &r.bytes[r.bytes.len() - 16..]
            );
            assert!(r.bytes.len() <= 3 * hole + 2 * 65536, "{}", r.bytes.len());
        }
    }

    #[test]
    fn a_large_file_is_cut_at_the_bound_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.bin");
        std::fs::write(&p, vec![b'x'; 10_000]).unwrap();
        let r = read_bounded(&p, 4096).unwrap();
        assert_eq!(r.bytes.len(), 4096);
        assert!(r.cut && !r.holes_skipped);
        assert_eq!(
            r.note().unwrap(),
            "read 4096 of a 10000-byte file: only its first 4096 bytes of data"
        );
        // Exactly at the bound is whole.
        let r = read_bounded(&p, 10_000).unwrap();
        assert!(r.is_whole(), "{r:?}");
    }
}
