//! The deadlock analysis's input ([`mpir_types::deadlock`]) from the model: what every tool
//! that reads queues and wants the wait-for verdict needs.

use mpir_types::deadlock::{CommQueues, JobSnapshot, RankSnapshot};

use super::{CommOrigin, CommunicatorQueues, RankQueues};

impl CommunicatorQueues {
    /// This communicator as the deadlock analysis takes it: its operations of the three
    /// queues (also the partial ones of a failed queue) in the order sends, receives,
    /// unexpected; the group only when every member's world rank is known; internal when the
    /// MPI made it for itself. A negative size counts as 0, a negative local rank as unknown
    /// (`u64::MAX`, which matches no member).
    pub fn wait_input(&self) -> CommQueues {
        let c = &self.communicator;
        let mut q = CommQueues::new(
            c.unique_id,
            c.name.clone(),
            u64::try_from(c.size).unwrap_or(0),
            u64::try_from(c.local_rank).unwrap_or(u64::MAX),
        );
        q.context_id = self.context_id;
        q.internal = self.origin == CommOrigin::Internal;
        q.group = self
            .group
            .as_ref()
            .and_then(|g| g.iter().copied().collect());
        q.operations = [&self.sends, &self.receives, &self.unexpected]
            .iter()
            .flat_map(|queue| queue.operations().iter().cloned())
            .collect();
        q
    }
}

impl RankQueues {
    /// This rank's queues as the deadlock analysis takes them, for world rank `rank`
    /// (process `pid`, when known).
    pub fn wait_input(&self, rank: u64, pid: Option<u32>) -> RankSnapshot {
        wait_rank(rank, pid, &self.communicators)
    }
}

fn wait_rank(rank: u64, pid: Option<u32>, communicators: &[CommunicatorQueues]) -> RankSnapshot {
    RankSnapshot::new(
        rank,
        pid.map(i64::from),
        communicators
            .iter()
            .map(CommunicatorQueues::wait_input)
            .collect(),
    )
}

/// The analysis input from one sample of the job: each rank read as (world rank, pid,
/// communicators). A rank whose world rank is unknown is left out: the analysis names ranks
/// by it.
pub fn snapshot_of<'a>(
    ranks: impl IntoIterator<Item = (Option<u64>, Option<u32>, &'a [CommunicatorQueues])>,
) -> JobSnapshot {
    JobSnapshot::new(
        ranks
            .into_iter()
            .filter_map(|(rank, pid, comms)| Some(wait_rank(rank?, pid, comms)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use mpir_types::deadlock;
    use mpir_types::mqd::{
        Communicator, LengthUnit, OpClass, OpStatus, Operation, Peer, PendingOperation, normalize,
    };

    use super::*;
    use crate::error::MqdError;
    use crate::model::Queue;

    /// A pending operation of `class` with peer `peer` (local rank; -1: any) and `tag`.
    fn op(class: OpClass, peer: i64, tag: i64) -> Operation {
        let raw = PendingOperation {
            status: OpStatus::Pending,
            desired_local_rank: peer,
            desired_global_rank: -1,
            tag_wild: false,
            desired_tag: tag,
            desired_length: 8,
            system_buffer: false,
            buffer: 0x1000,
            actual_local_rank: -1,
            actual_global_rank: -1,
            actual_tag: -1,
            actual_length: -1,
            extra_text: Vec::new(),
        };
        normalize(&raw, class, LengthUnit::Bytes)
    }

    fn world(local_rank: i64, group: Option<Vec<Option<u64>>>) -> CommunicatorQueues {
        let mut c = CommunicatorQueues::new(Communicator {
            unique_id: 0x40,
            local_rank,
            size: 2,
            name: "MPI_COMM_WORLD".into(),
        });
        c.group = group;
        c.context_id = Some(0);
        c
    }

    #[test]
    fn every_queue_class_and_peer_kind_is_carried_in_order() {
        let mut c = world(0, Some(vec![Some(0), Some(1)]));
        let send = op(OpClass::Send, 1, 5);
        let any = op(OpClass::Receive, -1, 6);
        let partial = op(OpClass::Unexpected, 1, 7);
        assert_eq!(any.peer_local, Peer::Any);
        c.sends = Queue::Operations(vec![send.clone()]);
        c.receives = Queue::Operations(vec![any.clone()]);
        c.unexpected = Queue::Failed {
            partial: vec![partial.clone()],
            error: MqdError::NoDll { reason: "x".into() },
        };
        let q = c.wait_input();
        assert_eq!(q.operations, vec![send, any, partial]);
        assert_eq!((q.unique_id, q.name.as_str()), (0x40, "MPI_COMM_WORLD"));
        assert_eq!((q.size, q.local_rank, q.context_id), (2, 0, Some(0)));
        assert_eq!(q.group, Some(vec![0, 1]));
        assert!(!q.internal);
        // No information: nothing to carry.
        c.unexpected = Queue::NoInformation;
        assert_eq!(c.wait_input().operations.len(), 2);
    }

    #[test]
    fn partly_known_groups_unknown_ranks_and_internal_communicators() {
        let mut c = world(-1, Some(vec![Some(0), None]));
        c.origin = CommOrigin::Internal;
        c.communicator.size = -5;
        let q = c.wait_input();
        assert_eq!(q.group, None, "a group with an unknown member is not used");
        assert_eq!(q.local_rank, u64::MAX);
        assert_eq!(q.size, 0);
        assert!(q.internal);
    }

    #[test]
    fn a_snapshot_leaves_out_ranks_without_a_world_rank_and_finds_a_cycle() {
        // Rank 0 receives from 1, rank 1 from 0, tags both sides wait for.
        let mut r0 = world(0, Some(vec![Some(0), Some(1)]));
        r0.receives = Queue::Operations(vec![op(OpClass::Receive, 1, 3)]);
        let mut r1 = world(1, Some(vec![Some(0), Some(1)]));
        r1.receives = Queue::Operations(vec![op(OpClass::Receive, 0, 3)]);
        let (c0, c1) = (vec![r0], vec![r1]);
        let job = snapshot_of([
            (Some(0), Some(100), c0.as_slice()),
            (Some(1), None, c1.as_slice()),
            (None, Some(102), c1.as_slice()),
        ]);
        assert_eq!(job.ranks.len(), 2);
        assert_eq!((job.ranks[0].rank, job.ranks[0].pid), (0, Some(100)));
        assert_eq!((job.ranks[1].rank, job.ranks[1].pid), (1, None));
        let by_rank = RankQueues::new(c0.clone(), Vec::new()).wait_input(0, Some(100));
        assert_eq!(by_rank, job.ranks[0]);
        let report = deadlock::analyze(&job).expect("analysis");
        assert_eq!(report.cycles.len(), 1, "{report:?}");
    }
}
