//! Names that may not be UTF-8, recorded exactly: a record keeps a name's lossy text for
//! reading and, when the name is not UTF-8, its exact bytes in lower-case hex beside it (a
//! trial's `path_hex`, a call's `argv_hex`, a kept suite's `path_hex`), so that two names that
//! decode alike stay two.

use std::borrow::Cow;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// `bytes` in lower-case hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes that [`hex`] wrote as `text`; `None` when `text` is not such hex.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The exact bytes of `path` in hex when it is not UTF-8; `None` when its text says it all.
pub fn hex_of(path: &Path) -> Option<String> {
    path.to_str()
        .is_none()
        .then(|| hex(path.as_os_str().as_bytes()))
}

/// The path a record names: its exact bytes from `exact_hex` when there are any, else `text`.
pub fn exact_path<'a>(text: &'a str, exact_hex: Option<&str>) -> Cow<'a, Path> {
    match exact_hex.and_then(from_hex) {
        Some(bytes) => Cow::Owned(OsString::from_vec(bytes).into()),
        None => Cow::Borrowed(Path::new(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_not_utf8_round_trips_through_hex_and_one_that_is_needs_none() {
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"a\xffb"));
        let h = hex_of(odd).expect("not UTF-8");
        assert_eq!(h, "61ff62");
        assert_eq!(exact_path("a\u{FFFD}b", Some(&h)), odd);
        assert_eq!(hex_of(Path::new("plain.txt")), None);
        assert_eq!(exact_path("plain.txt", None), Path::new("plain.txt"));
        assert_eq!(from_hex("6"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(hex(b""), "");
    }
}
