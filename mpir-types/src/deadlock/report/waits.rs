//! The parts of a report that name waits: communicators and operations as the report names
//! them, each wait and whom it needs, the cycles with their chains, the ranks blocked outside
//! them and the ranks not waiting.

use std::fmt;

use crate::deadlock::CommQueues;
use crate::mqd::{Length, OpClass, Operation, Peer};
use crate::stacks::{BlockedCall, RankActivity};

/// A communicator as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CommRef {
    /// Its name (empty when unnamed).
    pub name: String,
    /// The identifier all members share, when known.
    pub context_id: Option<u64>,
    /// Number of members.
    pub size: u64,
    /// Whether the MPI library created it for itself.
    pub internal: bool,
}

impl CommRef {
    pub(in crate::deadlock) fn of(c: &CommQueues) -> Self {
        CommRef {
            name: c.name.clone(),
            context_id: c.context_id,
            size: c.size,
            internal: c.internal,
        }
    }
}

impl fmt::Display for CommRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name.is_empty(), self.context_id) {
            (false, _) => f.write_str(&self.name)?,
            (true, Some(id)) => write!(f, "communicator {id:#x}")?,
            (true, None) => write!(f, "an unnamed communicator of {}", self.size)?,
        }
        if self.internal {
            f.write_str(" (internal)")?;
        }
        Ok(())
    }
}

/// An operation that waits, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WaitOp {
    /// Pending send or pending receive.
    pub class: OpClass,
    /// Its communicator.
    pub comm: CommRef,
    /// The source's identifier of the communicator in the waiting process.
    pub comm_unique_id: u64,
    /// Peer (source of a receive, destination of a send) in the communicator.
    pub peer: Peer,
    /// Tag; `None` for `MPI_ANY_TAG`.
    pub tag: Option<i64>,
    /// Buffer address in the waiting process.
    pub buffer: u64,
    /// Length.
    pub length: Length,
}

impl WaitOp {
    /// Operation `op` of the communicator `comm` (`unique_id` in the waiting process).
    pub(in crate::deadlock) fn of(comm: &CommRef, unique_id: u64, op: &Operation) -> Self {
        WaitOp {
            class: op.class,
            comm: comm.clone(),
            comm_unique_id: unique_id,
            peer: op.peer_local,
            tag: op.tag,
            buffer: op.buffer,
            length: op.length,
        }
    }
}

impl fmt::Display for WaitOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.class, self.peer) {
            (OpClass::Send, Peer::Rank(p)) => write!(f, "send to {p}")?,
            (OpClass::Send, _) => f.write_str("send")?,
            (_, Peer::Rank(p)) => write!(f, "receive from {p}")?,
            (_, Peer::Any) => f.write_str("receive from MPI_ANY_SOURCE")?,
            (_, Peer::Unknown(v)) => write!(f, "receive from ?{v}")?,
        }
        match self.tag {
            Some(t) => write!(f, " tag {t}")?,
            None => f.write_str(" tag MPI_ANY_TAG")?,
        }
        write!(f, " on {}", self.comm)
    }
}

/// Whom a wait needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "an MPI peer is one rank or MPI_ANY_SOURCE"
)]
pub enum WaitTarget {
    /// One rank (a specific source, or a send's destination; possibly the waiting rank).
    Rank {
        /// Its job rank.
        rank: u64,
    },
    /// Any one of the communicator's other members (`MPI_ANY_SOURCE`).
    AnySource {
        /// Their job ranks, sorted, at most [`MAX_LISTED_CANDIDATES`](crate::deadlock::MAX_LISTED_CANDIDATES).
        candidates: Vec<u64>,
        /// How many more there are.
        omitted: u64,
    },
}

/// Where the waiting rank stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "a rank progresses, is in a cycle, or waits on a deadlocked rank"
)]
pub enum RankState {
    /// It can progress: every one of its waits can be satisfied.
    Progressing,
    /// It is in cycle `cycle` (an index into [`DeadlockReport::cycles`](super::DeadlockReport::cycles)).
    InCycle {
        /// The cycle.
        cycle: usize,
    },
    /// It waits on a deadlocked rank without being in a cycle itself.
    BlockedByDeadlock,
}

/// A wait: a pending operation that no available message or posted receive satisfies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Wait {
    /// The waiting rank.
    pub rank: u64,
    /// Its operation.
    pub op: WaitOp,
    /// Whom it needs.
    pub target: WaitTarget,
    /// Whether its target can progress (so the wait can end).
    pub can_complete: bool,
    /// The waiting rank's state.
    pub state: RankState,
    /// The MPI call the waiting rank is in and its call site, when its stacks were given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocked_in: Option<BlockedCall>,
}

/// One link of a cycle's chain: `rank` waits, through `op`, for `waits_for`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Step {
    /// The waiting rank.
    pub rank: u64,
    /// The operation it waits in.
    pub op: WaitOp,
    /// The rank it waits for (for `MPI_ANY_SOURCE`: one of the candidates, all deadlocked).
    pub waits_for: u64,
    /// The MPI call the waiting rank is in and its call site, when its stacks were given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocked_in: Option<BlockedCall>,
}

/// A set of deadlocked ranks that wait on one another: a cycle of waits, or for
/// `MPI_ANY_SOURCE` a knot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Cycle {
    /// Every rank of it, sorted.
    pub ranks: Vec<u64>,
    /// One closed chain of waits through it: the last step waits for the first step's rank.
    pub chain: Vec<Step>,
    /// The communicators its waits are on.
    pub communicators: Vec<CommRef>,
}

/// A deadlocked rank outside every cycle: it waits on a deadlocked rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct BlockedRank {
    /// The rank.
    pub rank: u64,
    /// Its waits that cannot end.
    pub waits: Vec<WaitOp>,
    /// Deadlocked ranks it waits for directly (sorted, at most [`MAX_LISTED_CANDIDATES`](crate::deadlock::MAX_LISTED_CANDIDATES)).
    pub waits_for: Vec<u64>,
    /// The MPI call it is in and its call site, when its stacks were given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocked_in: Option<BlockedCall>,
}

/// A rank whose stacks show it is not waiting inside MPI (outside MPI, finalized, exited) and
/// that has pending sends or receives: they are not waits, and are listed here instead.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct NotWaiting {
    /// The rank.
    pub rank: u64,
    /// Where it is.
    pub activity: RankActivity,
    /// Its pending sends and receives (at most [`MAX_LISTED_CANDIDATES`](crate::deadlock::MAX_LISTED_CANDIDATES)).
    pub operations: Vec<WaitOp>,
    /// How many more there are.
    pub omitted: u64,
}
