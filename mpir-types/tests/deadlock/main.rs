//! Deadlock analysis on synthetic jobs: rings, rendezvous sends, wildcards (knots and escapes),
//! messages that satisfy waits, confirmation over snapshots, huge jobs, the DOT and JSON forms,
//! and random jobs against a brute-force oracle.
//!
//! The tests are here; their helpers: `jobs` (synthetic jobs and the demo job), `checks` (what
//! every report must satisfy), `dot` (the DOT form read back) and `oracle` (random jobs and a
//! brute-force answer).

mod checks;
mod dot;
mod jobs;
mod oracle;

use std::collections::BTreeSet;
use std::time::Duration;

use mpir_types::deadlock::{self, RankState, Verdict, WaitTarget};
#[cfg(feature = "serde")]
use mpir_types::deadlock::{DeadlockReport, JobSnapshot};
use mpir_types::mqd::{OpClass, Peer};
use proptest::prelude::*;

use checks::{check_chains, deadlocked, timed};
use dot::parse_dot;
use jobs::{comm, demo_job, op, recv, rendezvous_header, send, unexpected, world};
use oracle::{build, oracle, random_job};

#[test]
fn ring_of_blocking_receives() {
    for n in 2..=64u64 {
        let job = world(n, |r| vec![recv((r + 1) % n, 7)]);
        let rep = deadlock::analyze(&job).unwrap();
        assert_eq!(rep.verdict, Verdict::PotentialDeadlock, "n={n}");
        assert_eq!(rep.cycles.len(), 1, "n={n}");
        let c = &rep.cycles[0];
        assert_eq!(c.ranks, (0..n).collect::<Vec<_>>());
        assert_eq!(
            c.chain.len() as u64,
            n,
            "the chain goes round the whole ring"
        );
        assert_eq!(c.chain[0].rank, 0);
        assert_eq!(c.chain[0].waits_for, 1);
        assert_eq!(c.chain[0].op.class, OpClass::Receive);
        assert_eq!(c.chain[0].op.tag, Some(7));
        assert_eq!(c.communicators.len(), 1);
        assert_eq!(c.communicators[0].name, "MPI_COMM_WORLD");
        assert!(rep.blocked.is_empty());
        check_chains(&rep);
        let text = rep.to_string();
        assert!(text.starts_with("potential deadlock: 1 cycle"), "{text}");
        assert!(text.contains("receive from 1 tag 7 on MPI_COMM_WORLD; waits for rank 1"));
    }
}

#[test]
fn progressing_ring_has_no_cycle() {
    // Everyone receives from the next rank, but the last rank is busy computing (no pending
    // operation): it will send, so the whole chain can drain.
    let n = 8;
    let job = world(n, |r| {
        if r == n - 1 {
            vec![]
        } else {
            vec![recv(r + 1, 7)]
        }
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle);
    assert!(!rep.has_cycle());
    assert!(rep.blocked.is_empty());
    assert_eq!(rep.waits.len() as u64, n - 1);
    assert!(
        rep.waits
            .iter()
            .all(|w| w.can_complete && w.state == RankState::Progressing)
    );
    assert!(
        rep.to_string()
            .starts_with("no cycle: 8 ranks, 7 waiting operations")
    );
}

#[test]
fn rendezvous_sends_to_each_other() {
    let job = world(2, |r| vec![send(1 - r, 3)]);
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1);
    assert_eq!(rep.cycles[0].ranks, [0, 1]);
    assert!(
        rep.cycles[0]
            .chain
            .iter()
            .all(|s| s.op.class == OpClass::Send)
    );
    check_chains(&rep);
    // Each posts the matching receive as well (Isend + Irecv + Waitall): no deadlock.
    let job = world(2, |r| vec![send(1 - r, 3), recv(1 - r, 3)]);
    let rep = deadlock::analyze(&job).unwrap();
    assert!(!rep.has_cycle(), "{rep}");
    assert!(rep.waits.is_empty(), "every send meets its receive: {rep}");
}

#[test]
fn sends_matched_by_posted_receives() {
    // 0 sends to 1 tag 5; 1 has a posted receive from 0 with MPI_ANY_TAG: the pair matches.
    let mut any_tag = recv(0, 0);
    any_tag.tag = None;
    let job = world(2, |r| {
        if r == 0 {
            vec![send(1, 5)]
        } else {
            vec![any_tag.clone()]
        }
    });
    assert!(deadlock::analyze(&job).unwrap().waits.is_empty());
    // The same with mismatching tags: 0 waits for 1 to post, 1 waits for 0 to send: a cycle.
    let job = world(2, |r| {
        if r == 0 {
            vec![send(1, 5)]
        } else {
            vec![recv(0, 6)]
        }
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1, "{rep}");
    // One posted receive satisfies one send only: two sends, one receive.
    let job = world(2, |r| {
        if r == 0 {
            vec![send(1, 5), send(1, 5), recv(1, 9)]
        } else {
            vec![recv(0, 5)]
        }
    });
    let rep = deadlock::analyze(&job).unwrap();
    // 1's receive is satisfied, so 1 is free, so 0's second send can end: no cycle.
    assert!(!rep.has_cycle(), "{rep}");
    assert_eq!(rep.waits.iter().filter(|w| w.rank == 0).count(), 2);
}

#[test]
fn unexpected_messages_satisfy_receives() {
    // A ring, but rank 0 already holds rank 1's message: the ring is broken.
    let job = world(3, |r| {
        let mut v = vec![recv((r + 1) % 3, 7)];
        if r == 0 {
            v.push(unexpected(1, 7));
        }
        v
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert!(!rep.has_cycle(), "{rep}");
    // A message with another tag, or on another communicator, does not match.
    for (tag, ctx) in [(8, 0), (7, 1)] {
        let mut job = world(3, |r| vec![recv((r + 1) % 3, 7)]);
        job.ranks[0]
            .communicators
            .push(comm("other", 1, 3, 0, vec![]));
        job.ranks[0].communicators[ctx as usize]
            .operations
            .push(unexpected(1, tag));
        let rep = deadlock::analyze(&job).unwrap();
        assert!(rep.has_cycle(), "tag {tag} ctx {ctx}: {rep}");
    }
    // One message satisfies one receive: two receives from 1, one message.
    let job = world(3, |r| match r {
        0 => vec![recv(1, 7), recv(1, 7), unexpected(1, 7)],
        1 => vec![recv(0, 2)],
        _ => vec![],
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [0, 1]);
}

#[test]
fn sends_seen_only_as_rendezvous_headers_are_waits_of_their_senders() {
    // MPICH lists no blocking send: two ranks each in a large MPI_Send to the other show only
    // each other's request-to-send, in the unexpected queues.
    let job = world(3, |r| match r {
        0 => vec![rendezvous_header(1, 20)],
        1 => vec![rendezvous_header(0, 20)],
        _ => vec![],
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [0, 1]);
    for s in &rep.cycles[0].chain {
        assert_eq!(s.op.class, OpClass::Send, "{rep}");
        assert_eq!(s.op.tag, Some(20));
        assert_eq!(s.waits_for, 1 - s.rank);
    }
    check_chains(&rep);
    // Eager data (in a system buffer) says nothing about the sender.
    let job = world(3, |r| match r {
        0 => vec![unexpected(1, 20)],
        1 => vec![unexpected(0, 20)],
        _ => vec![],
    });
    assert!(!deadlock::analyze(&job).unwrap().has_cycle());
    // A send the sender lists already is not counted twice: one wait of rank 1.
    let job = world(2, |r| match r {
        0 => vec![rendezvous_header(1, 20), send(1, 21)],
        _ => vec![send(0, 20)],
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.waits.iter().filter(|w| w.rank == 1).count(), 1, "{rep}");
    assert!(rep.has_cycle(), "{rep}");
    // A receive posted for the header's tag releases the sender.
    let job = world(2, |r| match r {
        0 => vec![rendezvous_header(1, 20), recv(1, 20)],
        _ => vec![],
    });
    assert!(!deadlock::analyze(&job).unwrap().has_cycle());
}

#[test]
fn wildcard_receive_that_can_never_match() {
    // MPI_ANY_SOURCE on MPI_COMM_SELF: only the rank itself could send.
    let mut job = world(2, |_| vec![]);
    let mut any = op(OpClass::Receive, Peer::Any, Some(1), 0x10);
    any.tag = None;
    job.ranks[1]
        .communicators
        .push(comm("MPI_COMM_SELF", 100, 1, 0, vec![any]));
    // Each rank's MPI_COMM_SELF is a different communicator: give rank 0 its own.
    job.ranks[0]
        .communicators
        .push(comm("MPI_COMM_SELF", 101, 1, 0, vec![]));
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [1]);
    assert_eq!(rep.cycles[0].chain.len(), 1);
    assert_eq!(rep.cycles[0].chain[0].waits_for, 1);
    check_chains(&rep);
}

#[test]
fn any_source_knot_and_escape() {
    let any = |tag| op(OpClass::Receive, Peer::Any, Some(tag), 0x30);
    // Knot: every member waits on MPI_ANY_SOURCE.
    let rep = deadlock::analyze(&world(5, |_| vec![any(1)])).unwrap();
    assert_eq!(rep.cycles.len(), 1, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [0, 1, 2, 3, 4]);
    check_chains(&rep);
    assert!(matches!(
        &rep.waits[0].target,
        WaitTarget::AnySource { candidates, omitted: 0 } if candidates == &[1, 2, 3, 4]
    ));
    // Escape: one member is free, so it can send to any of them.
    let rep = deadlock::analyze(&world(5, |r| if r == 4 { vec![] } else { vec![any(1)] })).unwrap();
    assert!(!rep.has_cycle(), "{rep}");
    // A cycle through one candidate proves nothing while another is free: 0 and 1 receive
    // from each other (a cycle), 2 waits on MPI_ANY_SOURCE with 3 free.
    let job = world(4, |r| match r {
        0 => vec![recv(1, 0)],
        1 => vec![recv(0, 0)],
        2 => vec![any(9)],
        _ => vec![],
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1);
    assert_eq!(rep.cycles[0].ranks, [0, 1]);
    assert!(
        rep.blocked.is_empty(),
        "rank 2 can be served by rank 3: {rep}"
    );
    // Without the free rank 3, rank 2 is blocked by the deadlock but not in the cycle.
    let job = world(3, |r| match r {
        0 => vec![recv(1, 0)],
        1 => vec![recv(0, 0)],
        _ => vec![any(9)],
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1);
    assert_eq!(rep.cycles[0].ranks, [0, 1], "{rep}");
    assert_eq!(rep.blocked.len(), 1);
    assert_eq!(rep.blocked[0].rank, 2);
    assert_eq!(rep.blocked[0].waits_for, [0, 1]);
    assert!(rep.to_string().contains("blocked by the deadlock"));
    // Two wildcard waiters and a cycle: a knot of all three (each may wait on the others).
    let job = world(3, |r| match r {
        0 => vec![recv(1, 0)],
        _ => vec![any(9)],
    });
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1);
    assert_eq!(rep.cycles[0].ranks, [0, 1, 2], "{rep}");
    check_chains(&rep);
}

#[test]
fn peers_resolve_through_groups_and_unknown_peers_progress() {
    // A sub-communicator {world 4, world 2} where each receives from the other; the group maps
    // local ranks to world ranks.
    let mut job = world(5, |_| vec![]);
    for (local, world_rank) in [(0u64, 4usize), (1, 2)] {
        let mut c = comm("pair", 9, 2, local, vec![recv(1 - local, 1)]);
        c.group = Some(vec![4, 2]);
        job.ranks[world_rank].communicators.push(c);
    }
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.cycles.len(), 1, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [2, 4]);
    // A receive from a rank the snapshot does not hold is assumed to progress, and noted.
    let mut job = world(3, |r| vec![recv((r + 1) % 3, 7)]);
    job.ranks.remove(1);
    let rep = deadlock::analyze(&job).unwrap();
    assert!(!rep.has_cycle(), "{rep}");
    assert_eq!(
        rep.notes,
        [
            "rank 0 on MPI_COMM_WORLD: no rank of the snapshot is source 1; receive assumed to progress"
        ]
    );
    // With the group given, the note names the missing job rank.
    let mut job = world(3, |r| vec![recv((r + 1) % 3, 7)]);
    for r in &mut job.ranks {
        r.communicators[0].group = Some(vec![0, 1, 2]);
    }
    job.ranks.remove(1);
    let rep = deadlock::analyze(&job).unwrap();
    assert!(!rep.has_cycle(), "{rep}");
    assert!(rep.notes[0].contains("source 1 is rank 1, which the snapshot does not hold"));
    // Duplicate ranks are an error naming the rank.
    let mut job = world(2, |_| vec![]);
    job.ranks[1].rank = 0;
    let err = deadlock::analyze(&job).unwrap_err();
    assert!(err.to_string().contains("rank 0"));
}

#[test]
fn confirm_keeps_only_cycles_present_in_every_snapshot() {
    let ring = |buf: u64| {
        let mut job = world(4, |r| vec![recv((r + 1) % 4, 7)]);
        for r in &mut job.ranks {
            r.communicators[0].operations[0].buffer = buf;
        }
        job
    };
    // The same operations three times: confirmed.
    let rep = deadlock::confirm(&[ring(1), ring(1), ring(1)]).unwrap();
    assert_eq!(rep.verdict, Verdict::Deadlock);
    assert_eq!(rep.samples, 3);
    assert_eq!(rep.cycles.len(), 1);
    assert!(rep.to_string().starts_with("deadlock: 1 cycle"));
    // A ring that progresses: each snapshot catches a cycle, but of other operations.
    let rep = deadlock::confirm(&[ring(1), ring(2), ring(3)]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    assert!(rep.waits.iter().all(|w| w.state == RankState::Progressing));
    assert!(rep.notes[0].contains("dropped"));
    // One snapshot: still only potential.
    let rep = deadlock::confirm(&[ring(1)]).unwrap();
    assert_eq!(rep.verdict, Verdict::PotentialDeadlock);
    assert!(matches!(
        deadlock::confirm(&[]),
        Err(deadlock::AnalysisError::NoSamples)
    ));
}

#[test]
fn the_demo_jobs_deadlock() {
    for n in [4, 5, 8] {
        let rep = deadlock::analyze(&demo_job(n)).unwrap();
        assert_eq!(rep.cycles.len(), 1, "n={n}: {rep}");
        let c = &rep.cycles[0];
        assert_eq!(c.ranks, [0, 1, 2]);
        assert_eq!(c.communicators.len(), 1);
        assert_eq!(c.communicators[0].name, "demo-ring");
        assert_eq!(c.communicators[0].context_id, Some(48));
        check_chains(&rep);
        // Rank 3's send to 0 can never end, whatever its wildcard receive does.
        assert_eq!(rep.blocked.len(), 1, "n={n}: {rep}");
        assert_eq!(rep.blocked[0].rank, 3);
        assert!(
            rep.blocked[0]
                .waits
                .iter()
                .any(|w| w.class == OpClass::Send && w.tag == Some(99))
        );
        // With a fifth rank free, the wildcard receive can end; with four it cannot.
        let any = rep
            .waits
            .iter()
            .find(|w| w.rank == 3 && w.op.peer == Peer::Any)
            .unwrap();
        assert_eq!(any.can_complete, n > 4, "n={n}");
    }
    for n in [1, 2, 3] {
        let rep = deadlock::analyze(&demo_job(n)).unwrap();
        assert_eq!(rep.has_cycle(), n == 3, "n={n}: {rep}");
        assert!(rep.blocked.is_empty(), "n={n}: {rep}");
    }
}

#[test]
fn huge_jobs_in_linear_time() {
    let n = 10_000u64;
    // A ring of 10k: one cycle, a chain of 10k steps.
    let job = world(n, |r| vec![recv((r + 1) % n, 7)]);
    let rep = timed("ring 10k", Duration::from_secs(5), || {
        deadlock::analyze(&job).unwrap()
    });
    assert_eq!(rep.cycles.len(), 1);
    assert_eq!(rep.cycles[0].chain.len() as u64, n);
    let dot = timed("dot 10k", Duration::from_secs(5), || rep.to_dot());
    assert_eq!(parse_dot(&dot).edges.len() as u64, n);
    // A chain of 10k that drains from its free end (deep release propagation).
    let job = world(n, |r| {
        if r == n - 1 {
            vec![]
        } else {
            vec![recv(r + 1, 7)]
        }
    });
    let rep = timed("chain 10k", Duration::from_secs(5), || {
        deadlock::analyze(&job).unwrap()
    });
    assert!(!rep.has_cycle());
    // Everyone on MPI_ANY_SOURCE: 10k x 10k candidate pairs if expanded; one knot.
    let job = world(n, |_| vec![op(OpClass::Receive, Peer::Any, Some(1), 0)]);
    let rep = timed("knot 10k", Duration::from_secs(5), || {
        deadlock::analyze(&job).unwrap()
    });
    assert_eq!(rep.cycles.len(), 1);
    assert_eq!(rep.cycles[0].ranks.len() as u64, n);
    assert_eq!(rep.cycles[0].chain.len(), 2, "the shortest closed chain");
    check_chains(&rep);
    let WaitTarget::AnySource {
        candidates,
        omitted,
    } = &rep.waits[0].target
    else {
        panic!("not a wildcard wait");
    };
    assert_eq!(candidates.len(), deadlock::MAX_LISTED_CANDIDATES);
    assert_eq!(*omitted, n - 1 - deadlock::MAX_LISTED_CANDIDATES as u64);
    // Many receives and messages in one bucket (everyone sends to rank 0).
    let job = world(n, |r| {
        if r == 0 {
            (1..n).map(|s| recv(s, 1)).collect()
        } else {
            vec![send(0, 1)]
        }
    });
    let rep = timed("fan-in 10k", Duration::from_secs(5), || {
        deadlock::analyze(&job).unwrap()
    });
    assert!(rep.waits.is_empty());
}

#[test]
fn dot_output_reads_back() {
    // Ring 0 -> 1 -> 2 -> 0 on a communicator whose name needs escaping; rank 3 blocked by it
    // (a send to 0), rank 4 waits on a free rank 5.
    let job = world(6, |r| match r {
        0..=2 => vec![recv((r + 1) % 3, 7)],
        3 => vec![send(0, 99)],
        4 => vec![recv(5, 1)],
        _ => vec![],
    });
    let mut job = job;
    for r in &mut job.ranks {
        r.communicators[0].name = "ring \"A\"\\x".into();
    }
    let rep = deadlock::analyze(&job).unwrap();
    let dot = parse_dot(&rep.to_dot());
    let edges: BTreeSet<(String, String)> = dot
        .edges
        .iter()
        .map(|(a, b, _)| (a.clone(), b.clone()))
        .collect();
    let expect: BTreeSet<(String, String)> = [(0, 1), (1, 2), (2, 0), (3, 0), (4, 5)]
        .iter()
        .map(|(a, b)| (format!("r{a}"), format!("r{b}")))
        .collect();
    assert_eq!(edges, expect);
    for (a, b, attrs) in &dot.edges {
        let in_ring = ["r0", "r1", "r2"].contains(&a.as_str());
        assert_eq!(
            attrs.get("color").map(String::as_str) == Some("red"),
            in_ring,
            "{a}->{b}"
        );
        assert!(
            attrs["label"].contains("ring \"A\"\\x"),
            "{:?}",
            attrs["label"]
        );
    }
    assert!(dot.edges[0].2["label"].starts_with("receive from 1\ntag 7\n"));
    assert_eq!(dot.nodes["r0"]["fillcolor"], "#f4a6a6");
    assert_eq!(dot.nodes["r3"]["fillcolor"], "#fbd19b");
    assert!(!dot.nodes["r5"].contains_key("fillcolor"));
    assert_eq!(dot.nodes["r4"]["label"], "rank 4");
}

#[cfg(feature = "serde")]
#[test]
fn json_round_trip() {
    let rep = deadlock::analyze(&world(3, |r| vec![recv((r + 1) % 3, 7)])).unwrap();
    let text = serde_json::to_string(&rep).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["verdict"], "potential_deadlock");
    assert_eq!(v["cycles"][0]["ranks"], serde_json::json!([0, 1, 2]));
    assert_eq!(
        v["cycles"][0]["chain"][0]["op"]["comm"]["name"],
        "MPI_COMM_WORLD"
    );
    assert_eq!(v["cycles"][0]["chain"][0]["op"]["class"], "receive");
    assert_eq!(v["waits"][0]["state"]["in_cycle"]["cycle"], 0);
    let back: DeadlockReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, rep);
    let none = deadlock::analyze(&world(2, |_| vec![])).unwrap();
    let v = serde_json::to_value(&none).unwrap();
    assert_eq!(v["verdict"], "no_cycle");
    assert_eq!(v["cycles"], serde_json::json!([]));
    // The input model round-trips too.
    let job = world(2, |r| vec![send(1 - r, 1)]);
    let back: JobSnapshot = serde_json::from_str(&serde_json::to_string(&job).unwrap()).unwrap();
    assert_eq!(back, job);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_brute_force(spec in random_job()) {
        let rep = deadlock::analyze(&build(&spec)).unwrap();
        let (dead, on_cycle) = oracle(&spec);
        prop_assert_eq!(deadlocked(&rep), dead.clone());
        let in_cycles: BTreeSet<u64> =
            rep.cycles.iter().flat_map(|c| c.ranks.iter().copied()).collect();
        prop_assert_eq!(in_cycles, on_cycle);
        prop_assert_eq!(rep.has_cycle(), !dead.is_empty());
        check_chains(&rep);
        // Confirming identical snapshots keeps everything.
        let job = build(&spec);
        let conf = deadlock::confirm(&[job.clone(), job]).unwrap();
        prop_assert_eq!(&conf.cycles, &rep.cycles);
        prop_assert_eq!(&conf.blocked, &rep.blocked);
        let dot = parse_dot(&rep.to_dot());
        let single = rep
            .waits
            .iter()
            .filter(|w| matches!(w.target, WaitTarget::Rank { .. }))
            .count();
        prop_assert!(dot.edges.len() >= single, "{} edges for {} waits", dot.edges.len(), single);
    }
}
