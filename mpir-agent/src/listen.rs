//! The address a tool-daemon engine's agents connect back to when the user gave none
//! (`mpir --agent-listen`): [`default_listen`].
//!
//! The agents run on other nodes, so the address must be one those nodes reach. The best
//! evidence is the kernel's own: the source address it would use to send to one of the
//! agents' nodes ([`route_source`], a UDP socket connected to that node's address: nothing is
//! sent). That is the address of the interface that faces them, even when this node's name
//! resolves to a loopback address only (Debian's `127.0.1.1` line for a host without a
//! static address) or to an interface of another network than the job's. Without an agent
//! node that resolves (or before the job's nodes are known, as for `launch`), the first
//! address this node's name resolves to is taken, one that is not a loopback one first.
//!
//! Name lookups may wait for as long as the resolver likes: each runs on a thread of its own
//! and is given up after [`LOOKUP_TIMEOUT`] (all of them together).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::FrontEndError;

/// At most this many of the agents' nodes are looked up for a route.
const ROUTE_PROBES: usize = 4;

/// How long the name lookups may take, all together.
pub(crate) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The address agents connect to by default (see the module docs): the kernel's source
/// address toward the first of `agent_hosts` (nodes other than this one) that resolves, else
/// this node's name's first address that is not a loopback one, else its first.
///
/// # Errors
/// [`FrontEndError::ToolDaemons`] when neither gives an address.
pub(crate) fn default_listen(agent_hosts: &[String]) -> Result<SocketAddr, FrontEndError> {
    let deadline = Instant::now() + LOOKUP_TIMEOUT;
    let here = mpir_target::live::node::this_node();
    let remote: Vec<String> = agent_hosts
        .iter()
        .filter(|h| !here.classify(Some(h)).is_local())
        .take(ROUTE_PROBES)
        .cloned()
        .collect();
    for host in remote {
        let Ok(addrs) = resolve(&host, deadline) else {
            continue;
        };
        if let Some(source) = addrs.iter().find_map(|a| route_source(a.ip())) {
            return Ok(SocketAddr::new(source, 0));
        }
    }
    let name = here.display_name().to_string();
    let own = resolve(&name, deadline).map_err(|e| FrontEndError::ToolDaemons {
        context: format!(
            "resolving this node's name {name} for the agents to connect to (give an address \
             with --agent-listen)"
        ),
        source: e.into(),
    })?;
    by_name(&own)
        .map(|ip| SocketAddr::new(ip, 0))
        .ok_or_else(|| FrontEndError::ToolDaemons {
            context: format!("this node's name {name} resolves to no address"),
            source: "give an address with --agent-listen".into(),
        })
}

/// Of the addresses this node's name resolves to, the first that is not a loopback one
/// (127.0.0.1 and ::1 never reach another node), else the first (a simulated cluster's
/// nodes share the loopback network; Debian's 127.0.1.1 for an unconfigured host).
fn by_name(addrs: &[SocketAddr]) -> Option<IpAddr> {
    let loopback = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    };
    addrs
        .iter()
        .map(SocketAddr::ip)
        .find(|ip| !loopback(*ip))
        .or_else(|| addrs.first().map(SocketAddr::ip))
}

/// The local address the kernel would send from to reach `to`: a UDP socket connected to it
/// (which sends nothing); `None` when there is no route.
pub(crate) fn route_source(to: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = match to {
        IpAddr::V4(_) => (IpAddr::from([0u8; 4]), 0).into(),
        IpAddr::V6(_) => (IpAddr::from([0u16; 8]), 0).into(),
    };
    let socket = UdpSocket::bind(any).ok()?;
    // The discard port: connecting a UDP socket only asks the routing table.
    socket.connect(SocketAddr::new(to, 9)).ok()?;
    let source = socket.local_addr().ok()?.ip();
    (!source.is_unspecified()).then_some(source)
}

/// `host`'s addresses (an address is its own), looked up on a thread of its own and given up
/// at `deadline`.
fn resolve(host: &str, deadline: Instant) -> std::io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, 0)]);
    }
    let (tx, rx) = mpsc::channel();
    let name = host.to_string();
    std::thread::Builder::new()
        .name("mpir-lookup".into())
        .spawn(move || {
            let _ = tx.send((name.as_str(), 0).to_socket_addrs().map(Vec::from_iter));
        })?;
    let left = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("looking up {host} took over {LOOKUP_TIMEOUT:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 0)
    }

    #[test]
    fn by_name_prefers_an_address_that_is_not_a_loopback_one() {
        assert_eq!(
            by_name(&[sa("127.0.1.1"), sa("10.0.0.7")]),
            Some("10.0.0.7".parse().unwrap())
        );
        assert_eq!(
            by_name(&[sa("::1"), sa("fd00::7")]),
            Some("fd00::7".parse().unwrap())
        );
        assert_eq!(
            by_name(&[sa("127.0.1.1")]),
            Some("127.0.1.1".parse().unwrap())
        );
        assert_eq!(by_name(&[]), None);
    }

    #[test]
    fn the_route_to_a_loopback_address_leaves_from_a_loopback_address() {
        // Every Linux machine routes 127.0.0.0/8 through lo, from 127.0.0.1 (its address).
        let source = route_source("127.0.3.4".parse().unwrap()).unwrap();
        assert!(source.is_loopback(), "{source}");
        assert!(!source.is_unspecified());
    }

    #[test]
    fn the_route_is_the_kernels_own_choice() {
        // The oracle: `ip route get`, when iproute2 is there, names the same source.
        let Ok(out) = std::process::Command::new("ip")
            .args(["-4", "route", "get", "198.51.100.7"])
            .output()
        else {
            eprintln!("SKIPPED: no ip command");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let ours = route_source("198.51.100.7".parse().unwrap());
        match text.split_whitespace().skip_while(|w| *w != "src").nth(1) {
            Some(src) => assert_eq!(ours, Some(src.parse().unwrap()), "ip route get: {text}"),
            // No route there (no default route): neither finds one.
            None => assert_eq!(ours, None, "ip route get: {text}"),
        }
    }

    #[test]
    fn an_address_resolves_to_itself_and_a_lookup_is_bounded() {
        let soon = Instant::now() + Duration::from_secs(1);
        assert_eq!(resolve("10.1.2.3", soon).unwrap(), vec![sa("10.1.2.3")]);
        let past = Instant::now();
        // A deadline already passed: a lookup is given up at once or answered at once.
        let started = Instant::now();
        let _ = resolve("localhost", past);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn with_agent_hosts_the_address_is_the_one_that_routes_to_them() {
        // An agent node given by address: the route toward it decides.
        let a = default_listen(&["127.0.9.9".into()]).unwrap();
        assert_eq!(Some(a.ip()), route_source("127.0.9.9".parse().unwrap()));
        assert_eq!(a.port(), 0);
    }
}
