//! Which user is on the other end of a connection from this machine. The pages carry
//! the token that allows changes (`token.rs`), and on a shared machine any local user
//! can connect to a loopback port and read them: the web view would then let them
//! create tasks and start orchestrators that run with this user's repository and
//! credentials. So the server answers only its own user; the kernel says who owns
//! the client's end of a connection in `/proc/net/tcp` and `/proc/net/tcp6` (the
//! socket whose local address is our peer's and whose remote address is ours).

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The kernel's tables of TCP sockets.
const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];

/// The uid owning the client end of the connection from `peer` to `local`, if that
/// end is on this machine (in this network namespace).
pub(crate) fn owner(peer: SocketAddr, local: SocketAddr) -> std::io::Result<Option<u32>> {
    let (peer, local) = (canonical(peer), canonical(local));
    for table in TABLES {
        let file = match std::fs::File::open(table) {
            Ok(file) => file,
            // A kernel without IPv6 has no tcp6 table.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in BufReader::new(file).lines() {
            if let Some(uid) = owner_in_line(&line?, peer, local) {
                return Ok(Some(uid));
            }
        }
    }
    Ok(None)
}

/// The uid of a table line (`sl local_address rem_address st ... uid ...`) if its
/// local address is `peer` and its remote address `local`.
fn owner_in_line(line: &str, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let fields: Vec<&str> = line.split_whitespace().take(8).collect();
    let [_, from, to, _, _, _, _, uid] = fields.as_slice() else {
        return None;
    };
    (parse_addr(from)? == peer && parse_addr(to)? == local)
        .then(|| uid.parse().ok())
        .flatten()
}

/// `0100007F:1F90` (tcp) or 32 hex digits and a port (tcp6). The kernel prints each
/// 32-bit word of the address as a number in the machine's byte order, the port in
/// host order.
fn parse_addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for word in ip.as_bytes().chunks(8) {
        let word = u32::from_str_radix(std::str::from_utf8(word).ok()?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (a dual-stack socket sees
/// IPv4 peers so).
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_are_read_in_the_kernels_byte_order() {
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v4 = |a: Ipv4Addr| format!("{:08X}", u32::from_ne_bytes(a.octets()));
        let line = format!(
            "   3: {}:9C40 {}:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1",
            v4(Ipv4Addr::LOCALHOST),
            v4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(owner_in_line(&line, peer, local), Some(1000));
        assert_eq!(owner_in_line(&line, local, peer), None, "the other end");
        assert_eq!(
            owner_in_line("  sl  local_address rem_address", peer, local),
            None
        );
        // A dual-stack client socket: IPv4-mapped addresses in tcp6.
        let mapped: String = "::ffff:127.0.0.1"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets()
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes(w.try_into().unwrap())))
            .collect();
        let line6 = format!(
            "   0: {mapped}:9C40 {mapped}:1F90 01 00000000:00000000 00:00000000 00000000     7        0 1 1"
        );
        assert_eq!(owner_in_line(&line6, peer, local), Some(7));
    }

    #[test]
    fn a_loopback_connection_of_ours_is_ours() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(
            owner(peer, server.local_addr().unwrap()).unwrap(),
            Some(uid)
        );
        drop(client);
        let nobody: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(owner(nobody, server.local_addr().unwrap()).unwrap(), None);
    }
}
