//! The agent's stdout and stderr kept within a bound: T reads them from pipes while it waits for
//! the agent, writes the first half of the bound to the host file as it comes, keeps the last
//! half in a ring, and at the end writes a line marking the cut and then that tail. Neither the
//! host's disk nor anything reading the file later sees more than the bound.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// One stream's sink within a bound: the head written through, the tail in a ring. T uses it
/// for the agent's stdout and stderr; a caller that reads an agent's terminal
/// ([`crate::run_on_terminal`]) keeps what it shows with it too.
pub struct Capped {
    name: &'static str,
    file: File,
    /// Bytes of the head still to write through.
    head_left: u64,
    /// The ring's size: the bound's second half.
    tail_cap: usize,
    tail: Vec<u8>,
    /// Where the next byte goes in `tail`, once it is full.
    tail_next: usize,
    /// Every byte seen.
    total: u64,
    cap: u64,
}

impl Capped {
    /// A sink for stream `name` that keeps `cap` bytes of it in `file`.
    pub fn new(name: &'static str, file: File, cap: u64) -> Capped {
        let head = cap.div_ceil(2);
        Capped {
            name,
            file,
            head_left: head,
            tail_cap: usize::try_from(cap - head).unwrap_or(usize::MAX),
            tail: Vec::new(),
            tail_next: 0,
            total: 0,
            cap,
        }
    }

    /// Takes the next bytes of the stream.
    pub fn push(&mut self, mut data: &[u8]) -> io::Result<()> {
        self.total += data.len() as u64;
        if self.head_left > 0 {
            let n = data
                .len()
                .min(usize::try_from(self.head_left).unwrap_or(usize::MAX));
            self.file.write_all(&data[..n])?;
            self.head_left -= n as u64;
            data = &data[n..];
        }
        if self.tail_cap == 0 || data.is_empty() {
            return Ok(());
        }
        // Only the last `tail_cap` bytes of `data` can survive.
        if data.len() > self.tail_cap {
            data = &data[data.len() - self.tail_cap..];
        }
        for &b in data {
            if self.tail.len() < self.tail_cap {
                self.tail.push(b);
            } else {
                self.tail[self.tail_next] = b;
                self.tail_next = (self.tail_next + 1) % self.tail_cap;
            }
        }
        Ok(())
    }

    /// Writes the tail (after a line marking the cut, if there was one); returns the bytes cut.
    pub fn finish(mut self) -> io::Result<u64> {
        let kept_head = self.cap.div_ceil(2) - self.head_left;
        let cut = self.total - kept_head - self.tail.len() as u64;
        if cut > 0 {
            let mib = self.cap as f64 / (1024.0 * 1024.0);
            write!(
                self.file,
                "\n[proctor: {cut} bytes of the agent's {} cut here (limits.output_mb = {mib}: the first and the last half are kept)]\n",
                self.name,
            )?;
        }
        let (older, newer) = self.tail.split_at(self.tail_next);
        self.file.write_all(newer)?;
        self.file.write_all(older)?;
        Ok(cut)
    }
}

/// The most one read from an agent's pipe takes: a pipe's default buffer.
const PIPE_READ: usize = 65536;

/// The pipes T reads while the agent runs, each with its sink.
pub(crate) struct Pumps {
    open: Vec<(OwnedFd, Capped)>,
    done: Vec<Capped>,
    /// Where each read lands: as large as a pipe's buffer, and never zeroed, so that only the
    /// pages a read fills are touched (a quiet agent's trial faults in one, not sixteen).
    buf: Vec<u8>,
}

impl Pumps {
    /// Pumps for these read ends of the agent's output pipes.
    pub(crate) fn new(streams: Vec<(OwnedFd, Capped)>) -> Pumps {
        Pumps {
            open: streams,
            done: Vec::new(),
            buf: Vec::with_capacity(PIPE_READ),
        }
    }

    /// Pumps until `pidfd` is readable (the process ended: `true`) or `deadline` passes
    /// (`false`; `None` waits for ever). Meanwhile, whenever `also`'s descriptor is readable,
    /// calls its function (the trial init serving interface calls).
    pub(crate) fn until_exit(
        &mut self,
        pidfd: RawFd,
        deadline: Option<Instant>,
        mut also: Option<(RawFd, &mut dyn FnMut())>,
    ) -> io::Result<bool> {
        let extra = usize::from(also.is_some());
        loop {
            let ms = timeout_ms(deadline);
            if ms == Some(0) {
                return Ok(false);
            }
            let mut fds: Vec<libc::pollfd> = std::iter::once(pidfd)
                .chain(also.as_ref().map(|(fd, _)| *fd))
                .chain(self.open.iter().map(|(fd, _)| fd.as_raw_fd()))
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: a valid array of pollfds of the given length.
            let n = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    ms.unwrap_or(-1),
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            self.read_ready(&fds[1 + extra..])?;
            if let Some((_, serve)) = also.as_mut().filter(|_| fds[1].revents != 0) {
                serve();
            }
            if fds[0].revents != 0 {
                return Ok(true);
            }
        }
    }

    /// Reads what is left once every writer is gone (the agent's whole tree has ended), then
    /// finishes each sink: the bytes cut from each stream, in the order given.
    pub(crate) fn finish(mut self) -> io::Result<Vec<u64>> {
        // Every writer is gone, so each pipe ends; the deadline only guards against a writer
        // that somehow outlived the agent's PID namespace.
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        while !self.open.is_empty() && Instant::now() < deadline {
            let mut fds: Vec<libc::pollfd> = self
                .open
                .iter()
                .map(|(fd, _)| libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: a valid array of pollfds of the given length.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
            if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
            self.read_ready(&fds)?;
        }
        let mut sinks: Vec<Capped> = self.done;
        sinks.extend(self.open.into_iter().map(|(_, s)| s));
        let mut order: Vec<(usize, Capped)> = sinks
            .into_iter()
            .map(|s| (usize::from(s.name != "stdout"), s))
            .collect();
        order.sort_by_key(|(k, _)| *k);
        order.into_iter().map(|(_, s)| s.finish()).collect()
    }

    /// Reads once from each pipe `polled` says is ready (in `open`'s order); an ended pipe moves
    /// its sink to `done`.
    fn read_ready(&mut self, polled: &[libc::pollfd]) -> io::Result<()> {
        let mut ended = Vec::new();
        for (i, p) in polled.iter().enumerate() {
            if p.revents == 0 {
                continue;
            }
            let (fd, sink) = &mut self.open[i];
            self.buf.clear();
            let spare = self.buf.spare_capacity_mut();
            // SAFETY: a valid descriptor, and `spare.len()` writable bytes at `spare`.
            let n = unsafe { libc::read(fd.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
            match n {
                0 => ended.push(i),
                n if n > 0 => {
                    // SAFETY: `read` initialised the first `n` bytes of the spare capacity.
                    unsafe { self.buf.set_len(n as usize) };
                    sink.push(&self.buf)?;
                }
                _ => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        ended.push(i);
                    }
                }
            }
        }
        for i in ended.into_iter().rev() {
            let (_, sink) = self.open.remove(i);
            self.done.push(sink);
        }
        Ok(())
    }
}

/// Milliseconds until `deadline` for poll, rounded up (`None`: no deadline).
fn timeout_ms(deadline: Option<Instant>) -> Option<libc::c_int> {
    deadline.map(|d| {
        let left = d.saturating_duration_since(Instant::now());
        left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(cap: u64, chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut c = Capped::new("stdout", File::create(&path).unwrap(), cap);
        for chunk in chunks {
            c.push(chunk).unwrap();
        }
        let cut = c.finish().unwrap();
        (std::fs::read(&path).unwrap(), cut)
    }

    #[test]
    fn output_within_the_bound_is_kept_whole() {
        let (bytes, cut) = kept(10, &[b"abc", b"defghij"]);
        assert_eq!(bytes, b"abcdefghij");
        assert_eq!(cut, 0);
    }

    #[test]
    fn output_past_the_bound_keeps_head_and_tail_and_marks_the_cut() {
        let (bytes, cut) = kept(6, &[b"0123", b"456789", b"ab"]);
        assert_eq!(cut, 6, "12 bytes in, 3 + 3 kept");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("012\n[proctor: 6 bytes of the agent's stdout cut here"),
            "{text}"
        );
        assert!(text.ends_with(")]\n9ab"), "{text}");
    }

    #[test]
    fn one_huge_chunk_keeps_only_its_last_bytes_in_the_tail() {
        let big: Vec<u8> = (0..100u8).collect();
        let (bytes, cut) = kept(4, &[&big]);
        assert_eq!(cut, 96);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(&bytes[bytes.len() - 2..], &[98, 99]);
    }
}
