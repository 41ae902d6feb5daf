//! Text, Graphviz (STAT's 2D layout) and folded-stack output.

use super::Trust;
use super::ranges::Ranges;
use super::tree::{NodeId, NodeKind, StackTree};
use std::collections::BTreeMap;
use std::fmt::Write as _;

impl StackTree {
    /// An indented tree, one node per line: `label [ranks] N ranks, T threads`, then the
    /// truncated stacks, the unreached ranks with their reasons and what the limits cut.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut stack = vec![(NodeId::ROOT, 0usize)];
        while let Some((id, depth)) = stack.pop() {
            let Some(n) = self.node(id) else { continue };
            let _ = write!(
                out,
                "{:indent$}{} [{}] {} rank{}, {} thread{}",
                "",
                n.key.label(),
                n.ranks,
                n.ranks.count(),
                plural(n.ranks.count()),
                n.threads,
                plural(n.threads),
                indent = depth * 2
            );
            if n.trust == Some(Trust::Scan) {
                out.push_str("; found by stack scan (may be wrong)");
            }
            if !n.truncated.is_empty() {
                let _ = write!(out, "; stack ends early here for [{}]", n.truncated);
            }
            out.push('\n');
            stack.extend(n.children.iter().rev().map(|&c| (c, depth + 1)));
        }
        for (reason, ranks) in &self.truncations {
            let _ = writeln!(out, "truncated [{ranks}]: {reason}");
        }
        // A refusal by the kernel carries its remedy: said once per reason.
        let mut unreached: BTreeMap<(String, Option<String>), Ranges> = BTreeMap::new();
        for (rank, reason) in &self.unreached {
            let remedy = reason.denial.as_ref().map(|d| d.remedy());
            let entry = unreached.entry((reason.to_string(), remedy)).or_default();
            entry.add(&Ranges::one(*rank));
        }
        for ((reason, remedy), ranks) in &unreached {
            let _ = writeln!(out, "unreached [{ranks}]: {reason}");
            if let Some(remedy) = remedy {
                let _ = writeln!(out, "  what to do: {remedy}");
            }
        }
        if !self.cut.depth.is_empty() {
            let _ = writeln!(
                out,
                "cut [{}]: stacks deeper than {} frames",
                self.cut.depth, self.limits.max_depth
            );
        }
        if !self.cut.nodes.is_empty() {
            let _ = writeln!(
                out,
                "cut [{}]: frames left out at the limit of {} nodes",
                self.cut.nodes, self.limits.max_nodes
            );
        }
        out
    }

    /// Graphviz in STAT's 2D layout: a `/` root, one box per node labelled with its function,
    /// and edges labelled `count:[ranks]` (the ranks entering the child), with the node's
    /// function, module and source position, and the thread count (`tcount`), as attributes.
    pub fn to_dot(&self) -> String {
        let mut out =
            String::from("digraph G {\n\tnode [shape=box,style=filled,labeljust=c,height=0.2];\n");
        for (id, n) in self.nodes() {
            let fill = match n.key.kind {
                NodeKind::Root => "lightgrey",
                NodeKind::Helpers => "lightblue",
                NodeKind::Thread => "khaki",
                _ if !n.truncated.is_empty() => "pink",
                _ => "white",
            };
            let _ = write!(
                out,
                "\t{} [label=\"{}\",fillcolor={fill},function=\"{}\"",
                id.index(),
                escape(&n.key.label()),
                escape(&n.key.function)
            );
            if !n.key.module.is_empty() {
                let _ = write!(out, ",module=\"{}\"", escape(&n.key.module));
            }
            if let Some(l) = &n.key.location {
                let _ = write!(out, ",source=\"{}\",line={}", escape(&l.file), l.line);
            }
            out.push_str("];\n");
        }
        for (id, n) in self.nodes() {
            for &c in &n.children {
                let Some(child) = self.node(c) else { continue };
                let _ = writeln!(
                    out,
                    "\t{} -> {} [label=\"{}:[{}]\",count={},tcount={}];",
                    id.index(),
                    c.index(),
                    child.ranks.count(),
                    child.ranks,
                    child.ranks.count(),
                    child.threads
                );
            }
        }
        out.push_str("}\n");
        out
    }

    /// Folded stacks for flamegraph tools: one `outer;…;inner N` line per call path where
    /// threads end, `N` the number of threads ending there. `;` in names becomes `:`, line
    /// breaks become blanks.
    pub fn to_folded(&self) -> String {
        let mut out = String::new();
        for (id, _) in self.nodes() {
            let n = self.ending_threads(id);
            if n == 0 {
                continue;
            }
            let path = self.path(id);
            if path.is_empty() {
                let _ = writeln!(out, "[no frames] {n}");
                continue;
            }
            let labels: Vec<String> = path.iter().map(|k| folded_label(&k.label())).collect();
            let _ = writeln!(out, "{} {n}", labels.join(";"));
        }
        out
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn folded_label(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// A Graphviz double-quoted string's content.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
