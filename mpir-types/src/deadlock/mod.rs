//! Deadlock analysis over the message queues of a whole job: a wait-for graph built from every
//! rank's pending receives, pending sends and unexpected messages, the ranks that can never
//! progress, the cycles among them, and a report (text, JSON with the `serde` feature, Graphviz
//! DOT).
//!
//! Pure: the input is a [`JobSnapshot`] that some reader filled (a message-queue DLL, a native
//! queue walker, a test); nothing here touches a process.
//!
//! # What a wait is
//!
//! From the queues alone it is not known whether a rank is inside `MPI_Wait` (stacks, when
//! given, tell: see [below](#stacks-what-a-rank-is-doing)), so every *pending*
//! operation is taken as something its rank must eventually complete (MPI requires every request
//! to be completed or freed). An operation whose status is matched or complete is not a wait.
//!
//! * A **receive from a specific source** waits for that source, unless a matching message is
//!   already available: an unexpected message on this rank, or a pending send at the source
//!   that targets this rank, on the same communicator with a matching tag (`MPI_ANY_TAG`
//!   matches any tag). A receive from its own rank waits for itself: only a send it has not
//!   made could match it.
//! * A receive from **`MPI_ANY_SOURCE`** waits for *any one* of the communicator's other
//!   members (an OR-wait): it can complete as soon as one of them can still send. On a
//!   communicator with no other member it waits for itself.
//! * A **pending send** (in the send queue, unmatched: a rendezvous send) waits for its
//!   destination, unless the destination has a matching posted receive.
//! * One available message satisfies at most one receive, and one posted receive at most one
//!   send: they are paired greedily, most specific receive first, unexpected messages before
//!   pending sends.
//! * A rank with no unsatisfied wait is **not blocked**: it can still send, post and complete.
//! * An **unexpected message whose data is not in a system buffer** is a rendezvous header:
//!   its sender cannot finish that send until a matching receive is posted. When the sender's
//!   own queues do not show that send (MPICH lists only nonblocking sends), it is added to them
//!   as a pending send, so a rank blocked in a large `MPI_Send` is seen waiting.
//!
//! # Which ranks are deadlocked (AND-OR model)
//!
//! A rank needs *all* of its waits satisfied (AND); a wait needs *one* of its candidates (OR:
//! one rank for a specific source or a send, the communicator's other members for
//! `MPI_ANY_SOURCE`). Plain cycle detection is wrong for OR-waits: a rank waiting on
//! `MPI_ANY_SOURCE` is stuck only if *every* other member is stuck, so a cycle through one of
//! them proves nothing while another member is free (the classic OR-model answer is a *knot*,
//! a set of nodes from which nothing outside is reachable). The analysis computes the general
//! answer, which covers both: starting from the ranks that are not blocked, a rank is released
//! once each of its waits has a released candidate (a released rank can send, post, and so
//! satisfy the waits on it); this is repeated until nothing changes, in time linear in ranks,
//! operations and communicator members. Ranks never released are **deadlocked** — given the
//! snapshot.
//!
//! Among the deadlocked ranks, the strongly connected components of the wait-for graph (with
//! one node per `MPI_ANY_SOURCE` communicator, so a wildcard costs its members once, not once
//! per waiting rank; iterative Tarjan, no recursion) that contain a cycle are the reported
//! [`Cycle`]s: for an AND-only component a cycle of waits, for `MPI_ANY_SOURCE` a knot. Each
//! comes with one concrete closed chain of waits through it. The other deadlocked ranks wait on
//! a deadlocked rank without being part of a cycle: they are listed as
//! [`DeadlockReport::blocked`].
//!
//! # Potential, then confirmed
//!
//! One snapshot shows pending operations, not blocked ranks: a progressing ring can look like a
//! deadlock at one instant. [`analyze`] therefore reports a *potential* deadlock;
//! [`confirm`] analyses several snapshots taken some time apart (the reference tool takes 2–3,
//! 100 ms apart) and keeps only the cycles whose waiting operations are the same in every one of
//! them — same rank, communicator, queue, peer, tag and buffer.
//!
//! # Stacks: what a rank is doing
//!
//! A rank may carry its activity ([`RankSnapshot::activity`], from its threads' stacks through
//! [`classify_threads`]). A rank without one is analysed from
//! its queues alone, exactly as above, so snapshots without stacks give the same reports as
//! before stacks existed.
//!
//! * **Not waiting.** A rank known to be outside MPI ([`RankActivity::NotInMpi`]), finalized
//!   or exited waits for nothing: its pending sends and receives are not waits. They are not
//!   dropped silently but listed in [`DeadlockReport::not_waiting`] ("not waiting: not inside
//!   MPI"). A rank outside MPI can still progress, so waits on it can end. A rank that
//!   finalized or exited never communicates again: waits on it never end, and the ranks that
//!   wait on it are listed as [`DeadlockReport::blocked`] (there is no cycle: the verdict says
//!   so, the blocked list and its "waits for" ranks show the finished rank).
//! * **Where each wait is.** Each [`Wait`], cycle [`Step`] and [`BlockedRank`] names the MPI
//!   call its rank is blocked in and the call site ([`BlockedCall`](crate::stacks::BlockedCall)),
//!   when the rank's stacks are given.
//! * **Collective hangs.** Among the ranks whose activity is known (not `None`, not
//!   `Unknown`), each is *in a collective* (a blocking collective, or `MPI_Finalize`, which the
//!   standard makes collective over the job) or *elsewhere* (in another MPI call, outside MPI,
//!   finalized, exited). A [`CollectiveHang`] is reported when the ranks in collectives are in
//!   **two or more different collectives**, or when **some are in a collective while any other
//!   is elsewhere**. Collectives are matched by their C name, Fortran and C bindings alike, a
//!   large-count `_c` aside; two ranks in the same collective from different call sites are
//!   not a mismatch (MPI matches them). The hang lists the ranks per call (as
//!   [`RankSet`](crate::ranks::RankSet) ranges), their call sites, the ranks elsewhere by
//!   place, and the ranks not considered. The communicator is given when the queues show it
//!   (each rank of the call has its pending collective traffic — negative tags, or an internal
//!   communicator — on one same communicator); otherwise it is unknown. When every collective
//!   of the hang is known to be on one communicator, a rank elsewhere whose queues list
//!   communicators, none of them that one, is not a member: it is left out of the hang (listed
//!   in [`CollectiveHang::not_members`]), and if that leaves nobody elsewhere and one call,
//!   there is no hang.
//! * **Its limits.** Stacks do not name communicators, so all ranks of known activity are
//!   taken together: sub-communicators legitimately in different collectives, a rank that is
//!   not a member of the collective's communicator, a rank on its way to the collective (still
//!   computing, in a point-to-point call that will complete, waiting on a nonblocking
//!   collective's request) all look like a mismatch in one snapshot. That is why one snapshot
//!   gives only [`Verdict::PotentialCollectiveMismatch`], and [`confirm`] keeps the mismatch
//!   only when every rank of known activity is at the same place in every snapshot
//!   ([`Verdict::CollectiveMismatch`]). Ranks whose activity is unknown are never assumed
//!   to be anywhere.
//! * **Verdict precedence.** Cycles and collective mismatches are both reported, each in its
//!   section. The verdict names a cycle first ([`Verdict::PotentialDeadlock`] /
//!   [`Verdict::Deadlock`]): it rests on the queues as well as the stacks. With no cycle, a
//!   collective mismatch gives its own verdict. Whether it is potential or confirmed follows
//!   the number of snapshots, as for cycles.
//! * **Confirmation with stacks.** A wait is *the same* in two snapshots when its operation is
//!   (rank, communicator, queue, peer, tag, buffer) **and**, for a rank with stacks, its place
//!   is: the same MPI entry point (call and frame name), entered by the same thread, from the
//!   same call site (function, module+offset, file:line). That pair is the "stack prefix"
//!   compared: the frames inside MPI (progress loops, polling) move while a rank is stuck and are
//!   not compared; the frames outside the call site are implied by it in practice and are not
//!   compared either. A rank outside MPI stays at the same place when its main thread's
//!   innermost frame is the same (so a computing rank moves, a sleeping one does not).
//!
//! # Ranks whose waits no queue shows: the stacks-only rule
//!
//! Most MPIs people run export no queue a reader can trust (MPICH's ch4 over UCX, Intel MPI,
//! Open MPI under its UCX PML or without debug information). A rank whose queues were not read
//! is given as [`RankSnapshot::stacks_only`] ([`WaitSource::Stacks`]): its activity, no
//! communicators. A rank inside MPI whose queues *were* read but show no wait is, for this
//! rule, the same: its stacks say it is blocked, and a rank blocked inside an MPI call is never
//! "not waiting". Every other rank of the snapshot falls in one class:
//!
//! * **blocked**, its wait unknown: inside MPI (`MPI_Finalize` included) at the same place
//!   (same call, call site and thread) in every snapshot, with no wait in the queues;
//! * **deadlocked** by the queues' analysis (in a cycle, or blocked by one);
//! * **progressing**: outside MPI, moved between snapshots, or with queued waits that can all
//!   complete;
//! * **finished** (finalized or exited), or **unknown** (no stacks).
//!
//! [`DeadlockReport::stack_waits`] lists them when some rank is blocked. It is a **hang** when
//! no rank is progressing or unknown and the job has no rank outside the snapshot
//! ([`JobSnapshot::unread`]): nothing that could end a wait is left. With no cycle, no
//! collective mismatch and no rank waiting on finished ones, that gives its own verdict,
//! [`Verdict::BlockedInMpi`] (potential, [`Verdict::PotentialBlockedInMpi`], on one snapshot):
//! the ranks, their MPI call and call site are known; who waits for whom is not. When some
//! rank progresses or is unknown, the blocked ones may be waiting for it: they are listed, the
//! verdict stays [`Verdict::NoCycle`], and [`DeadlockReport::has_unknown_waits`] says the
//! report makes no claim about them. A call that lasts longer than the snapshots span (a large
//! collective) looks the same as a hung one: more snapshots, further apart, tell them apart.
//!
//! # Resolving peers and communicators
//!
//! A peer given as a rank in its communicator is turned into a job rank through the
//! operation's `peer_global`, else the communicator's `group`, else the one rank of the
//! snapshot holding the same communicator at that local rank. A communicator is the same on two
//! ranks when their `context_id`s are equal (MPICH's context id, Open MPI's cid), or, when the
//! source gives none, their name and size are. A peer that cannot be resolved, or that the
//! snapshot does not hold, is assumed to progress (noted in [`DeadlockReport::notes`]): the
//! analysis never invents a wait it cannot see. The same holds for `MPI_ANY_SOURCE` on a
//! communicator whose members are not all in the snapshot. Intercommunicators are not modelled.
//!
//! # Example: three ranks each receiving from the next
//!
//! ```
//! use mpir_types::deadlock::{self, CommQueues, JobSnapshot, RankSnapshot};
//! use mpir_types::mqd::{Length, OpClass, Operation, Peer};
//!
//! let recv = |from: u64| {
//!     let mut op = Operation::new(OpClass::Receive, Peer::Rank(from));
//!     op.tag = Some(7);
//!     op.length = Length { bytes: Some(64), elements: None };
//!     op.buffer = 0x1000;
//!     op
//! };
//! let job = JobSnapshot::new(
//!     (0..3)
//!         .map(|r| {
//!             let mut ring = CommQueues::new(0x10, "ring", 3, r);
//!             ring.operations = vec![recv((r + 1) % 3)];
//!             RankSnapshot::new(r, None, vec![ring])
//!         })
//!         .collect(),
//! );
//! let report = deadlock::analyze(&job)?;
//! assert!(report.has_cycle());
//! assert_eq!(report.cycles[0].ranks, [0, 1, 2]);
//! assert!(report.to_string().starts_with("potential deadlock"));
//! # Ok::<(), deadlock::AnalysisError>(())
//! ```

mod activity;
mod collective;
mod collective_exact;
mod confirm;
mod dot;
mod graph;
mod infer;
mod pairing;
mod report;
mod stuck;
mod tarjan;

use std::collections::HashMap;

use crate::mqd::Operation;
use crate::stacks::{RankActivity, RankStacks, ReasonCode, Unreached, classify_threads};

pub use confirm::confirm;
pub use report::{
    BlockedRank, CollectiveCall, CollectiveHang, CommRef, Cycle, DeadlockReport, Elsewhere,
    ElsewhereRanks, NotWaiting, RankState, Step, Verdict, Wait, WaitOp, WaitTarget,
};
pub use stuck::{BlockedCalls, ProgressingRanks, StackWaits, WhyProgressing};

/// Longest list of candidate ranks a report shows for one `MPI_ANY_SOURCE` wait.
pub const MAX_LISTED_CANDIDATES: usize = 64;
/// Most notes a report keeps (the rest are counted in `notes_omitted`).
pub const MAX_NOTES: usize = 64;

/// The queues of a whole job at one instant: the analysis input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct JobSnapshot {
    /// One entry per rank read (any order; a rank may be missing).
    pub ranks: Vec<RankSnapshot>,
    /// Ranks of the job that are not in [`ranks`](Self::ranks) because nothing of them could
    /// be read (neither queues nor stacks): their state is unknown, so no verdict that needs
    /// every rank (the stacks-only hang) is given while there are any. Absent from JSON when
    /// 0.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "is_zero"))]
    pub unread: u64,
}

#[cfg(feature = "serde")]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl JobSnapshot {
    /// The queues of `ranks` (every rank of the job: [`unread`](Self::unread) is 0).
    pub fn new(ranks: Vec<RankSnapshot>) -> Self {
        JobSnapshot { ranks, unread: 0 }
    }

    /// With `unread` ranks of the job not read at all (see [`JobSnapshot::unread`]).
    pub fn with_unread(mut self, unread: u64) -> Self {
        self.unread = unread;
        self
    }

    /// With each rank's activity taken from its stacks ([`classify_threads`] over its threads,
    /// its pid naming the main thread). Ranks without stacks keep their activity; stacks of
    /// ranks the snapshot does not hold are ignored. A rank `unreached` because its process
    /// exited is [`RankActivity::Exited`], and is added (with no queues) when the snapshot does
    /// not hold it, so that waits on it are known never to end. Other unreached ranks are left
    /// as they are (unknown).
    pub fn with_stacks(mut self, stacks: &[RankStacks], unreached: &[Unreached]) -> Self {
        let index: HashMap<u64, usize> = self
            .ranks
            .iter()
            .enumerate()
            .map(|(i, r)| (r.rank, i))
            .collect();
        for s in stacks {
            if let Some(r) = index.get(&s.rank).and_then(|&i| self.ranks.get_mut(i)) {
                r.activity = Some(classify_threads(&s.threads, Some(s.pid)));
            }
        }
        let mut added = std::collections::HashSet::new();
        for u in unreached {
            if u.reason.code != ReasonCode::Exited {
                continue;
            }
            match index.get(&u.rank).and_then(|&i| self.ranks.get_mut(i)) {
                Some(r) => r.activity = Some(RankActivity::Exited),
                None if added.insert(u.rank) => self.ranks.push(
                    RankSnapshot::new(u.rank, None, Vec::new()).with_activity(RankActivity::Exited),
                ),
                None => {}
            }
        }
        self
    }
}

/// The queues of one rank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RankSnapshot {
    /// Rank in `MPI_COMM_WORLD` (the job rank).
    pub rank: u64,
    /// Process id, when known.
    pub pid: Option<i64>,
    /// The communicators this rank belongs to, each with its operations.
    pub communicators: Vec<CommQueues>,
    /// Where the rank is as far as MPI is concerned (from its stacks, see
    /// [`classify_threads`]); `None`: not known, and the
    /// analysis is the queues-only one for this rank. Absent from JSON when `None`, and absent
    /// JSON means `None`, so snapshots written before it existed read unchanged.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub activity: Option<RankActivity>,
    /// Where this rank's waits come from: its queues (the default), or only its stacks (its
    /// queues could not be read; [`communicators`](Self::communicators) is then empty and
    /// says nothing). Absent from JSON for queues.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "WaitSource::is_queues")
    )]
    pub source: WaitSource,
    /// The collective this rank is in, exactly, when its wait-state export says so (the
    /// communicator as its context id, the call's number on it, its name and root): collective
    /// mismatches are then found by communicator and sequence number, not by call names.
    /// Absent from JSON when `None`.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub collective: Option<CollectiveAt>,
}

/// A collective call as the wait-state export records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CollectiveAt {
    /// The communicator's context id (as in [`CommQueues::context_id`]).
    pub comm: u64,
    /// The call's number among the collectives on that communicator.
    pub seq: u32,
    /// The call's C name.
    pub call: String,
    /// The root, for rooted collectives.
    pub root: Option<u64>,
}

impl CollectiveAt {
    /// A collective `call` on communicator `comm`, number `seq` there, with `root`.
    pub fn new(comm: u64, seq: u32, call: impl Into<String>, root: Option<u64>) -> Self {
        CollectiveAt {
            comm,
            seq,
            call: call.into(),
            root,
        }
    }
}

/// Where a rank's waits come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum WaitSource {
    /// Its message queues, read by a reader that proved it reads where the MPI keeps them.
    #[default]
    Queues,
    /// Its stacks alone: its queues could not be read. Its waits are unknown; a rank blocked
    /// inside MPI is taken as waiting for something (see the stacks-only rule).
    Stacks,
    /// The wait-state export of mpir-rs's preload library ([`crate::waits`]): what each
    /// thread is blocked on, recorded by the rank itself through the MPI profiling interface.
    WaitStates,
}

impl WaitSource {
    /// Whether this is [`WaitSource::Queues`].
    pub fn is_queues(&self) -> bool {
        *self == WaitSource::Queues
    }
}

impl RankSnapshot {
    /// The queues of job rank `rank` (process `pid`, when known).
    pub fn new(rank: u64, pid: Option<i64>, communicators: Vec<CommQueues>) -> Self {
        RankSnapshot {
            rank,
            pid,
            communicators,
            activity: None,
            source: WaitSource::Queues,
            collective: None,
        }
    }

    /// A rank whose queues could not be read, known only by its `activity` (from its stacks).
    pub fn stacks_only(rank: u64, pid: Option<i64>, activity: RankActivity) -> Self {
        RankSnapshot {
            rank,
            pid,
            communicators: Vec::new(),
            activity: Some(activity),
            source: WaitSource::Stacks,
            collective: None,
        }
    }

    /// With the rank's activity (see [`RankSnapshot::activity`]).
    pub fn with_activity(mut self, activity: RankActivity) -> Self {
        self.activity = Some(activity);
        self
    }
}

/// One communicator as one rank sees it, with its pending operations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CommQueues {
    /// The source's identifier of the communicator in this process (e.g. its address).
    pub unique_id: u64,
    /// An identifier every member shares, when the source knows one: MPICH's
    /// `recvcontext_id` (equal to `context_id` on an intracommunicator), Open MPI's cid.
    pub context_id: Option<u64>,
    /// Its name (`MPI_COMM_WORLD`, a name set with `MPI_Comm_set_name`, or empty).
    pub name: String,
    /// Number of members.
    pub size: u64,
    /// This rank's rank in it.
    pub local_rank: u64,
    /// Job rank (`MPI_COMM_WORLD` rank) of each member, by local rank, when known.
    pub group: Option<Vec<u64>>,
    /// Whether the MPI library created it for itself (not visible to the application).
    pub internal: bool,
    /// Its pending sends, pending receives and unexpected messages (each names its class).
    pub operations: Vec<Operation>,
}

impl CommQueues {
    /// A communicator with no context id, group or operations, not internal.
    pub fn new(unique_id: u64, name: impl Into<String>, size: u64, local_rank: u64) -> Self {
        CommQueues {
            unique_id,
            context_id: None,
            name: name.into(),
            size,
            local_rank,
            group: None,
            internal: false,
            operations: Vec::new(),
        }
    }
}

/// Why a snapshot cannot be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnalysisError {
    /// Two entries claim the same job rank.
    #[error("rank {rank} appears more than once in the snapshot")]
    DuplicateRank {
        /// The rank.
        rank: u64,
    },
    /// [`confirm`] was given no snapshot.
    #[error("no snapshot to analyse")]
    NoSamples,
}

/// Analyses one snapshot: the deadlocked ranks, the cycles among them (each a *potential*
/// deadlock, see the [module documentation](self)), the ranks blocked on them.
///
/// # Errors
/// [`AnalysisError::DuplicateRank`] when two entries claim one job rank.
pub fn analyze(job: &JobSnapshot) -> Result<DeadlockReport, AnalysisError> {
    let inferred = infer::rendezvous_sends(job);
    let job = inferred.as_ref().unwrap_or(job);
    let applied = activity::apply(job);
    let job = applied.job.as_ref().unwrap_or(job);
    let graph = graph::Analysis::run(job, &applied.finished)?;
    let mut report = report::build(job, &graph, 1);
    report.not_waiting = applied.not_waiting;
    report.collective = collective::find_all(job);
    report.stack_waits = stuck::find(job, &[], &report, &on_unknown(job)?);
    report.sources = sources_of(job);
    report.verdict = report.verdict_for(1);
    Ok(report)
}

/// The ranks whose waits can end only if ranks known by their stacks alone, blocked inside
/// MPI for something unknown, get free: released by the analysis of `job` (prepared as
/// [`analyze`] prepares it) but not by the same analysis with those ranks held as never free.
/// For the stacks-only rule such ranks are blocked too.
pub(super) fn on_unknown(
    job: &JobSnapshot,
) -> Result<std::collections::HashSet<u64>, AnalysisError> {
    let unknown_blocked = |r: &RankSnapshot| {
        r.source == WaitSource::Stacks
            && r.activity
                .as_ref()
                .is_some_and(|a| a.blocked_call().is_some())
    };
    if !job.ranks.iter().any(unknown_blocked) {
        return Ok(std::collections::HashSet::new());
    }
    let inferred = infer::rendezvous_sends(job);
    let job = inferred.as_ref().unwrap_or(job);
    let applied = activity::apply(job);
    let job = applied.job.as_ref().unwrap_or(job);
    let free = graph::Analysis::run(job, &applied.finished)?.released;
    let held: Vec<bool> = job
        .ranks
        .iter()
        .zip(&applied.finished)
        .map(|(r, &f)| f || unknown_blocked(r))
        .collect();
    let strict = graph::Analysis::run(job, &held)?.released;
    Ok(job
        .ranks
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            free.get(*i) == Some(&true) && strict.get(*i) != Some(&true) && !unknown_blocked(r)
        })
        .map(|(_, r)| r.rank)
        .collect())
}

/// Which source each rank's waits came from, by source (queues, wait-states, stacks).
fn sources_of(job: &JobSnapshot) -> Vec<SourceRanks> {
    let mut by: Vec<(WaitSource, Vec<u64>)> = Vec::new();
    for r in &job.ranks {
        match by.iter_mut().find(|(s, _)| *s == r.source) {
            Some((_, v)) => v.push(r.rank),
            None => by.push((r.source, vec![r.rank])),
        }
    }
    by.sort_by_key(|(s, _)| match s {
        WaitSource::WaitStates => 0,
        WaitSource::Queues => 1,
        _ => 2,
    });
    by.into_iter()
        .map(|(source, ranks)| SourceRanks {
            source,
            ranks: crate::ranks::RankSet::from_ranks(ranks),
        })
        .collect()
}

/// The ranks whose waits came from one source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SourceRanks {
    /// The source.
    pub source: WaitSource,
    /// The ranks.
    pub ranks: crate::ranks::RankSet,
}
