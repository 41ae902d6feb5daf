//! The queues document (`mpir.queues/1`, and `mpir.core/3` which adds the job and the
//! analysis of cores) and its table. Built from the tool's own types: the library's queue
//! model is converted here, field by field, so that a library change cannot change the schema.

use mpir_mqd::output::OutputLog;
use mpir_mqd::{CommOrigin, CommunicatorQueues, EngineUsed, Queue};
use mpir_session::{QueueRead, RankError, RankRead, ReleaseReport, chain};
use mpir_types::mqd::{OpClass, OpStatus, Operation, Peer};
use serde::Serialize;

use crate::deadlock::{CoverageOut, ReportOut, class_name};

/// `schema` of a queues document (docs/cli-json.md).
pub const QUEUES_SCHEMA: &str = "mpir.queues/1";

/// `schema` of `core`'s document for ranks' cores: a queues document with the job, the
/// analysis and its coverage.
pub const CORE_SCHEMA: &str = "mpir.core/3";

/// An operation's status: a word, or `{"unknown": n}` for a value the interface does not
/// define.
#[derive(Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum StatusOut {
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
pub struct QueuesDoc {
    pub schema: &'static str,
    pub engine: String,
    pub ranks: Vec<RankDoc>,
    pub notes: Vec<String>,
    /// `core` with a starter's core: the job document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<serde_json::Value>,
    /// `core`: the wait-for analysis of this one snapshot (absent when no core was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadlock: Option<ReportOut>,
    /// `core`: which ranks the analysis covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageOut>,
}

#[derive(Serialize, Clone)]
pub struct RankDoc {
    pub rank: Option<u64>,
    pub pid: u32,
    /// `core`: the core file read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub error: Option<String>,
    /// When the kernel refused this tool the rank: why, as in every document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<crate::DenialOut>,
    /// Why it was not read, in the one vocabulary of every document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::WhyOut>,
    /// What the reader could not see in an otherwise good result.
    pub notes: Vec<String>,
    pub communicators: Vec<CommDoc>,
}

#[derive(Serialize, Clone)]
pub struct CommDoc {
    pub name: String,
    pub id: u64,
    /// An id every member shares (MPICH's context id, Open MPI's cid), when known.
    pub context_id: Option<u64>,
    /// "predefined", "user", "internal" (made by the MPI for itself) or "unknown".
    pub origin: &'static str,
    pub size: i64,
    pub local_rank: i64,
    /// World rank of each member, by local rank, when known.
    pub group: Option<Vec<i64>>,
    /// Queues the reader could not give (no information, or failed part way).
    pub missing: Vec<String>,
    pub operations: Vec<OpDoc>,
}

#[derive(Serialize, Clone)]
pub struct OpDoc {
    pub class: &'static str,
    pub status: StatusOut,
    pub peer_local: Option<u64>,
    pub any_source: bool,
    pub peer_global: Option<u64>,
    pub tag: Option<i64>,
    pub any_tag: bool,
    pub length_bytes: Option<u64>,
    pub length_elements: Option<u64>,
    pub buffer: String,
    pub system_buffer: bool,
    pub actual: Option<ActualDoc>,
    pub extra_text: Vec<String>,
}

#[derive(Serialize, Clone)]
pub struct ActualDoc {
    pub peer_local: Option<u64>,
    pub peer_global: Option<u64>,
    pub tag: i64,
    pub length_bytes: Option<u64>,
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

pub fn comm_doc(c: &CommunicatorQueues) -> CommDoc {
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

pub use crate::names::{engine_name, rank_error};

/// Notes for what the MPI's DLL printed on its own: each distinct line once, with its count.
pub fn printed_notes(engine: Option<&EngineUsed>, printed: &OutputLog) -> Vec<String> {
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
pub fn release_notes(release: &ReleaseReport) -> impl Iterator<Item = String> + '_ {
    release
        .problems
        .iter()
        .map(|p| format!("while releasing: {}", chain(p)))
}

/// One rank of a queues document.
pub fn rank_doc(r: &RankRead, types_given: bool) -> RankDoc {
    let (error, mut notes, communicators) = match &r.queues {
        Ok(q) => (
            None,
            q.notes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<String>>(),
            q.communicators.iter().map(comm_doc).collect(),
        ),
        Err(e) => (Some(rank_error(e, types_given)), Vec::new(), Vec::new()),
    };
    if let Some(d) = &r.cooperative {
        notes.insert(
            0,
            format!(
                "read through its cooperative channel, not stopped (the kernel refused this \
                 tool the process: {d})"
            ),
        );
    }
    RankDoc {
        rank: r.rank,
        pid: r.pid,
        source: r.core.as_ref().map(|c| c.display().to_string()),
        error,
        denial: r
            .queues
            .as_ref()
            .err()
            .and_then(RankError::denial)
            .map(crate::DenialOut::of),
        why: r
            .queues
            .as_ref()
            .err()
            .map(|e| crate::WhyOut::of(&e.not_read())),
        notes,
        communicators,
    }
}

/// The queues document of what a session read.
pub fn queues_doc(read: &QueueRead, types_given: bool) -> QueuesDoc {
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
