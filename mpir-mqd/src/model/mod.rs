//! The result model every queue engine returns: the MPI's DLL hosted in or out of process
//! ([`crate::Host`], [`crate::OutOfProcessHost`]) and the native walkers ([`crate::native`])
//! give the same types.
//!
//! A leaf: it imports no engine (only `mpir-types` and this crate's errors). The conversion to
//! the deadlock analysis's input is here too ([`CommunicatorQueues::wait_input`],
//! [`RankQueues::wait_input`], [`snapshot_of`]).
//!
//! Ranks in `MPI_COMM_WORLD` ("global ranks") are `Option<u64>` throughout: `None` where the
//! source does not know one, never a negative sentinel.

#[cfg(feature = "serde")]
mod relayed;
mod wait;

pub use wait::snapshot_of;

use std::fmt;

use mpir_types::mqd::{self, LengthUnit, OpClass, Operation, Peer};

use crate::error::MqdError;
use crate::error::native::NativeError;

/// One queue of one communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Queue {
    /// The source has no information about this queue (`mqs_no_information`).
    NoInformation,
    /// The operations, in the order the source gave them (MPI's matching order).
    Operations(Vec<Operation>),
    /// The source failed part way: what it returned before, and why it stopped.
    Failed {
        /// Operations returned before the failure.
        partial: Vec<Operation>,
        /// The failure.
        #[cfg_attr(feature = "serde", serde(with = "relayed::mqd"))]
        error: MqdError,
    },
}

impl Queue {
    /// The operations obtained (also the partial ones of a failed queue).
    pub fn operations(&self) -> &[Operation] {
        match self {
            Queue::NoInformation => &[],
            Queue::Operations(ops) | Queue::Failed { partial: ops, .. } => ops,
        }
    }
}

/// Who made a communicator: the application, the MPI library for itself, or neither (the
/// predefined ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum CommOrigin {
    /// A predefined communicator (`MPI_COMM_WORLD`, `MPI_COMM_SELF`, `MPI_COMM_NULL`).
    Predefined,
    /// Made by the application (`MPI_Comm_dup`, `MPI_Comm_split`, ...).
    User,
    /// Made by the MPI library for its own use (MPICH's `MPI_ICOMM_WORLD` and the node /
    /// node-roots communicators of its hierarchical collectives).
    Internal,
    /// The source does not say (an MQD DLL reporting an unnamed communicator).
    Unknown,
}

impl CommOrigin {
    /// The rule for a communicator known only by the name an MQD DLL gives it: the
    /// predefined names are [`CommOrigin::Predefined`], `MPI_ICOMM_WORLD` (MPICH's internal
    /// copy of the world, which its DLL lists) is [`CommOrigin::Internal`], and anything else
    /// is [`CommOrigin::Unknown`] — MPICH's DLL also lists its unnamed node communicators,
    /// indistinguishable by name from an unnamed `MPI_Comm_dup`, and an application may name
    /// its communicators as it likes.
    pub fn from_dll_name(name: &str) -> Self {
        match name {
            "MPI_COMM_WORLD" | "MPI_COMM_SELF" | "MPI_COMM_NULL" => CommOrigin::Predefined,
            "MPI_ICOMM_WORLD" => CommOrigin::Internal,
            _ => CommOrigin::Unknown,
        }
    }
}

/// A communicator and its three queues.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CommunicatorQueues {
    /// The communicator as the DLL (or a native walker) describes it.
    pub communicator: mqd::Communicator,
    /// Who made it: from the MPI's own data with a native walker, from the name by
    /// [`CommOrigin::from_dll_name`] with a DLL.
    pub origin: CommOrigin,
    /// An id every member shares (MPICH's receive context id, Open MPI's cid), when the
    /// source reads one (native walkers; a DLL does not say).
    pub context_id: Option<u64>,
    /// The `MPI_COMM_WORLD` rank of each member, by local rank (`None` where unknown), when
    /// the DLL exports `mqs_get_comm_group` or a native walker could resolve it.
    pub group: Option<Vec<Option<u64>>>,
    /// Pending sends.
    pub sends: Queue,
    /// Pending receives.
    pub receives: Queue,
    /// Unexpected messages.
    pub unexpected: Queue,
}

impl CommunicatorQueues {
    /// A communicator with three empty queues, origin [`CommOrigin::Unknown`] and nothing
    /// else known (for tools and tests that build results themselves).
    pub fn new(communicator: mqd::Communicator) -> Self {
        CommunicatorQueues {
            origin: CommOrigin::from_dll_name(&communicator.name),
            communicator,
            context_id: None,
            group: None,
            sends: Queue::Operations(Vec::new()),
            receives: Queue::Operations(Vec::new()),
            unexpected: Queue::Operations(Vec::new()),
        }
    }

    /// The queue of `class`.
    pub fn queue(&self, class: OpClass) -> &Queue {
        match class {
            OpClass::Send => &self.sends,
            OpClass::Receive => &self.receives,
            OpClass::Unexpected => &self.unexpected,
        }
    }

    /// The queue of `class`, to change.
    pub fn queue_mut(&mut self, class: OpClass) -> &mut Queue {
        match class {
            OpClass::Send => &mut self.sends,
            OpClass::Receive => &mut self.receives,
            OpClass::Unexpected => &mut self.unexpected,
        }
    }
}

/// What an otherwise good read of a rank could not see.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum ReadNote {
    /// An optional symbol, type or field was absent, or a part of the result could not be
    /// resolved (a native walker's [`crate::native::Walk::missing`]): `what` names it and
    /// what it leaves out (`type mca_pml_ob1_comm_t (unexpected messages)`, ...).
    NotRead {
        /// The item and its consequence.
        what: String,
    },
    /// The communicator list was cut short (a cycle, an unreadable or corrupt entry); the
    /// communicators before the fault are in the result.
    CommunicatorsCutShort {
        /// Why.
        #[cfg_attr(feature = "serde", serde(with = "relayed::native"))]
        error: NativeError,
    },
    /// The MPI's types came from a layout set shipped with the tool (a stock Open MPI without
    /// debug information), proven on this rank before it was read ([`crate::layouts`]).
    ShippedTypes {
        /// The set (`openmpi 4.1.4 debian lp64`).
        set: String,
    },
}

impl fmt::Display for ReadNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadNote::NotRead { what } => write!(f, "not read: {what}"),
            ReadNote::ShippedTypes { set } => {
                write!(f, "types: shipped layouts of {set}, proven on this rank")
            }
            ReadNote::CommunicatorsCutShort { error } => {
                // A note is not an error: it shows its cause's whole chain itself.
                write!(f, "communicator list cut short: {error}")?;
                let mut source = std::error::Error::source(error);
                while let Some(s) = source {
                    write!(f, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
        }
    }
}

/// Everything read from one rank: its communicators with their queues, and what the read
/// could not see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RankQueues {
    /// Every communicator with its three queues.
    pub communicators: Vec<CommunicatorQueues>,
    /// What is missing from an otherwise good result.
    pub notes: Vec<ReadNote>,
}

impl RankQueues {
    /// A rank's result.
    pub fn new(communicators: Vec<CommunicatorQueues>, notes: Vec<ReadNote>) -> Self {
        RankQueues {
            communicators,
            notes,
        }
    }

    /// The rank's own `MPI_COMM_WORLD` rank, as its `MPI_COMM_WORLD` communicator says
    /// (for a process known by pid or core file only).
    pub fn world_rank(&self) -> Option<u64> {
        self.communicators
            .iter()
            .find(|c| c.communicator.name == "MPI_COMM_WORLD")
            .and_then(|c| u64::try_from(c.communicator.local_rank).ok())
    }
}

/// A group as a source gives it (`MPI_COMM_WORLD` ranks, negative where unknown) in the
/// model's form.
pub(crate) fn group_from_raw(raw: &[i64]) -> Vec<Option<u64>> {
    raw.iter().map(|&r| u64::try_from(r).ok()).collect()
}

/// [`mqd::normalize`], then global ranks filled from `group` where the source gave none.
pub(crate) fn normalize(
    op: &mqd::PendingOperation,
    class: OpClass,
    unit: LengthUnit,
    group: Option<&[Option<u64>]>,
) -> Operation {
    let mut n = mqd::normalize(op, class, unit);
    if let Some(group) = group {
        let global = |local: u64| {
            usize::try_from(local)
                .ok()
                .and_then(|i| group.get(i).copied().flatten())
        };
        if n.peer_global.is_none()
            && let Peer::Rank(r) = n.peer_local
        {
            n.peer_global = global(r);
        }
        if let Some(a) = n.actual.as_mut()
            && a.global_rank.is_none()
        {
            a.global_rank = a.local_rank.and_then(global);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(name: &str, local_rank: i64) -> mqd::Communicator {
        mqd::Communicator {
            unique_id: 7,
            local_rank,
            size: 4,
            name: name.into(),
        }
    }

    #[test]
    fn origin_from_dll_names() {
        assert_eq!(
            CommOrigin::from_dll_name("MPI_COMM_SELF"),
            CommOrigin::Predefined
        );
        assert_eq!(
            CommOrigin::from_dll_name("MPI_ICOMM_WORLD"),
            CommOrigin::Internal
        );
        assert_eq!(CommOrigin::from_dll_name(""), CommOrigin::Unknown);
    }

    #[test]
    fn world_rank_comes_from_the_world_communicator_only() {
        let mut q = RankQueues::default();
        assert_eq!(q.world_rank(), None);
        q.communicators
            .push(CommunicatorQueues::new(comm("MPI_COMM_SELF", 0)));
        q.communicators
            .push(CommunicatorQueues::new(comm("MPI_COMM_WORLD", 3)));
        assert_eq!(q.world_rank(), Some(3));
        q.communicators[1].communicator.local_rank = -1;
        assert_eq!(q.world_rank(), None);
    }

    #[test]
    fn notes_say_what_is_missing_and_why_the_list_stopped() {
        let n = ReadNote::NotRead {
            what: "type MPIR_Group (global ranks)".into(),
        };
        assert_eq!(n.to_string(), "not read: type MPIR_Group (global ranks)");
        let n = ReadNote::CommunicatorsCutShort {
            error: NativeError::Cycle {
                what: "communicators".into(),
                address: 0x40,
                hops: 2,
            },
        };
        let text = n.to_string();
        assert!(text.starts_with("communicator list cut short: communicators:"));
        assert!(text.contains("0x40"), "{text}");
    }

    #[test]
    fn negative_group_entries_are_unknown() {
        assert_eq!(group_from_raw(&[2, -1, 0]), vec![Some(2), None, Some(0)]);
    }
}
