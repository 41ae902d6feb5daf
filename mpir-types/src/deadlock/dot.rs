//! Graphviz DOT output of a report.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::report::{DeadlockReport, RankState, WaitTarget};
use crate::mqd::{OpClass, Peer};

/// A DOT string literal: quotes and backslashes escaped, line breaks as `\n`, other control
/// characters dropped (names come from the target).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn node(rank: u64) -> String {
    format!("\"r{rank}\"")
}

impl DeadlockReport {
    /// The wait-for graph in Graphviz DOT: one node per rank that waits or is waited for
    /// (`r<RANK>`), one edge per wait labelled with the operation, tag and communicator
    /// (`MPI_ANY_SOURCE` waits: a dashed edge to each listed candidate, and to an `…` node for
    /// the candidates not listed). Ranks in a cycle are filled red, ranks blocked by the
    /// deadlock orange; edges between two ranks of one cycle are red and bold.
    pub fn to_dot(&self) -> String {
        let states: HashMap<u64, RankState> =
            self.waits.iter().map(|w| (w.rank, w.state)).collect();
        let state_of = |rank: u64| states.get(&rank).copied().unwrap_or(RankState::Progressing);
        let mut nodes: BTreeMap<u64, RankState> = BTreeMap::new();
        let mut edges = String::new();
        for (i, w) in self.waits.iter().enumerate() {
            nodes.insert(w.rank, w.state);
            let class = match w.op.class {
                OpClass::Send => "send",
                _ => "receive",
            };
            let peer = match w.op.peer {
                Peer::Rank(p) => format!("{}{p}", if class == "send" { "to " } else { "from " }),
                Peer::Any => "from MPI_ANY_SOURCE".to_string(),
                Peer::Unknown(v) => format!("peer ?{v}"),
            };
            let tag =
                w.op.tag
                    .map_or_else(|| "MPI_ANY_TAG".to_string(), |t| t.to_string());
            let label = quoted(&format!("{class} {peer}\ntag {tag}\n{}", w.op.comm));
            let (targets, omitted, dashed) = match &w.target {
                WaitTarget::Rank { rank } => (std::slice::from_ref(rank), 0, false),
                WaitTarget::AnySource {
                    candidates,
                    omitted,
                } => (candidates.as_slice(), *omitted, true),
            };
            for &t in targets {
                nodes.entry(t).or_insert_with(|| state_of(t));
                let same_cycle = matches!(
                    (w.state, nodes.get(&t)),
                    (RankState::InCycle { cycle: a }, Some(RankState::InCycle { cycle: b })) if a == *b
                );
                let mut attrs = vec![format!("label={label}")];
                if dashed {
                    attrs.push("style=dashed".into());
                }
                if same_cycle {
                    attrs.push("color=red".into());
                    attrs.push("penwidth=2.5".into());
                    attrs.push("class=cycle".into());
                } else if !w.can_complete {
                    attrs.push("color=darkorange".into());
                }
                let _ = writeln!(
                    edges,
                    "  {} -> {} [{}];",
                    node(w.rank),
                    node(t),
                    attrs.join(", ")
                );
            }
            if omitted > 0 {
                let more = quoted(&format!("more{i}"));
                let _ = writeln!(
                    edges,
                    "  {more} [shape=plaintext, label={}];\n  {} -> {more} [label={label}, style=dashed];",
                    quoted(&format!("… {omitted} more ranks")),
                    node(w.rank),
                );
            }
        }
        let mut out = String::from("digraph deadlock {\n");
        let _ = writeln!(
            out,
            "  graph [label={}, labelloc=t];\n  node [shape=ellipse];",
            quoted(&self.summary())
        );
        for (rank, state) in &nodes {
            let style = match state {
                RankState::InCycle { .. } => ", style=filled, fillcolor=\"#f4a6a6\", color=red",
                RankState::BlockedByDeadlock => ", style=filled, fillcolor=\"#fbd19b\"",
                RankState::Progressing => "",
            };
            let _ = writeln!(
                out,
                "  {} [label={}{style}];",
                node(*rank),
                quoted(&format!("rank {rank}"))
            );
        }
        out.push_str(&edges);
        out.push_str("}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn names_from_the_target_cannot_break_out_of_a_string() {
        assert_eq!(
            quoted("a\"b\\c\nd\u{7}e"),
            r#""a\"b\\c\nd e""#.replace(' ', "")
        );
    }
}
