//! The stack facts of the deadlock document (`mpir.deadlock/4`): the MPI call a rank is
//! blocked in and its call site, where a rank is, and collective hangs — in the tool's own
//! types, converted field by field from `mpir_types::stacks::mpi_frames` and
//! `mpir_types::deadlock`, so a library change cannot change the document.

use mpir_types::deadlock::{
    CollectiveCall, CollectiveHang, Elsewhere, ElsewhereRanks, StackWaits, WhyProgressing,
};
use mpir_types::stacks::{BlockedCall, CallKind, CallSite, RankActivity, UnknownWhy};
use serde::Serialize;

/// A source position.
#[derive(Serialize)]
pub struct LocationOut {
    pub file: String,
    pub line: u32,
}

/// Where the user's code called MPI: the first frame outside the MPI entry points.
#[derive(Serialize)]
pub struct CallSiteOut {
    pub function: Option<String>,
    pub module: String,
    pub offset: u64,
    pub location: Option<LocationOut>,
}

impl CallSiteOut {
    pub fn of(c: &CallSite) -> Self {
        CallSiteOut {
            function: c.function.clone(),
            module: c.module.clone(),
            offset: c.offset,
            location: c.location.as_ref().map(|l| LocationOut {
                file: l.file.to_string(),
                line: l.line,
            }),
        }
    }
}

/// The MPI call a rank is blocked in.
#[derive(Serialize)]
pub struct BlockedCallOut {
    /// The C name of the call (`MPI_Barrier` for `PMPI_Barrier`, `mpi_barrier_`, …).
    pub call: String,
    /// The frame's own symbol.
    pub symbol: String,
    /// "collective", "point_to_point", "completion", "init", "finalize" or "other".
    pub kind: &'static str,
    pub call_site: Option<CallSiteOut>,
    pub tid: u32,
    pub threads_in_mpi: u32,
}

impl BlockedCallOut {
    pub fn of(b: &BlockedCall) -> Self {
        BlockedCallOut {
            call: b.call.clone(),
            symbol: b.symbol.clone(),
            kind: match b.kind {
                CallKind::Collective => "collective",
                CallKind::PointToPoint => "point_to_point",
                CallKind::Completion => "completion",
                CallKind::Init => "init",
                CallKind::Finalize => "finalize",
                _ => "other",
            },
            call_site: b.call_site.as_ref().map(CallSiteOut::of),
            tid: b.tid,
            threads_in_mpi: b.threads_in_mpi,
        }
    }
}

/// The `at` of a rank not inside MPI.
#[derive(Serialize)]
pub struct AtOut {
    pub at: Option<CallSiteOut>,
}

/// Where a rank is, from its stacks.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityOut {
    InMpi(BlockedCallOut),
    Finalizing(BlockedCallOut),
    NotInMpi(AtOut),
    Finalized,
    Exited,
    /// "no_stacks" or "truncated".
    Unknown(&'static str),
}

impl ActivityOut {
    pub fn of(a: &RankActivity) -> Self {
        match a {
            RankActivity::InMpi(b) => ActivityOut::InMpi(BlockedCallOut::of(b)),
            RankActivity::Finalizing(b) => ActivityOut::Finalizing(BlockedCallOut::of(b)),
            RankActivity::NotInMpi { at } => ActivityOut::NotInMpi(AtOut {
                at: at.as_ref().map(CallSiteOut::of),
            }),
            RankActivity::Finalized => ActivityOut::Finalized,
            RankActivity::Exited => ActivityOut::Exited,
            RankActivity::Unknown(UnknownWhy::Truncated) => ActivityOut::Unknown("truncated"),
            RankActivity::Unknown(_) => ActivityOut::Unknown("no_stacks"),
            _ => ActivityOut::Unknown("no_stacks"),
        }
    }
}

/// Ranks in one collective call.
#[derive(Serialize)]
pub struct CollectiveCallOut {
    pub call: String,
    /// Rank-set text (`0-2,7`).
    pub ranks: String,
    pub communicator: Option<CommOut>,
    pub call_sites: Vec<CallSiteOut>,
    /// Its number among the collectives on its communicator (wait-states only).
    pub sequence: Option<u32>,
    /// Its root (wait-states only, rooted collectives).
    pub root: Option<u64>,
}

/// The call of ranks in MPI outside every collective.
#[derive(Serialize)]
pub struct InCallOut {
    pub call: String,
}

/// Where the other ranks are.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElsewhereOut {
    InMpi(InCallOut),
    NotInMpi,
    Finalized,
    Exited,
}

/// Ranks elsewhere, by place.
#[derive(Serialize)]
pub struct ElsewhereRanksOut {
    pub what: ElsewhereOut,
    pub ranks: String,
}

/// A collective hang seen in the stacks.
#[derive(Serialize)]
pub struct CollectiveOut {
    pub calls: Vec<CollectiveCallOut>,
    pub elsewhere: Vec<ElsewhereRanksOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_members: Option<String>,
}

impl CollectiveOut {
    pub fn of(h: &CollectiveHang) -> Self {
        let set = |r: &mpir_types::ranks::RankSet| (!r.is_empty()).then(|| r.to_string());
        CollectiveOut {
            calls: h.calls.iter().map(call).collect(),
            elsewhere: h.elsewhere.iter().map(elsewhere).collect(),
            unknown: set(&h.unknown),
            not_members: set(&h.not_members),
        }
    }
}

fn call(c: &CollectiveCall) -> CollectiveCallOut {
    CollectiveCallOut {
        call: c.call.clone(),
        ranks: c.ranks.to_string(),
        communicator: c.communicator.as_ref().map(comm),
        call_sites: c.call_sites.iter().map(CallSiteOut::of).collect(),
        sequence: c.sequence,
        root: c.root,
    }
}

fn elsewhere(e: &ElsewhereRanks) -> ElsewhereRanksOut {
    ElsewhereRanksOut {
        what: match &e.what {
            Elsewhere::InMpi { call } => ElsewhereOut::InMpi(InCallOut { call: call.clone() }),
            Elsewhere::NotInMpi => ElsewhereOut::NotInMpi,
            Elsewhere::Finalized => ElsewhereOut::Finalized,
            Elsewhere::Exited => ElsewhereOut::Exited,
            _ => ElsewhereOut::NotInMpi,
        },
        ranks: e.ranks.to_string(),
    }
}

/// Ranks blocked in one MPI call from one call site, their waits unknown.
#[derive(Serialize)]
pub struct BlockedCallsOut {
    pub call: String,
    pub call_site: Option<CallSiteOut>,
    /// Rank-set text.
    pub ranks: String,
}

/// Ranks that can still progress, and why: "not_in_mpi", "moved" (between snapshots) or
/// "waits_can_complete" (their queued waits).
#[derive(Serialize)]
pub struct ProgressingOut {
    pub why: &'static str,
    pub ranks: String,
}

/// Ranks inside MPI whose waits no queue shows, from their stacks (`stack_waits`).
#[derive(Serialize)]
pub struct StackWaitsOut {
    /// Whether no rank can progress (the verdict is then "blocked_in_mpi").
    pub hang: bool,
    pub blocked: Vec<BlockedCallsOut>,
    /// Of the blocked ranks, those whose queues were not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues_not_read: Option<String>,
    /// Of the blocked ranks, those whose queues were read and show nothing pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues_empty: Option<String>,
    /// Of the blocked ranks, those whose queued waits are on ranks blocked for something
    /// unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits_on_blocked: Option<String>,
    pub progressing: Vec<ProgressingOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// Ranks of the job not read at all.
    pub unread: u64,
}

impl StackWaitsOut {
    pub fn of(w: &StackWaits) -> Self {
        let set = |r: &mpir_types::ranks::RankSet| (!r.is_empty()).then(|| r.to_string());
        StackWaitsOut {
            hang: w.hang,
            blocked: w
                .blocked
                .iter()
                .map(|b| BlockedCallsOut {
                    call: b.call.clone(),
                    call_site: b.call_site.as_ref().map(CallSiteOut::of),
                    ranks: b.ranks.to_string(),
                })
                .collect(),
            queues_not_read: set(&w.queues_not_read),
            queues_empty: set(&w.queues_empty),
            waits_on_blocked: set(&w.waits_on_blocked),
            progressing: w
                .progressing
                .iter()
                .map(|p| ProgressingOut {
                    why: match p.why {
                        WhyProgressing::NotInMpi => "not_in_mpi",
                        WhyProgressing::Moved => "moved",
                        WhyProgressing::WaitsCanComplete => "waits_can_complete",
                        WhyProgressing::CollectiveComplete => "collective_complete",
                        _ => "other",
                    },
                    ranks: p.ranks.to_string(),
                })
                .collect(),
            finished: set(&w.finished),
            unknown: set(&w.unknown),
            unread: w.unread,
        }
    }
}

/// A communicator as the analysis names it.
#[derive(Serialize)]
pub struct CommOut {
    pub name: String,
    pub context_id: Option<u64>,
    pub size: u64,
    pub internal: bool,
}

/// A communicator of the analysis as the documents show it.
pub fn comm(c: &mpir_types::deadlock::CommRef) -> CommOut {
    CommOut {
        name: c.name.clone(),
        context_id: c.context_id,
        size: c.size,
        internal: c.internal,
    }
}
