//! Stacks in the hang analysis: ranks outside MPI that do not wait, finished ranks, the blocked
//! call on every wait, collective mismatches, confirmation over samples, the JSON/DOT/text
//! forms, and random jobs against plain reference computations (stack shapes: `stack_shapes`).

mod stack_shapes;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mpir_types::deadlock::{
    self, CommQueues, DeadlockReport, Elsewhere, JobSnapshot, RankSnapshot, Verdict,
};
use mpir_types::mqd::{Length, OpClass, OpStatus, Operation, Peer};
use mpir_types::stacks::{RankActivity, UnknownWhy};
use proptest::prelude::*;
use stack_shapes::*;

// ---- the analysis ----------------------------------------------------------------------

fn op(class: OpClass, peer: u64, tag: i64) -> Operation {
    let mut op = Operation::new(class, Peer::Rank(peer));
    op.status = OpStatus::Pending;
    op.tag = Some(tag);
    op.length = Length {
        bytes: Some(64),
        elements: None,
    };
    op.buffer = 0x1000 + peer;
    op
}

fn recv(from: u64) -> Operation {
    op(OpClass::Receive, from, 7)
}

fn world_rank(n: u64, r: u64, ops: Vec<Operation>) -> RankSnapshot {
    let mut c = CommQueues::new(0x7000, "MPI_COMM_WORLD", n, r);
    c.context_id = Some(0);
    c.operations = ops;
    RankSnapshot::new(r, Some(1000 + r as i64), vec![c])
}

/// The ring 0 ← 1 ← 2 ← 0 (each receives from the next), with activities.
fn ring(acts: [Option<RankActivity>; 3]) -> JobSnapshot {
    JobSnapshot::new(
        acts.into_iter()
            .zip(0u64..)
            .map(|(a, r)| {
                let q = world_rank(3, r, vec![recv((r + 1) % 3)]);
                match a {
                    Some(a) => q.with_activity(a),
                    None => q,
                }
            })
            .collect(),
    )
}

#[test]
fn a_rank_outside_mpi_does_not_wait() {
    let job = ring([None, None, Some(outside(9))]);
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    assert!(rep.waits.iter().all(|w| w.rank != 2 && w.can_complete));
    assert_eq!(rep.not_waiting.len(), 1);
    let nw = &rep.not_waiting[0];
    assert_eq!((nw.rank, nw.operations.len(), nw.omitted), (2, 1, 0));
    assert_eq!(nw.operations[0].peer, Peer::Rank(0));
    let text = rep.to_string();
    assert!(text.contains("not waiting: not inside MPI"), "{text}");
    assert!(
        text.contains("rank 2     not inside MPI (at clock_nanosleep"),
        "{text}"
    );
    // Without stacks, the same queues are a cycle.
    assert!(
        deadlock::analyze(&ring([None, None, None]))
            .unwrap()
            .has_cycle()
    );
}

#[test]
fn waits_and_steps_name_the_blocked_call() {
    let job = ring([
        Some(in_mpi("PMPI_Recv", 10)),
        Some(in_mpi("PMPI_Recv", 11)),
        None,
    ]);
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.verdict, Verdict::PotentialDeadlock);
    let step0 = rep.cycles[0].chain.iter().find(|s| s.rank == 0).unwrap();
    let b = step0.blocked_in.as_ref().unwrap();
    assert_eq!(b.call, "MPI_Recv");
    assert_eq!(
        b.call_site
            .as_ref()
            .unwrap()
            .location
            .as_ref()
            .unwrap()
            .line,
        10
    );
    let step2 = rep.cycles[0].chain.iter().find(|s| s.rank == 2).unwrap();
    assert!(step2.blocked_in.is_none());
    assert!(rep.waits.iter().any(|w| w.rank == 1
        && w.blocked_in.as_ref().is_some_and(|b| {
            b.call_site
                .as_ref()
                .unwrap()
                .location
                .as_ref()
                .unwrap()
                .line
                == 11
        })));
    assert!(
        rep.to_string().contains("in MPI_Recv at main (ring.c:10)"),
        "{rep}"
    );
    assert!(
        rep.to_dot()
            .contains(r"rank 0\nMPI_Recv at main (ring.c:10)")
    );
}

#[test]
fn a_finished_rank_never_releases_its_waiters() {
    // 0 receives from 1, which has exited; 2 receives from 0.
    for gone in [RankActivity::Exited, RankActivity::Finalized] {
        let job = JobSnapshot::new(vec![
            world_rank(3, 0, vec![recv(1)]),
            world_rank(3, 1, vec![recv(0)]).with_activity(gone.clone()),
            world_rank(3, 2, vec![recv(0)]),
        ]);
        let rep = deadlock::analyze(&job).unwrap();
        assert!(!rep.has_cycle(), "{rep}");
        let blocked: Vec<(u64, Vec<u64>)> = rep
            .blocked
            .iter()
            .map(|b| (b.rank, b.waits_for.clone()))
            .collect();
        assert_eq!(blocked, [(0, vec![1]), (2, vec![0])], "{rep}");
        assert_eq!(rep.not_waiting[0].rank, 1);
        assert_eq!(rep.not_waiting[0].activity, gone);
        assert_eq!(rep.verdict, Verdict::NoCycle);
        assert!(rep.has_hang());
        assert!(
            rep.summary()
                .ends_with("2 ranks wait on ranks that finalized, are finalizing or exited"),
            "{rep}"
        );
        let dot = rep.to_dot();
        assert!(
            dot.contains(&format!(
                r#""r1" [label="rank 1\n{gone}\npending receive from 0"#
            )),
            "{dot}"
        );
        // Finished ranks stay finished: confirmed over samples, the waits on them remain.
        let rep = deadlock::confirm(&[job.clone(), job.clone()]).unwrap();
        assert_eq!(rep.blocked.len(), 2, "{rep}");
    }
}

fn acts_job(acts: Vec<Option<RankActivity>>) -> JobSnapshot {
    let n = acts.len() as u64;
    JobSnapshot::new(
        acts.into_iter()
            .zip(0u64..)
            .map(|(a, r)| {
                let q = world_rank(n, r, vec![]);
                match a {
                    Some(a) => q.with_activity(a),
                    None => q,
                }
            })
            .collect(),
    )
}

#[test]
fn collectives_that_do_not_match() {
    // Ranks 0-2 in MPI_Barrier (C and Fortran), rank 3 in MPI_Reduce, rank 4 unknown.
    let fortran = activity(vec![main_thread(
        100,
        vec![
            f(MPICH, "PMPI_Barrier"),
            f(FORT, "mpi_barrier_"),
            f(APP, "MAIN__"),
        ],
    )]);
    let job = acts_job(vec![
        Some(in_mpi("MPI_Barrier", 20)),
        Some(in_mpi("PMPI_Barrier", 20)),
        Some(fortran),
        Some(in_mpi("MPI_Reduce", 30)),
        None,
    ]);
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.verdict, Verdict::PotentialCollectiveMismatch, "{rep}");
    assert!(rep.has_hang() && !rep.has_cycle());
    let h = &rep.collective[0];
    let calls: Vec<(String, String)> = h
        .calls
        .iter()
        .map(|c| (c.call.clone(), c.ranks.to_string()))
        .collect();
    assert_eq!(
        calls,
        [
            ("MPI_Barrier".to_string(), "0-2".to_string()),
            ("MPI_Reduce".to_string(), "3".to_string())
        ]
    );
    assert!(h.elsewhere.is_empty());
    assert_eq!(h.unknown.to_string(), "4");
    assert!(h.calls[0].communicator.is_none());
    // Two call sites of MPI_Barrier: main (ring.c:20) and MAIN__.
    assert_eq!(h.calls[0].call_sites.len(), 2);
    let s = rep.summary();
    assert!(
        s.starts_with("potential collective hang: ranks 0-2 in MPI_Barrier; rank 3 in MPI_Reduce"),
        "{s}"
    );
    let dot = rep.to_dot();
    assert!(
        dot.contains("cluster_collective0") && dot.contains(r"MPI_Reduce\nranks 3"),
        "{dot}"
    );

    // All known ranks in one collective (different bindings, different call sites): no
    // mismatch.
    let same = acts_job(vec![
        Some(in_mpi("MPI_Bcast", 1)),
        Some(in_mpi("PMPI_Bcast_c", 2)),
        None,
    ]);
    let rep = deadlock::analyze(&same).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle);
    assert!(rep.collective.is_empty());
}

#[test]
fn a_collective_while_others_are_elsewhere() {
    let cases: Vec<(RankActivity, Elsewhere)> = vec![
        (
            in_mpi("PMPI_Recv", 5),
            Elsewhere::InMpi {
                call: "MPI_Recv".into(),
            },
        ),
        (outside(5), Elsewhere::NotInMpi),
        (RankActivity::Finalized, Elsewhere::Finalized),
        (RankActivity::Exited, Elsewhere::Exited),
    ];
    for (other, place) in cases {
        let job = acts_job(vec![
            Some(in_mpi("MPI_Allreduce", 8)),
            Some(in_mpi("MPI_Allreduce", 8)),
            Some(other),
        ]);
        let rep = deadlock::analyze(&job).unwrap();
        assert_eq!(rep.verdict, Verdict::PotentialCollectiveMismatch, "{rep}");
        let h = &rep.collective[0];
        assert_eq!(h.calls[0].ranks.to_string(), "0-1");
        assert_eq!(h.elsewhere[0].what, place);
        assert_eq!(h.elsewhere[0].ranks.to_string(), "2");
        // Nothing pending on rank 2: nothing listed as not waiting.
        assert!(rep.not_waiting.is_empty());
    }
    // MPI_Finalize is collective: one rank skipped the barrier and went on to finalize.
    let fin = activity(vec![main_thread(
        100,
        vec![f(OMPI, "PMPI_Finalize"), main_at(60)],
    )]);
    let job = acts_job(vec![
        Some(in_mpi("MPI_Barrier", 8)),
        Some(in_mpi("MPI_Barrier", 8)),
        Some(fin),
    ]);
    let rep = deadlock::analyze(&job).unwrap();
    let names: Vec<&str> = rep.collective[0]
        .calls
        .iter()
        .map(|c| c.call.as_str())
        .collect();
    assert_eq!(names, ["MPI_Barrier", "MPI_Finalize"]);
    // Ranks not in any collective are no collective hang, whatever they do.
    let job = acts_job(vec![Some(in_mpi("MPI_Recv", 1)), Some(outside(2))]);
    assert!(deadlock::analyze(&job).unwrap().collective.is_empty());
}

#[test]
fn the_communicator_of_a_collective_when_the_queues_show_it() {
    // Open MPI's collectives send with negative tags on the communicator itself.
    let mut sub = CommQueues::new(0x8000, "rows", 2, 0);
    sub.context_id = Some(5);
    let internal = |r: u64, peer: u64| {
        let mut c = sub.clone();
        c.local_rank = r;
        c.operations = vec![op(OpClass::Receive, peer, -16)];
        c
    };
    let job = JobSnapshot::new(vec![
        RankSnapshot::new(0, None, vec![internal(0, 1)]).with_activity(in_mpi("MPI_Bcast", 3)),
        RankSnapshot::new(1, None, vec![internal(1, 0)]).with_activity(in_mpi("MPI_Bcast", 3)),
        world_rank(3, 2, vec![]).with_activity(in_mpi("MPI_Barrier", 4)),
    ]);
    let rep = deadlock::analyze(&job).unwrap();
    let h = &rep.collective[0];
    let bcast = h.calls.iter().find(|c| c.call == "MPI_Bcast").unwrap();
    assert_eq!(
        bcast.communicator.as_ref().map(|c| c.name.as_str()),
        Some("rows")
    );
    let barrier = h.calls.iter().find(|c| c.call == "MPI_Barrier").unwrap();
    assert!(barrier.communicator.is_none());
    assert!(
        rep.to_string().contains("ranks 0-1 in MPI_Bcast on rows"),
        "{rep}"
    );
}

#[test]
fn ranks_outside_a_known_communicator_are_not_part_of_its_collective() {
    let rows = |r: u64, ops: Vec<Operation>| {
        let mut c = CommQueues::new(0x8000, "rows", 3, r);
        c.context_id = Some(5);
        c.operations = ops;
        c
    };
    let bcast = |r: u64, peer: u64| {
        RankSnapshot::new(
            r,
            None,
            vec![rows(r, vec![op(OpClass::Receive, peer, -16)])],
        )
        .with_activity(in_mpi("MPI_Bcast", 3))
    };
    // Rank 2 is in MPI_Recv and belongs to MPI_COMM_WORLD only: not a member of rows.
    let mut job = JobSnapshot::new(vec![
        bcast(0, 1),
        bcast(1, 0),
        world_rank(4, 2, vec![]).with_activity(in_mpi("MPI_Recv", 4)),
    ]);
    let rep = deadlock::analyze(&job).unwrap();
    assert!(rep.collective.is_empty(), "{rep}");
    // Rank 3 belongs to rows and is outside MPI: it is part of the hang; rank 2 still not.
    job.ranks
        .push(RankSnapshot::new(3, None, vec![rows(2, vec![])]).with_activity(outside(5)));
    let rep = deadlock::analyze(&job).unwrap();
    let h = &rep.collective[0];
    assert_eq!(h.calls[0].communicator.as_ref().unwrap().name, "rows");
    assert_eq!(h.elsewhere.len(), 1);
    assert_eq!(
        (&h.elsewhere[0].what, h.elsewhere[0].ranks.to_string()),
        (&Elsewhere::NotInMpi, "3".to_string())
    );
    assert_eq!(h.not_members.to_string(), "2");
    assert!(
        rep.to_string()
            .contains("not members of its communicator): ranks 2"),
        "{rep}"
    );
}

#[test]
fn a_cycle_comes_before_a_collective_mismatch() {
    // Ranks 0-2 in a receive ring, all in MPI_Recv; ranks 3-4 in different collectives.
    let mut job = ring([
        Some(in_mpi("MPI_Recv", 1)),
        Some(in_mpi("MPI_Recv", 1)),
        Some(in_mpi("MPI_Recv", 1)),
    ]);
    for r in &mut job.ranks {
        r.communicators[0].size = 5;
    }
    job.ranks
        .push(world_rank(5, 3, vec![]).with_activity(in_mpi("MPI_Barrier", 2)));
    job.ranks
        .push(world_rank(5, 4, vec![]).with_activity(in_mpi("MPI_Gather", 3)));
    let rep = deadlock::analyze(&job).unwrap();
    assert_eq!(rep.verdict, Verdict::PotentialDeadlock);
    assert!(rep.has_cycle() && rep.collective.len() == 1);
    assert!(
        rep.to_string().contains("collective mismatch too: "),
        "{rep}"
    );
    let rep = deadlock::confirm(&[job.clone(), job.clone()]).unwrap();
    assert_eq!(rep.verdict, Verdict::Deadlock);
    assert_eq!(rep.collective.len(), 1);
}

#[test]
fn confirmation_needs_the_same_place_in_every_sample() {
    let stuck = acts_job(vec![
        Some(in_mpi("MPI_Barrier", 20)),
        Some(in_mpi("MPI_Barrier", 20)),
        Some(computing(0x40)),
    ]);
    let one = deadlock::confirm(std::slice::from_ref(&stuck)).unwrap();
    assert_eq!(one.verdict, Verdict::PotentialCollectiveMismatch);
    let three = deadlock::confirm(&[stuck.clone(), stuck.clone(), stuck.clone()]).unwrap();
    assert_eq!(three.verdict, Verdict::CollectiveMismatch, "{three}");
    assert!(three.summary().starts_with("collective hang: "));
    // Rank 2 computes: its innermost frame moves between samples.
    let mut moved = stuck.clone();
    moved.ranks[2].activity = Some(computing(0x48));
    let rep = deadlock::confirm(&[stuck.clone(), moved, stuck.clone()]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    assert!(rep.collective.is_empty());
    assert!(
        rep.notes[0].contains("collective mismatch"),
        "{:?}",
        rep.notes
    );
    // A rank whose activity becomes unknown is not confirmed either.
    let mut unknown = stuck.clone();
    unknown.ranks[0].activity = Some(RankActivity::Unknown(UnknownWhy::Truncated));
    let rep = deadlock::confirm(&[stuck.clone(), unknown]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle);

    // A cycle whose operations stay but whose rank moved to another call site is dropped.
    let a = ring([
        Some(in_mpi("MPI_Recv", 10)),
        Some(in_mpi("MPI_Recv", 10)),
        Some(in_mpi("MPI_Recv", 10)),
    ]);
    let mut b = a.clone();
    b.ranks[1].activity = Some(in_mpi("MPI_Recv", 99));
    assert_eq!(
        deadlock::confirm(&[a.clone(), a.clone()]).unwrap().verdict,
        Verdict::Deadlock
    );
    let rep = deadlock::confirm(&[a.clone(), b]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    // …but a different number of threads in MPI is the same place.
    let mut c = a.clone();
    if let Some(RankActivity::InMpi(call)) = &mut c.ranks[1].activity {
        call.threads_in_mpi = 3;
    }
    assert_eq!(
        deadlock::confirm(&[a, c]).unwrap().verdict,
        Verdict::Deadlock
    );
}

#[cfg(feature = "serde")]
#[test]
fn json_is_additive() {
    let job = ring([Some(in_mpi("MPI_Recv", 10)), None, Some(outside(3))]);
    // The input: activity round-trips; a rank without one writes no `activity` key.
    let text = serde_json::to_string(&job).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["ranks"][1].get("activity").is_none());
    assert!(v["ranks"][0]["activity"]["in_mpi"]["call"] == "MPI_Recv");
    assert!(v["ranks"][2]["activity"]["not_in_mpi"]["at"]["function"] == "clock_nanosleep");
    let back: JobSnapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(back, job);

    let stuck = acts_job(vec![
        Some(in_mpi("MPI_Barrier", 20)),
        Some(in_mpi("MPI_Reduce", 20)),
    ]);
    let rep = deadlock::analyze(&stuck).unwrap();
    let v = serde_json::to_value(&rep).unwrap();
    assert_eq!(v["verdict"], "potential_collective_mismatch");
    assert_eq!(v["collective"][0]["calls"][0]["call"], "MPI_Barrier");
    assert_eq!(v["collective"][0]["calls"][1]["ranks"], "1");
    assert!(v["collective"][0].get("unknown").is_none());
    let back: DeadlockReport = serde_json::from_value(v).unwrap();
    assert_eq!(back, rep);

    // A report written before stacks existed (no new keys) still reads.
    let rep = deadlock::analyze(&ring([Some(in_mpi("MPI_Recv", 1)), None, None])).unwrap();
    let mut v = serde_json::to_value(&rep).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("not_waiting");
    o.remove("collective");
    for w in v["waits"].as_array_mut().unwrap() {
        w.as_object_mut().unwrap().remove("blocked_in");
    }
    for s in v["cycles"][0]["chain"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("blocked_in");
    }
    let old: DeadlockReport = serde_json::from_value(v).unwrap();
    assert_eq!(old.cycles.len(), 1);
    assert!(old.waits.iter().all(|w| w.blocked_in.is_none()));
}

#[test]
fn huge_jobs_with_stacks_in_linear_time() {
    let n = 200_000u64;
    let act = in_mpi("MPI_Barrier", 20);
    let job = JobSnapshot::new(
        (0..n)
            .map(|r| {
                let q = world_rank(n, r, vec![recv((r + 1) % n)]);
                match r {
                    7 => q.with_activity(in_mpi("MPI_Reduce", 21)),
                    r if r % 2 == 0 => q.with_activity(act.clone()),
                    _ => q,
                }
            })
            .collect(),
    );
    let t = Instant::now();
    let rep = deadlock::analyze(&job).unwrap();
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert_eq!(rep.verdict, Verdict::PotentialDeadlock);
    let h = &rep.collective[0];
    // Compact rank sets: the even ranks are many ranges, rank 7 one.
    assert_eq!(h.calls[1].ranks.to_string(), "7");
    assert_eq!(h.calls[0].ranks.count_within(n), n / 2);
}

// ---- random jobs against reference computations ------------------------------------------

/// Random ring-ish jobs: every rank receives from one peer; some ranks are outside MPI.
fn random_job() -> impl Strategy<Value = (u64, Vec<(u64, bool)>)> {
    (1u64..10).prop_flat_map(|n| {
        (
            Just(n),
            prop::collection::vec((0..n, any::<bool>()), n as usize),
        )
    })
}

fn deadlocked(r: &DeadlockReport) -> BTreeSet<u64> {
    r.cycles
        .iter()
        .flat_map(|c| c.ranks.iter().copied())
        .chain(r.blocked.iter().map(|b| b.rank))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    /// A rank outside MPI is analysed as a rank with no pending operation; ranks in MPI as
    /// ranks without stacks.
    #[test]
    fn outside_mpi_is_as_if_nothing_was_pending((n, spec) in random_job()) {
        let with = JobSnapshot::new(spec.iter().zip(0u64..).map(|(&(from, out), r)| {
            let q = world_rank(n, r, vec![recv(from)]);
            if out { q.with_activity(outside(1)) } else { q.with_activity(in_mpi("MPI_Recv", 1)) }
        }).collect());
        let reference = JobSnapshot::new(spec.iter().zip(0u64..).map(|(&(from, out), r)| {
            world_rank(n, r, if out { vec![] } else { vec![recv(from)] })
        }).collect());
        let a = deadlock::analyze(&with).unwrap();
        let b = deadlock::analyze(&reference).unwrap();
        prop_assert_eq!(deadlocked(&a), deadlocked(&b));
        prop_assert_eq!(a.cycles.len(), b.cycles.len());
        let nw: Vec<u64> = a.not_waiting.iter().map(|x| x.rank).collect();
        let outs: Vec<u64> = spec.iter().zip(0u64..).filter(|(s, _)| s.1).map(|(_, r)| r).collect();
        prop_assert_eq!(nw, outs);
    }

    /// The collective rule against its plain statement.
    #[test]
    fn collective_rule(kinds in prop::collection::vec(0u8..6, 1..12)) {
        let act = |k: u8| match k {
            0 => Some(in_mpi("MPI_Barrier", 1)),
            1 => Some(in_mpi("MPI_Allreduce", 1)),
            2 => Some(in_mpi("MPI_Recv", 1)),
            3 => Some(outside(1)),
            4 => Some(RankActivity::Unknown(UnknownWhy::Truncated)),
            _ => None,
        };
        let rep = deadlock::analyze(&acts_job(kinds.iter().map(|&k| act(k)).collect())).unwrap();
        let colls: BTreeSet<u8> = kinds.iter().copied().filter(|&k| k < 2).collect();
        let elsewhere = kinds.iter().any(|&k| k == 2 || k == 3);
        let expected = colls.len() > 1 || (!colls.is_empty() && elsewhere);
        prop_assert_eq!(!rep.collective.is_empty(), expected);
        prop_assert_eq!(rep.verdict == Verdict::PotentialCollectiveMismatch, expected);
        if let Some(h) = rep.collective.first() {
            let unknown: Vec<u64> = kinds.iter().zip(0u64..).filter(|(k, _)| **k >= 4).map(|(_, r)| r).collect();
            prop_assert_eq!(h.unknown.to_string(), mpir_types::ranks::RankSet::from_ranks(unknown).to_string());
        }
    }
}

/// Braces balance outside string literals, and every statement line ends as DOT wants.
fn check_dot_shape(dot: &str) {
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for ch in dot.chars() {
        match (in_str, esc, ch) {
            (true, true, _) => esc = false,
            (true, false, '\\') => esc = true,
            (_, false, '"') => in_str = !in_str,
            (false, _, '{') => depth += 1,
            (false, _, '}') => depth -= 1,
            _ => {}
        }
        assert!(depth >= 0, "{dot}");
    }
    assert!(!in_str && depth == 0, "{dot}");
    for line in dot.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            line.ends_with(';') || line.ends_with('{') || line == "}",
            "{line}\n{dot}"
        );
    }
}

#[test]
fn dot_with_stacks_is_well_formed() {
    let mut job = ring([Some(in_mpi("MPI_Recv", 1)), None, Some(outside(2))]);
    for r in &mut job.ranks {
        r.communicators[0].size = 5;
    }
    job.ranks
        .push(world_rank(5, 3, vec![]).with_activity(in_mpi("MPI_Barrier", 2)));
    job.ranks
        .push(world_rank(5, 4, vec![]).with_activity(RankActivity::Exited));
    let rep = deadlock::analyze(&job).unwrap();
    let dot = rep.to_dot();
    check_dot_shape(&dot);
    assert!(dot.contains("cluster_collective0"), "{dot}");
    assert!(dot.contains(r"exited\nranks 4"), "{dot}");
    assert!(
        dot.contains(r#""r2" [label="rank 2\nnot inside MPI (at clock_nanosleep)"#),
        "{dot}"
    );
}

#[test]
fn stacks_and_exited_ranks_join_a_snapshot() {
    use mpir_types::stacks::{NotRead, RankStacks, ReasonCode, Unreached};
    // Rank 0 receives from rank 2 (its world rank known), rank 1 receives from 0; rank 2's
    // process is gone, so the readers have no queues for it.
    let mut from2 = recv(2);
    from2.peer_global = Some(2);
    let job = JobSnapshot::new(vec![
        world_rank(3, 0, vec![from2]),
        world_rank(3, 1, vec![recv(0)]),
    ]);
    let before = deadlock::analyze(&job).unwrap();
    assert!(before.blocked.is_empty() && before.notes.iter().any(|n| n.contains("does not hold")));
    let stacks = vec![
        RankStacks::new(0, 100, ompi_recv(12)),
        RankStacks::new(1, 100, mpich_barrier(20)),
        RankStacks::new(9, 100, ompi_recv(1)),
    ];
    let unreached = vec![
        Unreached::new(2, NotRead::new(ReasonCode::Exited, "the process exited")),
        Unreached::new(2, NotRead::new(ReasonCode::Exited, "the process exited")),
        Unreached::new(
            5,
            NotRead::new(ReasonCode::NotStopped, "did not stop in time"),
        ),
    ];
    let job = job.with_stacks(&stacks, &unreached);
    assert_eq!(job.ranks.len(), 3);
    assert!(matches!(&job.ranks[0].activity, Some(RankActivity::InMpi(c)) if c.call == "MPI_Recv"));
    assert_eq!(job.ranks[2].activity, Some(RankActivity::Exited));
    let rep = deadlock::analyze(&job).unwrap();
    let blocked: Vec<(u64, Vec<u64>)> = rep
        .blocked
        .iter()
        .map(|b| (b.rank, b.waits_for.clone()))
        .collect();
    assert_eq!(blocked, [(0, vec![2]), (1, vec![0])], "{rep}");
    assert_eq!(rep.blocked[0].blocked_in.as_ref().unwrap().call, "MPI_Recv");
    // Rank 1 is in MPI_Barrier while rank 2 has exited and rank 0 is in MPI_Recv.
    let h = &rep.collective[0];
    assert_eq!(h.calls[0].call, "MPI_Barrier");
    let places: Vec<String> = h
        .elsewhere
        .iter()
        .map(|e| format!("{} {}", e.what, e.ranks))
        .collect();
    assert_eq!(places, ["in MPI_Recv 0", "exited 2"]);
}
