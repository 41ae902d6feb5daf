//! What the wait-for analysis makes of a rank's export: its pending operations and the
//! collective it is in.

use super::{Arg, CallKind, WaitStates};
use crate::deadlock::{CollectiveAt, CommQueues, RankSnapshot, WaitSource};
use crate::mqd::{OpClass, Operation, Peer};

/// `MPI_COMM_WORLD`'s id in the export.
pub const WORLD: u64 = 1;
/// `MPI_COMM_SELF`'s id in the export (the same on every process, and a different
/// communicator on each).
pub const SELF: u64 = 2;

impl WaitStates {
    /// This rank as the wait-for analysis takes it ([`WaitSource::WaitStates`]): every
    /// communicator of the export (the id as context id, which every member shares); on it, a
    /// pending receive or send for each thread's blocking point-to-point call, and one for
    /// every active request (what a rank waits on must be completed, as for queues). The
    /// identity the analysis compares across samples (`buffer`) is the thread's count of
    /// entered calls for a thread's call, and the handle with the count of the thread waiting
    /// on it for a request: a thread that returned and called again is a new operation. What
    /// cannot be placed (a communicator the export does not list) is said in `notes`.
    ///
    /// [`WaitSource::WaitStates`]: crate::deadlock::WaitSource::WaitStates
    pub fn rank_queues(&self, rank: u64, pid: Option<i64>) -> (RankSnapshot, Vec<String>) {
        let mut notes = Vec::new();
        let mut comms: Vec<CommQueues> = self
            .comms
            .iter()
            .map(|c| {
                let name = match c.id {
                    WORLD => "MPI_COMM_WORLD",
                    SELF => "MPI_COMM_SELF",
                    _ => "",
                };
                let mut q = CommQueues::new(c.id, name, c.size, c.rank);
                // MPI_COMM_SELF is a different communicator in every process.
                q.context_id = Some(if c.id == SELF {
                    SELF | ((rank.wrapping_add(1)) << 32)
                } else {
                    c.id
                });
                q
            })
            .collect();
        let mut place = |comm: u64, mut op: Operation, notes: &mut Vec<String>| {
            // On MPI_COMM_WORLD a peer's rank is its job rank: said, so that a peer known by
            // its stacks alone (no communicators) is still the rank waited for.
            if comm == WORLD
                && let Peer::Rank(p) = op.peer_local
            {
                op.peer_global = Some(p);
            }
            match comms.iter_mut().find(|q| q.unique_id == comm) {
                Some(q) => q.operations.push(op),
                None => notes.push(format!(
                    "rank {rank}: a wait on communicator {comm:#x}, which its export does not list, was left out"
                )),
            }
        };
        let peer = |a: Arg| match a {
            Arg::Value(p) => Some(Peer::Rank(u64::from(p))),
            Arg::Any => Some(Peer::Any),
            _ => None,
        };
        let tag = |a: Arg| match a {
            Arg::Value(t) => Some(i64::from(t)),
            _ => None,
        };
        let op = |class: OpClass, p: Peer, t: Arg, identity: u64| {
            let mut o = Operation::new(class, p);
            o.tag = tag(t);
            o.buffer = identity;
            o
        };
        // The collective a thread is in (the first such thread's: MPI forbids two threads of
        // a process in collectives on one communicator at once).
        let mut collective: Option<CollectiveAt> = None;
        // Requests a thread waits on, with that thread's call count.
        let mut waited: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
        for t in &self.threads {
            match t.call.kind() {
                CallKind::Receive => {
                    if let Some(p) = peer(t.peer) {
                        place(t.comm, op(OpClass::Receive, p, t.tag, t.calls), &mut notes);
                    }
                }
                CallKind::Send => {
                    // A buffered send completes locally: it waits for nobody.
                    if t.call.0 != 3
                        && let Some(p) = peer(t.peer)
                    {
                        place(t.comm, op(OpClass::Send, p, t.tag, t.calls), &mut notes);
                    }
                }
                CallKind::SendRecv => {
                    if let Some(p) = peer(t.send_peer) {
                        place(
                            t.comm,
                            op(OpClass::Send, p, t.send_tag, t.calls),
                            &mut notes,
                        );
                    }
                    if let Some(p) = peer(t.peer) {
                        place(t.comm, op(OpClass::Receive, p, t.tag, t.calls), &mut notes);
                    }
                }
                CallKind::Wait => {
                    for r in t.requests.iter().flatten() {
                        waited.insert(*r, t.calls);
                    }
                }
                CallKind::Collective if collective.is_none() => {
                    if let Some(name) = t.call.name() {
                        let comm = if t.comm == SELF {
                            SELF | ((rank.wrapping_add(1)) << 32)
                        } else {
                            t.comm
                        };
                        let root = match t.root {
                            Arg::Value(r) => Some(u64::from(r)),
                            _ => None,
                        };
                        collective = Some(CollectiveAt::new(comm, t.coll_seq, name, root));
                    }
                }
                _ => {}
            }
        }
        for r in self.requests.iter().filter(|r| r.active) {
            let class = if r.kind.is_receive_request() {
                OpClass::Receive
            } else if r.kind.is_blocking_send_request() {
                OpClass::Send
            } else {
                continue;
            };
            let Some(p) = peer(r.peer) else { continue };
            let identity = r.handle ^ waited.get(&r.index).copied().unwrap_or(0).rotate_left(40);
            place(r.comm, op(class, p, r.tag, identity), &mut notes);
        }
        let mut q = RankSnapshot::new(rank, pid, comms);
        q.source = WaitSource::WaitStates;
        q.collective = collective;
        (q, notes)
    }
}
