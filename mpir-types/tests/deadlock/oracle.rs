//! Random jobs whose operations never pair, and a brute-force oracle of which ranks are
//! deadlocked and which lie on a cycle.

use std::collections::BTreeSet;

use mpir_types::deadlock::JobSnapshot;
use mpir_types::mqd::{OpClass, Peer};
use proptest::prelude::*;

use crate::jobs::{op, recv, send, world};

/// Random jobs on one world communicator whose operations never pair (receive tags below 100,
/// send tags from 100, no unexpected messages), so each is a wait: (rank, kind, peer).
pub(crate) fn random_job() -> impl Strategy<Value = (u64, Vec<Vec<(u8, u64)>>)> {
    (1u64..12).prop_flat_map(|n| {
        let ops = prop::collection::vec((0u8..3, 0..n), 0..3);
        (Just(n), prop::collection::vec(ops, n as usize))
    })
}

pub(crate) fn build((n, ops): &(u64, Vec<Vec<(u8, u64)>>)) -> JobSnapshot {
    world(*n, |r| {
        ops[r as usize]
            .iter()
            .map(|&(kind, peer)| match kind {
                0 => recv(peer, 1),
                1 => send(peer, 100),
                _ => op(OpClass::Receive, Peer::Any, Some(2), 0),
            })
            .collect()
    })
}

/// Brute force: the candidates of each wait, listed explicitly; release until nothing changes.
pub(crate) fn oracle((n, ops): &(u64, Vec<Vec<(u8, u64)>>)) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let cands = |r: u64, kind: u8, peer: u64| -> Vec<u64> {
        match kind {
            0 | 1 => vec![peer],
            _ if *n == 1 => vec![r],
            _ => (0..*n).filter(|&m| m != r).collect(),
        }
    };
    let mut free: Vec<bool> = ops.iter().map(Vec::is_empty).collect();
    loop {
        let mut changed = false;
        for r in 0..*n {
            if !free[r as usize]
                && ops[r as usize]
                    .iter()
                    .all(|&(k, p)| cands(r, k, p).iter().any(|&c| free[c as usize]))
            {
                free[r as usize] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let dead: BTreeSet<u64> = (0..*n).filter(|&r| !free[r as usize]).collect();
    // On a cycle: reaches itself through stuck waits among deadlocked ranks.
    let on_cycle = dead
        .iter()
        .copied()
        .filter(|&s| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![s];
            while let Some(r) = stack.pop() {
                for &(k, p) in &ops[r as usize] {
                    let c = cands(r, k, p);
                    if c.iter().any(|&x| free[x as usize]) {
                        continue;
                    }
                    for x in c {
                        if x == s {
                            return true;
                        }
                        if seen.insert(x) {
                            stack.push(x);
                        }
                    }
                }
            }
            false
        })
        .collect();
    (dead, on_cycle)
}
