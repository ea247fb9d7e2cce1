//! What a trial on the internet network may reach: which names its resolver answers and which
//! addresses its traffic may go to. Pure decisions, no I/O.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The rules of one trial's way out.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// `HOST` (that name) or `*.HOST` (any name below it); empty: every name.
    allowed_hosts: Vec<String>,
    /// The host's own addresses, never reachable.
    host_addrs: Vec<IpAddr>,
    /// With `allowed_hosts`: the addresses the resolver gave for an allowed name, with it.
    given: HashMap<IpAddr, String>,
}

impl Policy {
    /// The rules for `allowed_hosts` (as the suite spells them) on a host with `host_addrs`.
    pub(crate) fn new(allowed_hosts: &[String], host_addrs: Vec<IpAddr>) -> Policy {
        Policy {
            allowed_hosts: allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            host_addrs,
            given: HashMap::new(),
        }
    }

    /// Whether the resolver may answer `name`.
    pub(crate) fn name_allowed(&self, name: &str) -> bool {
        if self.allowed_hosts.is_empty() {
            return true;
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.allowed_hosts
            .iter()
            .any(|rule| match rule.strip_prefix("*.") {
                Some(suffix) => name
                    .strip_suffix(suffix)
                    .is_some_and(|head| head.ends_with('.') && head.len() > 1),
                None => *rule == name,
            })
    }

    /// Notes that the resolver answered `name` with `addr`, so that traffic to it is let out
    /// under an allow-list.
    pub(crate) fn give(&mut self, addr: IpAddr, name: &str) {
        self.given.insert(addr, name.to_owned());
    }

    /// The name an address was given for, if the resolver gave it.
    pub(crate) fn name_of(&self, addr: IpAddr) -> Option<&str> {
        self.given.get(&addr).map(String::as_str)
    }

    /// Whether `addr` is an address a trial may ever reach (public, not the host's); the
    /// reason when not. The allow-list is not asked.
    pub(crate) fn reachable(&self, addr: IpAddr) -> Result<(), &'static str> {
        let addr = canonical(addr);
        if self.host_addrs.iter().any(|h| canonical(*h) == addr) {
            return Err("an address of the host");
        }
        match not_public(addr) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Whether traffic to `addr` may go out; the reason when not.
    pub(crate) fn address(&self, addr: IpAddr) -> Result<(), &'static str> {
        self.reachable(addr)?;
        let addr = canonical(addr);
        if !self.allowed_hosts.is_empty() && !self.given.contains_key(&addr) {
            return Err("not an address the resolver gave for an allowed host");
        }
        Ok(())
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Why `addr` is not an address of the public internet, if it is not.
pub(crate) fn not_public(addr: IpAddr) -> Option<&'static str> {
    match canonical(addr) {
        IpAddr::V4(a) => not_public_v4(a),
        IpAddr::V6(a) => not_public_v6(a),
    }
}

fn not_public_v4(a: Ipv4Addr) -> Option<&'static str> {
    let [b0, b1, ..] = a.octets();
    if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_unspecified() || b0 == 0 {
        Some("an unspecified address")
    } else if a.is_private() || (b0 == 100 && (64..128).contains(&b1)) {
        Some("a private address")
    } else if a.is_link_local() {
        Some("a link-local address")
    } else if a.is_multicast() || a.is_broadcast() || b0 >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else {
        None
    }
}

fn not_public_v6(a: Ipv6Addr) -> Option<&'static str> {
    let first = a.segments()[0];
    if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_unspecified() {
        Some("an unspecified address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("a private address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if a.is_multicast() {
        Some("a multicast, broadcast or reserved address")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_name_without_an_allow_list() {
        let p = Policy::new(&[], vec![]);
        assert!(p.name_allowed("pypi.org"));
        assert!(p.address(ip("151.101.0.223")).is_ok());
    }

    #[test]
    fn an_allow_list_names_hosts_and_their_subdomains() {
        let p = Policy::new(&["pypi.org".into(), "*.pythonhosted.org".into()], vec![]);
        assert!(p.name_allowed("pypi.org"));
        assert!(p.name_allowed("PyPI.org."));
        assert!(!p.name_allowed("www.pypi.org"), "HOST is that name only");
        assert!(p.name_allowed("files.pythonhosted.org"));
        assert!(
            !p.name_allowed("pythonhosted.org"),
            "*.HOST is below it only"
        );
        assert!(!p.name_allowed("evilpythonhosted.org"));
        assert!(!p.name_allowed("example.com"));
    }

    #[test]
    fn under_an_allow_list_only_given_addresses_go_out() {
        let mut p = Policy::new(&["pypi.org".into()], vec![]);
        let a = ip("151.101.0.223");
        assert!(p.address(a).is_err(), "an address nobody looked up");
        p.give(a, "pypi.org");
        assert!(p.address(a).is_ok());
        assert_eq!(p.name_of(a), Some("pypi.org"));
    }

    #[test]
    fn the_host_and_private_ranges_are_never_reachable() {
        let mut p = Policy::new(&[], vec![ip("192.0.2.2"), ip("fd00::2")]);
        for a in [
            "127.0.0.1",
            "127.8.8.8",
            "0.0.0.0",
            "10.255.255.53",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.2",
            "::1",
            "::",
            "fd00::2",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:192.0.2.2",
        ] {
            assert!(p.address(ip(a)).is_err(), "{a} must be refused");
        }
        // Not even when the resolver gave it (a public name that points at the host).
        p.give(ip("127.0.0.1"), "localtest.me");
        assert!(p.address(ip("127.0.0.1")).is_err());
        for a in [
            "192.0.2.1",
            "151.101.0.223",
            "2a04:4e42::223",
            "100.128.0.1",
        ] {
            assert!(p.address(ip(a)).is_ok(), "{a} is public");
        }
    }
}
