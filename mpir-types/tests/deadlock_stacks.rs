//! Stacks in the hang analysis: the MPI call each rank is in (hand-built stacks of the shapes
//! Open MPI, MPICH, Fortran and profiling wrappers give), ranks outside MPI that do not wait,
//! finished ranks, collective mismatches, confirmation over samples, the JSON/DOT/text forms,
//! and random jobs against plain reference computations.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpir_types::deadlock::{
    self, CommQueues, DeadlockReport, Elsewhere, JobSnapshot, RankQueues, Verdict,
};
use mpir_types::mqd::{Length, OpClass, OpStatus, Operation, Peer};
use mpir_types::stacks::{
    BlockedCall, CallKind, Frame, RankActivity, SourceLocation, ThreadStack, Truncation, Trust,
    UnknownWhy, classify_threads,
};
use proptest::prelude::*;

const APP: &str = "/home/u/ring";
const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const OMPI: &str = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
const OPAL: &str = "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40";
const MPICH: &str = "/usr/lib/x86_64-linux-gnu/libmpich.so.12";
const FORT: &str = "/usr/lib/x86_64-linux-gnu/libmpi_mpifh.so.40";

fn f(module: &str, symbol: &str) -> Frame {
    Frame::new(module, 0x100 + symbol.len() as u64, Trust::Cfi).with_symbol(symbol)
}

fn main_at(line: u32) -> Frame {
    f(APP, "main").with_location(SourceLocation::new("ring.c", line))
}

/// The outer frames every C program's main thread has.
fn libc_start() -> [Frame; 3] {
    [
        f(LIBC, "__libc_start_call_main"),
        f(LIBC, "__libc_start_main_impl"),
        f(APP, "_start"),
    ]
}

fn thread(tid: u32, inner: Vec<Frame>) -> ThreadStack {
    ThreadStack::new(tid, inner)
}

fn main_thread(tid: u32, inner: Vec<Frame>) -> ThreadStack {
    let mut frames = inner;
    frames.extend(libc_start());
    thread(tid, frames)
}

/// Open MPI: main → MPI_Recv → ob1 → opal_progress → poll.
fn ompi_recv(line: u32) -> Vec<ThreadStack> {
    vec![
        main_thread(
            100,
            vec![
                f(LIBC, "poll"),
                f(OPAL, "opal_progress"),
                f(OMPI, "mca_pml_ob1_recv"),
                f(OMPI, "PMPI_Recv"),
                main_at(line),
            ],
        ),
        thread(
            101,
            vec![
                f(LIBC, "epoll_wait"),
                f(OPAL, "event_base_loop"),
                f(OPAL, "progress_engine"),
                f(LIBC, "start_thread"),
                f(LIBC, "clone3"),
            ],
        ),
    ]
}

/// MPICH: main → MPI_Barrier → MPIR_Barrier_impl → MPID_Progress_wait.
fn mpich_barrier(line: u32) -> Vec<ThreadStack> {
    vec![main_thread(
        100,
        vec![
            f(MPICH, "MPIDI_CH3I_Progress"),
            f(MPICH, "MPID_Progress_wait"),
            f(MPICH, "MPIR_Barrier_intra_auto"),
            f(MPICH, "MPIR_Barrier_impl"),
            f(MPICH, "MPI_Barrier"),
            main_at(line),
        ],
    )]
}

fn in_call(threads: &[ThreadStack]) -> BlockedCall {
    match classify_threads(threads, Some(100)) {
        RankActivity::InMpi(c) | RankActivity::Finalizing(c) => c,
        other => panic!("not in MPI: {other:?}"),
    }
}

#[test]
fn open_mpi_recv_and_mpich_barrier() {
    let c = in_call(&ompi_recv(12));
    assert_eq!(c.call, "MPI_Recv");
    assert_eq!(c.symbol, "PMPI_Recv");
    assert_eq!(c.kind, CallKind::PointToPoint);
    assert_eq!(c.tid, 100);
    // The helper thread (libevent progress engine) does not count.
    assert_eq!(c.threads_in_mpi, 1);
    let site = c.call_site.as_ref().unwrap();
    assert_eq!(site.function.as_deref(), Some("main"));
    assert_eq!(site.module, APP);
    assert_eq!(site.location.as_ref().map(|l| l.line), Some(12));
    assert_eq!(c.to_string(), "MPI_Recv at main (ring.c:12)");

    let c = in_call(&mpich_barrier(20));
    assert_eq!(
        (c.call.as_str(), c.kind),
        ("MPI_Barrier", CallKind::Collective)
    );
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("main"));
}

#[test]
fn fortran_bindings_and_profiling_wrappers_name_the_users_call() {
    let fortran = |binding: &str| {
        vec![main_thread(
            100,
            vec![
                f(MPICH, "MPID_Progress_wait"),
                f(MPICH, "MPIR_Barrier_impl"),
                f(MPICH, "PMPI_Barrier"),
                f(FORT, binding),
                f(APP, "MAIN__"),
                f(APP, "main"),
            ],
        )]
    };
    for binding in [
        "mpi_barrier_",
        "pmpi_barrier__",
        "MPI_BARRIER",
        "ompi_barrier_f",
    ] {
        let c = in_call(&fortran(binding));
        assert_eq!(c.call, "MPI_Barrier", "{binding}");
        assert_eq!(c.symbol, binding);
        assert_eq!(
            c.call_site.unwrap().function.as_deref(),
            Some("MAIN__"),
            "{binding}"
        );
    }
    // A PMPI profiling wrapper: main → MPI_Barrier (the tool's) → PMPI_Barrier (the MPI's).
    let wrapped = vec![main_thread(
        100,
        vec![
            f(MPICH, "MPIR_Barrier_impl"),
            f(MPICH, "PMPI_Barrier"),
            f("/opt/tool/libprof.so", "MPI_Barrier"),
            main_at(30),
        ],
    )];
    let c = in_call(&wrapped);
    assert_eq!(
        (c.call.as_str(), c.symbol.as_str()),
        ("MPI_Barrier", "MPI_Barrier")
    );
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("main"));
    // A callback run from inside MPI that blocks again: the innermost run is the call.
    let nested = vec![main_thread(
        100,
        vec![
            f(OMPI, "PMPI_Recv"),
            f(APP, "on_error"),
            f(OMPI, "ompi_errhandler_invoke"),
            f(OMPI, "PMPI_Send"),
            main_at(40),
        ],
    )];
    let c = in_call(&nested);
    assert_eq!(c.call, "MPI_Recv");
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("on_error"));
}

#[test]
fn threads_helpers_finalize_and_what_was_not_read() {
    // A worker thread in MPI while the main thread sleeps: in MPI, the worker's call.
    let threads = vec![
        main_thread(100, vec![f(LIBC, "clock_nanosleep"), main_at(5)]),
        thread(
            102,
            vec![
                f(OMPI, "PMPI_Recv"),
                f(APP, "worker"),
                f(LIBC, "start_thread"),
            ],
        ),
    ];
    let c = in_call(&threads);
    assert_eq!((c.tid, c.call.as_str()), (102, "MPI_Recv"));
    assert_eq!(c.call_site.unwrap().function.as_deref(), Some("worker"));
    // Two threads in MPI: the main thread's call, and both counted.
    let mut two = ompi_recv(12);
    two.push(thread(
        103,
        vec![
            f(OMPI, "PMPI_Wait"),
            f(APP, "worker"),
            f(LIBC, "start_thread"),
        ],
    ));
    let c = in_call(&two);
    assert_eq!(
        (c.tid, c.call.as_str(), c.threads_in_mpi),
        (100, "MPI_Recv", 2)
    );
    // Outside MPI: main sleeping, the helper thread ignored even when truncated.
    let outside = vec![
        main_thread(100, vec![f(LIBC, "clock_nanosleep"), main_at(5)]),
        thread(101, vec![f(LIBC, "epoll_wait"), f(OPAL, "progress_engine")])
            .with_truncation(Truncation::UnreadableStack),
    ];
    match classify_threads(&outside, Some(100)) {
        RankActivity::NotInMpi { at: Some(at) } => {
            assert_eq!(at.function.as_deref(), Some("clock_nanosleep"))
        }
        other => panic!("{other:?}"),
    }
    // A truncated stack showing no MPI frame is unknown, never "outside MPI".
    let cut = vec![
        thread(100, vec![f(LIBC, "poll"), f(OPAL, "opal_progress")])
            .with_truncation(Truncation::NoUnwindInfo),
    ];
    assert_eq!(
        classify_threads(&cut, Some(100)),
        RankActivity::Unknown(UnknownWhy::Truncated)
    );
    // …and so is one whose MPI frame was only found by scanning.
    let scanned = vec![thread(
        100,
        vec![
            f(LIBC, "poll"),
            Frame::new(OMPI, 0x40, Trust::Scan).with_symbol("PMPI_Recv"),
            main_at(3),
        ],
    )];
    assert_eq!(
        classify_threads(&scanned, Some(100)),
        RankActivity::Unknown(UnknownWhy::Truncated)
    );
    // A truncated stack whose read frames end inside MPI: in MPI, caller not read.
    let cut_in = vec![
        thread(100, vec![f(LIBC, "poll"), f(MPICH, "MPI_Barrier")])
            .with_truncation(Truncation::UnreadableStack),
    ];
    let c = in_call(&cut_in);
    assert!(c.call_site.is_none());
    assert_eq!(c.to_string(), "MPI_Barrier (caller not read)");
    // MPI_Finalize, and no stacks at all.
    let fin = vec![main_thread(
        100,
        vec![
            f(OMPI, "ompi_mpi_finalize"),
            f(OMPI, "PMPI_Finalize"),
            main_at(50),
        ],
    )];
    assert!(matches!(
        classify_threads(&fin, Some(100)),
        RankActivity::Finalizing(c) if c.call == "MPI_Finalize"
    ));
    assert_eq!(
        classify_threads(&[], None),
        RankActivity::Unknown(UnknownWhy::NoStacks)
    );
}

#[test]
fn hostile_stacks_stay_bounded() {
    // One shared copy of each huge name (frames hold `Arc<str>`).
    let huge: Arc<str> = "x".repeat(1 << 20).into();
    let mpi_huge: Arc<str> = format!("MPI_{huge}").into();
    let frames: Vec<Frame> = (0..200_000)
        .map(|i| match i % 3 {
            0 => Frame::new(huge.clone(), i, Trust::Cfi).with_symbol(huge.clone()),
            1 => Frame::new(APP, i, Trust::Cfi).with_symbol(mpi_huge.clone()),
            _ => Frame::new(APP, i, Trust::Cfi),
        })
        .collect();
    let t = Instant::now();
    let threads = vec![thread(100, frames)];
    // Frames past the examined limit are not read: unknown, not outside MPI.
    assert_eq!(
        classify_threads(&threads, Some(100)),
        RankActivity::Unknown(UnknownWhy::Truncated)
    );
    // A real MPI frame under huge names: the kept names are cut.
    let threads = vec![thread(
        100,
        vec![
            f(OMPI, "PMPI_Recv"),
            Frame::new(huge.clone(), 1, Trust::Cfi).with_symbol(huge.clone()),
            f(APP, "main"),
        ],
    )];
    let c = in_call(&threads);
    let site = c.call_site.unwrap();
    assert!(site.module.len() < 1024 && site.function.unwrap().len() < 1024);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

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

fn world_rank(n: u64, r: u64, ops: Vec<Operation>) -> RankQueues {
    let mut c = CommQueues::new(0x7000, "MPI_COMM_WORLD", n, r);
    c.context_id = Some(0);
    c.operations = ops;
    RankQueues::new(r, Some(1000 + r as i64), vec![c])
}

fn activity(threads: Vec<ThreadStack>) -> RankActivity {
    classify_threads(&threads, Some(100))
}

/// A rank computing in `compute`, at `offset`.
fn computing(offset: u64) -> RankActivity {
    activity(vec![main_thread(
        100,
        vec![
            Frame::new(APP, offset, Trust::Context).with_symbol("compute"),
            main_at(3),
        ],
    )])
}

fn outside(line: u32) -> RankActivity {
    activity(vec![main_thread(
        100,
        vec![f(LIBC, "clock_nanosleep"), main_at(line)],
    )])
}

/// A rank in `call` (a C name), called from main at `line`.
fn in_mpi(call: &str, line: u32) -> RankActivity {
    activity(vec![main_thread(
        100,
        vec![f(OPAL, "opal_progress"), f(OMPI, call), main_at(line)],
    )])
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
                .ends_with("2 ranks wait on ranks that finalized or exited"),
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
        RankQueues::new(0, None, vec![internal(0, 1)]).with_activity(in_mpi("MPI_Bcast", 3)),
        RankQueues::new(1, None, vec![internal(1, 0)]).with_activity(in_mpi("MPI_Bcast", 3)),
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
    use mpir_types::stacks::{RankStacks, Unreached, UnreachedReason};
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
        Unreached::new(2, UnreachedReason::Exited),
        Unreached::new(2, UnreachedReason::Exited),
        Unreached::new(5, UnreachedReason::Timeout),
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
