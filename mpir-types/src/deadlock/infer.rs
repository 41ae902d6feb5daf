//! Sends a snapshot does not show but implies: a rendezvous send whose request-to-send header
//! sits in the receiver's unexpected queue.
//!
//! Some MPIs list only nonblocking sends in their send queue (MPICH's `MPIR_Sendq` holds
//! `MPI_Isend` requests; a rank blocked in a large `MPI_Send` shows nothing). Its rendezvous
//! header still reaches the receiver, which lists it as an unexpected message whose data is
//! *not* in a system buffer — the data is still in the sender's buffer, and the sender cannot
//! finish until a matching receive is posted. Each such message becomes a pending send of its
//! sender (on the sender's copy of the communicator, to the receiver, with the message's tag
//! and length), unless the sender already lists a pending send to that receiver with that tag.

use std::collections::HashMap;

use super::{CommQueues, JobSnapshot};
use crate::mqd::{OpClass, OpStatus, Operation, Peer};

/// What identifies one communicator across ranks (as the analysis matches them).
#[derive(Hash, PartialEq, Eq)]
enum Key {
    Context(u64),
    NameSize(String, u64),
}

fn key(c: &CommQueues) -> Key {
    match c.context_id {
        Some(id) => Key::Context(id),
        None => Key::NameSize(c.name.clone(), c.size),
    }
}

/// `job` with the implied sends added, or `None` when it implies none.
pub(super) fn rendezvous_sends(job: &JobSnapshot) -> Option<JobSnapshot> {
    // (communicator, local rank) -> (rank index, communicator index); job rank -> rank index.
    let mut at: HashMap<(Key, u64), (usize, usize)> = HashMap::new();
    let mut by_rank: HashMap<u64, usize> = HashMap::new();
    for (ri, r) in job.ranks.iter().enumerate() {
        by_rank.insert(r.rank, ri);
        for (ci, c) in r.communicators.iter().enumerate() {
            at.insert((key(c), c.local_rank), (ri, ci));
        }
    }
    let mut added: Vec<(usize, usize, Operation)> = Vec::new();
    for (ri, r) in job.ranks.iter().enumerate() {
        for c in &r.communicators {
            for op in &c.operations {
                if op.class != OpClass::Unexpected
                    || op.status != OpStatus::Pending
                    || op.system_buffer
                {
                    continue;
                }
                let Peer::Rank(src_local) = op.peer_local else {
                    continue;
                };
                // The sender: by world rank when known (then its copy of the communicator),
                // else by its rank in this communicator.
                let sender =
                    op.peer_global
                        .or_else(|| {
                            c.group
                                .as_ref()?
                                .get(usize::try_from(src_local).ok()?)
                                .copied()
                        })
                        .and_then(|g| {
                            let si = *by_rank.get(&g)?;
                            let ci =
                                job.ranks.get(si)?.communicators.iter().position(|sc| {
                                    key(sc) == key(c) && sc.local_rank == src_local
                                })?;
                            Some((si, ci))
                        })
                        .or_else(|| at.get(&(key(c), src_local)).copied());
                let Some((si, sci)) = sender else { continue };
                if si == ri {
                    continue;
                }
                let Some(sc) = job.ranks.get(si).and_then(|s| s.communicators.get(sci)) else {
                    continue;
                };
                let shown = sc.operations.iter().any(|s| {
                    s.class == OpClass::Send
                        && s.status == OpStatus::Pending
                        && s.peer_local == Peer::Rank(c.local_rank)
                        && s.tag == op.tag
                });
                if shown {
                    continue;
                }
                added.push((
                    si,
                    sci,
                    Operation {
                        class: OpClass::Send,
                        status: OpStatus::Pending,
                        peer_local: Peer::Rank(c.local_rank),
                        peer_global: Some(r.rank),
                        tag: op.tag,
                        length: op.length,
                        system_buffer: false,
                        buffer: 0,
                        actual: None,
                        extra_text: vec![format!(
                            "inferred from the rendezvous header in rank {}'s unexpected queue",
                            r.rank
                        )],
                    },
                ));
            }
        }
    }
    if added.is_empty() {
        return None;
    }
    let mut out = job.clone();
    for (si, ci, op) in added {
        if let Some(c) = out
            .ranks
            .get_mut(si)
            .and_then(|r| r.communicators.get_mut(ci))
        {
            c.operations.push(op);
        }
    }
    Some(out)
}
