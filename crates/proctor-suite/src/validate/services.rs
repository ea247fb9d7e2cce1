//! `[[services]]` and `[[tasks.services]]`: a program and probes a trial can start and reach,
//! or a sidecar container (a service with an `image`).

use toml::Spanned;

use super::Validator;
use crate::model::{Network, Service, Task};
use crate::problem::ProblemKind;

impl Validator<'_> {
    /// Each service: a program (inside the suite when it is a path), a `state` path inside the
    /// suite, and `http://` probes; a sidecar's image, in a task that runs in an image; and per
    /// task, names unique among the suite's and the task's, `depends_on` naming them, no cycle.
    pub(super) fn services(&mut self) {
        let suite = self.suite;
        for service in &suite.file.services {
            self.service(service, None);
        }
        for task in &suite.file.tasks {
            for service in &task.services {
                self.service(service, Some(task));
                self.task_service_name(task, service);
            }
            self.depends_on(task);
        }
    }

    /// One service, the suite's (`task` is `None`) or a task's.
    fn service(&mut self, service: &Service, task: Option<&Task>) {
        let argv = service.command.get_ref();
        match argv.first() {
            None if service.is_sidecar() => {}
            None => {
                let p = self.at(ProblemKind::InvalidValue, service.name.span(), "this service has no `command`").with_label("no argv").with_help("give the program and its arguments, e.g. command = [\"services/mock\", \"--port\", \"7070\"], or an `image` to run as a sidecar container");
                self.out.push(p);
            }
            // A sidecar's program is inside its image.
            Some(prog) if prog.contains('/') && !service.is_sidecar() => {
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
        if let Some(h) = &service.healthcheck {
            if h.command.get_ref().is_empty() {
                let p = self.at(ProblemKind::InvalidValue, h.command.span(), "a healthcheck `command` is empty").with_label("empty argv").with_help("give the command that exits 0 once the service is up, e.g. [\"sh\", \"-c\", \"wget -q -O- http://127.0.0.1:8080/\"]");
                self.out.push(p);
            }
        }
        self.sidecar(service, task);
    }

    /// A sidecar's `image`, `workdir`, and the image its tasks must run in.
    fn sidecar(&mut self, service: &Service, task: Option<&Task>) {
        let Some(image) = &service.image else {
            if let Some(w) = &service.workdir {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        w.span(),
                        "`workdir` is for a service with an `image`",
                    )
                    .with_label("no image")
                    .with_help("remove it, or give the service an `image`");
                self.out.push(p);
            }
            return;
        };
        if image.get_ref().trim().is_empty() {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    image.span(),
                    "a service's `image` is empty",
                )
                .with_label("empty")
                .with_help("name an image, e.g. \"redis:7\" or \"oci-archive:images/db.tar\"");
            self.out.push(p);
        }
        if let Some(w) = service
            .workdir
            .as_ref()
            .filter(|w| !w.get_ref().starts_with('/'))
        {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    w.span(),
                    format!("`{}` is not an absolute path", w.get_ref()),
                )
                .with_label("expected /PATH")
                .with_help("give the folder inside the image, e.g. \"/srv\"");
            self.out.push(p);
        }
        let suite = self.suite;
        let tasks: Vec<&Task> = match task {
            Some(t) => vec![t],
            None => suite.file.tasks.iter().collect(),
        };
        let d = &suite.file.defaults;
        if let Some(t) = tasks
            .iter()
            .find(|t| t.network.or(d.network) == Some(Network::Host))
        {
            let p = self.at(ProblemKind::InvalidValue, image.span(), format!("task `{}` runs on the host's network (network = \"host\"), where service `{}` would listen on the host's ports beside every other trial's", t.id.get_ref(), service.name.get_ref())).with_label("needs the trial's own network").with_help("give the task network = \"none\", \"loopback\" or \"internet\": its sidecars then share the trial's own network, reached by name");
            self.out.push(p);
        }
        if let Some(t) = tasks.iter().find(|t| suite.environment(t).is_none()) {
            let p = self.at(ProblemKind::InvalidValue, image.span(), format!("task `{}` does not run in an image, so service `{}` cannot run beside it as a sidecar container", t.id.get_ref(), service.name.get_ref())).with_label("needs an image for the task").with_help("give the task an image ([environment] image or [tasks.environment] image), or run the service in the trial's root (no `image`)");
            self.out.push(p);
        }
    }

    /// A task's service must not take a name the suite's services or another of the task's
    /// have.
    fn task_service_name(&mut self, task: &Task, service: &Service) {
        let name = service.name.get_ref();
        let suite_has = self
            .suite
            .file
            .services
            .iter()
            .any(|s| s.name.get_ref() == name);
        let first = task.services.iter().find(|s| s.name.get_ref() == name);
        let twice = first.is_some_and(|f| f.name.span() != service.name.span());
        self.id("service", &service.name);
        if suite_has || twice {
            let p = self
                .at(
                    ProblemKind::DuplicateId,
                    service.name.span(),
                    format!(
                        "two services of task `{}` have the name `{name}`",
                        task.id.get_ref()
                    ),
                )
                .with_label(if suite_has {
                    "the suite's [[services]] has it too"
                } else {
                    "already used in this task"
                })
                .with_help(
                    "give each service its own name (the main container reaches it by that name)",
                );
            self.out.push(p);
        }
    }

    /// Every `depends_on` of a task's trial names one of its services, and none is a cycle.
    fn depends_on(&mut self, task: &Task) {
        let suite = self.suite;
        let all = suite.services(task);
        for service in &all {
            for dep in &service.depends_on {
                if !all.iter().any(|s| s.name.get_ref() == dep.get_ref()) {
                    let known: Vec<&str> = all.iter().map(|s| s.name.get_ref().as_str()).collect();
                    let p = self
                        .at(
                            ProblemKind::UnknownReference,
                            dep.span(),
                            format!(
                                "no service `{}` in task `{}`'s trials",
                                dep.get_ref(),
                                task.id.get_ref()
                            ),
                        )
                        .with_label("unknown service")
                        .with_help(format!("name one of: {}", known.join(", ")));
                    self.out.push(p);
                }
            }
        }
        if let Some(c) = crate::start_order::cycle(&all) {
            let first = all
                .iter()
                .find(|s| s.name.get_ref() == c[0])
                .map(|s| s.name.span())
                .unwrap_or(0..0);
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    first,
                    format!(
                        "the services of task `{}` depend on each other in a cycle: {}",
                        task.id.get_ref(),
                        c.join(" -> ")
                    ),
                )
                .with_label("cycle")
                .with_help("remove one `depends_on` of the cycle");
            self.out.push(p);
        }
    }
}
