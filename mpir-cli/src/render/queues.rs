//! The queues document (`mpir.queues/1`, and `mpir.core/2` which adds the job and the
//! analysis of cores) and its table. Built from the tool's own types: the library's queue
//! model is converted here, field by field, so that a library change cannot change the schema.

use mpir_mqd::output::OutputLog;
use mpir_mqd::{CommOrigin, CommunicatorQueues, EngineUsed, MqdError, Queue};
use mpir_session::{QueueRead, RankError, RankRead, ReleaseReport, chain};
use mpir_types::mqd::{OpClass, OpStatus, Operation, Peer};
use serde::Serialize;

use crate::render::deadlock::{CoverageOut, ReportOut, class_name};

/// `schema` of a queues document (docs/cli-json.md).
pub(crate) const QUEUES_SCHEMA: &str = "mpir.queues/1";

/// `schema` of `core`'s document for ranks' cores: a queues document with the job, the
/// analysis and its coverage.
pub(crate) const CORE_SCHEMA: &str = "mpir.core/2";

/// An operation's status: a word, or `{"unknown": n}` for a value the interface does not
/// define.
#[derive(Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StatusOut {
    /// Posted, not matched.
    Pending,
    /// Matched, data not yet moved.
    Matched,
    /// Done.
    Complete,
    /// Another value, as read.
    Unknown(i64),
}

#[derive(Serialize)]
pub(crate) struct QueuesDoc {
    pub(crate) schema: &'static str,
    pub(crate) engine: String,
    pub(crate) ranks: Vec<RankDoc>,
    pub(crate) notes: Vec<String>,
    /// `core` with a starter's core: the job document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job: Option<serde_json::Value>,
    /// `core`: the wait-for analysis of this one snapshot (absent when no core was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) deadlock: Option<ReportOut>,
    /// `core`: which ranks the analysis covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) coverage: Option<CoverageOut>,
}

#[derive(Serialize, Clone)]
pub(crate) struct RankDoc {
    pub(crate) rank: Option<u64>,
    pub(crate) pid: u32,
    /// `core`: the core file read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    pub(crate) error: Option<String>,
    /// What the reader could not see in an otherwise good result.
    pub(crate) notes: Vec<String>,
    pub(crate) communicators: Vec<CommDoc>,
}

#[derive(Serialize, Clone)]
pub(crate) struct CommDoc {
    pub(crate) name: String,
    pub(crate) id: u64,
    /// An id every member shares (MPICH's context id, Open MPI's cid), when known.
    pub(crate) context_id: Option<u64>,
    /// "predefined", "user", "internal" (made by the MPI for itself) or "unknown".
    pub(crate) origin: &'static str,
    pub(crate) size: i64,
    pub(crate) local_rank: i64,
    /// World rank of each member, by local rank, when known.
    pub(crate) group: Option<Vec<i64>>,
    /// Queues the reader could not give (no information, or failed part way).
    pub(crate) missing: Vec<String>,
    pub(crate) operations: Vec<OpDoc>,
}

#[derive(Serialize, Clone)]
pub(crate) struct OpDoc {
    pub(crate) class: &'static str,
    pub(crate) status: StatusOut,
    pub(crate) peer_local: Option<u64>,
    pub(crate) any_source: bool,
    pub(crate) peer_global: Option<u64>,
    pub(crate) tag: Option<i64>,
    pub(crate) any_tag: bool,
    pub(crate) length_bytes: Option<u64>,
    pub(crate) length_elements: Option<u64>,
    pub(crate) buffer: String,
    pub(crate) system_buffer: bool,
    pub(crate) actual: Option<ActualDoc>,
    pub(crate) extra_text: Vec<String>,
}

#[derive(Serialize, Clone)]
pub(crate) struct ActualDoc {
    pub(crate) peer_local: Option<u64>,
    pub(crate) peer_global: Option<u64>,
    pub(crate) tag: i64,
    pub(crate) length_bytes: Option<u64>,
}

fn op_doc(op: &Operation) -> OpDoc {
    let (peer_local, any_source) = match op.peer_local {
        Peer::Any => (None, true),
        Peer::Rank(r) => (Some(r), false),
        _ => (None, false),
    };
    OpDoc {
        class: class_name(op.class),
        status: match op.status {
            OpStatus::Pending => StatusOut::Pending,
            OpStatus::Matched => StatusOut::Matched,
            OpStatus::Complete => StatusOut::Complete,
            OpStatus::Unknown(v) => StatusOut::Unknown(v),
        },
        peer_local,
        any_source,
        peer_global: op.peer_global,
        tag: op.tag,
        any_tag: op.tag.is_none() && op.class == OpClass::Receive,
        length_bytes: op.length.bytes,
        length_elements: op.length.elements,
        buffer: super::hex(op.buffer),
        system_buffer: op.system_buffer,
        actual: op.actual.map(|a| ActualDoc {
            peer_local: a.local_rank,
            peer_global: a.global_rank,
            tag: a.tag,
            length_bytes: a.length.bytes,
        }),
        extra_text: op.extra_text.clone(),
    }
}

pub(crate) fn comm_doc(c: &CommunicatorQueues) -> CommDoc {
    let mut operations = Vec::new();
    let mut missing = Vec::new();
    for class in OpClass::ALL {
        let label = match class {
            OpClass::Send => "send",
            OpClass::Receive => "receive",
            OpClass::Unexpected => "unexpected",
        };
        match c.queue(class) {
            Queue::NoInformation => missing.push(format!("{label}: no information")),
            Queue::Failed { error, .. } => missing.push(format!("{label}: {}", chain(error))),
            _ => {}
        }
        operations.extend(c.queue(class).operations().iter().map(op_doc));
    }
    CommDoc {
        name: c.communicator.name.clone(),
        id: c.communicator.unique_id,
        context_id: c.context_id,
        origin: match c.origin {
            CommOrigin::Predefined => "predefined",
            CommOrigin::User => "user",
            CommOrigin::Internal => "internal",
            _ => "unknown",
        },
        size: c.communicator.size,
        local_rank: c.communicator.local_rank,
        // -1 for a member whose world rank is unknown (the document's shape since version 1).
        group: c.group.as_ref().map(|g| {
            g.iter()
                .map(|r| r.and_then(|r| i64::try_from(r).ok()).unwrap_or(-1))
                .collect()
        }),
        missing,
        operations,
    }
}

/// Why a rank was not read, on one line; with a hint when the engine missed the MPI's types
/// and no types sidecar was given.
pub(crate) fn rank_error(e: &RankError, types_given: bool) -> String {
    let text = chain(e);
    if !types_given && !MqdError::missing_types_in(e).is_empty() {
        format!("{text} (the MPI library may lack debug info: give a types sidecar with --types)")
    } else {
        text
    }
}

/// The engine as the documents name it (`none` when no engine could be set up).
pub(crate) fn engine_name(engine: Option<&EngineUsed>) -> String {
    engine.map_or_else(|| "none".to_string(), ToString::to_string)
}

/// Notes for what the MPI's DLL printed on its own: each distinct line once, with its count.
pub(crate) fn printed_notes(engine: Option<&EngineUsed>, printed: &OutputLog) -> Vec<String> {
    let path = match engine {
        Some(EngineUsed::Dll { path, .. }) => path.display().to_string(),
        _ => "?".to_string(),
    };
    printed
        .notes()
        .into_iter()
        .map(|l| format!("the DLL {path} printed: {l}"))
        .collect()
}

/// Notes for what letting the ranks go met.
pub(crate) fn release_notes(release: &ReleaseReport) -> impl Iterator<Item = String> + '_ {
    release
        .problems
        .iter()
        .map(|p| format!("while releasing: {}", chain(p)))
}

/// One rank of a queues document.
pub(crate) fn rank_doc(r: &RankRead, types_given: bool) -> RankDoc {
    let (error, notes, communicators) = match &r.queues {
        Ok(q) => (
            None,
            q.notes.iter().map(ToString::to_string).collect(),
            q.communicators.iter().map(comm_doc).collect(),
        ),
        Err(e) => (Some(rank_error(e, types_given)), Vec::new(), Vec::new()),
    };
    RankDoc {
        rank: r.rank,
        pid: r.pid,
        source: r.core.as_ref().map(|c| c.display().to_string()),
        error,
        notes,
        communicators,
    }
}

/// The queues document of what a session read.
pub(crate) fn queues_doc(read: &QueueRead, types_given: bool) -> QueuesDoc {
    let mut notes = printed_notes(read.engine.as_ref(), &read.printed);
    notes.extend(release_notes(&read.release));
    QueuesDoc {
        schema: QUEUES_SCHEMA,
        engine: engine_name(read.engine.as_ref()),
        ranks: read
            .ranks
            .iter()
            .map(|r| rank_doc(r, types_given))
            .collect(),
        notes,
        job: None,
        deadlock: None,
        coverage: None,
    }
}

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
