//! What the tool prints: the tables and text forms here; every JSON document is the crate
//! [`mpir_json`]'s (one definition for the tool, the C API and the Python bindings), built from
//! its own types so that a library refactor cannot change a schema.

pub(crate) mod job;
pub(crate) mod queues;
pub(crate) mod stacks;

pub(crate) use mpir_json::deadlock;

/// The lines saying which ranks were read through their cooperative channel (the kernel
/// refused this tool them), one per refusal, and whether the job's table came from its ranks'
/// announcements.
pub(crate) fn cooperative_lines<'a>(
    ranks: impl Iterator<Item = (Option<u64>, &'a mpir_types::access::AccessDenial)>,
    announced: Option<&mpir_session::Announced>,
) -> Vec<String> {
    let mut by_reason: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (rank, d) in ranks {
        by_reason
            .entry(d.to_string())
            .or_default()
            .push(rank.map_or("?".into(), |r| r.to_string()));
    }
    let mut lines: Vec<String> = Vec::new();
    if let Some(a) = announced {
        lines.push(format!(
            "job table: from its ranks' announcements on their cooperative channels (starter \
             pid {} refused: {})",
            a.starter, a.denial
        ));
    }
    lines.extend(by_reason.into_iter().map(|(reason, ranks)| {
        format!(
            "read through their cooperative channel, not stopped [{}]: the kernel refused \
             this tool ({reason})",
            ranks.join(",")
        )
    }));
    lines
}
