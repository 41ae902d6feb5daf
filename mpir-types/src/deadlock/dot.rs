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
    /// deadlock orange; edges between two ranks of one cycle are red and bold. A waiting rank
    /// whose stacks were given names its MPI call and call site under its rank. A collective
    /// mismatch is a cluster `collective` of box nodes (`c<I>_<J>`), one per call and one per
    /// place elsewhere, each labelled with its ranks; a rank not waiting (outside MPI,
    /// finalized, exited) is a dotted box naming its activity and what it has pending.
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
        let calls: HashMap<u64, String> = self
            .waits
            .iter()
            .filter_map(|w| Some((w.rank, w.blocked_in.as_ref()?.to_string())))
            .collect();
        let not_waiting: HashMap<u64, String> = self
            .not_waiting
            .iter()
            .map(|n| {
                let mut label = n.activity.to_string();
                for o in &n.operations {
                    label.push_str("\npending ");
                    label.push_str(&o.to_string());
                }
                if n.omitted > 0 {
                    label.push_str(&format!("\n… {} more", n.omitted));
                }
                (n.rank, label)
            })
            .collect();
        for &rank in not_waiting.keys() {
            nodes.entry(rank).or_insert(RankState::Progressing);
        }
        for (rank, state) in &nodes {
            let style = match state {
                _ if not_waiting.contains_key(rank) => ", shape=box, style=dotted",
                RankState::InCycle { .. } => ", style=filled, fillcolor=\"#f4a6a6\", color=red",
                RankState::BlockedByDeadlock => ", style=filled, fillcolor=\"#fbd19b\"",
                RankState::Progressing => "",
            };
            let label = match (calls.get(rank), not_waiting.get(rank)) {
                (Some(c), _) => format!("rank {rank}\n{c}"),
                (None, Some(n)) => format!("rank {rank}\n{n}"),
                (None, None) => format!("rank {rank}"),
            };
            let _ = writeln!(out, "  {} [label={}{style}];", node(*rank), quoted(&label));
        }
        for (i, c) in self.collective.iter().enumerate() {
            let _ = writeln!(
                out,
                "  subgraph \"cluster_collective{i}\" {{\n    label={}; color=purple;",
                quoted("collective mismatch")
            );
            for (j, call) in c.calls.iter().enumerate() {
                let on = call
                    .communicator
                    .as_ref()
                    .map_or_else(String::new, |m| format!("\non {m}"));
                let _ = writeln!(
                    out,
                    "    \"c{i}_{j}\" [shape=box, style=filled, fillcolor=\"#d9c2f0\", label={}];",
                    quoted(&format!("{}\nranks {}{on}", call.call, call.ranks))
                );
            }
            for (k, e) in c.elsewhere.iter().enumerate() {
                let j = c.calls.len() + k;
                let _ = writeln!(
                    out,
                    "    \"c{i}_{j}\" [shape=box, label={}];",
                    quoted(&format!("{}\nranks {}", e.what, e.ranks))
                );
            }
            out.push_str("  }\n");
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
