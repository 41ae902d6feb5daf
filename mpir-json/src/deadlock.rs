//! The deadlock document (`mpir.deadlock/4`): the wait-for analysis in the tool's own types,
//! converted field by field from the library's [`DeadlockReport`] (stack facts included, in
//! `activity.rs`).
//!
//! Version 4: ranks whose queues cannot be read are covered by their stacks — the verdicts
//! `potential_blocked_in_mpi` and `blocked_in_mpi`, `stack_waits`, and `coverage.stacks_only`
//! (`coverage.read` now counts them; `coverage.not_read` lists only ranks of which nothing was
//! read).
//! Version 3: the stacks join the analysis — the verdicts `potential_collective_mismatch` and
//! `collective_mismatch`, `blocked_in` on every wait, step and blocked rank, `not_waiting` and
//! `collective`. Version 2: `op.buffer` is a hex string, as every address in the documents
//! (version 1 wrote the library's decimal number).

use mpir_session::{Coverage, DeadlockRead, NotCovered, chain};
use mpir_types::deadlock::{
    BlockedRank, Cycle, DeadlockReport, NotWaiting, RankState, Step, Verdict, Wait, WaitOp,
    WaitSource, WaitTarget,
};
use mpir_types::mqd::{OpClass, Peer};

use crate::activity::{ActivityOut, BlockedCallOut, CollectiveOut, StackWaitsOut};
pub use crate::activity::{CommOut, comm};
use serde::Serialize;

/// A rank the analysis could not cover, and why.
#[derive(Serialize, Clone, Debug)]
pub struct UnreadRank {
    pub rank: Option<u64>,
    pub pid: u32,
    pub reason: String,
    /// When the kernel refused this tool the rank: why, as in every document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<crate::DenialOut>,
    /// Why it was not read, in the one vocabulary of every document (absent in
    /// `wait_states_not_used`: those ranks were read, their export was not used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::WhyOut>,
}

/// Which ranks a verdict rests on: a verdict is only about the ranks read.
#[derive(Serialize, Clone, Debug)]
pub struct CoverageOut {
    /// Ranks asked for (the job's, or the pids named).
    pub ranks: usize,
    /// Ranks read in every sample: the verdict covers these only.
    pub read: usize,
    /// Whether every rank asked for was read.
    pub complete: bool,
    /// Ranks covered by their stacks alone, with the first reason their queues could not be
    /// read (counted in `read`).
    pub stacks_only: Vec<UnreadRank>,
    /// The others (neither queues nor stacks read in every sample), with the first reason
    /// their queues could not be read.
    pub not_read: Vec<UnreadRank>,
    /// Ranks whose wait-state export was not used, with why (it could not be read, or it is
    /// missing while other ranks have one).
    pub wait_states_not_used: Vec<UnreadRank>,
    /// The ranks asked for, when `--ranks` chose some (the others were not looked at).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<String>,
    /// Ranks read through their cooperative channel (the kernel refused this tool them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cooperative: Vec<crate::CooperativeOut>,
    /// The job's table was built from its ranks' announcements (the starter refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announced: Option<crate::AnnouncedOut>,
}

impl CoverageOut {
    /// The session's coverage, each reason on one line (with the `--types` hint where it
    /// applies).
    pub fn of(c: &Coverage, types_given: bool) -> CoverageOut {
        CoverageOut {
            ranks: c.ranks,
            read: c.read,
            complete: c.is_complete(),
            stacks_only: c
                .stacks_only
                .iter()
                .map(|n| unread_rank(n, types_given))
                .collect(),
            not_read: c
                .not_read
                .iter()
                .map(|n| unread_rank(n, types_given))
                .collect(),
            wait_states_not_used: c
                .waits_problems
                .iter()
                .map(|(rank, pid, reason)| UnreadRank {
                    rank: *rank,
                    pid: *pid,
                    reason: reason.clone(),
                    denial: None,
                    why: None,
                })
                .collect(),
            selection: c.selection.as_ref().map(ToString::to_string),
            cooperative: c
                .cooperative
                .iter()
                .map(|(rank, pid, d)| crate::CooperativeOut {
                    rank: *rank,
                    pid: Some(*pid),
                    denial: crate::DenialOut::of(d),
                })
                .collect(),
            announced: c.announced.as_ref().map(crate::AnnouncedOut::of),
        }
    }

    /// The distinct reasons ranks were not read, each with how many ranks gave it (at most
    /// `max`, the most frequent first).
    pub fn reasons(&self, max: usize) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for u in &self.not_read {
            match counts.iter_mut().find(|(r, _)| *r == u.reason) {
                Some((_, n)) => *n += 1,
                None => counts.push((u.reason.clone(), 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts.truncate(max);
        counts
    }

    /// One line on what a verdict covers (text output), or `None` when complete.
    pub fn caveat(&self) -> Option<String> {
        if let (true, Some(sel)) = (self.complete, &self.selection) {
            return Some(format!(
                "the verdict covers only the selected ranks {sel} (the others were not read)"
            ));
        }
        if self.complete {
            return None;
        }
        let ranks: Vec<String> = self
            .not_read
            .iter()
            .take(16)
            .map(|u| u.rank.map_or(format!("pid {}", u.pid), |r| r.to_string()))
            .collect();
        let more = if self.not_read.len() > 16 {
            ", …"
        } else {
            ""
        };
        Some(format!(
            "the verdict covers only the {} of {} ranks read; not read: {}{more}",
            self.read,
            self.ranks,
            ranks.join(", ")
        ))
    }

    /// The error when no rank at all could be read: there is no verdict. Says why (the
    /// distinct reasons) and what to do.
    pub fn nothing_read(&self, hint: Option<&str>) -> String {
        let reasons: Vec<String> = self
            .reasons(3)
            .into_iter()
            .map(|(r, n)| if n > 1 { format!("{r} ({n} ranks)") } else { r })
            .collect();
        let mut s = format!(
            "no rank's queues could be read, so there is no verdict ({} ranks: {})",
            self.ranks,
            reasons.join("; ")
        );
        if let Some(h) = hint {
            s.push_str("; ");
            s.push_str(h);
        }
        s
    }
}

fn unread_rank(n: &NotCovered, types_given: bool) -> UnreadRank {
    UnreadRank {
        rank: n.rank,
        pid: n.pid,
        reason: crate::names::rank_error(&n.reason, types_given),
        denial: n.reason.denial().map(crate::DenialOut::of),
        why: Some(crate::WhyOut::of(&n.reason.not_read())),
    }
}

/// A rank not read in one sample, on one line (`unread` of the document).
pub fn unread_line(n: &NotCovered, types_given: bool) -> String {
    format!(
        "sample {}: rank {} (pid {}): {}",
        n.sample,
        n.rank.map_or("?".into(), |r| r.to_string()),
        n.pid,
        crate::names::rank_error(&n.reason, types_given)
    )
}

/// `unread` of the document: every rank not read in some sample, and every problem met
/// while releasing, by sample.
pub fn unread_lines(read: &mpir_session::DeadlockRead, types_given: bool) -> Vec<String> {
    unread_lines_where(read, types_given, |_| true)
}

/// [`unread_lines`] with only the unread ranks `keep` keeps (release problems always).
pub fn unread_lines_where(
    read: &mpir_session::DeadlockRead,
    types_given: bool,
    keep: impl Fn(&NotCovered) -> bool,
) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let samples = read.releases.len().max(1);
    for s in 1..=samples {
        if let Some(r) = read.releases.get(s - 1) {
            lines.extend(
                r.problems
                    .iter()
                    .map(|p| format!("sample {s}: while releasing: {}", chain(p))),
            );
        }
        lines.extend(
            read.unread
                .iter()
                .filter(|n| n.sample as usize == s && keep(n))
                .map(|n| unread_line(n, types_given)),
        );
    }
    lines
}

/// `schema` of a deadlock document (docs/cli-json.md).
pub const DEADLOCK_SCHEMA: &str = "mpir.deadlock/4";

/// A whole `mpir.deadlock/4` document.
#[derive(Serialize)]
pub struct DeadlockDoc<'a> {
    pub schema: &'static str,
    pub engine: String,
    /// Ranks that could not be read in some sample (the analysis treats them as progressing).
    pub unread: Vec<String>,
    /// Which ranks the verdict covers.
    pub coverage: &'a CoverageOut,
    /// What the MPI's DLL printed on its own (each distinct line once, with its count).
    pub reader_notes: &'a [String],
    #[serde(flatten)]
    pub report: ReportOut,
    /// With verdict "unknown" only: why no rank could be read, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The analysis: the verdict and the graph's parts.
#[derive(Serialize)]
pub struct ReportOut {
    /// "no_cycle", "potential_deadlock", "deadlock", "potential_collective_mismatch",
    /// "collective_mismatch", "potential_blocked_in_mpi", "blocked_in_mpi", or "unknown"
    /// (nothing read).
    pub verdict: &'static str,
    pub samples: usize,
    pub ranks: usize,
    pub cycles: Vec<CycleOut>,
    pub blocked: Vec<BlockedOut>,
    pub waits: Vec<WaitOut>,
    /// Ranks with pending operations that are not inside MPI (or finished): not waits.
    pub not_waiting: Vec<NotWaitingOut>,
    /// Collective hangs seen in the stacks.
    pub collective: Vec<CollectiveOut>,
    /// Ranks inside MPI whose waits no queue shows, from their stacks (null when none).
    pub stack_waits: Option<StackWaitsOut>,
    /// Where each rank's waits came from: "wait_states", "queues" or "stacks", with the ranks.
    pub sources: Vec<SourceOut>,
    pub notes: Vec<String>,
    pub notes_omitted: u64,
}

/// The ranks whose waits came from one source.
#[derive(Serialize)]
pub struct SourceOut {
    /// "wait_states", "queues" or "stacks".
    pub source: &'static str,
    /// Rank-set text.
    pub ranks: String,
}

/// One cycle: its ranks, one closed chain through it, its communicators.
#[derive(Serialize)]
pub struct CycleOut {
    pub ranks: Vec<u64>,
    pub chain: Vec<StepOut>,
    pub communicators: Vec<CommOut>,
}

/// One link of a chain: `rank` waits for `waits_for` because of `op`.
#[derive(Serialize)]
pub struct StepOut {
    pub rank: u64,
    pub waits_for: u64,
    pub op: OpOut,
    /// The MPI call `rank` is blocked in and where it was called from, when stacks were read.
    pub blocked_in: Option<BlockedCallOut>,
}

/// A rank waiting on a deadlocked rank without being in a cycle.
#[derive(Serialize)]
pub struct BlockedOut {
    pub rank: u64,
    pub waits: Vec<OpOut>,
    pub waits_for: Vec<u64>,
    pub blocked_in: Option<BlockedCallOut>,
}

/// A rank whose pending operations are not waits: it is not inside MPI, or has finished.
#[derive(Serialize)]
pub struct NotWaitingOut {
    pub rank: u64,
    pub activity: ActivityOut,
    pub operations: Vec<OpOut>,
    pub omitted: u64,
}

/// Every wait found.
#[derive(Serialize)]
pub struct WaitOut {
    pub rank: u64,
    pub op: OpOut,
    pub target: TargetOut,
    pub can_complete: bool,
    pub state: StateOut,
    pub blocked_in: Option<BlockedCallOut>,
}

/// What a wait waits for.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetOut {
    /// One rank.
    Rank { rank: u64 },
    /// `MPI_ANY_SOURCE`: the candidates (at most a few listed, the rest counted).
    AnySource { candidates: Vec<u64>, omitted: u64 },
}

/// Where the waiting rank stands.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateOut {
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
pub enum PeerOut {
    /// `MPI_ANY_SOURCE`.
    Any,
    /// A rank of the communicator.
    Rank(u64),
    /// A value that is neither (as read).
    Unknown(i64),
}

/// A buffer's length in the units known.
#[derive(Serialize)]
pub struct LengthOut {
    pub bytes: Option<u64>,
    pub elements: Option<u64>,
}

/// The pending operation a wait rests on.
#[derive(Serialize)]
pub struct OpOut {
    /// "send", "receive" or "unexpected".
    pub class: &'static str,
    pub peer: PeerOut,
    /// `null` for `MPI_ANY_TAG`.
    pub tag: Option<i64>,
    /// The buffer's address, in hex.
    pub buffer: String,
    pub comm: CommOut,
    pub comm_unique_id: u64,
    pub length: LengthOut,
}

/// The document word for an operation class.
pub fn class_name(c: OpClass) -> &'static str {
    match c {
        OpClass::Send => "send",
        OpClass::Receive => "receive",
        OpClass::Unexpected => "unexpected",
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
        blocked_in: s.blocked_in.as_ref().map(BlockedCallOut::of),
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
        blocked_in: b.blocked_in.as_ref().map(BlockedCallOut::of),
    }
}

fn not_waiting(n: &NotWaiting) -> NotWaitingOut {
    NotWaitingOut {
        rank: n.rank,
        activity: ActivityOut::of(&n.activity),
        operations: n.operations.iter().map(op).collect(),
        omitted: n.omitted,
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
        blocked_in: w.blocked_in.as_ref().map(BlockedCallOut::of),
    }
}

impl ReportOut {
    /// No verdict: no rank was read in every one of `samples` samples.
    pub fn unknown(samples: u32) -> Self {
        ReportOut {
            verdict: "unknown",
            samples: samples as usize,
            ranks: 0,
            cycles: Vec::new(),
            blocked: Vec::new(),
            waits: Vec::new(),
            not_waiting: Vec::new(),
            collective: Vec::new(),
            stack_waits: None,
            sources: Vec::new(),
            notes: Vec::new(),
            notes_omitted: 0,
        }
    }
}

impl From<&DeadlockReport> for ReportOut {
    fn from(r: &DeadlockReport) -> Self {
        ReportOut {
            verdict: match r.verdict {
                Verdict::NoCycle => "no_cycle",
                Verdict::PotentialDeadlock => "potential_deadlock",
                Verdict::Deadlock => "deadlock",
                Verdict::PotentialCollectiveMismatch => "potential_collective_mismatch",
                Verdict::CollectiveMismatch => "collective_mismatch",
                Verdict::PotentialBlockedInMpi => "potential_blocked_in_mpi",
                Verdict::BlockedInMpi => "blocked_in_mpi",
            },
            samples: r.samples,
            ranks: r.ranks,
            cycles: r.cycles.iter().map(cycle).collect(),
            blocked: r.blocked.iter().map(blocked).collect(),
            waits: r.waits.iter().map(wait).collect(),
            not_waiting: r.not_waiting.iter().map(not_waiting).collect(),
            collective: r.collective.iter().map(CollectiveOut::of).collect(),
            stack_waits: r.stack_waits.as_ref().map(StackWaitsOut::of),
            sources: r
                .sources
                .iter()
                .map(|s| SourceOut {
                    source: match s.source {
                        WaitSource::WaitStates => "wait_states",
                        WaitSource::Queues => "queues",
                        _ => "stacks",
                    },
                    ranks: s.ranks.to_string(),
                })
                .collect(),
            notes: r.notes.clone(),
            notes_omitted: r.notes_omitted,
        }
    }
}

/// The deadlock document of what the session found (the verdict "unknown" when nothing was
/// read).
pub fn doc<'a>(
    read: &DeadlockRead,
    coverage: &'a CoverageOut,
    notes: &'a [String],
    samples: u32,
    types_given: bool,
) -> DeadlockDoc<'a> {
    DeadlockDoc {
        schema: DEADLOCK_SCHEMA,
        engine: crate::names::engine_name(read.engine.as_ref()),
        unread: unread_lines(read, types_given),
        coverage,
        reader_notes: notes,
        report: read
            .report
            .as_ref()
            .map_or_else(|| ReportOut::unknown(samples), ReportOut::from),
        error: None,
    }
}
