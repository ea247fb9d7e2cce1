//! Content digests (`sha256:<64 hex>`, the only algorithm read) and hashing while writing.

use std::fmt;
use std::io::{self, Write};

use ring::digest::{Context, SHA256};

/// A `sha256:<64 lowercase hex>` content digest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 lowercase hex>`; anything else is `Err` with what is wrong.
    pub(crate) fn parse(text: &str) -> Result<Digest, String> {
        let Some((algorithm, hex)) = text.split_once(':') else {
            return Err(format!(
                "`{text}` is not a digest (expected sha256:<64 hex digits>)"
            ));
        };
        if algorithm != "sha256" {
            return Err(format!(
                "digest algorithm `{algorithm}` is not supported (only sha256 is)"
            ));
        }
        Digest::from_hex(hex).ok_or_else(|| {
            format!("`{text}` is not a sha256 digest (expected 64 lowercase hex digits)")
        })
    }

    /// A digest from its 64 lowercase hex digits.
    pub(crate) fn from_hex(hex: &str) -> Option<Digest> {
        let ok = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| Digest {
            hex: hex.to_string(),
        })
    }

    /// The digest of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Digest {
        let mut hasher = Hasher::new();
        hasher.update(bytes);
        hasher.finish()
    }

    /// The 64 hex digits, without `sha256:`.
    pub(crate) fn hex(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

/// An incremental SHA-256.
pub(crate) struct Hasher(Context);

impl Hasher {
    /// A hasher over nothing yet.
    pub(crate) fn new() -> Hasher {
        Hasher(Context::new(&SHA256))
    }

    /// Adds `bytes`.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest of everything added.
    pub(crate) fn finish(self) -> Digest {
        let hex = self
            .0
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Digest { hex }
    }
}

/// A writer that hashes and counts what goes through it, and refuses more than `limit` bytes.
pub(crate) struct HashingWriter<W> {
    inner: W,
    hasher: Hasher,
    written: u64,
    limit: Option<u64>,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`; writing more than `limit` bytes (when given) fails.
    pub(crate) fn new(inner: W, limit: Option<u64>) -> Self {
        HashingWriter {
            inner,
            hasher: Hasher::new(),
            written: 0,
            limit,
        }
    }

    /// Forgets what was written (the caller rewinds `inner` itself).
    pub(crate) fn restart(&mut self) {
        self.hasher = Hasher::new();
        self.written = 0;
    }

    /// The inner writer.
    pub(crate) fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The digest and size of what was written, and the inner writer.
    pub(crate) fn finish(self) -> (Digest, u64, W) {
        (self.hasher.finish(), self.written, self.inner)
    }
}

/// The error a [`HashingWriter`] gives when more than its limit is written.
pub(crate) const OVER_LIMIT: &str = "more bytes than the descriptor's size";

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(limit) = self.limit {
            if self.written + buf.len() as u64 > limit {
                return Err(io::Error::new(io::ErrorKind::InvalidData, OVER_LIMIT));
            }
        }
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_empty_is_the_known_value() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parse_accepts_sha256_only() {
        let d = Digest::of(b"x");
        assert_eq!(Digest::parse(&d.to_string()), Ok(d));
        assert!(Digest::parse("sha512:abcd").unwrap_err().contains("sha512"));
        assert!(Digest::parse("sha256:ABC").is_err());
        assert!(Digest::parse("nothing").is_err());
    }

    #[test]
    fn hashing_writer_hashes_and_limits() {
        let mut w = HashingWriter::new(Vec::new(), Some(3));
        w.write_all(b"abc").unwrap();
        assert!(w.write_all(b"d").is_err());
        let (digest, n, inner) = w.finish();
        assert_eq!((digest, n, inner), (Digest::of(b"abc"), 3, b"abc".to_vec()));
    }
}
