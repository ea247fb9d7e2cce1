//! A trial's model evidence on disk: `model.jsonl` (one line per request) and the request and
//! response bodies as `model/NNNN.{request,response}.{json,sse}.gz`, with every credential
//! removed.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use flate2::write::GzEncoder;
use flate2::Compression;

/// What a removed credential is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Removes secrets (the real key, the trial's token) from anything about to be recorded.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor for these secrets (empty ones are ignored).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        Redactor {
            secrets: secrets
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.as_bytes().to_vec())
                .collect(),
        }
    }

    /// `bytes` with every occurrence of every secret replaced by [`REDACTED`].
    pub fn redact<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        let mut out = Cow::Borrowed(bytes);
        for secret in &self.secrets {
            if let Some(replaced) = replace_all(&out, secret, REDACTED.as_bytes()) {
                out = Cow::Owned(replaced);
            }
        }
        out
    }

    /// A string with every secret replaced.
    pub fn redact_str(&self, s: &str) -> String {
        String::from_utf8_lossy(&self.redact(s.as_bytes())).into_owned()
    }
}

fn replace_all(hay: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let first = find(hay, needle)?;
    let mut out = Vec::with_capacity(hay.len());
    out.extend_from_slice(&hay[..first]);
    out.extend_from_slice(with);
    let mut rest = &hay[first + needle.len()..];
    while let Some(i) = find(rest, needle) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(with);
        rest = &rest[i + needle.len()..];
    }
    out.extend_from_slice(rest);
    Some(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A trial's evidence folder.
#[derive(Debug)]
pub(crate) struct EvidenceDir {
    root: PathBuf,
    lines: Mutex<()>,
}

impl EvidenceDir {
    /// Creates `root/model/` (and `root`).
    pub fn create(root: &Path) -> std::io::Result<EvidenceDir> {
        std::fs::create_dir_all(root.join("model"))?;
        Ok(EvidenceDir {
            root: root.to_path_buf(),
            lines: Mutex::new(()),
        })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes one body, gzip-compressed, as `model/NNNN.{which}.{ext}.gz`; gives its path
    /// relative to the folder. The caller has already redacted it.
    pub fn write_body(
        &self,
        seq: u64,
        which: &str,
        ext: &str,
        bytes: &[u8],
    ) -> std::io::Result<String> {
        let relative = format!("model/{seq:04}.{which}.{ext}.gz");
        let file = std::fs::File::create(self.root.join(&relative))?;
        let mut gz = GzEncoder::new(std::io::BufWriter::new(file), Compression::default());
        gz.write_all(bytes)?;
        gz.finish()?.flush()?;
        Ok(relative)
    }

    /// Appends one line (a newline is added) to `model.jsonl`.
    pub fn append_line(&self, line: &[u8]) -> std::io::Result<()> {
        let _guard = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("model.jsonl"))?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        file.write_all(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn every_secret_is_replaced_everywhere() {
        let r = Redactor::new(["sk-real", "tok", ""]);
        assert_eq!(
            r.redact(b"a sk-real b sk-realsk-real tok").as_ref(),
            b"a [REDACTED] b [REDACTED][REDACTED] [REDACTED]"
        );
        assert!(matches!(r.redact(b"nothing here"), Cow::Borrowed(_)));
        assert_eq!(r.redact_str("sk-rea"), "sk-rea");
        assert_eq!(Redactor::default().redact(b"x").as_ref(), b"x");
        assert_eq!(format!("{r:?}"), "Redactor(2 secrets)");
    }

    #[test]
    fn bodies_are_gzipped_and_lines_appended() {
        let dir = tempfile::tempdir().unwrap();
        let ev = EvidenceDir::create(&dir.path().join("t")).unwrap();
        let rel = ev.write_body(7, "request", "json", b"{\"a\":1}").unwrap();
        assert_eq!(rel, "model/0007.request.json.gz");
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(ev.root().join(&rel)).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "{\"a\":1}");
        ev.append_line(b"{}").unwrap();
        ev.append_line(b"{\"b\":2}").unwrap();
        let lines = std::fs::read_to_string(ev.root().join("model.jsonl")).unwrap();
        assert_eq!(lines, "{}\n{\"b\":2}\n");
    }
}
