//! Synthetic jobs: pending operations (receives, sends, eager and rendezvous unexpected
//! messages), communicators, a world of `n` ranks, and the bundled demo job as a queue reader
//! reports it.

use mpir_types::deadlock::{CommQueues, JobSnapshot, RankSnapshot};
use mpir_types::mqd::{Length, OpClass, OpStatus, Operation, Peer};

pub(crate) fn op(class: OpClass, peer: Peer, tag: Option<i64>, buffer: u64) -> Operation {
    let mut op = Operation::new(class, peer);
    op.status = OpStatus::Pending;
    op.tag = tag;
    op.length = Length {
        bytes: Some(1 << 20),
        elements: None,
    };
    op.buffer = buffer;
    op
}

pub(crate) fn recv(from: u64, tag: i64) -> Operation {
    op(OpClass::Receive, Peer::Rank(from), Some(tag), 0x1000 + from)
}

pub(crate) fn send(to: u64, tag: i64) -> Operation {
    op(OpClass::Send, Peer::Rank(to), Some(tag), 0x2000 + to)
}

/// An eager unexpected message: its data is here, in a system buffer.
pub(crate) fn unexpected(from: u64, tag: i64) -> Operation {
    let mut op = op(
        OpClass::Unexpected,
        Peer::Rank(from),
        Some(tag),
        0x9000 + from,
    );
    op.system_buffer = true;
    op
}

/// A rendezvous header in the unexpected queue: the data is still at the sender.
pub(crate) fn rendezvous_header(from: u64, tag: i64) -> Operation {
    op(OpClass::Unexpected, Peer::Rank(from), Some(tag), 0)
}

pub(crate) fn comm(name: &str, ctx: u64, size: u64, rank: u64, ops: Vec<Operation>) -> CommQueues {
    let mut c = CommQueues::new(0x7000 + ctx, name, size, rank);
    c.context_id = Some(ctx);
    c.operations = ops;
    c
}

/// `n` ranks, each in MPI_COMM_WORLD with the operations `ops(rank)`.
pub(crate) fn world(n: u64, mut ops: impl FnMut(u64) -> Vec<Operation>) -> JobSnapshot {
    JobSnapshot::new(
        (0..n)
            .map(|r| {
                RankSnapshot::new(
                    r,
                    Some(1000 + r as i64),
                    vec![comm("MPI_COMM_WORLD", 0, n, r, ops(r))],
                )
            })
            .collect(),
    )
}

/// What a queue reader reports for the bundled demo job (mpir-demo/demo/rank.c) with `n` ranks:
/// MPI_COMM_WORLD (context 0), MPI_COMM_SELF (16, no group), the internal MPI_ICOMM_WORLD (32)
/// and "demo-ring" (48); ranks 0-2 receive from the next of the three (tag 7), rank 3 has an
/// MPI_ANY_SOURCE receive (tag 42) and a send to 0 (tag 99) on demo-ring and an unexpected
/// message from 1 (tag 5) on MPI_COMM_WORLD.
pub(crate) fn demo_job(n: u64) -> JobSnapshot {
    let everyone: Vec<u64> = (0..n).collect();
    JobSnapshot::new(
        (0..n)
            .map(|r| {
                let mut ring_ops = Vec::new();
                let mut world_ops = Vec::new();
                if n >= 3 && r < 3 {
                    ring_ops.push(recv((r + 1) % 3, 7));
                } else if n == 2 && r == 0 {
                    ring_ops.push(recv(1, 7));
                } else if r == 3 {
                    ring_ops.push(op(OpClass::Receive, Peer::Any, Some(42), 0x50));
                    ring_ops.push(send(0, 99));
                    world_ops.push(unexpected(1, 5));
                }
                let with_group = |mut c: CommQueues| {
                    c.group = Some(everyone.clone());
                    c
                };
                let mut icomm = with_group(comm("MPI_ICOMM_WORLD", 32, n, r, vec![]));
                icomm.internal = true;
                RankSnapshot::new(
                    r,
                    None,
                    vec![
                        with_group(comm("demo-ring", 48, n, r, ring_ops)),
                        icomm,
                        comm("MPI_COMM_SELF", 16, 1, 0, vec![]),
                        with_group(comm("MPI_COMM_WORLD", 0, n, r, world_ops)),
                    ],
                )
            })
            .collect(),
    )
}
