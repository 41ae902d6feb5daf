//! The deadlock document (`mpir.deadlock/2`): the wait-for analysis in the tool's own types,
//! converted field by field from the library's [`DeadlockReport`].
//!
//! Version 2: `op.buffer` is a hex string, as every address in the documents (version 1 wrote
//! the library's decimal number).

use mpir_types::deadlock::{
    BlockedRank, CommRef, Cycle, DeadlockReport, RankState, Step, Verdict, Wait, WaitOp, WaitTarget,
};
use mpir_types::mqd::{OpClass, Peer};
use serde::Serialize;

use crate::cmd::deadlock::Coverage;

/// `schema` of a deadlock document (docs/cli-json.md).
pub(crate) const DEADLOCK_SCHEMA: &str = "mpir.deadlock/2";

/// A whole `mpir.deadlock/2` document.
#[derive(Serialize)]
pub(crate) struct DeadlockDoc<'a> {
    pub(crate) schema: &'static str,
    pub(crate) engine: String,
    /// Ranks that could not be read in some sample (the analysis treats them as progressing).
    pub(crate) unread: Vec<String>,
    /// Which ranks the verdict covers.
    pub(crate) coverage: &'a Coverage,
    /// What the MPI's DLL printed on its own (each distinct line once, with its count).
    pub(crate) reader_notes: &'a [String],
    #[serde(flatten)]
    pub(crate) report: ReportOut,
    /// With verdict "unknown" only: why no rank could be read, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// The analysis: the verdict and the graph's parts.
#[derive(Serialize)]
pub(crate) struct ReportOut {
    /// "no_cycle", "potential_deadlock", "deadlock", or "unknown" (nothing read).
    pub(crate) verdict: &'static str,
    pub(crate) samples: usize,
    pub(crate) ranks: usize,
    pub(crate) cycles: Vec<CycleOut>,
    pub(crate) blocked: Vec<BlockedOut>,
    pub(crate) waits: Vec<WaitOut>,
    pub(crate) notes: Vec<String>,
    pub(crate) notes_omitted: u64,
}

/// One cycle: its ranks, one closed chain through it, its communicators.
#[derive(Serialize)]
pub(crate) struct CycleOut {
    pub(crate) ranks: Vec<u64>,
    pub(crate) chain: Vec<StepOut>,
    pub(crate) communicators: Vec<CommOut>,
}

/// One link of a chain: `rank` waits for `waits_for` because of `op`.
#[derive(Serialize)]
pub(crate) struct StepOut {
    pub(crate) rank: u64,
    pub(crate) waits_for: u64,
    pub(crate) op: OpOut,
}

/// A rank waiting on a deadlocked rank without being in a cycle.
#[derive(Serialize)]
pub(crate) struct BlockedOut {
    pub(crate) rank: u64,
    pub(crate) waits: Vec<OpOut>,
    pub(crate) waits_for: Vec<u64>,
}

/// Every wait found.
#[derive(Serialize)]
pub(crate) struct WaitOut {
    pub(crate) rank: u64,
    pub(crate) op: OpOut,
    pub(crate) target: TargetOut,
    pub(crate) can_complete: bool,
    pub(crate) state: StateOut,
}

/// What a wait waits for.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TargetOut {
    /// One rank.
    Rank { rank: u64 },
    /// `MPI_ANY_SOURCE`: the candidates (at most a few listed, the rest counted).
    AnySource { candidates: Vec<u64>, omitted: u64 },
}

/// Where the waiting rank stands.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StateOut {
    /// Not part of a deadlock.
    Progressing,
    /// In cycle `cycle` (an index into `cycles`).
    InCycle { cycle: usize },
    /// Waits on a deadlocked rank.
    BlockedByDeadlock,
}

/// The peer of an operation, in its communicator.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PeerOut {
    /// `MPI_ANY_SOURCE`.
    Any,
    /// A rank of the communicator.
    Rank(u64),
    /// A value that is neither (as read).
    Unknown(i64),
}

/// A communicator as the analysis names it.
#[derive(Serialize)]
pub(crate) struct CommOut {
    pub(crate) name: String,
    pub(crate) context_id: Option<u64>,
    pub(crate) size: u64,
    pub(crate) internal: bool,
}

/// A buffer's length in the units known.
#[derive(Serialize)]
pub(crate) struct LengthOut {
    pub(crate) bytes: Option<u64>,
    pub(crate) elements: Option<u64>,
}

/// The pending operation a wait rests on.
#[derive(Serialize)]
pub(crate) struct OpOut {
    /// "send", "receive" or "unexpected".
    pub(crate) class: &'static str,
    pub(crate) peer: PeerOut,
    /// `null` for `MPI_ANY_TAG`.
    pub(crate) tag: Option<i64>,
    /// The buffer's address, in hex.
    pub(crate) buffer: String,
    pub(crate) comm: CommOut,
    pub(crate) comm_unique_id: u64,
    pub(crate) length: LengthOut,
}

/// The document word for an operation class.
pub(crate) fn class_name(c: OpClass) -> &'static str {
    match c {
        OpClass::Send => "send",
        OpClass::Receive => "receive",
        OpClass::Unexpected => "unexpected",
    }
}

fn comm(c: &CommRef) -> CommOut {
    CommOut {
        name: c.name.clone(),
        context_id: c.context_id,
        size: c.size,
        internal: c.internal,
    }
}

fn op(o: &WaitOp) -> OpOut {
    OpOut {
        class: class_name(o.class),
        peer: match o.peer {
            Peer::Any => PeerOut::Any,
            Peer::Rank(r) => PeerOut::Rank(r),
            Peer::Unknown(v) => PeerOut::Unknown(v),
        },
        tag: o.tag,
        buffer: super::hex(o.buffer),
        comm: comm(&o.comm),
        comm_unique_id: o.comm_unique_id,
        length: LengthOut {
            bytes: o.length.bytes,
            elements: o.length.elements,
        },
    }
}

fn step(s: &Step) -> StepOut {
    StepOut {
        rank: s.rank,
        waits_for: s.waits_for,
        op: op(&s.op),
    }
}

fn cycle(c: &Cycle) -> CycleOut {
    CycleOut {
        ranks: c.ranks.clone(),
        chain: c.chain.iter().map(step).collect(),
        communicators: c.communicators.iter().map(comm).collect(),
    }
}

fn blocked(b: &BlockedRank) -> BlockedOut {
    BlockedOut {
        rank: b.rank,
        waits: b.waits.iter().map(op).collect(),
        waits_for: b.waits_for.clone(),
    }
}

fn wait(w: &Wait) -> WaitOut {
    WaitOut {
        rank: w.rank,
        op: op(&w.op),
        target: match &w.target {
            WaitTarget::Rank { rank } => TargetOut::Rank { rank: *rank },
            WaitTarget::AnySource {
                candidates,
                omitted,
            } => TargetOut::AnySource {
                candidates: candidates.clone(),
                omitted: *omitted,
            },
        },
        can_complete: w.can_complete,
        state: match w.state {
            RankState::Progressing => StateOut::Progressing,
            RankState::InCycle { cycle } => StateOut::InCycle { cycle },
            RankState::BlockedByDeadlock => StateOut::BlockedByDeadlock,
        },
    }
}

impl From<&DeadlockReport> for ReportOut {
    fn from(r: &DeadlockReport) -> Self {
        ReportOut {
            verdict: match r.verdict {
                Verdict::NoCycle => "no_cycle",
                Verdict::PotentialDeadlock => "potential_deadlock",
                Verdict::Deadlock => "deadlock",
            },
            samples: r.samples,
            ranks: r.ranks,
            cycles: r.cycles.iter().map(cycle).collect(),
            blocked: r.blocked.iter().map(blocked).collect(),
            waits: r.waits.iter().map(wait).collect(),
            notes: r.notes.clone(),
            notes_omitted: r.notes_omitted,
        }
    }
}
