//! `runner.worker.allow`: the destinations the proxy lets through (SPEC §17).
//!
//! An entry is `host`, `host:port`, `*.suffix`, `*.suffix:port` or `host:*`, where a
//! host is a DNS name or an IP literal (IPv6 in brackets when a port follows).
//! Without a port an entry allows 443 for CONNECT and 80 for plain HTTP. `*.suffix`
//! matches names below the suffix, not the suffix itself. A name entry never matches
//! an IP literal: an address passes only when it is listed as one.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use crate::Error;

/// Longest DNS name.
const MAX_NAME: usize = 253;

/// How the client asked for the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `CONNECT host:port` (TLS, passed through untouched).
    Connect,
    /// A plain HTTP request with an absolute URI.
    Plain,
}

impl Via {
    /// The port an entry without one allows.
    pub fn default_port(self) -> u16 {
        match self {
            Via::Connect => 443,
            Via::Plain => 80,
        }
    }
}

/// A destination host as a client named it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// Lowercase, without a trailing dot.
    Name(String),
    Address(IpAddr),
}

impl Host {
    /// A host as written in a URL or a CONNECT line: a name, an IPv4 literal or a
    /// bracketed IPv6 literal. Names that only a lenient resolver would read as an
    /// address (`127.1`, `0x7f000001`) are refused.
    pub fn parse(text: &str) -> Result<Host, Error> {
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(|a| Host::Address(canonical(IpAddr::V6(a))))
                .map_err(|_| Error::NotIpv6(text.to_string()));
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            return Ok(Host::Address(canonical(address)));
        }
        name(text).map(Host::Name)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Address(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Address(a) => write!(f, "{a}"),
        }
    }
}

/// A `host:port` a client asked for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Destination {
    pub host: Host,
    pub port: u16,
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// One `runner.worker.allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: Pattern,
    ports: Ports,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Name(String),
    /// `*.suffix`: the suffix, without `*.`.
    Below(String),
    Address(IpAddr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
    /// 443 for CONNECT, 80 for plain HTTP.
    Default,
    One(u16),
    Any,
}

impl Rule {
    /// Reads an entry; the error says what is wrong with it.
    pub fn parse(entry: &str) -> Result<Rule, Error> {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(Error::EmptyEntry);
        }
        if entry.contains("://") || entry.contains('/') {
            return Err(Error::Url(agent_runner_core::text::cut_chars(entry, 80)));
        }
        let (host, ports) = split_port(entry)?;
        let host = if let Some(suffix) = host.strip_prefix("*.") {
            let suffix = name(suffix)?;
            if !suffix.contains('.') {
                return Err(Error::WholeTopLevelDomain(suffix));
            }
            Pattern::Below(suffix)
        } else if host.contains('*') {
            return Err(Error::MisplacedStar);
        } else {
            match Host::parse(host)? {
                Host::Name(name) => Pattern::Name(name),
                Host::Address(address) => Pattern::Address(address),
            }
        };
        Ok(Rule { host, ports })
    }

    /// The entry that allows exactly `destination` when asked for `via`.
    pub fn for_destination(destination: &Destination, via: Via) -> Rule {
        Rule {
            host: match &destination.host {
                Host::Name(name) => Pattern::Name(name.clone()),
                Host::Address(address) => Pattern::Address(*address),
            },
            ports: if destination.port == via.default_port() {
                Ports::Default
            } else {
                Ports::One(destination.port)
            },
        }
    }

    /// Whether this entry allows `destination` asked for `via`.
    pub fn allows(&self, destination: &Destination, via: Via) -> bool {
        let host = match (&self.host, &destination.host) {
            (Pattern::Name(rule), Host::Name(name)) => rule == name,
            (Pattern::Below(suffix), Host::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Address(rule), Host::Address(address)) => rule == address,
            _ => false,
        };
        host && self.ports.allow(destination.port, via)
    }

    /// Whether this entry lists `address` itself (for `port`, asked for `via`), which
    /// lets a name resolving to a non-public address through.
    pub fn lists(&self, address: IpAddr, port: u16, via: Via) -> bool {
        self.host == Pattern::Address(canonical(address)) && self.ports.allow(port, via)
    }
}

impl Ports {
    fn allow(self, port: u16, via: Via) -> bool {
        match self {
            Ports::Default => port == via.default_port(),
            Ports::One(p) => port == p,
            Ports::Any => true,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bracket =
            matches!(self.host, Pattern::Address(IpAddr::V6(_))) && self.ports != Ports::Default;
        match &self.host {
            Pattern::Name(name) => f.write_str(name)?,
            Pattern::Below(suffix) => write!(f, "*.{suffix}")?,
            Pattern::Address(address) if bracket => write!(f, "[{address}]")?,
            Pattern::Address(address) => write!(f, "{address}")?,
        }
        match self.ports {
            Ports::Default => Ok(()),
            Ports::One(port) => write!(f, ":{port}"),
            Ports::Any => f.write_str(":*"),
        }
    }
}

/// The effective `runner.worker.allow` of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    pub rules: Vec<Rule>,
    /// Where the list came from, for `validate` and the note.
    pub origin: Origin,
}

/// Where an allow list came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `runner.worker.allow` as written.
    Task,
    /// The defaults (`task::default_allow`); why these hosts.
    Default(String),
}

impl Default for AllowList {
    /// Nothing allowed.
    fn default() -> Self {
        AllowList {
            rules: Vec::new(),
            origin: Origin::Task,
        }
    }
}

impl AllowList {
    /// The first entry that allows `destination`.
    pub fn find(&self, destination: &Destination, via: Via) -> Option<&Rule> {
        self.rules.iter().find(|r| r.allows(destination, via))
    }

    /// Whether `address` (for `port`) is itself listed.
    pub fn lists(&self, address: IpAddr, port: u16, via: Via) -> bool {
        self.rules.iter().any(|r| r.lists(address, port, via))
    }

    /// Whether this list lets through what the single-host entry `needed` allows
    /// (a wildcard entry `needed` is never covered).
    pub fn covers(&self, needed: &Rule) -> bool {
        let host = match &needed.host {
            Pattern::Name(name) => Host::Name(name.clone()),
            Pattern::Address(address) => Host::Address(*address),
            Pattern::Below(_) => return false,
        };
        [Via::Connect, Via::Plain].into_iter().any(|via| {
            let port = match needed.ports {
                Ports::One(port) => port,
                Ports::Default | Ports::Any => via.default_port(),
            };
            let destination = Destination {
                host: host.clone(),
                port,
            };
            self.find(&destination, via).is_some()
        })
    }

    /// The entries as written in YAML.
    pub fn entries(&self) -> Vec<String> {
        self.rules.iter().map(Rule::to_string).collect()
    }
}

/// `host[:port]` of an entry: a port, `*`, or nothing. A bare IPv6 literal has no
/// port (its colons are its own).
fn split_port(entry: &str) -> Result<(&str, Ports), Error> {
    if entry.starts_with('[') {
        return match entry.split_once("]:") {
            Some((host, port)) => Ok((&entry[..host.len() + 1], ports(port)?)),
            None => Ok((entry, Ports::Default)),
        };
    }
    if entry.parse::<Ipv6Addr>().is_ok() {
        return Ok((entry, Ports::Default));
    }
    match entry.rsplit_once(':') {
        Some((host, port)) => Ok((host, ports(port)?)),
        None => Ok((entry, Ports::Default)),
    }
}

fn ports(text: &str) -> Result<Ports, Error> {
    if text == "*" {
        return Ok(Ports::Any);
    }
    match text.parse::<u16>() {
        Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(Ports::One(port)),
        _ => Err(Error::NotAPort(text.to_string())),
    }
}

/// A DNS name, lowercase, without its trailing dot: labels of letters, digits, `-`
/// and `_`, the last one starting with a letter (so it is never an address in
/// disguise).
fn name(text: &str) -> Result<String, Error> {
    let lower = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let shown = agent_runner_core::text::cut_chars(text, 80);
    if lower.is_empty() || lower.len() > MAX_NAME {
        return Err(Error::NoHostName(shown));
    }
    let valid_labels = lower.split('.').all(|label| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let last_is_word = lower
        .rsplit('.')
        .next()
        .and_then(|l| l.bytes().next())
        .is_some_and(|b| b.is_ascii_alphabetic());
    if !valid_labels || !last_is_word {
        return Err(Error::NotAHostName(shown));
    }
    Ok(lower)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(host: &str, port: u16) -> Destination {
        Destination {
            host: Host::parse(host).unwrap(),
            port,
        }
    }

    fn allows(entry: &str, host: &str, port: u16, via: Via) -> bool {
        Rule::parse(entry).unwrap().allows(&dest(host, port), via)
    }

    #[test]
    fn entries_read_and_print_back_normalised() {
        for (entry, shown) in [
            ("api.openai.com", "api.openai.com"),
            ("API.OpenAI.com.", "api.openai.com"),
            ("pypi.org:8443", "pypi.org:8443"),
            ("*.github.com", "*.github.com"),
            ("*.github.com:22", "*.github.com:22"),
            ("registry.npmjs.org:*", "registry.npmjs.org:*"),
            ("10.0.0.5", "10.0.0.5"),
            ("127.0.0.2:8080", "127.0.0.2:8080"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("[2001:db8::1]:443", "[2001:db8::1]:443"),
            ("[::ffff:127.0.0.2]:80", "127.0.0.2:80"),
            (" spaced.example ", "spaced.example"),
        ] {
            assert_eq!(Rule::parse(entry).unwrap().to_string(), shown, "{entry}");
        }
    }

    #[test]
    fn malformed_entries_say_why() {
        for (entry, why) in [
            ("", "empty"),
            ("*", "may only start"),
            ("*:443", "may only start"),
            ("api.*.com", "may only start"),
            ("*.com", "whole top-level domain"),
            ("host:0", "not a port"),
            ("host:65536", "not a port"),
            ("host:+80", "not a port"),
            ("host:", "not a port"),
            ("http://host", "not a host name"),
            ("host/path", "not a host name"),
            ("a..b", "not a host name"),
            ("127.1", "not a host name"),
            ("0x7f000001", "not a host name"),
            ("1.2.3.4.5", "not a host name"),
            ("[::1", "not a host name"),
            ("[zz::1]:80", "not an IPv6 address"),
            ("ex ample.com", "not a host name"),
        ] {
            let e = Rule::parse(entry).unwrap_err().to_string();
            assert!(e.contains(why), "{entry:?}: {e}");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(Rule::parse(&long).is_err(), "a label is at most 63 bytes");
    }

    #[test]
    fn ports_default_to_443_for_connect_and_80_for_plain_http() {
        use Via::{Connect, Plain};
        assert!(allows("example.com", "example.com", 443, Connect));
        assert!(!allows("example.com", "example.com", 80, Connect));
        assert!(allows("example.com", "example.com", 80, Plain));
        assert!(!allows("example.com", "example.com", 443, Plain));
        assert!(allows("example.com:8080", "example.com", 8080, Connect));
        assert!(allows("example.com:8080", "example.com", 8080, Plain));
        assert!(!allows("example.com:8080", "example.com", 443, Connect));
        assert!(allows("example.com:*", "example.com", 22, Connect));
        assert!(allows("example.com:*", "example.com", 1, Plain));
    }

    #[test]
    fn names_match_exactly_and_wildcards_only_below_their_suffix() {
        use Via::Connect;
        assert!(allows("example.com", "EXAMPLE.com.", 443, Connect));
        assert!(!allows("example.com", "www.example.com", 443, Connect));
        assert!(!allows("example.com", "example.com.evil.net", 443, Connect));
        assert!(allows("*.example.com", "www.example.com", 443, Connect));
        assert!(allows("*.example.com", "a.b.example.com", 443, Connect));
        assert!(!allows("*.example.com", "example.com", 443, Connect));
        assert!(!allows("*.example.com", "badexample.com", 443, Connect));
        assert!(!allows(
            "*.example.com",
            "www.example.com.evil.net",
            443,
            Connect
        ));
        assert!(!allows("*.example.com", "www.example.com", 80, Connect));
    }

    #[test]
    fn addresses_pass_only_when_listed_as_addresses() {
        use Via::{Connect, Plain};
        assert!(allows("127.0.0.2:8080", "127.0.0.2", 8080, Plain));
        assert!(!allows("127.0.0.2:8080", "127.0.0.3", 8080, Plain));
        assert!(allows("[::1]:8080", "[::1]", 8080, Plain));
        assert!(allows("127.0.0.2:8080", "[::ffff:127.0.0.2]", 8080, Plain));
        // A name never matches an address, nor an address a name.
        assert!(!allows("localhost", "127.0.0.1", 443, Connect));
        assert!(!allows("127.0.0.1", "localhost", 443, Connect));
        let rule = Rule::parse("127.0.0.1:9000").unwrap();
        assert!(rule.lists("127.0.0.1".parse().unwrap(), 9000, Plain));
        assert!(rule.lists("::ffff:127.0.0.1".parse().unwrap(), 9000, Plain));
        assert!(!rule.lists("127.0.0.1".parse().unwrap(), 9001, Plain));
        assert!(!Rule::parse("localhost:9000").unwrap().lists(
            "127.0.0.1".parse().unwrap(),
            9000,
            Plain
        ));
    }

    #[test]
    fn the_entry_for_a_denied_destination_allows_it_and_nothing_wider() {
        for (host, port, via, shown) in [
            ("github.com", 443, Via::Connect, "github.com"),
            ("github.com", 80, Via::Plain, "github.com"),
            ("github.com", 22, Via::Connect, "github.com:22"),
            ("github.com", 443, Via::Plain, "github.com:443"),
            ("[2001:db8::1]", 443, Via::Connect, "2001:db8::1"),
            ("[2001:db8::1]", 8443, Via::Connect, "[2001:db8::1]:8443"),
        ] {
            let d = dest(host, port);
            let rule = Rule::for_destination(&d, via);
            assert_eq!(rule.to_string(), shown);
            assert!(rule.allows(&d, via));
            assert_eq!(Rule::parse(shown).unwrap(), rule, "it reads back");
        }
    }

    #[test]
    fn destination_hosts_are_checked_like_entries() {
        assert_eq!(
            Host::parse("Example.COM.").unwrap(),
            Host::Name("example.com".into())
        );
        assert_eq!(
            Host::parse("[::ffff:10.0.0.1]").unwrap(),
            Host::Address("10.0.0.1".parse().unwrap())
        );
        for bad in ["", "a b", "a\r\nb", "127.1", "exa$mple.com", "[::1"] {
            assert!(Host::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quickcheck_entries_never_panic_and_what_reads_prints_back_the_same() {
        fn prop(entry: String) -> bool {
            match Rule::parse(&entry) {
                Ok(rule) => Rule::parse(&rule.to_string()).ok() == Some(rule),
                Err(e) => !e.to_string().is_empty(),
            }
        }
        quickcheck::QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(String) -> bool);
    }
}
