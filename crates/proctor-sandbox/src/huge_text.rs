//! The zygote's code on huge pages, so that the trial inits forked from it do not fault it in.
//!
//! Every trial forks two processes from the zygote's image (the trial init T and the agent init
//! A). A fork does not copy the page tables of file mappings: each child faults in again, page
//! by page (16 at a time with the kernel's fault-around), the code and read-only data it runs,
//! and tears those page tables down at its exit. Measured on a no-op trial: about 75 of T's and
//! A's 150 page faults were in the binary's code and read-only data.
//!
//! [`remap`] copies the 2 MiB-aligned part of those mappings into anonymous memory backed by
//! transparent huge pages and moves it over the original, with the same bytes at the same
//! addresses. A fork then copies one page-table entry per 2 MiB, and the children never fault
//! on it. Where the kernel gives no huge pages (transparent huge pages off, or memory too
//! fragmented), nothing is replaced: 4 KiB anonymous pages would be copied at every fork, which
//! costs more than the faults they save.

use std::io;
use std::path::Path;

/// The size of a huge page on x86-64 and arm64 with 4 KiB pages.
const HUGE: usize = 2 << 20;

/// What [`remap`] did: bytes moved onto huge pages, and the regions left as they were (with why).
#[derive(Debug, Default)]
pub(crate) struct Remapped {
    /// Bytes now on huge pages.
    pub bytes: usize,
    /// Why a region was left as it was, one line each.
    pub skipped: Vec<String>,
}

/// Set (to anything but `0`) to leave the zygote's code where the loader mapped it.
pub(crate) const DISABLE_ENV: &str = "PROCTOR_SANDBOX_NO_HUGE_TEXT";

/// Whether the zygote moves its code onto huge pages: unless `PROCTOR_SANDBOX_NO_HUGE_TEXT` is
/// set to something other than `0` (for comparison, and to profile the trial inits with their
/// code's symbols, which an anonymous mapping does not name).
pub(crate) fn enabled() -> bool {
    std::env::var_os(DISABLE_ENV).is_none_or(|v| v.is_empty() || v == "0")
}

/// Moves the calling process's own code and read-only data onto huge pages where the kernel
/// gives them; meant for the zygote at its start, before its first fork. Each region is replaced
/// in one `mremap` with the same bytes, so code running there, in this thread or another, runs
/// on unchanged.
pub(crate) fn remap() -> Remapped {
    let mut out = Remapped::default();
    if !transparent_huge_pages_on() {
        out.skipped
            .push("transparent huge pages are off on this machine".to_owned());
        return out;
    }
    let regions = match own_read_only_regions() {
        Ok(r) => r,
        Err(e) => {
            out.skipped
                .push(format!("cannot read /proc/self/maps: {e}"));
            return out;
        }
    };
    for region in regions {
        match region.remap() {
            Ok(n) => out.bytes += n,
            Err(why) => out.skipped.push(why),
        }
    }
    out
}

/// Whether `enabled` is `always` or `madvise` (the kernel's setting in brackets).
fn transparent_huge_pages_on() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
}

/// A read-only mapping of the executable (its code, or its read-only data).
#[derive(Debug, PartialEq)]
struct Region {
    start: usize,
    end: usize,
    exec: bool,
}

/// The executable's own read-only mappings (`r-xp` and `r--p` of the file `/proc/self/exe`
/// names), from `/proc/self/maps`.
fn own_read_only_regions() -> io::Result<Vec<Region>> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(parse_maps(&maps, &exe))
}

/// The read-only mappings of `exe` in the text of a `/proc/PID/maps`.
fn parse_maps(maps: &str, exe: &Path) -> Vec<Region> {
    let exe = exe.to_string_lossy();
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?.trim_start();
            if path != exe {
                return None;
            }
            let exec = match perms {
                "r-xp" => true,
                "r--p" => false,
                _ => return None,
            };
            let (start, end) = range.split_once('-')?;
            Some(Region {
                start: usize::from_str_radix(start, 16).ok()?,
                end: usize::from_str_radix(end, 16).ok()?,
                exec,
            })
        })
        .collect()
}

impl Region {
    /// The part of the region that whole huge pages cover.
    fn aligned(&self) -> Option<(usize, usize)> {
        let start = self.start.checked_add(HUGE - 1)? & !(HUGE - 1);
        let end = self.end & !(HUGE - 1);
        (end > start).then(|| (start, end - start))
    }

    /// Copies the aligned part onto huge pages and moves the copy over it; returns the bytes
    /// moved.
    fn remap(&self) -> Result<usize, String> {
        let Some((at, len)) = self.aligned() else {
            return Ok(0);
        };
        let copy = HugeCopy::new(len).map_err(|e| format!("cannot map {len} bytes: {e}"))?;
        // SAFETY: [at, at + len) lies in a readable mapping of this process, which nothing
        // writes (code or read-only data); the copy is a fresh writable mapping of `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(at as *const u8, copy.at as *mut u8, len) };
        let huge = anon_huge_bytes(copy.at).unwrap_or(0);
        if huge < len {
            return Err(format!(
                "the kernel gave {huge} of {len} bytes on huge pages at {at:#x}: left as it was"
            ));
        }
        copy.replace(at, self.exec)
            .map_err(|e| format!("cannot move the copy over {at:#x}: {e}"))?;
        Ok(len)
    }
}

/// A 2 MiB-aligned anonymous mapping asked for huge pages; unmapped on drop unless moved.
struct HugeCopy {
    at: usize,
    len: usize,
}

impl HugeCopy {
    fn new(len: usize) -> io::Result<HugeCopy> {
        // SAFETY: a new private anonymous mapping; the excess around the aligned part is
        // unmapped at once, and the rest is owned by the returned value.
        unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                len + HUGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if raw == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let raw = raw as usize;
            let at = (raw + HUGE - 1) & !(HUGE - 1);
            if at > raw {
                libc::munmap(raw as *mut libc::c_void, at - raw);
            }
            let tail = at + len;
            if raw + len + HUGE > tail {
                libc::munmap(tail as *mut libc::c_void, raw + len + HUGE - tail);
            }
            let copy = HugeCopy { at, len };
            if libc::madvise(at as *mut libc::c_void, len, libc::MADV_HUGEPAGE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(copy)
        }
    }

    /// Makes the copy read-only (and executable for code) and moves it over `at`, replacing
    /// what was mapped there in one step.
    fn replace(self, at: usize, exec: bool) -> io::Result<()> {
        let prot = libc::PROT_READ | if exec { libc::PROT_EXEC } else { 0 };
        // SAFETY: the copy is ours; `mremap` with MREMAP_FIXED replaces [at, at + len) at once
        // with the same bytes, so code running there (this function's included) carries on.
        unsafe {
            if libc::mprotect(self.at as *mut libc::c_void, self.len, prot) != 0 {
                return Err(io::Error::last_os_error());
            }
            let moved = libc::mremap(
                self.at as *mut libc::c_void,
                self.len,
                self.len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                at as *mut libc::c_void,
            );
            if moved == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        std::mem::forget(self);
        Ok(())
    }
}

impl Drop for HugeCopy {
    fn drop(&mut self) {
        // SAFETY: our own mapping, not moved.
        unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
    }
}

/// `AnonHugePages` of the mapping that starts at `at`, in bytes, from `/proc/self/smaps`.
fn anon_huge_bytes(at: usize) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let head = format!("{at:x}-");
    let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
    lines.next()?;
    lines
        .take_while(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_executables_read_only_mappings_are_taken() {
        let maps = "\
00200000-0079b000 r--p 00000000 fd:01 123 /opt/proctor
0079b000-01f3c000 r-xp 0059a000 fd:01 123 /opt/proctor
01f3c000-01ffd000 rw-p 01739000 fd:01 123 /opt/proctor
7f0000000000-7f0000200000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
7f0000400000-7f0000600000 r--p 00000000 00:00 0 
";
        let regions = parse_maps(maps, Path::new("/opt/proctor"));
        assert_eq!(
            regions,
            vec![
                Region {
                    start: 0x200000,
                    end: 0x79b000,
                    exec: false
                },
                Region {
                    start: 0x79b000,
                    end: 0x1f3c000,
                    exec: true
                },
            ]
        );
    }

    #[test]
    fn only_whole_huge_pages_inside_a_region_are_moved() {
        let r = |start, end| Region {
            start,
            end,
            exec: true,
        };
        assert_eq!(
            r(0x79b000, 0x1f3c000).aligned(),
            Some((0x800000, 0x1600000))
        );
        assert_eq!(r(0x200000, 0x400000).aligned(), Some((0x200000, 0x200000)));
        assert_eq!(r(0x201000, 0x400000).aligned(), None);
        assert_eq!(r(0x200000, 0x3ff000).aligned(), None);
    }

    /// A read-only file mapping of 4 MiB at a 2 MiB-aligned address: where the kernel gives huge
    /// pages it moves onto them with its bytes, at its address; where it does not, it stays as
    /// it was and the report says why.
    #[test]
    fn a_read_only_file_mapping_moves_onto_huge_pages_with_its_bytes() {
        use std::io::Write;
        let len = 2 * HUGE;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        // SAFETY: a reservation of fresh address space, then the file mapped at its aligned
        // part; both unmapped at the end.
        let (raw, at) = unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                len + HUGE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(raw, libc::MAP_FAILED);
            let at = (raw as usize + HUGE - 1) & !(HUGE - 1);
            let mapped = libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                fd,
                0,
            );
            assert_eq!(mapped as usize, at);
            (raw, at)
        };
        let region = Region {
            start: at,
            end: at + len,
            exec: false,
        };
        let moved = region.remap();
        // SAFETY: `len` readable bytes at `at` (moved or not).
        let now = unsafe { std::slice::from_raw_parts(at as *const u8, len) };
        assert!(now == bytes.as_slice(), "the bytes changed");
        match moved {
            Ok(n) => {
                assert_eq!(n, len);
                assert_eq!(anon_huge_bytes(at), Some(len));
            }
            Err(why) => {
                // Left as it was: still the file's pages (the kernel gave too few huge pages, or
                // none can be asked for on this kernel).
                assert!(!why.is_empty());
                assert_eq!(anon_huge_bytes(at), Some(0), "{why}");
            }
        }
        // SAFETY: the reservation made above, which holds the mapping.
        unsafe { libc::munmap(raw, len + HUGE) };
    }

    /// On this very test binary, wherever the loader put it: the code moves onto huge pages
    /// where whole ones fit in it and the kernel gives them, or the report says why not, and the
    /// code keeps running.
    #[test]
    fn the_code_moves_onto_huge_pages_or_the_report_says_why_not() {
        let before = parse_maps(
            &std::fs::read_to_string("/proc/self/maps").unwrap(),
            &std::fs::read_link("/proc/self/exe").unwrap(),
        );
        assert!(before.iter().any(|r| r.exec), "{before:?}");
        let movable: usize = before
            .iter()
            .filter_map(|r| r.aligned())
            .map(|(_, len)| len)
            .sum();
        let remapped = remap();
        assert!(
            remapped.bytes == movable || !remapped.skipped.is_empty(),
            "{remapped:?} of {movable} bytes"
        );
        if remapped.bytes > 0 {
            let huge: usize = before
                .iter()
                .filter_map(|r| r.aligned())
                .filter_map(|(at, _)| anon_huge_bytes(at))
                .sum();
            assert_eq!(huge, remapped.bytes, "{remapped:?}");
        }
        // Still the same code: formatting and parsing run through it.
        assert_eq!(
            format!("{:x}", 0x1f3c000).parse::<String>().unwrap(),
            "1f3c000"
        );
    }

    #[test]
    fn a_mapping_that_is_not_there_has_no_huge_pages() {
        assert_eq!(anon_huge_bytes(0x1000), None);
    }
}
