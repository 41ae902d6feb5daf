//! The queues table; the document is [`mpir_json::queues`]'s.

pub(crate) use mpir_json::queues::*;

fn print_table(doc: &QueuesDoc) {
    outln!("message queues ({}), {} ranks", doc.engine, doc.ranks.len());
    // Notes every read rank shares are said once, at the end.
    let read: Vec<&RankDoc> = doc.ranks.iter().filter(|r| r.error.is_none()).collect();
    let common: Vec<&String> = read.first().map_or(Vec::new(), |first| {
        first
            .notes
            .iter()
            .filter(|n| read.iter().all(|r| r.notes.contains(n)))
            .collect()
    });
    for r in &doc.ranks {
        let rank = r.rank.map_or("?".to_string(), |r| r.to_string());
        let from = r
            .source
            .as_deref()
            .map_or(String::new(), |s| format!(", core {s}"));
        match &r.error {
            Some(e) => outln!("rank {rank} (pid {}{from}): not read: {e}", r.pid),
            None => outln!("rank {rank} (pid {}{from}):", r.pid),
        }
        if let Some(d) = &r.denial {
            outln!("  what to do: {}", d.remedy);
        }
        for n in r.notes.iter().filter(|n| !common.contains(n)) {
            outln!("  ({n})");
        }
        for c in &r.communicators {
            let name = if c.name.is_empty() {
                "(unnamed)"
            } else {
                &c.name
            };
            let origin = if c.origin == "internal" {
                ", internal"
            } else {
                ""
            };
            outln!(
                "  {name} (size {}, local rank {}{origin}): {} operations",
                c.size,
                c.local_rank,
                c.operations.len()
            );
            for m in &c.missing {
                outln!("    ({m})");
            }
            for o in &c.operations {
                let peer = match (o.any_source, o.peer_local, o.peer_global) {
                    (true, _, _) => "any".to_string(),
                    (false, Some(l), Some(g)) if l != g => format!("{l} (world {g})"),
                    (false, Some(l), _) => l.to_string(),
                    _ => "?".to_string(),
                };
                let tag = o.tag.map_or("any".to_string(), |t| t.to_string());
                let len = match (o.length_bytes, o.length_elements) {
                    (Some(b), _) => format!("{b} bytes"),
                    (None, Some(e)) => format!("{e} elements"),
                    _ => "? bytes".into(),
                };
                let class = match o.class {
                    "send" => "send      to  ",
                    "receive" => "receive   from",
                    _ => "unexpected from",
                };
                let status = match o.status {
                    StatusOut::Pending => "pending".to_string(),
                    StatusOut::Matched => "matched".to_string(),
                    StatusOut::Complete => "complete".to_string(),
                    StatusOut::Unknown(v) => format!("status {v}"),
                };
                outln!("    {class} {peer:<12} tag {tag:<8} {len:<16} {status}");
            }
        }
    }
    for n in common {
        outln!("note (every rank): {n}");
    }
    for n in &doc.notes {
        outln!("note: {n}");
    }
}

/// Prints `doc` as JSON or as the table.
pub(crate) fn print_doc(doc: &QueuesDoc, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(doc)?);
    } else {
        print_table(doc);
    }
    Ok(())
}
