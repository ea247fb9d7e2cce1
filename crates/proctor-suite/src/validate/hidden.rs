//! The hidden parts of a suite (`holdout/`, `answers/`, `mutations/`, `suite.toml`, the scripted
//! agents' files): no path the suite writes may hand one to the agent.

use super::paths::{suite_parts, Overlap};
use super::{commands::allowed_name, Validator};
use crate::problem::{Problem, ProblemKind};
use std::ops::Range;

/// The folders at the top of a suite that the agent must never see: `holdout/` (for checks
/// only), `answers/` (for people), `mutations/` (applied, never shown as patches).
const HIDDEN_FOLDERS: &[(&str, &str)] = &[
    ("holdout", "the holdout files, which only checks may see"),
    ("answers", "the answer sheets"),
    ("mutations", "the hidden mutations"),
];

/// A hidden part of the suite that a path meets: how, which part (as written in messages) and
/// what it holds. `overlap: None` is the suite folder itself, which holds every hidden part.
struct HiddenHit {
    overlap: Option<Overlap>,
    part: String,
    what: String,
}

impl HiddenHit {
    /// The end of the problem's message, after the path.
    fn describe(&self) -> String {
        match self.overlap {
            Some(o) => format!("{} `{}`, {}", o.verb(), self.part, self.what),
            None => "is the suite folder itself, which holds suite.toml and the hidden holdout/, answers/, mutations/ and agents/".to_string(),
        }
    }
}

impl Validator<'_> {
    /// Every suite path whose content the agent is given: the fixture, each variant's `files`
    /// sources and each `allow` path (a program the agent can read as well as run).
    pub(super) fn laid_paths(&self) -> Vec<String> {
        let f = &self.suite.file;
        let mut out = vec![f.fixture.get_ref().clone()];
        for v in &f.variants {
            out.extend(v.files.values().map(|src| src.get_ref().clone()));
        }
        let lists = std::iter::once(&f.defaults.allow)
            .chain(f.variants.iter().map(|v| &v.allow))
            .chain(f.tasks.iter().map(|t| &t.allow))
            .flatten();
        for list in lists {
            out.extend(
                list.iter()
                    .filter(|a| a.get_ref().contains('/'))
                    .map(|a| a.get_ref().clone()),
            );
        }
        out
    }

    /// The hidden part of the suite `path` meets, if any. Hidden from everything: `holdout/`,
    /// `answers/`, `mutations/` and `suite.toml`. Hidden from what the agent is given (`laid`):
    /// also `agents/` as a whole, every variant's `script` and `model_script` (the steps of
    /// scripted agents and the turns of scripted models, read by proctor and never laid into a
    /// workspace) and the simulated users' `persona` and `model_script`; a variant's own files
    /// elsewhere under `agents/` may be laid.
    fn hidden_hit(&self, path: &str, laid: bool) -> Option<HiddenHit> {
        let parts = suite_parts(path)?;
        if parts.is_empty() {
            return Some(HiddenHit {
                overlap: None,
                part: ".".to_string(),
                what: String::new(),
            });
        }
        let mut fixed: Vec<(Vec<&str>, String, String)> = HIDDEN_FOLDERS
            .iter()
            .map(|(name, what)| (vec![*name], format!("{name}/"), what.to_string()))
            .collect();
        fixed.push((
            vec!["suite.toml"],
            "suite.toml".to_string(),
            "the suite's rules".to_string(),
        ));
        for (hidden, part, what) in fixed {
            if let Some(overlap) = Overlap::of(&parts, &hidden) {
                return Some(HiddenHit {
                    overlap: Some(overlap),
                    part,
                    what,
                });
            }
        }
        if !laid {
            return None;
        }
        if parts == ["agents"] {
            return Some(HiddenHit {
                overlap: Some(Overlap::Is),
                part: "agents/".to_string(),
                what: "the folder of the scripted agents and model scripts".to_string(),
            });
        }
        for v in &self.suite.file.variants {
            for (key, value) in [("script", &v.script), ("model_script", &v.model_script)] {
                let Some(value) = value else {
                    continue;
                };
                let Some(hidden) = suite_parts(value.get_ref()).filter(|h| !h.is_empty()) else {
                    continue;
                };
                if let Some(overlap) = Overlap::of(&parts, &hidden) {
                    return Some(HiddenHit {
                        overlap: Some(overlap),
                        part: hidden.join("/"),
                        what: format!("the `{key}` of variant `{}`", v.id.get_ref()),
                    });
                }
            }
        }
        self.user_hit(&parts)
    }

    /// The simulated users' files `parts` meets, if any: a model-played user's `persona` and
    /// `model_script` are read by proctor and never laid into a workspace.
    fn user_hit(&self, parts: &[&str]) -> Option<HiddenHit> {
        for task in &self.suite.file.tasks {
            let Some(user) = &task.user else { continue };
            for (key, value) in [
                ("persona", &user.persona),
                ("model_script", &user.model_script),
            ] {
                let Some(hidden) = value
                    .as_ref()
                    .and_then(|v| suite_parts(v.get_ref()))
                    .filter(|h| !h.is_empty())
                else {
                    continue;
                };
                if let Some(overlap) = Overlap::of(parts, &hidden) {
                    return Some(HiddenHit {
                        overlap: Some(overlap),
                        part: hidden.join("/"),
                        what: format!("the user's `{key}` of task `{}`", task.id.get_ref()),
                    });
                }
            }
        }
        None
    }

    /// One problem for a path that meets a hidden part of the suite.
    fn hidden_problem(
        &self,
        span: Range<usize>,
        field: &str,
        path: &str,
        hit: &HiddenHit,
        help: String,
    ) -> Problem {
        self.at(
            ProblemKind::BadPath,
            span,
            format!("{field} `{path}` {}", hit.describe()),
        )
        .with_label("hidden from the agent")
        .with_help(help)
    }

    /// No path the suite writes may hand the agent (or an agent's script) a hidden part of the
    /// suite: the fixture, `files`, `allow` paths, `script`, `model_script` and services'
    /// programs are each checked against `holdout/`, `answers/`, `mutations/` and `suite.toml`,
    /// and what is laid into a workspace also against `agents/` and the scripted agents' files.
    pub(super) fn hidden_parts(&mut self) {
        let suite = self.suite;
        let f = &suite.file;
        let hidden_list =
            "holdout/, answers/, mutations/ and suite.toml are never shown to the agent";
        let fixture = f.fixture.get_ref();
        if let Some(hit) = self.hidden_hit(fixture, true) {
            let p = self.hidden_problem(
                f.fixture.span(),
                "the fixture",
                fixture,
                &hit,
                format!("keep the starting workspace in a folder of its own and point at it, such as `fixture = \"fixture\"`; {hidden_list}"),
            );
            self.out.push(p);
        }
        for v in &f.variants {
            for (dest, src) in &v.files {
                if let Some(hit) = self.hidden_hit(src.get_ref(), true) {
                    let p = self.hidden_problem(
                        src.span(),
                        &format!("`files` source (for `{dest}`)"),
                        src.get_ref(),
                        &hit,
                        format!("copy what the agent may see into a file of its own, such as \"files/{}/{dest}\", and point `files` at it; {hidden_list}, nor are scripted agents' files", v.id.get_ref()),
                    );
                    self.out.push(p);
                }
            }
            for (key, value) in [("script", &v.script), ("model_script", &v.model_script)] {
                let Some(value) = value else {
                    continue;
                };
                if let Some(hit) = self.hidden_hit(value.get_ref(), false) {
                    let p = self.hidden_problem(
                        value.span(),
                        &format!("`{key}`"),
                        value.get_ref(),
                        &hit,
                        format!("keep scripted agents and model scripts under agents/, such as `{key} = \"agents/{}\"`", v.id.get_ref()),
                    );
                    self.out.push(p);
                }
            }
        }
        let lists = std::iter::once(&f.defaults.allow)
            .chain(f.variants.iter().map(|v| &v.allow))
            .chain(f.tasks.iter().map(|t| &t.allow))
            .flatten();
        for list in lists {
            for a in list.iter().filter(|a| a.get_ref().contains('/')) {
                if let Some(hit) = self.hidden_hit(a.get_ref(), true) {
                    let name = allowed_name(a.get_ref());
                    let p = self.hidden_problem(
                        a.span(),
                        "the `allow` path",
                        a.get_ref(),
                        &hit,
                        format!("the agent can read every program it is allowed: put the program in a folder of its own, such as \"bin/{name}\", and allow that path; {hidden_list}"),
                    );
                    self.out.push(p);
                }
            }
        }
        for service in f.services.iter().filter(|s| !s.is_sidecar()) {
            let Some(prog) = service
                .command
                .get_ref()
                .first()
                .filter(|p| p.contains('/'))
            else {
                continue;
            };
            if let Some(hit) = self.hidden_hit(prog, true) {
                let name = allowed_name(prog);
                let p = self.hidden_problem(
                    service.command.span(),
                    &format!("the program of service `{}`", service.name.get_ref()),
                    prog,
                    &hit,
                    format!("put the service's program in a folder of its own, such as \"services/{name}\"; {hidden_list}"),
                );
                self.out.push(p);
            }
        }
    }
}
