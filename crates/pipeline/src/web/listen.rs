//! The listening sockets. A browser resolves `localhost` to 127.0.0.1 or ::1,
//! trying either first; if the server held its port on one of them only, another
//! local user could listen on the other with the same port, and
//! `http://localhost:<port>/` would open their page, same-origin with this server
//! reached through `localhost`: it could read our pages (and the token in them) and
//! post tasks. So on 127.0.0.1 or ::1 the server holds the port on both loopback
//! addresses, and answers only requests whose Host is the address the connection
//! came to (`guard`): the URL it prints is that address, which no one else can
//! hold, never a name.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

/// Tries at finding a port free on both loopback addresses when any port will do.
const TRIES: usize = 32;

/// Why the server cannot listen where it was asked.
#[derive(Debug, thiserror::Error)]
pub enum CannotListen {
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// The other loopback address of a given port is another program's.
    #[error(
        "cannot listen on {second} as well as on {addr}: {error}: another program holds port {port} there, and http://localhost:{port}/ could lead a browser to it; stop it, or choose another port (--addr {}:0 picks a free one)",
        url_host(addr.ip())
    )]
    OtherLoopback {
        addr: SocketAddr,
        second: SocketAddr,
        port: u16,
        error: std::io::Error,
    },
    #[error("cannot listen on {0}: no port was free on both 127.0.0.1 and ::1 in {TRIES} tries")]
    NoCommonPort(SocketAddr),
}

/// The sockets of a server asked to listen on `addr`: `addr` itself first, then,
/// for 127.0.0.1 or ::1, the other loopback address on the same port (unless this
/// machine has none: no one can listen there either). Port 0 picks a port free on
/// both; a given port another program holds on the other address is an error.
pub fn listen(addr: SocketAddr) -> Result<Vec<TcpListener>, CannotListen> {
    let Some(other) = other_loopback(addr.ip()) else {
        return Ok(vec![bind(addr)?]);
    };
    for _ in 0..TRIES {
        let first = bind(addr)?;
        let port = first
            .local_addr()
            .map_err(|error| CannotListen::Bind { addr, error })?
            .port();
        let second = SocketAddr::new(other, port);
        match TcpListener::bind(second) {
            Ok(listener) => return Ok(vec![first, listener]),
            Err(e) if no_such_address(&e) => {
                log::debug!("not listening on {second} too: {e}");
                return Ok(vec![first]);
            }
            Err(e) if e.kind() == ErrorKind::AddrInUse && addr.port() == 0 => continue,
            Err(e) => {
                return Err(CannotListen::OtherLoopback {
                    addr,
                    second,
                    port,
                    error: e,
                });
            }
        }
    }
    Err(CannotListen::NoCommonPort(addr))
}

fn bind(addr: SocketAddr) -> Result<TcpListener, CannotListen> {
    TcpListener::bind(addr).map_err(|error| CannotListen::Bind { addr, error })
}

/// The loopback address of the other family, for the one `localhost` names.
fn other_loopback(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(Ipv4Addr::LOCALHOST) => Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        IpAddr::V6(Ipv6Addr::LOCALHOST) => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        _ => None,
    }
}

/// A kernel without that address or family.
fn no_such_address(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::AddrNotAvailable
        || matches!(
            e.raw_os_error(),
            Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT)
        )
}

/// `ip` as the host part of a URL or an `--addr` (IPv6 in brackets).
fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_held_on_both_families_on_one_port() {
        let held = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addrs: Vec<SocketAddr> = held.iter().map(|l| l.local_addr().unwrap()).collect();
        assert_eq!(addrs[0].ip(), Ipv4Addr::LOCALHOST);
        let port = addrs[0].port();
        if addrs.len() == 2 {
            assert_eq!(addrs[1], SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port));
            // Nobody else gets that port on ::1 now, nor on the wildcard addresses.
            for squat in ["[::1]", "[::]", "0.0.0.0"] {
                let e = TcpListener::bind(format!("{squat}:{port}")).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::AddrInUse, "{squat}");
            }
        } else {
            assert!(TcpListener::bind(format!("[::1]:{port}")).is_err());
        }
        // A given port taken on ::1 is refused, naming why.
        if let Ok(squatter) = TcpListener::bind("[::1]:0") {
            let port = squatter.local_addr().unwrap().port();
            let e = listen(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("cannot listen on [::1]:{port} as well"))
                    && e.contains("http://localhost:"),
                "{e}"
            );
        }
        // Another loopback address is held alone: `localhost` does not name it.
        assert_eq!(listen("127.0.0.2:0".parse().unwrap()).unwrap().len(), 1);
    }
}
