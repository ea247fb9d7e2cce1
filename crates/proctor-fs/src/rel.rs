//! Relative paths looked at as bytes, at the speed of a memory scan. A path an agent made may
//! hold 10,000 components; code that visits each component of every path it is given walks such
//! a tree in quadratic time, so the checks made per path here never do.

use std::borrow::Cow;

/// Whether `rel` names something beneath its folder: not absolute, and no `..` component.
pub fn stays_beneath(rel: &[u8]) -> bool {
    if rel.first() == Some(&b'/') {
        return false;
    }
    // A `..` component is `..` at the start or after a `/`, and at the end or before a `/`.
    // (A match cannot start inside one that began a byte earlier: that byte would be a `/`.)
    memchr::memmem::find_iter(rel, b"..").all(|i| {
        let starts = i == 0 || rel[i - 1] == b'/';
        let ends = rel.get(i + 2).is_none_or(|&b| b == b'/');
        !(starts && ends)
    })
}

/// Whether `rel` names at least one entry: a component other than `.` (and other than the empty
/// ones of a doubled, leading or trailing `/`). Quick for any path whose first component is a
/// name.
pub fn has_name(rel: &[u8]) -> bool {
    rel.split(|&b| b == b'/')
        .any(|name| !name.is_empty() && name != b".")
}

/// `rel` as bytes with no `.` component and no empty one (no doubled, leading or trailing `/`);
/// `None` if it leads out (absolute, or a `..` component). Borrowed when `rel` is in that form
/// already, as every path proctor makes is.
pub fn normal(rel: &[u8]) -> Option<Cow<'_, [u8]>> {
    if !stays_beneath(rel) {
        return None;
    }
    if is_normal(rel) {
        return Some(Cow::Borrowed(rel));
    }
    let mut out: Vec<u8> = Vec::with_capacity(rel.len());
    for name in rel.split(|&b| b == b'/') {
        if name.is_empty() || name == b"." {
            continue;
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(name);
    }
    Some(Cow::Owned(out))
}

/// The order of two normal relative paths ([`normal`]) component by component, as `Path`'s
/// own: a folder before what it holds, `a/b` before `a-b`. The first difference is found by
/// comparing blocks of bytes, so two paths 20 KB long that differ near their ends compare at
/// the speed of `memcmp` (`Path`'s comparison goes byte by byte).
pub fn cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let mut start = 0;
    while start + BLOCK <= n && a[start..start + BLOCK] == b[start..start + BLOCK] {
        start += BLOCK;
    }
    let first_difference = a[start..n]
        .iter()
        .zip(&b[start..n])
        .position(|(x, y)| x != y)
        .map(|i| start + i);
    // `/` sorts before every other byte: a name ends before a longer one that starts with it.
    let rank = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    match first_difference {
        Some(i) => rank(a[i]).cmp(&rank(b[i])),
        None => a.len().cmp(&b.len()),
    }
}

/// [`cmp`] of two paths.
pub fn cmp_paths(a: &std::path::Path, b: &std::path::Path) -> std::cmp::Ordering {
    use std::os::unix::ffi::OsStrExt;
    cmp(a.as_os_str().as_bytes(), b.as_os_str().as_bytes())
}

/// Whether `rel` (which stays beneath) has no `.` component and no empty one.
fn is_normal(rel: &[u8]) -> bool {
    if rel.is_empty() {
        return true;
    }
    if rel[0] == b'/' || rel[rel.len() - 1] == b'/' || rel == b"." || rel.starts_with(b"./") {
        return false;
    }
    if memchr::memmem::find(rel, b"//").is_some() {
        return false;
    }
    // A `.` component past the first: `/.` at the end or before a `/`.
    memchr::memmem::find_iter(rel, b"/.").all(|i| rel.get(i + 2).is_some_and(|&b| b != b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    /// What the slow way says, component by component, for comparison.
    fn by_components(rel: &[u8]) -> Option<Vec<u8>> {
        if rel.first() == Some(&b'/') {
            return None;
        }
        let mut names = Vec::new();
        for name in rel.split(|&b| b == b'/') {
            match name {
                b"" | b"." => {}
                b".." => return None,
                _ => names.push(name),
            }
        }
        Some(names.join(&b'/'))
    }

    #[test]
    fn every_form_of_a_path_reads_as_it_does_component_by_component() {
        let cases: &[&[u8]] = &[
            b"",
            b".",
            b"..",
            b"...",
            b"a",
            b"a/b",
            b"a/b/",
            b"/a",
            b"a//b",
            b"./a",
            b"a/.",
            b"a/./b",
            b"a/..",
            b"a/../b",
            b"../a",
            b"a/..b",
            b"a/b..",
            b"a/.../b",
            b"a/....",
            b".hidden/.git/x",
            b"a/./",
            b"x/a../..",
            b"x/.../../",
            b"d/d/d/d",
        ];
        for &rel in cases {
            let want = by_components(rel);
            let got = normal(rel).map(|c| c.into_owned());
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(rel));
            assert_eq!(
                stays_beneath(rel),
                want.is_some(),
                "{:?}",
                String::from_utf8_lossy(rel)
            );
            if let Some(w) = &want {
                assert_eq!(
                    has_name(rel),
                    !w.is_empty(),
                    "{:?}",
                    String::from_utf8_lossy(rel)
                );
            }
        }
    }

    #[test]
    fn paths_sort_as_path_sorts_them() {
        let long = "d/".repeat(200);
        let mut names: Vec<String> = [
            "a", "a/b", "a-b", "a.b", "a/b/c", "ab", "b", "a/", "a0", "a/-", "a//x", "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        names.extend([
            format!("{long}f"),
            format!("{long}d"),
            format!("{long}d/f"),
            format!("{long}e"),
            long.trim_end_matches('/').to_owned(),
        ]);
        let normal_of = |s: &String| normal(s.as_bytes()).unwrap().into_owned();
        for x in &names {
            for y in &names {
                let (x, y) = (normal_of(x), normal_of(y));
                let want = std::path::Path::new(std::ffi::OsStr::from_bytes(&x))
                    .cmp(std::path::Path::new(std::ffi::OsStr::from_bytes(&y)));
                assert_eq!(
                    cmp(&x, &y),
                    want,
                    "{:?} {:?}",
                    String::from_utf8_lossy(&x),
                    String::from_utf8_lossy(&y)
                );
            }
        }
    }

    #[test]
    fn a_path_already_normal_is_borrowed_and_a_deep_one_is_checked_in_one_scan() {
        let deep = "d/".repeat(10_000) + "bottom.txt";
        assert!(matches!(normal(deep.as_bytes()), Some(Cow::Borrowed(_))));
        let out = format!("{deep}/../../x");
        assert!(normal(out.as_bytes()).is_none());
        assert!(matches!(normal(b"a//b"), Some(Cow::Owned(_))));
    }
}
