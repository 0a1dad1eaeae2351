//! Classes of IP addresses: which ones a name may resolve to (public ones) and which
//! it may not unless the address itself is listed (SPEC §17: loopback, private,
//! link-local, cloud metadata, and the other ranges that never name a host on the
//! internet). This is what stops the proxy from being a way into the host or its
//! network (SSRF) or a DNS name re-pointed at them (rebinding): the proxy connects
//! to exactly the addresses it checked here.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Public,
    Loopback,
    /// RFC 1918, shared address space (CGNAT), unique-local IPv6, local NAT64.
    Private,
    LinkLocal,
    /// Cloud instance metadata services (169.254.169.254 and friends).
    Metadata,
    /// 0.0.0.0/8 and `::` (connecting to them reaches this host).
    Unspecified,
    Multicast,
    /// Documentation, benchmarking, broadcast, Teredo and other special ranges.
    Reserved,
}

impl Class {
    pub(crate) fn of(address: IpAddr) -> Class {
        match address {
            IpAddr::V4(v4) => of_v4(v4),
            IpAddr::V6(v6) => of_v6(v6),
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Public => "a public address",
            Class::Loopback => "a loopback address",
            Class::Private => "a private address",
            Class::LinkLocal => "a link-local address",
            Class::Metadata => "a cloud metadata address",
            Class::Unspecified => "an unspecified address (this host)",
            Class::Multicast => "a multicast address",
            Class::Reserved => "a reserved address",
        })
    }
}

/// Metadata services: AWS/GCP/Azure/OpenStack/Oracle, Alibaba, Azure's wire server.
const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
];
/// AWS's IPv6 metadata service.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

fn of_v4(a: Ipv4Addr) -> Class {
    let [b0, b1, b2, _] = a.octets();
    if METADATA_V4.contains(&a) {
        return Class::Metadata;
    }
    match (b0, b1, b2) {
        (0, _, _) => Class::Unspecified,
        (127, _, _) => Class::Loopback,
        (10, _, _) | (192, 168, _) => Class::Private,
        (172, 16..=31, _) | (100, 64..=127, _) => Class::Private,
        (169, 254, _) => Class::LinkLocal,
        (224..=239, _, _) => Class::Multicast,
        (240..=255, _, _) => Class::Reserved,
        // IETF protocol assignments, documentation, 6to4 relays, benchmarking.
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) | (192, 88, 99) => {
            Class::Reserved
        }
        (198, 18..=19, _) => Class::Reserved,
        _ => Class::Public,
    }
}

fn of_v6(a: Ipv6Addr) -> Class {
    if a == METADATA_V6 {
        return Class::Metadata;
    }
    if a.is_unspecified() {
        return Class::Unspecified;
    }
    if a.is_loopback() {
        return Class::Loopback;
    }
    let s = a.segments();
    // Addresses that carry an IPv4 address take its class: mapped, the deprecated
    // compatible form, NAT64 and 6to4 all end up at that IPv4 address.
    if let Some(v4) = a.to_ipv4_mapped() {
        return of_v4(v4);
    }
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return of_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    if s[0] == 0x2002 {
        return of_v4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    match s[0] {
        0xfc00..=0xfdff => Class::Private,
        0xfe80..=0xfebf => Class::LinkLocal,
        // Site-local (deprecated, still routed inside some networks).
        0xfec0..=0xfeff => Class::Private,
        0xff00..=0xffff => Class::Multicast,
        // Local-use NAT64.
        0x0064 if s[1] == 0xff9b && s[2] == 1 => Class::Private,
        // Teredo (hides an IPv4 address), documentation, discard-only.
        0x2001 if s[1] == 0 || s[1] == 0x0db8 => Class::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => Class::Reserved,
        _ => Class::Public,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> Class {
        Class::of(text.parse().unwrap())
    }

    #[test]
    fn every_range_that_is_not_the_internet_is_named() {
        for (address, expected) in [
            ("8.8.8.8", Class::Public),
            ("104.18.33.45", Class::Public),
            ("2606:4700::6810:1", Class::Public),
            ("127.0.0.1", Class::Loopback),
            ("127.255.255.254", Class::Loopback),
            ("::1", Class::Loopback),
            ("10.1.2.3", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("192.168.1.1", Class::Private),
            ("100.64.0.1", Class::Private),
            ("fd12:3456::1", Class::Private),
            ("fec0::1", Class::Private),
            ("64:ff9b:1::1", Class::Private),
            ("169.254.1.1", Class::LinkLocal),
            ("fe80::1", Class::LinkLocal),
            ("169.254.169.254", Class::Metadata),
            ("100.100.100.200", Class::Metadata),
            ("168.63.129.16", Class::Metadata),
            ("fd00:ec2::254", Class::Metadata),
            ("0.0.0.0", Class::Unspecified),
            ("0.1.2.3", Class::Unspecified),
            ("::", Class::Unspecified),
            ("224.0.0.1", Class::Multicast),
            ("ff02::1", Class::Multicast),
            ("255.255.255.255", Class::Reserved),
            ("240.0.0.1", Class::Reserved),
            ("192.0.2.1", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
            ("2001:db8::1", Class::Reserved),
            ("2001::1", Class::Reserved),
            ("100::1", Class::Reserved),
        ] {
            assert_eq!(class(address), expected, "{address}");
        }
    }

    #[test]
    fn ipv6_forms_of_an_ipv4_address_have_its_class() {
        for (address, expected) in [
            ("::ffff:127.0.0.1", Class::Loopback),
            ("::ffff:169.254.169.254", Class::Metadata),
            ("::ffff:8.8.8.8", Class::Public),
            ("::127.0.0.1", Class::Loopback),
            ("::10.0.0.1", Class::Private),
            ("64:ff9b::10.0.0.1", Class::Private),
            ("64:ff9b::169.254.169.254", Class::Metadata),
            ("64:ff9b::8.8.8.8", Class::Public),
            ("2002:7f00:1::", Class::Loopback),
            ("2002:a9fe:a9fe::1", Class::Metadata),
            ("2002:0808:0808::1", Class::Public),
        ] {
            assert_eq!(class(address), expected, "{address}");
        }
    }
}
