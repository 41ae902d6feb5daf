//! The analysis proper: pairing messages with receives, the waits that remain, the ranks that
//! are released (AND-OR reduction), and the cyclic components among the others (iterative
//! Tarjan) with one closed chain through each.
//!
//! Indices here are the analysis's own (positions in the snapshot's vectors, or in tables
//! built from them); target data only ever selects among them through `get`.

use std::collections::{HashMap, VecDeque};

use super::pairing::{Bucket, Msg, pair_bucket};
use super::tarjan::tarjan;

use super::{AnalysisError, CommQueues, JobSnapshot, MAX_NOTES};
use crate::mqd::{OpClass, OpStatus, Operation, Peer};

/// An operation: rank index, communicator index, operation index in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct OpRef {
    pub(super) rank: usize,
    pub(super) comm: usize,
    pub(super) op: usize,
}

/// What one wait needs: one rank, or any member of a communicator (`MPI_ANY_SOURCE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Rank(usize),
    Group(usize),
}

/// A wait that no available message or posted receive satisfies.
#[derive(Debug, Clone, Copy)]
pub(super) struct WaitEdge {
    pub(super) op: OpRef,
    pub(super) target: Target,
    /// Satisfied while releasing ranks (its target, or a member of its group, was released).
    pub(super) satisfied: bool,
}

/// The result of the analysis, in indices; `report` turns it into the public report.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    /// Every wait left after pairing messages with receives.
    pub(super) waits: Vec<WaitEdge>,
    /// Wait indices per rank index.
    pub(super) waits_of: Vec<Vec<usize>>,
    /// Per rank index: whether it can progress.
    pub(super) released: Vec<bool>,
    /// Per rank index: finalized or exited, so never released (waits on it never end).
    pub(super) finished: Vec<bool>,
    /// Member rank indices per communicator key (a key is one communicator across ranks).
    pub(super) members: Vec<Vec<usize>>,
    /// Cyclic components: rank indices, sorted by job rank.
    pub(super) components: Vec<Vec<usize>>,
    /// Per rank index: its cyclic component.
    pub(super) component_of: Vec<Option<usize>>,
    /// Per component: a closed chain of (wait index, rank index waited for).
    pub(super) chains: Vec<Vec<(usize, usize)>>,
    /// What the analysis could not resolve, as text.
    pub(super) notes: Vec<String>,
    /// Notes beyond [`MAX_NOTES`].
    pub(super) notes_omitted: u64,
}

/// Whether an operation still needs something: pending, or a status we do not know.
pub(super) fn is_pending(op: &Operation) -> bool {
    matches!(op.status, OpStatus::Pending | OpStatus::Unknown(_))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum KeyRef<'a> {
    Context(u64),
    Named(&'a str, u64),
}

fn key_of(c: &CommQueues) -> KeyRef<'_> {
    match c.context_id {
        Some(id) => KeyRef::Context(id),
        None => KeyRef::Named(&c.name, c.size),
    }
}

/// How a peer resolved to a rank of the snapshot.
enum Resolved {
    Rank(usize),
    /// A job rank the snapshot does not hold.
    Missing(u64),
    /// No rank of the snapshot holds that local rank of the communicator.
    NotHeld,
    /// Two ranks of the snapshot claim it.
    Ambiguous,
}

impl Resolved {
    /// Why a peer is assumed to progress, for a note.
    fn why(&self, what: &str, p: u64) -> String {
        match self {
            Resolved::Rank(_) => String::new(),
            Resolved::Missing(g) => {
                format!("{what} {p} is rank {g}, which the snapshot does not hold")
            }
            Resolved::NotHeld => format!("no rank of the snapshot is {what} {p}"),
            Resolved::Ambiguous => format!("two ranks of the snapshot claim to be {what} {p}"),
        }
    }
}

struct Builder<'a> {
    job: &'a JobSnapshot,
    index_of: HashMap<u64, usize>,
    /// Key id per (rank index, communicator index).
    key: Vec<Vec<usize>>,
    /// Rank index per (key, local rank); `None` when two ranks claim it.
    at: HashMap<(usize, u64), Option<usize>>,
    members: Vec<Vec<usize>>,
    /// Flat operation id base per (rank index, communicator index).
    base: Vec<Vec<usize>>,
    flat: Vec<OpRef>,
    notes: Vec<String>,
    notes_omitted: u64,
}

impl<'a> Builder<'a> {
    fn new(job: &'a JobSnapshot) -> Result<Self, AnalysisError> {
        let mut index_of = HashMap::with_capacity(job.ranks.len());
        for (i, r) in job.ranks.iter().enumerate() {
            if index_of.insert(r.rank, i).is_some() {
                return Err(AnalysisError::DuplicateRank { rank: r.rank });
            }
        }
        let mut keys: HashMap<KeyRef<'a>, usize> = HashMap::new();
        let mut b = Builder {
            job,
            index_of,
            key: Vec::with_capacity(job.ranks.len()),
            at: HashMap::new(),
            members: Vec::new(),
            base: Vec::with_capacity(job.ranks.len()),
            flat: Vec::new(),
            notes: Vec::new(),
            notes_omitted: 0,
        };
        for (ri, r) in job.ranks.iter().enumerate() {
            let mut ks = Vec::with_capacity(r.communicators.len());
            let mut bases = Vec::with_capacity(r.communicators.len());
            for (ci, c) in r.communicators.iter().enumerate() {
                let next = keys.len();
                let k = *keys.entry(key_of(c)).or_insert(next);
                if k == b.members.len() {
                    b.members.push(Vec::new());
                }
                if let Some(m) = b.members.get_mut(k)
                    && m.last() != Some(&ri)
                {
                    m.push(ri);
                }
                b.at.entry((k, c.local_rank))
                    .and_modify(|e| {
                        if *e != Some(ri) {
                            *e = None;
                        }
                    })
                    .or_insert(Some(ri));
                ks.push(k);
                bases.push(b.flat.len());
                b.flat.extend((0..c.operations.len()).map(|op| OpRef {
                    rank: ri,
                    comm: ci,
                    op,
                }));
            }
            b.key.push(ks);
            b.base.push(bases);
        }
        Ok(b)
    }

    fn note(&mut self, text: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(text);
        } else {
            self.notes_omitted += 1;
        }
    }

    fn comm(&self, ri: usize, ci: usize) -> Option<&'a CommQueues> {
        self.job.ranks.get(ri)?.communicators.get(ci)
    }

    fn key_of(&self, ri: usize, ci: usize) -> Option<usize> {
        self.key.get(ri)?.get(ci).copied()
    }

    fn flat_id(&self, o: OpRef) -> Option<usize> {
        Some(self.base.get(o.rank)?.get(o.comm)? + o.op)
    }

    fn job_rank(&self, ri: usize) -> u64 {
        self.job.ranks.get(ri).map_or(u64::MAX, |r| r.rank)
    }

    /// The snapshot rank of local rank `p` of communicator (ri, ci).
    fn resolve(&self, ri: usize, ci: usize, op: &Operation, p: u64) -> Resolved {
        let Some(c) = self.comm(ri, ci) else {
            return Resolved::NotHeld;
        };
        let global = op.peer_global.or_else(|| {
            let g = c.group.as_ref()?;
            if g.len() as u64 != c.size {
                return None;
            }
            g.get(usize::try_from(p).ok()?).copied()
        });
        if let Some(g) = global {
            return match self.index_of.get(&g) {
                Some(&i) => Resolved::Rank(i),
                None => Resolved::Missing(g),
            };
        }
        match self.key_of(ri, ci).and_then(|k| self.at.get(&(k, p))) {
            Some(Some(i)) => Resolved::Rank(*i),
            Some(None) => Resolved::Ambiguous,
            None => Resolved::NotHeld,
        }
    }

    fn describe(&self, o: OpRef) -> String {
        let name = self.comm(o.rank, o.comm).map_or("?", |c| {
            if c.name.is_empty() {
                "(unnamed)"
            } else {
                &c.name
            }
        });
        format!("rank {} on {name}", self.job_rank(o.rank))
    }

    /// Local rank `p` of a peer, or a note when it is out of the communicator.
    fn local_peer(&mut self, o: OpRef, op: &Operation) -> Option<u64> {
        let size = self.comm(o.rank, o.comm).map_or(0, |c| c.size);
        match op.peer_local {
            Peer::Rank(p) if p < size => Some(p),
            Peer::Rank(p) => {
                let d = self.describe(o);
                self.note(format!(
                    "{d}: peer {p} is outside the communicator of size {size}; ignored"
                ));
                None
            }
            Peer::Unknown(v) => {
                let d = self.describe(o);
                self.note(format!("{d}: {:?} with peer value {v}; ignored", op.class));
                None
            }
            Peer::Any => None,
        }
    }

    /// Pairs available messages with receives; returns which operations are satisfied and the
    /// sends whose destination resolved (flat id -> destination rank index).
    fn pair(&mut self) -> (Vec<bool>, HashMap<usize, usize>) {
        let job = self.job;
        let mut buckets: HashMap<(usize, usize), Bucket> = HashMap::new();
        let mut send_dest = HashMap::new();
        for (ri, r) in job.ranks.iter().enumerate() {
            for (ci, c) in r.communicators.iter().enumerate() {
                let Some(k) = self.key_of(ri, ci) else {
                    continue;
                };
                for (oi, op) in c.operations.iter().enumerate() {
                    let o = OpRef {
                        rank: ri,
                        comm: ci,
                        op: oi,
                    };
                    let Some(id) = self.flat_id(o) else { continue };
                    match op.class {
                        OpClass::Receive if is_pending(op) => {
                            if matches!(op.peer_local, Peer::Any) {
                                let b = buckets.entry((k, ri)).or_default();
                                b.recvs.push((id, None, op.tag));
                            } else if let Some(p) = self.local_peer(o, op) {
                                let b = buckets.entry((k, ri)).or_default();
                                b.recvs.push((id, Some(p), op.tag));
                            }
                        }
                        OpClass::Unexpected => {
                            let src = match op.peer_local {
                                Peer::Rank(p) => Some(p),
                                _ => None,
                            };
                            let b = buckets.entry((k, ri)).or_default();
                            b.unexpected.push(Msg {
                                send: None,
                                src,
                                tag: op.tag,
                            });
                        }
                        OpClass::Send if is_pending(op) => {
                            let Some(p) = self.local_peer(o, op) else {
                                continue;
                            };
                            match self.resolve(ri, ci, op, p) {
                                Resolved::Rank(dest) => {
                                    send_dest.insert(id, dest);
                                    let b = buckets.entry((k, dest)).or_default();
                                    b.sends.push(Msg {
                                        send: Some(id),
                                        src: Some(c.local_rank),
                                        tag: op.tag,
                                    });
                                }
                                other => {
                                    let d = self.describe(o);
                                    let why = other.why("destination", p);
                                    self.note(format!("{d}: {why}; send assumed to progress"));
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let mut satisfied = vec![false; self.flat.len()];
        for (_, b) in buckets {
            pair_bucket(b, &mut satisfied);
        }
        (satisfied, send_dest)
    }
}

impl Analysis {
    /// Runs the whole analysis on `job`; `finished` (by rank index, may be short) marks the
    /// ranks that will never communicate again.
    pub(super) fn run(job: &JobSnapshot, finished: &[bool]) -> Result<Analysis, AnalysisError> {
        let mut b = Builder::new(job)?;
        let (satisfied, send_dest) = b.pair();
        let n = job.ranks.len();
        let mut a = Analysis {
            waits_of: vec![Vec::new(); n],
            ..Analysis::default()
        };
        let flat = std::mem::take(&mut b.flat);
        for (id, &o) in flat.iter().enumerate() {
            if satisfied.get(id).copied().unwrap_or(true) {
                continue;
            }
            let (Some(c), Some(k)) = (b.comm(o.rank, o.comm), b.key_of(o.rank, o.comm)) else {
                continue;
            };
            let Some(op) = c.operations.get(o.op) else {
                continue;
            };
            let target = match op.class {
                OpClass::Send => send_dest.get(&id).map(|&d| Target::Rank(d)),
                OpClass::Receive if is_pending(op) => match op.peer_local {
                    Peer::Rank(p) if p == c.local_rank => Some(Target::Rank(o.rank)),
                    Peer::Rank(p) if p < c.size => match b.resolve(o.rank, o.comm, op, p) {
                        Resolved::Rank(t) => Some(Target::Rank(t)),
                        other => {
                            let d = b.describe(o);
                            let why = other.why("source", p);
                            b.note(format!("{d}: {why}; receive assumed to progress"));
                            None
                        }
                    },
                    Peer::Any => {
                        let members = b.members.get(k).map_or(0, Vec::len) as u64;
                        if members < c.size {
                            let d = b.describe(o);
                            b.note(format!(
                                "{d}: MPI_ANY_SOURCE, but only {members} of {} members are in the snapshot; assumed to progress",
                                c.size
                            ));
                            None
                        } else if members <= 1 {
                            Some(Target::Rank(o.rank))
                        } else {
                            Some(Target::Group(k))
                        }
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some(target) = target
                && let Some(w) = a.waits_of.get_mut(o.rank)
            {
                w.push(a.waits.len());
                a.waits.push(WaitEdge {
                    op: o,
                    target,
                    satisfied: false,
                });
            }
        }
        a.members = std::mem::take(&mut b.members);
        a.notes = std::mem::take(&mut b.notes);
        a.notes_omitted = b.notes_omitted;
        a.finished = (0..n)
            .map(|i| finished.get(i).copied().unwrap_or(false))
            .collect();
        a.release(&b.key);
        a.find_cycles(job);
        Ok(a)
    }

    /// AND-OR reduction: release ranks with no unsatisfied wait, satisfy the waits on them (and
    /// on their communicators), repeat.
    fn release(&mut self, keys: &[Vec<usize>]) {
        let n = self.waits_of.len();
        let mut on_rank: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut on_group: Vec<Vec<usize>> = vec![Vec::new(); self.members.len()];
        for (wi, w) in self.waits.iter().enumerate() {
            let list = match w.target {
                Target::Rank(t) => on_rank.get_mut(t),
                Target::Group(g) => on_group.get_mut(g),
            };
            if let Some(l) = list {
                l.push(wi);
            }
        }
        let mut pending: Vec<usize> = self.waits_of.iter().map(Vec::len).collect();
        let mut group_released = vec![false; self.members.len()];
        self.released = vec![false; n];
        let finished = &self.finished;
        let mut queue: Vec<usize> = (0..n)
            .filter(|&r| pending.get(r) == Some(&0) && finished.get(r) != Some(&true))
            .collect();
        for &r in &queue {
            if let Some(x) = self.released.get_mut(r) {
                *x = true;
            }
        }
        let waits = &mut self.waits;
        let released = &mut self.released;
        let mut satisfy = |wi: usize, queue: &mut Vec<usize>| {
            let Some(w) = waits.get_mut(wi) else { return };
            if w.satisfied {
                return;
            }
            w.satisfied = true;
            let owner = w.op.rank;
            if let Some(p) = pending.get_mut(owner) {
                *p = p.saturating_sub(1);
                if *p == 0
                    && finished.get(owner) != Some(&true)
                    && let Some(x) = released.get_mut(owner)
                    && !*x
                {
                    *x = true;
                    queue.push(owner);
                }
            }
        };
        while let Some(r) = queue.pop() {
            for &wi in on_rank.get(r).map_or(&[][..], Vec::as_slice) {
                satisfy(wi, &mut queue);
            }
            for &g in keys.get(r).map_or(&[][..], Vec::as_slice) {
                if let Some(done) = group_released.get_mut(g)
                    && !*done
                {
                    *done = true;
                    for &wi in on_group.get(g).map_or(&[][..], Vec::as_slice) {
                        satisfy(wi, &mut queue);
                    }
                }
            }
        }
    }

    /// Adjacency of the deadlocked part: ranks are nodes `0..n`, communicator keys `n..n+k`.
    fn adjacency(&self) -> Vec<Vec<usize>> {
        let n = self.waits_of.len();
        let mut adj = vec![Vec::new(); n + self.members.len()];
        let mut waiters: Vec<Vec<usize>> = vec![Vec::new(); self.members.len()];
        for w in self.waits.iter().filter(|w| !w.satisfied) {
            let to = match w.target {
                Target::Rank(t) => t,
                Target::Group(g) => {
                    if let Some(ws) = waiters.get_mut(g)
                        && ws.last() != Some(&w.op.rank)
                    {
                        ws.push(w.op.rank);
                    }
                    n + g
                }
            };
            if let Some(a) = adj.get_mut(w.op.rank) {
                a.push(to);
            }
        }
        for (g, ws) in waiters.iter().enumerate() {
            if ws.is_empty() {
                continue;
            }
            let sole = (ws.len() == 1).then(|| ws.first().copied()).flatten();
            let Some(a) = adj.get_mut(n + g) else {
                continue;
            };
            for &m in self.members.get(g).map_or(&[][..], Vec::as_slice) {
                // A lone waiter's own receive cannot be satisfied by itself.
                if Some(m) != sole && !self.released.get(m).copied().unwrap_or(true) {
                    a.push(m);
                }
            }
        }
        adj
    }

    fn find_cycles(&mut self, job: &JobSnapshot) {
        let n = self.waits_of.len();
        let adj = self.adjacency();
        let sccs = tarjan(&adj);
        self.component_of = vec![None; n];
        let mut node_comp = vec![usize::MAX; adj.len()];
        for scc in sccs {
            let ranks: Vec<usize> = scc.iter().copied().filter(|&v| v < n).collect();
            let cyclic = match scc.as_slice() {
                [] => false,
                [v] => adj.get(*v).is_some_and(|a| a.contains(v)),
                _ => !ranks.is_empty(),
            };
            if !cyclic {
                continue;
            }
            let id = self.components.len();
            for &v in &scc {
                if let Some(c) = node_comp.get_mut(v) {
                    *c = id;
                }
            }
            for &r in &ranks {
                if let Some(c) = self.component_of.get_mut(r) {
                    *c = Some(id);
                }
            }
            let mut ranks = ranks;
            ranks.sort_by_key(|&r| job.ranks.get(r).map_or(u64::MAX, |q| q.rank));
            self.components.push(ranks);
        }
        let mut seen = vec![usize::MAX; n];
        let mut expanded = vec![usize::MAX; self.members.len()];
        let mut pred = vec![(usize::MAX, usize::MAX); n];
        for c in 0..self.components.len() {
            let chain = self.chain(c, &node_comp, &mut seen, &mut expanded, &mut pred);
            self.chains.push(chain);
        }
    }

    /// A shortest closed chain through the component's first rank (breadth first; a
    /// communicator's members are expanded at most twice).
    fn chain(
        &self,
        c: usize,
        node_comp: &[usize],
        seen: &mut [usize],
        expanded: &mut [usize],
        pred: &mut [(usize, usize)],
    ) -> Vec<(usize, usize)> {
        let n = self.waits_of.len();
        let Some(&s) = self.components.get(c).and_then(|r| r.first()) else {
            return Vec::new();
        };
        let in_comp = |v: usize| node_comp.get(v) == Some(&c);
        let mut queue = VecDeque::from([s]);
        if let Some(x) = seen.get_mut(s) {
            *x = c;
        }
        let mut closing = None;
        'bfs: while let Some(r) = queue.pop_front() {
            for &wi in self.waits_of.get(r).map_or(&[][..], Vec::as_slice) {
                let Some(w) = self.waits.get(wi).filter(|w| !w.satisfied) else {
                    continue;
                };
                let mut visit = |t: usize, queue: &mut VecDeque<usize>| -> bool {
                    if t == s {
                        return true;
                    }
                    if let Some(x) = seen.get_mut(t)
                        && *x != c
                    {
                        *x = c;
                        if let Some(p) = pred.get_mut(t) {
                            *p = (r, wi);
                        }
                        queue.push_back(t);
                    }
                    false
                };
                match w.target {
                    Target::Rank(t) if in_comp(t) && visit(t, &mut queue) => {
                        closing = Some((r, wi));
                        break 'bfs;
                    }
                    Target::Group(g) if in_comp(n + g) => {
                        if expanded.get(g) == Some(&c) {
                            continue;
                        }
                        for &m in self.members.get(g).map_or(&[][..], Vec::as_slice) {
                            if m != r && in_comp(m) && visit(m, &mut queue) {
                                closing = Some((r, wi));
                                break 'bfs;
                            }
                        }
                        if r != s
                            && let Some(e) = expanded.get_mut(g)
                        {
                            *e = c;
                        }
                    }
                    _ => {}
                }
            }
        }
        let Some((last, last_wait)) = closing else {
            return Vec::new();
        };
        // Walk back from `last` to `s`, then reverse: s -> ... -> last -> s.
        let mut chain = vec![(last_wait, s)];
        let mut v = last;
        let mut hops = 0;
        while v != s && hops <= n {
            let Some(&(p, wi)) = pred.get(v) else { break };
            chain.push((wi, v));
            v = p;
            hops += 1;
        }
        chain.reverse();
        chain
    }
}
