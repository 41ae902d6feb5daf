//! The stand-in MPIR tool daemon and the check that exactly one ran per node with ranks, inside
//! that node, seeing that node's ranks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::report::Printed;
use crate::support::*;

/// The stand-in tool daemon: records where it runs (host name, its pid and its parent's
/// command inside its node, its second argument, the node's `mn_deadlock` pids) in
/// `$1/daemon.<host>.<pid>.txt`, then lingers.
pub(crate) const TOOL_DAEMON: &str = r#"#!/bin/sh
i=0
while [ $i -lt 100 ] && [ "$(pgrep -x mn_deadlock | wc -l)" -lt 2 ]; do sleep 0.1; i=$((i+1)); done
f="$1/daemon.$(hostname).$$.txt"
{ echo "host=$(hostname)"; echo "pid=$$"; echo "parent=$(cat /proc/$PPID/comm)"; echo "arg=$2"
  echo "ranks=$(pgrep -x mn_deadlock | sort -n | tr '\n' ' ')"; } > "$f.tmp" && mv "$f.tmp" "$f"
exec sleep 120
"#;

/// Exactly one daemon per node with ranks (node2, node3), inside that node, started by its
/// orted, seeing that node's ranks under the table's pids.
pub(crate) fn check_daemons(dir: &Path, ranks: &[Printed]) {
    let mut daemons: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("daemon.") && n.ends_with(".txt"))
        .collect();
    daemons.sort();
    assert_eq!(daemons.len(), 2, "{daemons:?}");
    let mut nodes = BTreeSet::new();
    for name in &daemons {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                .unwrap_or_default()
                .to_string()
        };
        let host = field("host");
        assert!(
            name.starts_with(&format!("daemon.{host}.")),
            "{name}: {text}"
        );
        assert_eq!(field("parent"), "orted", "{text}");
        assert_eq!(field("arg"), "two words", "{text}");
        let seen: Vec<u32> = field("ranks")
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        let want: Vec<u32> = ranks
            .iter()
            .filter(|(_, _, h)| *h == host)
            .map(|(_, p, _)| *p)
            .collect();
        assert_eq!(
            seen, want,
            "{host}'s daemon sees other ranks than the table: {text}"
        );
        nodes.insert(host);
    }
    assert_eq!(
        nodes,
        BTreeSet::from(["node2".to_string(), "node3".to_string()])
    );
}

/// Writes the stand-in tool daemon into `dir`.
pub(crate) fn tool_daemon(dir: &Path) -> PathBuf {
    let daemon = dir.join("tooldaemon.sh");
    std::fs::write(&daemon, TOOL_DAEMON).unwrap();
    run(Command::new("chmod").arg("755").arg(&daemon)).unwrap();
    daemon
}
