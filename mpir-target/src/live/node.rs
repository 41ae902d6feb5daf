//! The facts of this machine that say which host strings name it: its host name, the aliases
//! `/etc/hosts` lists on the same line as that name, and the addresses of its interfaces.
//! [`mpir_types::node::ThisNode`] applies them.
//!
//! Nothing here asks DNS (a lookup can hang for as long as a resolver likes); a launcher that
//! reports an alias these facts do not list needs the caller's
//! [`ThisNode::with_alias`](mpir_types::node::ThisNode::with_alias).

use std::io::Read;

use mpir_types::node::ThisNode;

/// Most of `/etc/hosts` read (a hosts file is a few KiB; a hostile one is not read further).
const MAX_HOSTS_FILE: u64 = 1 << 20;

/// This machine's facts: host name (kernel), its aliases in `/etc/hosts`, interface addresses.
/// What cannot be read is left out (so fewer hosts are local, never more).
pub fn this_node() -> ThisNode {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mut node = ThisNode::new();
    if !hostname.is_empty() {
        node = node.with_name(&hostname);
        if let Some(hosts) = read_hosts_file() {
            for alias in aliases_in_hosts(&hosts, &hostname) {
                node = node.with_name(&alias);
            }
        }
    }
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for ifa in addrs {
            let Some(a) = ifa.address else { continue };
            if let Some(v4) = a.as_sockaddr_in() {
                node = node.with_address(std::net::IpAddr::V4(v4.ip()));
            } else if let Some(v6) = a.as_sockaddr_in6() {
                node = node.with_address(std::net::IpAddr::V6(v6.ip()));
            }
        }
    }
    node
}

fn read_hosts_file() -> Option<String> {
    let f = crate::files::open_regular(std::path::Path::new("/etc/hosts")).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_HOSTS_FILE).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The names on every `/etc/hosts` line that lists `hostname` (any case): this machine's fully
/// qualified name and aliases. Lines about other hosts say nothing about this one, even when
/// their address is a loopback one (a simulated cluster maps each node to its own 127.0.1.N).
pub fn aliases_in_hosts(hosts: &str, hostname: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_ascii_whitespace();
        let Some(_address) = words.next() else {
            continue;
        };
        let names: Vec<&str> = words.collect();
        if names.iter().any(|n| n.eq_ignore_ascii_case(hostname)) {
            out.extend(names.iter().map(|n| (*n).to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_come_only_from_lines_naming_this_host() {
        let hosts = "127.0.0.1 localhost\n\
                     127.0.1.1 node1.cluster.org node1 # this one\n\
                     127.0.1.2 node2.cluster.org node2\n\
                     # 127.0.1.1 commented.out node1\n\
                     10.0.0.1\tNODE1-ib\tib1 node1\n";
        let mut a = aliases_in_hosts(hosts, "node1");
        a.sort();
        assert_eq!(
            a,
            ["NODE1-ib", "ib1", "node1", "node1", "node1.cluster.org"]
        );
        assert!(aliases_in_hosts(hosts, "node3").is_empty());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "reads /proc and the interfaces, which Miri's isolation forbids"
    )]
    fn this_machine_is_local_and_a_made_up_host_is_not() {
        let node = this_node();
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert!(node.classify(Some(hostname.trim())).is_local());
        assert!(node.classify(Some("127.0.0.1")).is_local());
        assert!(!node.classify(Some("no-such-node-7f3a.invalid")).is_local());
        assert!(
            node.addresses().iter().any(|a| a.is_loopback()),
            "lo's address is listed: {:?}",
            node.addresses()
        );
    }
}
