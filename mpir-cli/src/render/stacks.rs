//! The stacks' text form; the document is [`mpir_json::stacks`]'s.

use mpir_session::StacksRead;

pub(crate) use mpir_json::stacks::*;

/// The text form: the tree, then the envelope's lines (stops, what did not move, numbering).
pub(crate) fn text(read: &StacksRead, source: &str) -> String {
    use std::fmt::Write as _;
    let last = read.last();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stacks of {} ranks ({source}), {} sample{}",
        last.ranks.len() + last.unreached.len(),
        read.samples.len(),
        if read.samples.len() == 1 { "" } else { "s" }
    );
    out.push_str(&read.tree().to_text());
    for line in super::cooperative_lines(
        read.cooperative.iter().map(|(rank, d)| (Some(*rank), d)),
        read.announced.as_ref(),
    ) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(unmoved) = &read.unmoved {
        if unmoved.is_empty() {
            let _ = writeln!(out, "every rank's stacks moved between samples");
        } else {
            let _ = writeln!(
                out,
                "did not move in {} samples: [{unmoved}]",
                read.samples.len()
            );
        }
    }
    if let Some(max) = read.samples.iter().filter_map(|s| s.max_stop()).max() {
        let _ = writeln!(
            out,
            "each process stopped at most {:.3} ms per sample",
            max.as_secs_f64() * 1e3
        );
    }
    let python = mpir_types::stacks::PythonSummary::of(&last.ranks);
    for (version, ranks) in &python.versions {
        let _ = writeln!(out, "ranks running CPython {version}: [{ranks}]");
    }
    for (problem, ranks) in &python.problems {
        let _ = writeln!(out, "Python frames not read: [{ranks}] {problem}");
    }
    if !read.numbered.is_empty() {
        let list: Vec<String> = read
            .numbered
            .iter()
            .map(|(r, p)| format!("{r}=pid {p}"))
            .collect();
        let _ = writeln!(out, "numbered by position: {}", list.join(", "));
    }
    out
}
