//! The trial's resolver: answers the DNS queries a trial sends to `127.0.0.53` (its
//! `/etc/resolv.conf`) from the host's own resolver, for the names the [`Policy`] allows, with
//! only the addresses the trial may reach. IPv4 only, as the trial's network is.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

/// Where the trial's resolver listens, inside the trial's network namespace.
pub(crate) const RESOLVER_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 53);

/// The `/etc/resolv.conf` a trial on the internet network sees.
pub(crate) const RESOLV_CONF: &str = "nameserver 127.0.0.53\noptions edns0\n";

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;
const RCODE_NXDOMAIN: u8 = 3;
const RCODE_NOTIMP: u8 = 4;
const RCODE_FORMERR: u8 = 1;
const RCODE_SERVFAIL: u8 = 2;

/// One question of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// The name asked, lower-case, without the final dot.
    pub(crate) name: String,
    /// The record type.
    pub(crate) qtype: u16,
    /// The class.
    pub(crate) qclass: u16,
    /// Where the question's bytes end in the query.
    end: usize,
}

/// The one question of a query, or why it has none to answer.
pub(crate) fn parse_query(q: &[u8]) -> Result<Question, u8> {
    if q.len() < 12 {
        return Err(RCODE_FORMERR);
    }
    let is_query = q[2] & 0x80 == 0;
    let opcode = (q[2] >> 3) & 0x0f;
    let qdcount = u16::from_be_bytes([q[4], q[5]]);
    if !is_query || qdcount != 1 {
        return Err(RCODE_FORMERR);
    }
    if opcode != 0 {
        return Err(RCODE_NOTIMP);
    }
    let mut at = 12;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*q.get(at).ok_or(RCODE_FORMERR)?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return Err(RCODE_FORMERR); // compression in a question, or a bad length
        }
        let label = q.get(at..at + len).ok_or(RCODE_FORMERR)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
    }
    let fixed = q.get(at..at + 4).ok_or(RCODE_FORMERR)?;
    Ok(Question {
        name: labels.join("."),
        qtype: u16::from_be_bytes([fixed[0], fixed[1]]),
        qclass: u16::from_be_bytes([fixed[2], fixed[3]]),
        end: at + 4,
    })
}

/// The answer to query `q` (whose question is `question`): `rcode`, and an A record for each of
/// `addrs`.
pub(crate) fn answer(q: &[u8], question: &Question, rcode: u8, addrs: &[Ipv4Addr]) -> Vec<u8> {
    let mut out = Vec::with_capacity(question.end + addrs.len() * 16);
    out.extend_from_slice(&q[..2]); // id
                                    // QR, the query's opcode and RD, RA; the rcode.
    out.push(0x80 | (q[2] & 0x79));
    out.push(0x80 | (rcode & 0x0f));
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]); // no authority, no additional records
    out.extend_from_slice(&q[12..question.end]);
    for a in addrs {
        out.extend_from_slice(&[0xc0, 12]); // the question's name
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&60u32.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&a.octets());
    }
    out
}

/// A bare error answer (for a query without a question to echo).
pub(crate) fn error_answer(q: &[u8], rcode: u8) -> Option<Vec<u8>> {
    let head = q.get(..4)?;
    let mut out = head.to_vec();
    out[2] = 0x80 | (q[2] & 0x79);
    out[3] = 0x80 | (rcode & 0x0f);
    out.extend_from_slice(&[0; 8]);
    Some(out)
}

/// What the resolver decided for one question.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Answer with these addresses (none: the name exists, no record of this type).
    Answer(Vec<Ipv4Addr>),
    /// The name is not answered, and why (recorded as a refusal).
    Refuse(&'static str),
    /// The host's resolver failed for it (recorded as nothing: not the trial's doing).
    Fail,
}

/// Resolves `question` through the host's resolver, keeping only the addresses `reachable`
/// lets out.
pub(crate) fn resolve(
    question: &Question,
    allowed: bool,
    reachable: impl Fn(IpAddr) -> bool,
) -> Decision {
    if !allowed {
        return Decision::Refuse("not an allowed host");
    }
    if question.qclass != CLASS_IN || question.name.is_empty() {
        return Decision::Answer(Vec::new());
    }
    let found: Vec<Ipv4Addr> = match (question.name.as_str(), 0).to_socket_addrs() {
        Ok(it) => it
            .filter_map(|a| match a.ip() {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            })
            .collect(),
        Err(_) => return Decision::Fail,
    };
    if found.is_empty() {
        return Decision::Fail;
    }
    let mut ok: Vec<Ipv4Addr> = found
        .into_iter()
        .filter(|a| reachable(IpAddr::V4(*a)))
        .collect();
    ok.dedup();
    if ok.is_empty() {
        return Decision::Refuse("resolves only to addresses the trial may not reach");
    }
    if question.qtype != TYPE_A {
        // AAAA and the rest: the name exists, the trial's network has no such record.
        return Decision::Answer(Vec::new());
    }
    Decision::Answer(ok)
}

/// The rcode of a refusal and of a failure.
pub(crate) fn rcode_for(d: &Decision) -> u8 {
    match d {
        Decision::Answer(_) => 0,
        Decision::Refuse(_) => RCODE_NXDOMAIN,
        Decision::Fail => RCODE_SERVFAIL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        q
    }

    #[test]
    fn a_question_is_read_and_answered() {
        let q = query("PyPI.org", 1);
        let question = parse_query(&q).unwrap();
        assert_eq!(question.name, "pypi.org");
        assert_eq!(question.qtype, 1);
        let a = answer(&q, &question, 0, &[Ipv4Addr::new(151, 101, 0, 223)]);
        assert_eq!(&a[..2], &[0x12, 0x34], "same id");
        assert_eq!(a[2] & 0x80, 0x80, "a response");
        assert_eq!(a[2] & 0x01, 0x01, "recursion desired echoed");
        assert_eq!(a[3] & 0x0f, 0, "no error");
        assert_eq!(u16::from_be_bytes([a[6], a[7]]), 1, "one answer");
        assert_eq!(&a[a.len() - 4..], &[151, 101, 0, 223]);
    }

    #[test]
    fn malformed_queries_are_errors() {
        assert_eq!(parse_query(&[0; 5]), Err(RCODE_FORMERR));
        let mut q = query("a.b", 1);
        q[5] = 2; // two questions
        assert_eq!(parse_query(&q), Err(RCODE_FORMERR));
        let mut q = query("a.b", 1);
        q[2] |= 0x80; // a response, not a query
        assert_eq!(parse_query(&q), Err(RCODE_FORMERR));
        let q = query("a.b", 1);
        assert_eq!(parse_query(&q[..q.len() - 2]), Err(RCODE_FORMERR));
        let e = error_answer(&q, RCODE_FORMERR).unwrap();
        assert_eq!(e[3] & 0x0f, RCODE_FORMERR);
    }

    #[test]
    fn a_name_not_allowed_is_refused_without_a_lookup() {
        let q = parse_query(&query("example.com", 1)).unwrap();
        let d = resolve(&q, false, |_| true);
        assert_eq!(d, Decision::Refuse("not an allowed host"));
        assert_eq!(rcode_for(&d), RCODE_NXDOMAIN);
    }

    #[test]
    fn a_name_that_resolves_only_to_forbidden_addresses_is_refused() {
        let q = parse_query(&query("localhost", 1)).unwrap();
        assert_eq!(
            resolve(&q, true, |_| false),
            Decision::Refuse("resolves only to addresses the trial may not reach")
        );
    }
}
