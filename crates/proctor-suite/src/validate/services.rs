//! `[[services]]`: a program and probes a trial can start and reach.

use toml::Spanned;

use super::Validator;
use crate::problem::ProblemKind;

impl Validator<'_> {
    /// Each service: a program (inside the suite when it is a path), a `state` path inside the
    /// suite, and `http://` probes.
    pub(super) fn services(&mut self) {
        for service in &self.suite.file.services {
            let argv = service.command.get_ref();
            match argv.first() {
                None => {
                    let p = self.at(ProblemKind::InvalidValue, service.command.span(), "a service `command` is empty").with_label("empty argv").with_help("give the program and its arguments, e.g. [\"services/mock\", \"--port\", \"7070\"]");
                    self.out.push(p);
                }
                Some(prog) if prog.contains('/') => {
                    let spanned = Spanned::new(service.command.span(), prog.clone());
                    self.suite_path("command", &spanned, true);
                }
                Some(_) => {}
            }
            if let Some(state) = &service.state {
                self.suite_path("state", state, false);
            }
            for url in [
                service.ready.as_ref().map(|r| &r.http),
                service.guard.as_ref().map(|g| &g.http),
            ]
            .into_iter()
            .flatten()
            {
                if !url.get_ref().starts_with("http://") {
                    let p = self.at(ProblemKind::InvalidValue, url.span(), format!("`{}` is not an http:// URL", url.get_ref())).with_label("expected http://HOST:PORT/PATH").with_help("services are probed over plain HTTP inside the trial, e.g. \"http://127.0.0.1:7070/health\"");
                    self.out.push(p);
                }
            }
        }
    }
}
