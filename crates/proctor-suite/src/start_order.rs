//! The order a trial's services start in: each after the services its `depends_on` names.

use crate::model::Service;

/// `services` in start order: repeatedly the first one written whose dependencies have all
/// started. A dependency that is not among them is ignored, and services caught in a cycle
/// keep their written order after the rest (`validate` refuses both).
pub fn start_order<'a>(services: impl IntoIterator<Item = &'a Service>) -> Vec<&'a Service> {
    let mut left: Vec<&Service> = services.into_iter().collect();
    let names: Vec<&str> = left.iter().map(|s| s.name.get_ref().as_str()).collect();
    let mut out: Vec<&Service> = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let started = |dep: &str| out.iter().any(|s| s.name.get_ref() == dep);
        let next = left.iter().position(|s| {
            s.depends_on
                .iter()
                .all(|d| started(d.get_ref()) || !names.contains(&d.get_ref().as_str()))
        });
        match next {
            Some(i) => out.push(left.remove(i)),
            None => out.append(&mut left),
        }
    }
    out
}

/// The first cycle among `services`' `depends_on`, as the names around it (the first repeated
/// at the end), if there is one.
pub fn cycle<'a>(services: &[&'a Service]) -> Option<Vec<&'a str>> {
    let deps = |name: &str| -> Vec<&'a str> {
        services
            .iter()
            .find(|s| s.name.get_ref() == name)
            .map(|s| s.depends_on.iter().map(|d| d.get_ref().as_str()).collect())
            .unwrap_or_default()
    };
    for start in services {
        let mut path: Vec<&'a str> = vec![start.name.get_ref().as_str()];
        if let Some(c) = walk(&deps, &mut path) {
            return Some(c);
        }
    }
    None
}

/// Depth-first from the last name of `path`: the cycle back to a name on it, if any.
fn walk<'a>(deps: &dyn Fn(&str) -> Vec<&'a str>, path: &mut Vec<&'a str>) -> Option<Vec<&'a str>> {
    let last = *path.last()?;
    for d in deps(last) {
        if let Some(at) = path.iter().position(|p| *p == d) {
            let mut c = path[at..].to_vec();
            c.push(d);
            return Some(c);
        }
        if path.len() > 64 {
            return None;
        }
        path.push(d);
        let found = walk(deps, path);
        path.pop();
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, deps: &[&str]) -> Service {
        let deps: Vec<String> = deps.iter().map(|d| format!("{d:?}")).collect();
        toml::from_str(&format!(
            "name = {name:?}\nimage = \"busybox\"\ndepends_on = [{}]\n",
            deps.join(", ")
        ))
        .expect("a service")
    }

    fn names(v: &[&Service]) -> Vec<String> {
        v.iter().map(|s| s.name.get_ref().clone()).collect()
    }

    #[test]
    fn each_service_starts_after_what_it_depends_on_else_in_written_order() {
        let s = [
            service("app", &["db", "cache"]),
            service("db", &[]),
            service("cache", &["db"]),
            service("other", &[]),
        ];
        assert_eq!(names(&start_order(&s)), ["db", "cache", "app", "other"]);
        let missing = [service("a", &["nowhere"]), service("b", &[])];
        assert_eq!(names(&start_order(&missing)), ["a", "b"]);
        assert_eq!(cycle(&s.iter().collect::<Vec<_>>()), None);
    }

    #[test]
    fn a_cycle_is_named_and_keeps_its_written_order_last() {
        let s = [
            service("a", &["b"]),
            service("b", &["c"]),
            service("c", &["a"]),
            service("d", &[]),
        ];
        assert_eq!(names(&start_order(&s)), ["d", "a", "b", "c"]);
        assert_eq!(
            cycle(&s.iter().collect::<Vec<_>>()),
            Some(vec!["a", "b", "c", "a"])
        );
    }
}
