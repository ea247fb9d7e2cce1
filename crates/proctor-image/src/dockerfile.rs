//! What a Dockerfile says without building it: whether it is only `FROM` with `WORKDIR` and
//! `ENV` (then the image is its base image, with a working folder and variables, and nothing
//! needs building), and which images its `FROM` lines name.

/// A Dockerfile that builds nothing: one `FROM` of a named image, then only `WORKDIR` and `ENV`
/// (with no variable in any of them). Running it is running `from` in `workdir` with `env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseImage {
    /// The image `FROM` names, as written.
    pub from: String,
    /// The last `WORKDIR`, made absolute as Docker does (relative ones join the one before);
    /// `None` without one.
    pub workdir: Option<String>,
    /// The variables `ENV` sets, in order (a later one of the same name wins).
    pub env: Vec<(String, String)>,
}

/// One instruction: its keyword in upper case and the rest of its (joined) line.
struct Instruction {
    keyword: String,
    rest: String,
}

/// The instructions of a Dockerfile, comments and blank lines left out, continued lines joined.
/// `None` when it declares another escape character (`# escape=`), which is not read here.
fn instructions(text: &str) -> Option<Vec<Instruction>> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut at_start = true;
    for line in text.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && trimmed.starts_with('#') {
            // Parser directives are comments at the very top: only `escape` changes the syntax.
            if at_start {
                let directive = trimmed.trim_start_matches('#').trim().to_ascii_lowercase();
                if directive.starts_with("escape") && directive.contains('=') {
                    return None;
                }
            }
            continue;
        }
        at_start = false;
        if trimmed.is_empty() {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let line = std::mem::take(&mut pending);
        let (keyword, rest) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            rest: rest.trim().to_string(),
        });
    }
    if !pending.trim().is_empty() {
        let (keyword, rest) = pending
            .trim()
            .split_once(char::is_whitespace)
            .unwrap_or((pending.trim(), ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            rest: rest.trim().to_string(),
        });
    }
    Some(out)
}

/// The Dockerfile `text` as its base image, when it is only `FROM IMAGE [AS NAME]` followed by
/// `WORKDIR` and `ENV` lines, with no variable (`$`), no flag (`--platform`) and no `scratch`;
/// `None` when anything in it needs a builder.
pub fn base_only(text: &str) -> Option<BaseImage> {
    let instructions = instructions(text)?;
    let (first, rest) = instructions.split_first()?;
    if first.keyword != "FROM" || first.rest.contains('$') || first.rest.starts_with("--") {
        return None;
    }
    let words: Vec<&str> = first.rest.split_whitespace().collect();
    let from = match words[..] {
        [image] => image,
        [image, as_kw, _] if as_kw.eq_ignore_ascii_case("as") => image,
        _ => return None,
    };
    if from.eq_ignore_ascii_case("scratch") {
        return None;
    }
    let mut workdir: Option<String> = None;
    let mut env: Vec<(String, String)> = Vec::new();
    for i in rest {
        if i.rest.contains('$') {
            return None;
        }
        match i.keyword.as_str() {
            "WORKDIR" => {
                let dir = unquote_one(&i.rest)?;
                if dir.is_empty() {
                    return None;
                }
                workdir = Some(if dir.starts_with('/') {
                    dir
                } else {
                    format!(
                        "{}/{dir}",
                        workdir.as_deref().unwrap_or("").trim_end_matches('/')
                    )
                });
            }
            "ENV" => {
                for (k, v) in env_pairs(&i.rest)? {
                    env.retain(|(old, _)| old != &k);
                    env.push((k, v));
                }
            }
            _ => return None,
        }
    }
    Some(BaseImage {
        from: from.to_string(),
        workdir,
        env,
    })
}

/// The images the `FROM` lines of `text` name (`scratch` and earlier stages left out), as
/// written; empty when it cannot be read.
pub fn from_images(text: &str) -> Vec<String> {
    let mut stages: Vec<String> = Vec::new();
    let mut out: Vec<String> = Vec::new();
    for i in instructions(text).unwrap_or_default() {
        if i.keyword != "FROM" {
            continue;
        }
        let words: Vec<&str> = i
            .rest
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
        let Some(image) = words.first() else { continue };
        if !image.eq_ignore_ascii_case("scratch")
            && !stages.iter().any(|s| s.eq_ignore_ascii_case(image))
            && !out.iter().any(|o| o == image)
        {
            out.push(image.to_string());
        }
        if let [_, as_kw, name] = words[..] {
            if as_kw.eq_ignore_ascii_case("as") {
                stages.push(name.to_string());
            }
        }
    }
    out
}

/// `text` with the image of every `FROM` line written in full, as Docker resolves it: a short
/// name on Docker Hub (`centos:7` → `docker.io/library/centos:7`, `org/app` →
/// `docker.io/org/app`), so that a builder's own short-name aliases (Debian's buildah sends
/// `centos` to quay.io) cannot send it elsewhere. Earlier stages, `scratch`, names with a `$`,
/// continued `FROM` lines and the bodies of heredocs are left as they are.
pub(crate) fn qualify_from(text: &str) -> String {
    let mut stages: Vec<String> = Vec::new();
    let mut heredoc: Option<String> = None;
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if let Some(end) = &heredoc {
            if body.trim() == end {
                heredoc = None;
            }
            out.push_str(line);
            continue;
        }
        heredoc = heredoc_end(body);
        out.push_str(&qualify_line(line, body, &mut stages));
    }
    out
}

/// The terminator of a heredoc that `line` opens (`<<EOF`, `<<-EOF`, `<<"EOF"`), if any.
fn heredoc_end(line: &str) -> Option<String> {
    let start = line.find("<<")? + 2;
    let rest = line[start..].trim_start_matches('-');
    let word: String = rest
        .trim_matches(|c| c == '"' || c == '\'')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// One line of a Dockerfile, its `FROM` image written in full (see [`qualify_from`]).
fn qualify_line(line: &str, body: &str, stages: &mut Vec<String>) -> String {
    let trimmed = body.trim_start();
    let is_from = trimmed.len() > 4
        && trimmed[..4].eq_ignore_ascii_case("FROM")
        && trimmed[4..].starts_with(char::is_whitespace);
    if !is_from || body.trim_end().ends_with('\\') {
        return line.to_string();
    }
    let words: Vec<&str> = trimmed[4..].split_whitespace().collect();
    let Some(position) = words.iter().position(|w| !w.starts_with("--")) else {
        return line.to_string();
    };
    let image = words[position];
    if let [as_kw, name] = words[position + 1..] {
        if as_kw.eq_ignore_ascii_case("as") {
            stages.push(name.to_ascii_lowercase());
        }
    }
    let keep = image.contains('$')
        || image.eq_ignore_ascii_case("scratch")
        || stages
            .iter()
            .take(
                stages
                    .len()
                    .saturating_sub(usize::from(words.len() > position + 1)),
            )
            .any(|s| s.eq_ignore_ascii_case(image));
    let full = docker_hub_name(image);
    if keep || full == image {
        return line.to_string();
    }
    let mut words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    words[position] = full;
    let indent = &body[..body.len() - trimmed.len()];
    let keyword = &trimmed[..4];
    let ending = &line[body.len()..];
    format!("{indent}{keyword} {}{ending}", words.join(" "))
}

/// `image` as Docker names it in full: a first component without `.` or `:` (and not
/// `localhost`) is a Docker Hub repository, `library/` for a single component.
pub(crate) fn docker_hub_name(image: &str) -> String {
    let first = image.split('/').next().unwrap_or(image);
    let has_registry =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_registry {
        image.to_string()
    } else if image.contains('/') {
        format!("docker.io/{image}")
    } else {
        format!("docker.io/library/{image}")
    }
}

/// The words of `text` as a POSIX shell splits them (`shlex`), quotes and their escapes taken
/// away; `None` when a quote is left open, or when a shell and Docker would read the text
/// differently: a word starting with `#` (a comment to a shell, a plain word to Docker) or a
/// separator other than a space or a tab.
fn words(text: &str) -> Option<Vec<String>> {
    if text.contains(|c: char| c.is_whitespace() && c != ' ' && c != '\t') {
        return None;
    }
    let words = shlex::split(text)?;
    let hashes = |s: &str| s.matches('#').count();
    // Every `#` of the text is in a word unless the shell took one as a comment.
    (words.iter().map(|w| hashes(w)).sum::<usize>() == hashes(text)).then_some(words)
}

/// One word (a `WORKDIR` path); `None` for more than one.
fn unquote_one(text: &str) -> Option<String> {
    match words(text)?.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// The pairs of an `ENV`: `KEY=VALUE ...`, or the older `KEY VALUE` (the rest of the line).
fn env_pairs(text: &str) -> Option<Vec<(String, String)>> {
    let first = text.split_whitespace().next()?;
    if !first.contains('=') {
        let (key, value) = text.split_once(char::is_whitespace)?;
        return Some(vec![(key.to_string(), value.trim().to_string())]);
    }
    words(text)?
        .into_iter()
        .map(|w| {
            w.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_or_an_odd_separator_in_env_needs_a_builder() {
        // Docker keeps `#x` as a word (and refuses it: no `=`); a shell would drop it as a
        // comment and make the line look simple.
        for text in [
            "FROM ubuntu\nENV A=1 #x\n",
            "FROM ubuntu\nENV A=1 \"#x\" #y\n",
            "FROM ubuntu\nWORKDIR /a\u{a0}b\n",
        ] {
            assert_eq!(base_only(text), None, "{text:?}");
        }
        // A `#` inside a word or in quotes is a plain character to both.
        let simple = base_only("FROM ubuntu\nENV A=\"x #y\" B=1#2 C='#'\n").expect("simple");
        let env: Vec<(&str, &str)> = simple
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(env, [("A", "x #y"), ("B", "1#2"), ("C", "#")]);
    }

    #[test]
    fn from_workdir_and_env_is_its_base_image() {
        let text = "# syntax=docker/dockerfile:1\nFROM python:3.13-slim-bookworm AS base\n\n# set up\nWORKDIR /app\nWORKDIR src\nENV A=1 B=\"two words\" \\\n    C='x y'\nENV OLD style value\nENV A=3\n";
        assert_eq!(
            base_only(text),
            Some(BaseImage {
                from: "python:3.13-slim-bookworm".into(),
                workdir: Some("/app/src".into()),
                env: vec![
                    ("B".into(), "two words".into()),
                    ("C".into(), "x y".into()),
                    ("OLD".into(), "style value".into()),
                    ("A".into(), "3".into()),
                ],
            })
        );
        assert_eq!(
            base_only("from ubuntu:24.04\n"),
            Some(BaseImage {
                from: "ubuntu:24.04".into(),
                workdir: None,
                env: vec![],
            })
        );
    }

    #[test]
    fn anything_that_needs_a_builder_is_not_a_base_image() {
        for text in [
            "FROM ubuntu:24.04\nRUN apt-get update\n",
            "FROM ubuntu:24.04\nCOPY . /app\n",
            "FROM scratch\n",
            "ARG V=24.04\nFROM ubuntu:$V\n",
            "FROM --platform=linux/amd64 ubuntu\n",
            "FROM ubuntu\nENV P=$PATH:/x\n",
            "FROM ubuntu\nWORKDIR $HOME\n",
            "FROM a AS b\nFROM b\n",
            "# escape=`\nFROM ubuntu\n",
            "FROM ubuntu\nENV A=\"open\n",
            "FROM ubuntu\nUSER 1000\n",
            "",
        ] {
            assert_eq!(base_only(text), None, "{text}");
        }
    }

    #[test]
    fn from_lines_are_written_in_full_as_docker_resolves_them() {
        let text = "# syntax=docker/dockerfile:1\nFROM centos:7 AS base\nRUN echo hi\nfrom --platform=linux/amd64 python:3.13-slim\nFROM base\nFROM org/app@sha256:abc AS other\nFROM ghcr.io/x/y:1\nFROM localhost/z\nFROM 127.0.0.1:5000/a/b\nFROM scratch\nFROM $BASE\nRUN cat > /Dockerfile <<EOF\nFROM inside:heredoc\nEOF\nFROM ubuntu\r\n";
        assert_eq!(
            qualify_from(text),
            "# syntax=docker/dockerfile:1\nFROM docker.io/library/centos:7 AS base\nRUN echo hi\nfrom --platform=linux/amd64 docker.io/library/python:3.13-slim\nFROM base\nFROM docker.io/org/app@sha256:abc AS other\nFROM ghcr.io/x/y:1\nFROM localhost/z\nFROM 127.0.0.1:5000/a/b\nFROM scratch\nFROM $BASE\nRUN cat > /Dockerfile <<EOF\nFROM inside:heredoc\nEOF\nFROM docker.io/library/ubuntu\r\n"
        );
    }

    #[test]
    fn from_images_skips_stages_and_scratch() {
        let text = "FROM --platform=linux/amd64 golang:1.22 AS build\nRUN go build\nFROM scratch\nFROM build AS again\nFROM debian:12\nCOPY --from=build /x /x\n";
        assert_eq!(from_images(text), vec!["golang:1.22", "debian:12"]);
    }
}
