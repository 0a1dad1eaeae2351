//! The decision for one request: may the proxy connect, and to which addresses.
//! A destination must match an allow entry; a name is resolved here (never by the
//! client) and refused if any of its addresses is not public, unless that address
//! is listed itself. The proxy then connects to exactly these addresses.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use super::address::Class;
use agent_runner_settings::allow::rules::{AllowList, Destination, Host, Rule, Via, canonical};

/// Resolves a name to addresses (the system resolver; tests give their own).
pub(crate) type Resolve = fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>;

/// The system resolver.
pub(crate) fn system_resolve(name: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    Ok((name, port).to_socket_addrs()?.collect())
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Connect to these addresses, in order; `rule` is the entry that allowed it.
    Allow {
        addresses: Vec<SocketAddr>,
        rule: String,
    },
    /// Refuse (403); `allow_entry` is the entry that would allow it, if one can.
    Deny {
        reason: String,
        allow_entry: Option<String>,
    },
    /// Allowed, but it cannot be reached (502).
    Unreachable { reason: String },
}

/// The worker's list, named in the reasons of its denials.
const WORKER_LIST: &str = "runner.worker.allow";
/// Setup's list (SPEC §21), which setup's denials name.
const SETUP_LIST: &str = "task.setup.allow";

/// A denial's `reason` while setup runs: it names setup's list, where a host
/// setup needs goes (the worker's would open it to the worker too).
pub(crate) fn during_setup(reason: &str) -> String {
    format!(
        "{} (during setup)",
        reason.replace(WORKER_LIST, &format!("{SETUP_LIST} or {WORKER_LIST}"))
    )
}

/// The list a denial with `reason` names for its allow entry: setup's for one
/// during setup, else the worker's.
pub fn list_in(reason: &str) -> &'static str {
    if reason.contains(SETUP_LIST) {
        SETUP_LIST
    } else {
        WORKER_LIST
    }
}

/// Decides on `destination` asked for `via`.
pub(crate) fn decide(
    allow: &AllowList,
    destination: &Destination,
    via: Via,
    resolve: Resolve,
) -> Verdict {
    let Some(rule) = allow.find(destination, via) else {
        let reason = match destination.host {
            Host::Address(_) => "an IP address not listed in runner.worker.allow",
            Host::Name(_) => "not in runner.worker.allow",
        };
        return Verdict::Deny {
            reason: reason.into(),
            allow_entry: Some(Rule::for_destination(destination, via).to_string()),
        };
    };
    let rule = rule.to_string();
    let addresses = match &destination.host {
        // Listed as an address: that is the check.
        Host::Address(address) => vec![SocketAddr::new(*address, destination.port)],
        Host::Name(name) => match resolve(name, destination.port) {
            Ok(found) if !found.is_empty() => found,
            Ok(_) => {
                return Verdict::Unreachable {
                    reason: format!("{name} has no address"),
                };
            }
            Err(e) => {
                return Verdict::Unreachable {
                    reason: format!("cannot resolve {name}: {e}"),
                };
            }
        },
    };
    for address in &addresses {
        let ip: IpAddr = canonical(address.ip());
        let class = Class::of(ip);
        if class != Class::Public && !allow.lists(ip, destination.port, via) {
            let at = Destination {
                host: Host::Address(ip),
                port: destination.port,
            };
            return Verdict::Deny {
                reason: format!("resolves to {class} ({ip}), which is not listed"),
                allow_entry: Some(Rule::for_destination(&at, via).to_string()),
            };
        }
    }
    Verdict::Allow { addresses, rule }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_settings::allow::rules::Origin;

    fn list(entries: &[&str]) -> AllowList {
        AllowList {
            rules: entries.iter().map(|e| Rule::parse(e).unwrap()).collect(),
            origin: Origin::Task,
        }
    }

    fn dest(host: &str, port: u16) -> Destination {
        Destination {
            host: Host::parse(host).unwrap(),
            port,
        }
    }

    /// A fake DNS: names map to fixed addresses.
    fn fake_dns(name: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        let ips: &[&str] = match name {
            "public.example" => &["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
            "rebound.example" => &["93.184.215.14", "127.0.0.1"],
            "metadata.example" => &["169.254.169.254"],
            "mapped.example" => &["::ffff:10.0.0.7"],
            "inside.example" => &["10.0.0.7"],
            "empty.example" => &[],
            _ => return Err(std::io::Error::other("Name or service not known")),
        };
        Ok(ips
            .iter()
            .map(|ip| SocketAddr::new(ip.parse().unwrap(), port))
            .collect())
    }

    /// A denial while setup runs names setup's list, where its allow entry goes.
    #[test]
    fn a_denial_during_setup_names_setup_s_list() {
        let reason = during_setup("an IP address not listed in runner.worker.allow");
        assert_eq!(
            reason,
            "an IP address not listed in task.setup.allow or runner.worker.allow (during setup)"
        );
        assert_eq!(list_in(&reason), "task.setup.allow");
        assert_eq!(list_in("not in runner.worker.allow"), "runner.worker.allow");
    }

    fn decide_on(entries: &[&str], host: &str, port: u16, via: Via) -> Verdict {
        decide(&list(entries), &dest(host, port), via, fake_dns)
    }

    #[test]
    fn a_listed_public_name_is_allowed_at_the_addresses_checked() {
        match decide_on(&["public.example"], "public.example", 443, Via::Connect) {
            Verdict::Allow { addresses, rule } => {
                assert_eq!(rule, "public.example");
                assert_eq!(addresses.len(), 2);
                assert!(addresses.iter().all(|a| a.port() == 443));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unlisted_destination_is_denied_with_the_entry_that_would_allow_it() {
        assert_eq!(
            decide_on(&["public.example"], "github.com", 443, Via::Connect),
            Verdict::Deny {
                reason: "not in runner.worker.allow".into(),
                allow_entry: Some("github.com".into())
            }
        );
        assert_eq!(
            decide_on(&["public.example"], "93.184.215.14", 8080, Via::Plain),
            Verdict::Deny {
                reason: "an IP address not listed in runner.worker.allow".into(),
                allow_entry: Some("93.184.215.14:8080".into())
            }
        );
    }

    #[test]
    fn a_listed_name_resolving_to_a_non_public_address_is_refused_unless_that_address_is_listed() {
        for (host, class) in [
            ("rebound.example", "a loopback address (127.0.0.1)"),
            (
                "metadata.example",
                "a cloud metadata address (169.254.169.254)",
            ),
            ("mapped.example", "a private address (10.0.0.7)"),
            ("inside.example", "a private address (10.0.0.7)"),
        ] {
            match decide_on(&[host], host, 443, Via::Connect) {
                Verdict::Deny {
                    reason,
                    allow_entry,
                } => {
                    assert!(reason.contains(class), "{host}: {reason}");
                    assert!(allow_entry.is_some());
                }
                other => panic!("{host}: {other:?}"),
            }
        }
        assert!(matches!(
            decide_on(
                &["inside.example", "10.0.0.7"],
                "inside.example",
                443,
                Via::Connect
            ),
            Verdict::Allow { .. }
        ));
        assert!(
            matches!(
                decide_on(
                    &["inside.example", "10.0.0.7:22"],
                    "inside.example",
                    443,
                    Via::Connect
                ),
                Verdict::Deny { .. }
            ),
            "the address is listed for another port only"
        );
    }

    #[test]
    fn a_listed_address_is_allowed_whatever_its_class_and_nothing_is_resolved() {
        match decide_on(&["127.0.0.2:8080"], "127.0.0.2", 8080, Via::Plain) {
            Verdict::Allow { addresses, .. } => {
                assert_eq!(addresses, vec!["127.0.0.2:8080".parse().unwrap()]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn names_that_do_not_resolve_are_unreachable_not_denied() {
        assert!(matches!(
            decide_on(&["nowhere.example"], "nowhere.example", 443, Via::Connect),
            Verdict::Unreachable { .. }
        ));
        assert!(matches!(
            decide_on(&["empty.example"], "empty.example", 443, Via::Connect),
            Verdict::Unreachable { .. }
        ));
    }
}
