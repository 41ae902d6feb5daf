//! What every report is checked for: its deadlocked ranks, chains that are closed and made of
//! stuck waits of their cycle, and a time bound.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mpir_types::deadlock::{DeadlockReport, RankState};

pub(crate) fn deadlocked(r: &DeadlockReport) -> BTreeSet<u64> {
    r.cycles
        .iter()
        .flat_map(|c| c.ranks.iter().copied())
        .chain(r.blocked.iter().map(|b| b.rank))
        .collect()
}

/// Every chain is closed and made of waits of its cycle's ranks that cannot end.
pub(crate) fn check_chains(r: &DeadlockReport) {
    for (i, c) in r.cycles.iter().enumerate() {
        assert!(!c.chain.is_empty(), "cycle {i} has no chain: {r}");
        for (k, s) in c.chain.iter().enumerate() {
            let next = &c.chain[(k + 1) % c.chain.len()];
            assert_eq!(
                s.waits_for, next.rank,
                "chain of cycle {i} is not closed: {r}"
            );
            assert!(c.ranks.contains(&s.rank));
            assert!(
                r.waits.iter().any(|w| w.rank == s.rank
                    && w.op == s.op
                    && !w.can_complete
                    && w.state == RankState::InCycle { cycle: i }),
                "step {s:?} is not a stuck wait of cycle {i}"
            );
        }
    }
}

pub(crate) fn timed<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    let took = t.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < limit, "{what} took {took:?}");
    out
}
