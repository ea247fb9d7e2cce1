//! Git binary patches (`git diff --binary`): a file's new content as a `literal` (deflated) or
//! a `delta` against its old content, base85-encoded line by line. A binary patch applies only
//! to the exact old content its `index OLD..NEW` line names (git blob ids, abbreviated or whole),
//! and its result must be the content NEW names: the same "applies cleanly" a text hunk has.

use std::io::Read;

use sha1::{Digest, Sha1};

/// The forward half of a `GIT binary patch` block, with the blob ids it goes between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryPatch {
    /// The old content's blob id (hex, maybe abbreviated); all zeros for a new file.
    pub old_id: String,
    /// The new content's blob id (hex, maybe abbreviated); all zeros for a deletion.
    pub new_id: String,
    /// How the new content is made.
    pub data: BinaryData,
}

/// A binary hunk's payload, inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinaryData {
    /// The new content, whole.
    Literal(Vec<u8>),
    /// A git delta from the old content to the new.
    Delta(Vec<u8>),
}

/// Why a binary patch cannot be read or applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinaryError {
    /// A line of base85 data is malformed.
    #[error("a line of the binary data is not git's base85: {0}")]
    Base85(String),
    /// The data does not inflate, or inflates to another size than stated.
    #[error("the binary data does not inflate to the {0} bytes stated")]
    Inflate(usize),
    /// The delta is malformed or does not fit the old content.
    #[error("the binary delta does not apply: {0}")]
    Delta(String),
}

/// Git's base85 alphabet.
const ALPHABET: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/// Decodes one line of git's base85 data: a length character (`A`-`Z` 1-26 bytes, `a`-`z`
/// 27-52), then groups of five characters, four bytes each.
pub fn decode_line(line: &str) -> Result<Vec<u8>, BinaryError> {
    let bad = || BinaryError::Base85(line.chars().take(40).collect());
    let bytes = line.as_bytes();
    let (&first, rest) = bytes.split_first().ok_or_else(bad)?;
    let len = match first {
        b'A'..=b'Z' => (first - b'A' + 1) as usize,
        b'a'..=b'z' => (first - b'a' + 27) as usize,
        _ => return Err(bad()),
    };
    if rest.len() != len.div_ceil(4) * 5 {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(len.div_ceil(4) * 4);
    for group in rest.chunks(5) {
        let mut acc: u64 = 0;
        for &c in group {
            let v = ALPHABET.iter().position(|&a| a == c).ok_or_else(bad)?;
            acc = acc * 85 + v as u64;
        }
        let word = u32::try_from(acc).map_err(|_| bad())?;
        out.extend_from_slice(&word.to_be_bytes());
    }
    out.truncate(len);
    Ok(out)
}

/// Inflates a hunk's deflated data, which must come to `size` bytes.
pub fn inflate(deflated: &[u8], size: usize) -> Result<Vec<u8>, BinaryError> {
    let mut out = Vec::with_capacity(size.min(1 << 26));
    flate2::read::ZlibDecoder::new(deflated)
        .take(size as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| BinaryError::Inflate(size))?;
    if out.len() != size {
        return Err(BinaryError::Inflate(size));
    }
    Ok(out)
}

/// Applies a git delta to `base`.
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, BinaryError> {
    let err = |m: &str| BinaryError::Delta(m.to_string());
    let mut at = 0usize;
    let varint = |at: &mut usize| -> Result<usize, BinaryError> {
        let (mut v, mut shift) = (0usize, 0u32);
        loop {
            let b = *delta.get(*at).ok_or_else(|| err("it ends in its header"))?;
            *at += 1;
            v |= ((b & 0x7f) as usize)
                .checked_shl(shift)
                .ok_or_else(|| err("a size too large"))?;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(err("a size too large"));
            }
        }
    };
    let src_size = varint(&mut at)?;
    let dst_size = varint(&mut at)?;
    if src_size != base.len() {
        return Err(BinaryError::Delta(format!(
            "it is made for a file of {src_size} bytes; this one has {}",
            base.len()
        )));
    }
    let mut out = Vec::with_capacity(dst_size.min(1 << 26));
    while at < delta.len() {
        let cmd = delta[at];
        at += 1;
        if cmd & 0x80 != 0 {
            let mut field = |bits: &[(u8, u32)]| -> Result<usize, BinaryError> {
                let mut v = 0usize;
                for &(bit, shift) in bits {
                    if cmd & bit != 0 {
                        let b = *delta
                            .get(at)
                            .ok_or_else(|| err("a copy runs past its end"))?;
                        at += 1;
                        v |= (b as usize) << shift;
                    }
                }
                Ok(v)
            };
            let offset = field(&[(0x01, 0), (0x02, 8), (0x04, 16), (0x08, 24)])?;
            let mut size = field(&[(0x10, 0), (0x20, 8), (0x40, 16)])?;
            if size == 0 {
                size = 0x10000;
            }
            let piece = offset
                .checked_add(size)
                .and_then(|end| base.get(offset..end))
                .ok_or_else(|| err("a copy reaches past the old content"))?;
            out.extend_from_slice(piece);
        } else if cmd != 0 {
            let piece = delta
                .get(at..at + cmd as usize)
                .ok_or_else(|| err("an insert runs past its end"))?;
            out.extend_from_slice(piece);
            at += cmd as usize;
        } else {
            return Err(err("a zero command"));
        }
        if out.len() > dst_size {
            return Err(err("it makes more than the size it states"));
        }
    }
    if out.len() != dst_size {
        return Err(err("it makes another size than it states"));
    }
    Ok(out)
}

/// The git blob id of `content` (hex SHA-1 of `blob LEN\0CONTENT`).
pub fn blob_id(content: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
}

/// Whether `id` (hex, abbreviated or whole) names `content`'s blob.
pub fn names(id: &str, content: &[u8]) -> bool {
    !id.is_empty() && blob_id(content).starts_with(&id.to_ascii_lowercase())
}

/// Whether `id` is the all-zero id git writes for "no file".
pub fn is_null(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b == b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base85_lines_decode_as_git_writes_them() {
        // `git diff --binary` of an empty file: `literal 0` / `HcmV?d00001` (zlib of nothing).
        let bytes = decode_line("HcmV?d00001").unwrap();
        assert_eq!(bytes.len(), 8);
        assert_eq!(inflate(&bytes, 0).unwrap(), b"");
        assert!(decode_line("Hcm").is_err(), "too short for its length");
        assert!(decode_line("").is_err());
    }

    #[test]
    fn a_delta_copies_and_inserts_and_checks_its_base() {
        let base = b"hello world";
        // src 11, dst 9: copy 5 bytes from 0, insert "!!!!".
        let delta = [11, 9, 0x80 | 0x10, 5, 4, b'!', b'!', b'!', b'!'];
        assert_eq!(apply_delta(base, &delta).unwrap(), b"hello!!!!");
        // The wrong base is refused, not patched into garbage.
        assert!(apply_delta(b"hello", &delta).is_err());
        // A copy past the base's end is refused.
        assert!(apply_delta(base, &[11, 5, 0x80 | 0x01 | 0x10, 20, 5]).is_err());
    }

    #[test]
    fn blob_ids_are_git_s() {
        // `git hash-object /dev/null`.
        assert_eq!(blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert!(names("e69de29", b""));
        assert!(!names("e69de28", b""));
        assert!(is_null("0000000") && !is_null("e69de29"));
    }
}
