//! Which node a rank lives on, and whether that node is this one.
//!
//! A pid in `MPIR_proctable` means something only on its own node: on a cluster, a remote
//! rank's pid routinely equals the pid of an unrelated local process. The host string a
//! starter reports is kept verbatim; [`ThisNode`] holds the facts that say which host strings
//! name this machine (its host names and aliases, the addresses of its interfaces, names a
//! caller adds), and [`ThisNode::classify`] applies them. No I/O here: `mpir-target` gathers
//! the facts of a live machine (`mpir_target::live::node::this_node`).
//!
//! Matching is by facts only:
//! - host names compare without regard to ASCII case and to one trailing dot (DNS's root);
//! - a short name (no dot) matches a fully qualified name whose first label it is, either way
//!   round (`node7` and `node7.cluster.org`); two fully qualified names must be equal
//!   (`node7.a.org` is not `node7.b.org`), and when the machine's fully qualified name is
//!   known, a fully qualified host must be it;
//! - an address literal (IPv4, IPv6, bracketed IPv6) is local when it is a loopback address or
//!   an address of one of this machine's interfaces;
//! - `localhost` and its usual spellings are local;
//! - nothing is resolved through DNS or `/etc/hosts` here: an alias the facts do not list is
//!   remote, and the caller says otherwise with [`ThisNode::with_alias`].

use std::net::IpAddr;

/// Why a host string names this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum LocalBy {
    /// One of this machine's host names (or its short or fully qualified form).
    HostName,
    /// `localhost`, or a loopback address.
    Loopback,
    /// An address of one of this machine's interfaces.
    InterfaceAddress,
    /// A name the caller said names this node.
    Alias,
}

/// Where a rank's host is, as far as the facts tell.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Locality {
    /// This node.
    Local(LocalBy),
    /// Another node: nothing on this machine may be done to its pid.
    Remote,
    /// No usable host string (missing, empty, or not a plausible name): treated as not this
    /// node.
    Unknown,
}

impl Locality {
    /// Whether the host is this node.
    pub fn is_local(&self) -> bool {
        matches!(self, Locality::Local(_))
    }
}

/// The facts that say which host strings name this machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ThisNode {
    /// Host names of this machine (kernel host name, fully qualified forms), normalised.
    names: Vec<String>,
    /// Addresses of this machine's interfaces.
    addresses: Vec<IpAddr>,
    /// Names the caller says name this node, normalised.
    aliases: Vec<String>,
}

/// Lower-cases and strips one trailing dot; `None` for an empty result.
fn normalise(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

/// The first label of a normalised name.
fn first_label(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Whether two normalised names name the same host: equal, or one is short and is the other's
/// first label.
fn same_host(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.contains('.'), b.contains('.')) {
        (false, true) => first_label(b) == a,
        (true, false) => first_label(a) == b,
        _ => false,
    }
}

const LOCALHOST_NAMES: [&str; 5] = [
    "localhost",
    "localhost.localdomain",
    "localhost6",
    "ip6-localhost",
    "ip6-loopback",
];

/// An address literal: IPv4, IPv6, or IPv6 in brackets.
fn address_literal(host: &str) -> Option<IpAddr> {
    let inner = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    inner.parse().ok()
}

impl ThisNode {
    /// No facts: only `localhost` and loopback addresses are local.
    pub fn new() -> Self {
        ThisNode::default()
    }

    /// With this host name of the machine (the kernel's, or a fully qualified form).
    pub fn with_name(mut self, name: &str) -> Self {
        if let Some(n) = normalise(name)
            && !self.names.contains(&n)
        {
            self.names.push(n);
        }
        self
    }

    /// With this address of one of the machine's interfaces.
    pub fn with_address(mut self, address: IpAddr) -> Self {
        if !self.addresses.contains(&address) {
            self.addresses.push(address);
        }
        self
    }

    /// With a name (or address literal) the caller says names this node: for launchers that
    /// report an alias or an address the machine's facts do not list.
    pub fn with_alias(mut self, alias: &str) -> Self {
        if let Some(n) = normalise(alias)
            && !self.aliases.contains(&n)
        {
            self.aliases.push(n);
        }
        self
    }

    /// The machine's host names, normalised.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The machine's interface addresses.
    pub fn addresses(&self) -> &[IpAddr] {
        &self.addresses
    }

    /// The caller's aliases, normalised.
    pub fn aliases(&self) -> &[String] {
        &self.aliases
    }

    /// A name for this node in messages: its first host name, else `localhost`.
    pub fn display_name(&self) -> &str {
        self.names.first().map_or("localhost", String::as_str)
    }

    /// Where the host a starter reported is. `None`, an empty string, or one with control
    /// characters is [`Locality::Unknown`].
    pub fn classify(&self, host: Option<&str>) -> Locality {
        let Some(host) = host else {
            return Locality::Unknown;
        };
        if host.chars().any(|c| c.is_control() || c == '\u{fffd}') {
            return Locality::Unknown;
        }
        let Some(h) = normalise(host.trim()) else {
            return Locality::Unknown;
        };
        if self.aliases.iter().any(|a| same_host(a, &h)) {
            return Locality::Local(LocalBy::Alias);
        }
        if let Some(addr) = address_literal(&h) {
            if self
                .aliases
                .iter()
                .any(|a| address_literal(a) == Some(addr))
            {
                return Locality::Local(LocalBy::Alias);
            }
            if addr.is_loopback() {
                return Locality::Local(LocalBy::Loopback);
            }
            if self.addresses.contains(&addr) {
                return Locality::Local(LocalBy::InterfaceAddress);
            }
            return Locality::Remote;
        }
        if LOCALHOST_NAMES.contains(&h.as_str()) {
            return Locality::Local(LocalBy::Loopback);
        }
        // A fully qualified host is this machine's only as one of its fully qualified names
        // when it has any: its short name alone cannot tell `node7.a.org` from `node7.b.org`.
        let knows_fqdn = self.names.iter().any(|n| n.contains('.'));
        let matches = |n: &String| {
            if h.contains('.') && knows_fqdn {
                *n == h
            } else {
                same_host(n, &h)
            }
        };
        if self.names.iter().any(matches) {
            return Locality::Local(LocalBy::HostName);
        }
        Locality::Remote
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> ThisNode {
        ThisNode::new()
            .with_name("Node7")
            .with_name("node7.cluster.example.org.")
            .with_address("10.1.2.7".parse().unwrap())
            .with_address("fe80::1".parse().unwrap())
    }

    #[test]
    fn host_names_match_without_case_and_trailing_dot() {
        let n = node();
        for h in [
            "node7",
            "NODE7",
            "node7.",
            "node7.cluster.example.org",
            "Node7.Cluster.Example.Org.",
        ] {
            assert_eq!(
                n.classify(Some(h)),
                Locality::Local(LocalBy::HostName),
                "{h}"
            );
        }
    }

    #[test]
    fn other_hosts_are_remote() {
        let n = node();
        for h in [
            "node8",
            "node70",
            "node7.other.example.org",
            "node7x.cluster.example.org",
            "10.1.2.8",
            "192.0.2.1",
            "node",
        ] {
            assert_eq!(n.classify(Some(h)), Locality::Remote, "{h}");
        }
    }

    #[test]
    fn a_short_machine_name_matches_any_domain_but_fqdns_must_agree() {
        let short = ThisNode::new().with_name("vm");
        assert!(short.classify(Some("vm.cluster.org")).is_local());
        assert!(!short.classify(Some("vm2.cluster.org")).is_local());
        let fqdn = ThisNode::new().with_name("vm.a.org");
        assert!(fqdn.classify(Some("vm")).is_local());
        assert!(!fqdn.classify(Some("vm.b.org")).is_local());
    }

    #[test]
    fn addresses_and_loopback() {
        let n = node();
        assert_eq!(
            n.classify(Some("10.1.2.7")),
            Locality::Local(LocalBy::InterfaceAddress)
        );
        assert_eq!(
            n.classify(Some("[fe80::1]")),
            Locality::Local(LocalBy::InterfaceAddress)
        );
        for h in [
            "127.0.0.1",
            "127.0.1.1",
            "::1",
            "[::1]",
            "localhost",
            "LOCALHOST.",
        ] {
            assert_eq!(
                n.classify(Some(h)),
                Locality::Local(LocalBy::Loopback),
                "{h}"
            );
        }
        // With no facts, only loopback is local.
        assert_eq!(ThisNode::new().classify(Some("node7")), Locality::Remote);
    }

    #[test]
    fn aliases_given_by_the_caller() {
        let n = node().with_alias("ib-node7").with_alias("192.0.2.77");
        assert_eq!(
            n.classify(Some("IB-NODE7")),
            Locality::Local(LocalBy::Alias)
        );
        assert_eq!(
            n.classify(Some("192.0.2.77")),
            Locality::Local(LocalBy::Alias)
        );
        assert_eq!(n.classify(Some("ib-node8")), Locality::Remote);
    }

    #[test]
    fn unusable_hosts_are_unknown() {
        let n = node();
        for h in [
            None,
            Some(""),
            Some("."),
            Some("node7\n"),
            Some("no\u{fffd}de7"),
        ] {
            assert_eq!(n.classify(h), Locality::Unknown, "{h:?}");
        }
        // Surrounding blanks are not part of a name.
        assert!(n.classify(Some(" node7 ")).is_local());
    }
}
